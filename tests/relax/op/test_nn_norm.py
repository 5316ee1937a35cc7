"""Softmax and normalization operators against numpy references (float64), interpreted and
some compiled; shape/dtype inference and its errors."""

import numpy as np
import pytest

from schedlab import te
from schedlab.relax.op import OpTypeError, TensorInfo, get_op
from tests.relax.op.test_nn import rand, run_op

TOL = dict(rtol=1e-4, atol=1e-5)


def softmax_ref(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax(axis):
    x = rand(3, 5, 7) * 4
    np.testing.assert_allclose(
        run_op("relax.nn.softmax", [x], dict(axis=axis)), softmax_ref(x, axis), **TOL
    )
    got = run_op("relax.nn.log_softmax", [x], dict(axis=axis))
    np.testing.assert_allclose(got, np.log(softmax_ref(x.astype(np.float64), axis)), **TOL)


def test_softmax_is_stable_and_compiles():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, 0.0, 3.0]], "float32")
    got = run_op("relax.nn.softmax", [x], build=True)
    np.testing.assert_allclose(got, softmax_ref(x.astype(np.float64), -1), **TOL)


def norm_ref(x, axes, gamma=None, beta=None, eps=1e-5):
    mean = x.mean(axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return out * (1 if gamma is None else gamma) + (0 if beta is None else beta)


@pytest.mark.parametrize(
    "axes, center, scale", [(-1, True, True), ((1, 2), False, True), ((0, 2), True, False)]
)
def test_layer_norm(axes, center, scale):
    x = rand(3, 5, 7) + 2
    axes_t = (axes,) if isinstance(axes, int) else axes
    param_shape = tuple(x.shape[a] for a in axes_t)
    gamma, beta = rand(*param_shape), rand(*param_shape)
    attrs = dict(axes=axes, center=center, scale=scale, epsilon=1e-3)
    got = run_op("relax.nn.layer_norm", [x, gamma, beta], attrs)
    shape = [x.shape[a] if a in [t % 3 for t in axes_t] else 1 for a in range(3)]
    ref = norm_ref(
        x,
        axes_t,
        gamma.reshape(shape) if scale else None,
        beta.reshape(shape) if center else None,
        1e-3,
    )
    np.testing.assert_allclose(got, ref, **TOL)


def test_rms_norm_compiled():
    x, w = rand(4, 9), rand(9)
    got = run_op("relax.nn.rms_norm", [x, w], build=True)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=-1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(got, ref, **TOL)


def test_instance_and_group_norm():
    x, gamma, beta = rand(2, 6, 5, 3), rand(6), rand(6)
    shape = (1, 6, 1, 1)
    got = run_op("relax.nn.instance_norm", [x, gamma, beta])
    ref = norm_ref(x, (2, 3), gamma.reshape(shape), beta.reshape(shape))
    np.testing.assert_allclose(got, ref, **TOL)
    got = run_op("relax.nn.group_norm", [x, gamma, beta], dict(num_groups=3, epsilon=1e-4))
    grouped = norm_ref(x.reshape(2, 3, 2, 5, 3), (2, 3, 4), eps=1e-4).reshape(x.shape)
    np.testing.assert_allclose(got, grouped * gamma.reshape(shape) + beta.reshape(shape), **TOL)


def test_batch_norm_compiled():
    x = rand(2, 4, 3, 5)
    gamma, beta, mean, var = rand(4), rand(4), rand(4), np.abs(rand(4)) + 0.5
    got = run_op("relax.nn.batch_norm", [x, gamma, beta, mean, var], dict(epsilon=1e-3), build=True)
    s = (1, 4, 1, 1)
    ref = (x - mean.reshape(s)) / np.sqrt(var.reshape(s) + 1e-3) * gamma.reshape(s)
    np.testing.assert_allclose(got, ref + beta.reshape(s), **TOL)


@pytest.mark.parametrize("size", [3, 4])
def test_local_response_norm(size):
    x = rand(2, 7, 3, 2)
    attrs = dict(size=size, alpha=0.2, beta=0.6, bias=1.5)
    got = run_op("relax.nn.local_response_norm", [x], attrs)
    squares = np.zeros_like(x, dtype=np.float64)
    for c in range(7):
        lo, hi = max(0, c - (size - 1) // 2), min(7, c + size // 2 + 1)
        squares[:, c] = (x[:, lo:hi].astype(np.float64) ** 2).sum(axis=1)
    np.testing.assert_allclose(got, x / (1.5 + 0.2 / size * squares) ** 0.6, **TOL)


def test_symbolic_infer():
    n = te.size_var("n")
    info = get_op("relax.nn.softmax").infer_info([TensorInfo((n, 5))], {})
    assert info.shape[0] is n
    spec = get_op("relax.nn.layer_norm")
    out = spec.infer_info([TensorInfo((n, 5)), TensorInfo((5,)), TensorInfo((5,))], dict(axes=-1))
    assert out.shape[0] is n


def expect_error(name, infos, attrs, match):
    with pytest.raises(OpTypeError, match=match):
        get_op(name).infer_info(
            [i if isinstance(i, TensorInfo) else TensorInfo(i) for i in infos], attrs
        )


def test_errors():
    expect_error(
        "relax.nn.softmax",
        [(3, 4)],
        dict(axis=2),
        r"relax.nn.softmax: axis 2 is out "
        r"of range for rank 2; inputs \(Tensor\(\(3, 4\), float32\)\)",
    )
    expect_error("relax.nn.softmax", [TensorInfo((3,), "int32")], {}, "float dtype")
    expect_error(
        "relax.nn.layer_norm",
        [(3, 4), (3,), (4,)],
        dict(axes=-1),
        r"gamma must have "
        r"shape \(4\)",
    )
    expect_error("relax.nn.layer_norm", [(3, 4), (4,), (4,)], {}, "missing required")
    expect_error("relax.nn.group_norm", [(2, 6, 3), (6,), (6,)], dict(num_groups=4), "divide")
    expect_error("relax.nn.batch_norm", [(2, 3), (3,), (3,), (3,), (2,)], {}, "moving_var")
    expect_error("relax.nn.batch_norm", [(2, 3)] + [(3,)] * 4, dict(training=True), "inference")
    expect_error("relax.nn.local_response_norm", [(2, 3)], dict(size=0), "size")
    expect_error("relax.nn.rms_norm", [(2, 3), TensorInfo((3,), "float16")], {}, "dtype")

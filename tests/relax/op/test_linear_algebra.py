"""relax.matmul (numpy semantics) and relax.linear against numpy."""

import numpy as np
import pytest

from schedlab import te
from schedlab.relax.op import OpTypeError, TensorInfo, get_op
from tests.relax.op.test_nn import rand, run_op


@pytest.mark.parametrize(
    "a, b",
    [
        ((3, 5), (5, 7)),
        ((2, 3, 5), (5, 7)),
        ((4, 1, 3, 5), (2, 5, 7)),
        ((5,), (2, 5, 3)),
        ((2, 3, 5), (5,)),
        ((5,), (5,)),
        ((1, 3, 5), (4, 5, 2)),
    ],
)
def test_matmul(a, b):
    x, y = rand(*a), rand(*b)
    got = run_op("relax.matmul", [x, y])
    np.testing.assert_allclose(got, np.matmul(x.astype(np.float64), y), rtol=1e-4, atol=1e-5)


def test_matmul_compiled_and_out_dtype():
    x, y = rand(3, 4, 5), rand(3, 5, 6)
    got = run_op("relax.matmul", [x, y], build=True)
    np.testing.assert_allclose(got, x @ y, rtol=1e-4, atol=1e-5)
    xi = np.arange(6, dtype="int8").reshape(2, 3)
    yi = np.full((3, 2), 100, dtype="int8")
    got = run_op("relax.matmul", [xi, yi], dict(out_dtype="int32"))
    np.testing.assert_array_equal(got, xi.astype(np.int32) @ yi.astype(np.int32))
    assert got.dtype == np.int32


@pytest.mark.parametrize("x_shape, bias", [((3, 5), True), ((2, 3, 5), False), ((5,), True)])
def test_linear(x_shape, bias):
    x, w = rand(*x_shape), rand(7, 5)
    arrays = [x, w] + ([rand(7)] if bias else [])
    got = run_op("relax.linear", arrays, build=bias and len(x_shape) == 2)
    ref = x.astype(np.float64) @ w.T + (arrays[2] if bias else 0)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_symbolic_batch():
    n = te.size_var("n")
    spec = get_op("relax.matmul")
    info = spec.infer_info([TensorInfo((n, 3, 5)), TensorInfo((5, 2))], {})
    assert info.shape[0] is n and [int(d) for d in info.shape[1:]] == [3, 2]


def expect_error(name, infos, attrs, match):
    with pytest.raises(OpTypeError, match=match):
        get_op(name).infer_info(
            [i if isinstance(i, TensorInfo) else TensorInfo(i) for i in infos], attrs
        )


def test_errors():
    expect_error(
        "relax.matmul",
        [(3, 4), (5, 2)],
        {},
        r"relax.matmul: reduction dimensions "
        r"differ: 4 vs 5; inputs \(Tensor\(\(3, 4\), float32\), Tensor\(\(5, 2\)",
    )
    expect_error("relax.matmul", [(2, 3, 4), (3, 4, 2)], {}, "batch dimensions 2 and 3")
    expect_error("relax.matmul", [(), (3,)], {}, "rank >= 1")
    expect_error("relax.matmul", [(3, 4), TensorInfo((4, 2), "float16")], {}, "out_dtype")
    expect_error("relax.linear", [(3, 4), (5, 3)], {}, "last dimension 4 != weight's 3")
    expect_error("relax.linear", [(3, 4), (5, 4), (4,)], {}, "bias")
    expect_error("relax.linear", [(3, 4)], {}, "2 or 3 inputs")

"""Every registry workload, at two odd sizes: well formed, and the interpreter and the compiled
CPU kernel both match the numpy reference."""

import numpy as np
import pytest

import schedlab
from schedlab import workloads
from schedlab.ir import verify

# two odd sizes per workload: odd extents, strides/paddings/dilations that leave borders
SIZES = {
    "gemm": [dict(M=17, N=23, K=29), dict(M=33, N=7, K=13)],
    "batch_matmul": [dict(batch=3, M=7, N=9, K=5), dict(batch=2, M=13, N=5, K=11)],
    "gemv": [dict(M=17, K=29), dict(M=31, K=7)],
    "matmul_bias_relu": [dict(M=17, N=23, K=29), dict(M=9, N=7, K=13)],
    "conv1d_ncw": [
        dict(N=2, CI=3, L=17, CO=5, kernel=3, stride=1, padding=1, dilation=1),
        dict(N=1, CI=5, L=23, CO=3, kernel=5, stride=2, padding=2, dilation=2),
    ],
    "conv2d_nchw": [
        dict(N=1, CI=3, H=9, W=11, CO=5, kernel=3, stride=1, padding=1),
        dict(N=2, CI=5, H=13, W=7, CO=3, kernel=3, stride=2, padding=0),
    ],
    "dilated_conv2d_nchw": [
        dict(N=1, CI=3, H=11, W=9, CO=5, kernel=3, stride=1, padding=2, dilation=2),
        dict(N=1, CI=2, H=13, W=15, CO=3, kernel=3, stride=2, padding=1, dilation=3),
    ],
    "group_conv2d_nchw": [
        dict(N=1, CI=6, H=9, W=7, CO=9, kernel=3, stride=1, padding=1, groups=3),
        dict(N=2, CI=4, H=7, W=11, CO=6, kernel=3, stride=2, padding=1, groups=2),
    ],
    "conv3d_ncdhw": [
        dict(N=1, CI=3, D=5, H=7, W=5, CO=3, kernel=3, stride=1, padding=1),
        dict(N=1, CI=2, D=7, H=5, W=9, CO=5, kernel=3, stride=2, padding=0),
    ],
    "conv2d_nhwc": [
        dict(N=1, CI=3, H=9, W=11, CO=5, kernel=3, stride=1, padding=1),
        dict(N=2, CI=5, H=13, W=7, CO=3, kernel=3, stride=2, padding=2, dilation=2),
    ],
    "depthwise_conv2d_nchw": [
        dict(N=1, C=5, H=9, W=11, multiplier=1, kernel=3, stride=1, padding=1),
        dict(N=2, C=3, H=13, W=7, multiplier=2, kernel=3, stride=2, padding=1),
    ],
    "conv2d_transpose_nchw": [
        dict(N=1, CI=3, H=5, W=7, CO=5, kernel=3, stride=2, padding=1),
        dict(N=1, CI=5, H=7, W=5, CO=3, kernel=4, stride=1, padding=0),
    ],
    "capsule_conv2d": [
        dict(N=1, H=7, W=5, CI=3, CO=5, kernel=3, stride=1, padding=1, capsule=2),
        dict(N=1, H=9, W=7, CI=2, CO=3, kernel=3, stride=2, padding=0, capsule=3),
    ],
    "softmax": [dict(M=17, N=23), dict(M=5, N=33)],
    "layer_norm": [dict(M=17, N=23), dict(M=5, N=33)],
    "rms_norm": [dict(M=17, N=23), dict(M=5, N=33)],
    "reduce_sum": [dict(M=17, N=23), dict(M=5, N=33)],
    "reduce_max": [dict(M=17, N=23), dict(M=5, N=33)],
    "transpose": [dict(M=17, N=23), dict(M=5, N=33)],
    "norm": [dict(M=17, N=23), dict(M=5, N=33)],
}

CASES = [
    pytest.param(name, sizes, id=f"{name}-{index}")
    for name in SIZES
    for index, sizes in enumerate(SIZES[name])
]


def _run(name, sizes, execute):
    func, reference = workloads.get(name, **sizes)
    args = workloads.make_args(func, seed=7)
    num_outputs = func.attrs["schedlab.num_outputs"]
    inputs = [a.copy() for a in args[:-num_outputs]]
    execute(func, args)
    expected = reference(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(args[-num_outputs:], expected):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for before, after in zip(inputs, args):
        np.testing.assert_array_equal(before, after)  # inputs are left alone


def test_every_workload_has_sizes():
    assert sorted(SIZES) == sorted(workloads.names(include_plugins=False))


@pytest.mark.parametrize("name, sizes", CASES)
def test_verify(name, sizes):
    func, _ = workloads.get(name, **sizes)
    verify(func)
    assert func.attrs["global_symbol"] == name


@pytest.mark.parametrize("name, sizes", CASES)
def test_interpreter_matches_reference(name, sizes):
    _run(name, sizes, lambda func, args: schedlab.interpret(func, *args))


@pytest.mark.parametrize("name, sizes", CASES)
def test_compiled_matches_reference(name, sizes):
    _run(name, sizes, lambda func, args: schedlab.build(func, target="cpu")(*args))


@pytest.mark.parametrize(
    "name, dtype, sizes",
    [
        ("gemm", "int32", dict(M=9, N=7, K=11)),
        ("conv2d_nchw", "int32", dict(N=1, CI=3, H=7, W=5, CO=3, kernel=3, stride=2)),
        ("reduce_max", "int8", dict(M=5, N=9)),
        ("layer_norm", "float64", dict(M=5, N=9)),
    ],
)
def test_other_dtypes(name, dtype, sizes):
    for execute in (
        lambda func, args: schedlab.interpret(func, *args),
        lambda func, args: schedlab.build(func, target="cpu")(*args),
    ):
        func, reference = workloads.get(name, dtype=dtype, **sizes)
        args = workloads.make_args(func, seed=5)
        execute(func, args)
        expected = reference(*args[:-1])
        assert args[-1].dtype == expected.dtype == np.dtype(dtype)
        np.testing.assert_allclose(args[-1], expected, rtol=1e-12, atol=1e-12)

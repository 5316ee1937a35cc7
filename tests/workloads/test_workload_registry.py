"""The registry API: get/names/spec/make_args, sizes and their errors, flop counts."""

import numpy as np
import pytest

from schedlab import workloads
from schedlab.ir import IntImm

EXPECTED = [
    "gemm", "batch_matmul", "gemv", "matmul_bias_relu", "conv1d_ncw", "conv2d_nchw",
    "conv2d_nhwc", "conv3d_ncdhw", "depthwise_conv2d_nchw", "group_conv2d_nchw",
    "dilated_conv2d_nchw", "conv2d_transpose_nchw", "capsule_conv2d", "softmax", "layer_norm",
    "rms_norm", "reduce_sum", "reduce_max", "transpose", "norm",
]  # fmt: skip


def shape(buffer):
    return tuple(int(s) for s in buffer.shape)


def test_names_cover_the_issue():
    assert sorted(workloads.names(include_plugins=False)) == sorted(EXPECTED)
    assert workloads.names()[0] == "gemm"


def test_defaults_and_sizes():
    func, reference = workloads.get("gemm")
    assert [shape(b) for b in func.buffers] == [(128, 128)] * 3
    func, _ = workloads.get("gemm", M=64, N=48, K=80)
    assert [shape(b) for b in func.buffers] == [(64, 80), (80, 48), (64, 48)]
    a, b = np.ones((2, 3), "float32"), np.ones((3, 4), "float32")
    np.testing.assert_array_equal(reference(a, b), np.full((2, 4), 3.0, "float32"))


def test_spec_fields():
    spec = workloads.spec("conv2d_nchw")
    assert spec.name == "conv2d_nchw" and spec.num_outputs == 1
    assert spec.defaults["kernel"] == 3 and spec.description
    assert callable(spec.factory) and callable(spec.reference)


def test_unknown_name_lists_valid_ones():
    with pytest.raises(ValueError, match="unknown workload 'gem'.*gemm.*softmax"):
        workloads.get("gem")
    with pytest.raises(ValueError, match="unknown workload"):
        workloads.spec("nope")


def test_unknown_size_lists_valid_ones():
    with pytest.raises(ValueError, match="unknown size 'Q'; valid sizes: K, M, N"):
        workloads.get("gemm", Q=3)
    with pytest.raises(ValueError, match="must be an integer"):
        workloads.get("gemm", M=2.5)


def test_invalid_convolution_sizes():
    with pytest.raises(ValueError, match="groups=4 must divide"):
        workloads.get("group_conv2d_nchw", CI=6)
    with pytest.raises(ValueError, match="empty output"):
        workloads.get("conv2d_nchw", H=2, padding=0)
    with pytest.raises(ValueError, match="stride must be >= 1"):
        workloads.get("conv2d_nchw", stride=0)
    with pytest.raises(ValueError, match="padding must be <= kernel - 1"):
        workloads.get("conv2d_transpose_nchw", kernel=3, padding=3)


def test_dtype():
    func, reference = workloads.get("gemm", dtype="int32", M=3, N=4, K=5)
    assert all(b.dtype == "int32" for b in func.buffers)
    args = workloads.make_args(func)
    assert all(a.dtype == np.int32 for a in args)
    assert reference(*args[:2]).dtype == np.int32
    func, _ = workloads.get("softmax", dtype="float64", M=3, N=4)
    assert func.buffers[0].dtype == "float64"
    with pytest.raises(ValueError, match="dtype int32 is not supported"):
        workloads.get("softmax", dtype="int32")


def test_make_args():
    func, _ = workloads.get("matmul_bias_relu", M=5, N=3, K=7)
    assert func.attrs["schedlab.num_outputs"] == 1
    args = workloads.make_args(func, seed=3)
    assert [a.shape for a in args] == [(5, 7), (7, 3), (3,), (5, 3)]
    assert all(a.dtype == np.float32 for a in args)
    assert not args[-1].any() and all(a.any() for a in args[:-1])
    assert all(np.abs(a).max() <= 1.0 for a in args)
    again = workloads.make_args(func, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(args, again))
    assert not np.array_equal(args[0], workloads.make_args(func, seed=4)[0])


def test_make_args_rejects_symbolic_shapes():
    from schedlab import te

    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    with pytest.raises(ValueError, match="symbolic extent n"):
        workloads.make_args(te.create_prim_func([A, B]))


def test_flops():
    assert workloads.spec("gemm").flops(M=64, N=48, K=80) == 2 * 64 * 48 * 80
    assert workloads.spec("gemm").flops() == 2 * 128**3
    conv = workloads.spec("conv2d_nchw")
    # N=2, CO=8, 7x7 output (H=W=14, k=3, stride 2, pad 1), CI=4, 3x3 taps
    assert conv.flops(N=2, CI=4, H=14, W=14, CO=8, stride=2) == 2 * 2 * 8 * 7 * 7 * 4 * 9
    group = workloads.spec("group_conv2d_nchw")
    assert group.flops(CI=8, CO=8, groups=4, H=5, W=5) == 2 * 8 * 25 * 2 * 9


@pytest.mark.parametrize("name", EXPECTED)
def test_default_sizes_build(name):
    func, _ = workloads.get(name)
    assert all(isinstance(s, IntImm) for b in func.buffers for s in b.shape)
    assert workloads.spec(name).flops() >= 0


@pytest.mark.parametrize(
    "name", [n for n in workloads.names() if workloads.spec(n).baseline is not None]
)
def test_fast_baselines_agree_with_the_exact_reference(name):
    workload = workloads.spec(name)
    sizes = {key: 13 for key in workload.scale}
    func, reference = workloads.get(name, **sizes)
    args = workloads.make_args(func, seed=3)
    inputs = args[: len(args) - workload.num_outputs]
    np.testing.assert_allclose(
        workload.bound_baseline(**sizes)(*inputs), reference(*inputs), rtol=1e-4, atol=1e-5
    )


def test_every_workload_has_a_bench_size():
    for name in workloads.names():
        assert workloads.spec(name).scale, name
    assert workloads.spec("gemm").scaled_sizes(7) == {"M": 7, "N": 7, "K": 7}


def test_sizes_say_what_they_accept():
    # 0 is no extent either: the message says what is accepted, and names the size
    with pytest.raises(ValueError, match=r"workload 'gemm': size M must be >= 1, got -5"):
        workloads.get("gemm", M=-5)
    with pytest.raises(ValueError, match=r"size K must be >= 1, got 0"):
        workloads.get("gemm", K=0)
    with pytest.raises(ValueError, match=r"size padding must be >= 0, got -1"):
        workloads.get("conv2d_nchw", padding=-1)
    spec = workloads.spec("conv2d_nchw")
    assert (spec.size_minimum("H"), spec.size_minimum("padding")) == (1, 0)
    assert spec.size_problem("H", 1) is None and spec.size_problem("H", "8") is not None

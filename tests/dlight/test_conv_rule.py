"""The `Conv` default rule: which blocks it takes, the packed weight and channel-innermost
accumulators it builds, and numerics against the numpy references at odd spatial sizes,
strides, dilations, 1x1 kernels, batches, conv1d/conv3d and both vector widths."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import schedlab
from schedlab import dlight, workloads
from schedlab.dlight.analysis import block_info, conv_axes
from schedlab.relax.frontend.onnx import from_onnx
from schedlab.schedule import Schedule
from schedlab.target import Target


def schedule(func, simd_width=512, **attrs):
    target = Target("cpu", simd_width=simd_width, **attrs)
    sch, fired = dlight.schedule_func(func, dlight.cpu.default_rules(), target)
    return sch, fired, target


def check(name, sizes, simd_width=512, seed=5):
    func, reference = workloads.get(name, **sizes)
    sch, fired, target = schedule(func, simd_width)
    args = workloads.make_args(func, seed=seed)
    schedlab.build(sch.mod, target=target)(*args)
    np.testing.assert_allclose(args[-1], reference(*args[:-1]), rtol=1e-4, atol=1e-4)
    return sch, fired


CASES = [
    ("conv2d_nchw", dict(CI=5, H=13, W=11, CO=32)),  # odd columns: rows fitted to 11
    ("conv2d_nchw", dict(CI=3, H=23, W=23, CO=16, stride=2, padding=0)),  # a stem
    ("conv2d_nchw", dict(CI=7, H=9, W=31, CO=48, kernel=1, padding=0)),  # 1x1, 31 columns
    ("conv2d_nchw", dict(N=2, CI=4, H=7, W=7, CO=64, kernel=3)),  # batch 2, two vectors
    ("conv2d_nchw", dict(CI=6, H=15, W=17, CO=24, kernel=5, stride=2, padding=2)),  # half lanes
    ("dilated_conv2d_nchw", dict(CI=3, H=13, W=19, CO=16)),
    ("conv1d_ncw", dict(CI=5, L=37, CO=16)),
    ("conv3d_ncdhw", dict(CI=3, D=5, H=7, W=9, CO=16)),
    ("conv2d_nchw", dict(CI=9, H=6, W=13, CO=72, kernel=1, padding=0)),  # 72 channels: padded
    ("conv2d_nchw", dict(CI=4, H=5, W=7, CO=20, kernel=3)),  # 20 = no whole vector: padded
]


@pytest.mark.parametrize("simd_width", [256, 512])
@pytest.mark.parametrize("name, sizes", CASES)
def test_conv_rule_matches_reference(name, sizes, simd_width):
    sch, fired = check(name, sizes, simd_width)
    assert fired[name] == "Conv", fired
    packed = [b for b in sch.func.body.block.alloc_buffers
              if b.name in ("weight_global", "weight_pad_global")]  # fmt: skip
    assert len(packed) == 1 and packed[0].shape[-1].value in (simd_width // 32, simd_width // 64)


def test_conv_rule_lays_accumulators_out_channel_innermost():
    func, _ = workloads.get("conv2d_nchw", CI=8, H=14, W=14, CO=32)
    sch, fired, target = schedule(func)
    source = schedlab.build(sch.mod, target=target).source
    # one weight vector times a broadcast input element per accumulator vector: no gathers
    assert "sl_broadcast_float32x16(pad_temp[" in source
    assert "sl_load_float32x16(weight_global" in source
    assert "for (int32_t sl_l" not in source.split("conv2d_nchw_local")[2].split("}")[0]


@pytest.mark.parametrize(
    "name, sizes",
    [
        ("conv2d_nchw", dict(CI=5, H=13, W=11, CO=7)),  # fewer channels than a vector
        ("group_conv2d_nchw", dict(CI=8, H=9, W=11, CO=32, groups=2)),  # channel in the data
        ("depthwise_conv2d_nchw", dict(C=16, H=13, W=11)),
        ("conv2d_nhwc", dict(CI=5, H=9, W=11, CO=32)),  # channels last: the columns are not
        ("gemm", dict(M=32, N=32, K=32)),
    ],
)
def test_conv_rule_declines(name, sizes):
    func, _ = workloads.get(name, **sizes)
    _, fired, _ = schedule(func)
    assert "Conv" not in fired.values(), fired


@pytest.mark.parametrize("simd_width", [256, 512])
def test_padded_channels_keep_the_update_vectorized(simd_width):
    """1000 classes = 62.5 vectors of 16: the block runs on whole channel groups (weights
    zero-padded in the packing copy, which folds on constants), the update is all vector
    code, and only the write-back tests the channel (on AVX2, 125 vectors of 8 need none)."""
    from schedlab.relax.transform.fold_layout_rewrite import split_layout_rewrite

    func, reference = workloads.get("conv2d_nchw", CI=6, H=7, W=9, CO=1000, kernel=1, padding=0)
    sch, fired, target = schedule(func, simd_width)
    assert fired["conv2d_nchw"] == "Conv"
    lanes = simd_width // 32
    packed = [b for b in sch.func.body.block.alloc_buffers if b.name.startswith("weight")]
    assert [b.shape[-1].value for b in packed] == [lanes]  # one stage: padded and packed
    assert split_layout_rewrite(sch.func) is not None
    kernel = schedlab.build(sch.mod, target=target)
    update = kernel.source.split("for (int32_t rc")[1].split("}")[0]
    assert "#pragma omp simd" not in update and f"sl_load_float32x{lanes}(weight" in update
    args = workloads.make_args(func, seed=2)
    kernel(*args)
    np.testing.assert_allclose(args[-1], reference(*args[:-1]), rtol=1e-4, atol=1e-4)


def test_conv_axes_roles():
    func, _ = workloads.get("conv2d_nchw", CI=4, H=8, W=8, CO=16)
    sch = Schedule(func)
    info = block_info(sch.state, sch.get(sch.get_block("conv2d_nchw")))
    axes = conv_axes(info)
    names = lambda vs: [v.name for v in vs]  # noqa: E731
    assert names(axes.outer) == ["vnn", "vyy"] and axes.channel.name == "vff"
    assert axes.row.name == "vxx" and names(axes.reduce) == ["vrc", "vry", "vrx"]


@settings(max_examples=12, deadline=None)
@given(
    ci=st.integers(1, 9),
    hw=st.integers(3, 21),
    co=st.sampled_from([8, 16, 24, 48]),
    kernel=st.sampled_from([1, 3]),
    stride=st.integers(1, 2),
    padding=st.integers(0, 1),
    seed=st.integers(0, 99),
)
def test_conv_rule_property(ci, hw, co, kernel, stride, padding, seed):
    sizes = dict(CI=ci, H=hw, W=hw + 2, CO=co, kernel=kernel, stride=stride, padding=padding)
    check("conv2d_nchw", sizes, simd_width=256, seed=seed)


def test_conv_bias_relu_epilogue_is_fused_into_the_write_back():
    """An onnx Conv + bias + Relu through the default pipeline: one kernel whose write-back
    applies the bias and the ReLU, equal to numpy."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((32, 6, 3, 3)).astype("float32")
    b = rng.standard_normal(32).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["y"], ["z"])]  # fmt: skip
    graph = helper.make_graph(
        nodes, "conv_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 9, 13])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 32, 9, 13])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )  # fmt: skip
    mod = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    x = rng.standard_normal((1, 6, 9, 13)).astype("float32")
    vm = schedlab.relax.VirtualMachine(schedlab.compile(mod, "cpu"))
    got = np.asarray(vm["main"](x))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    want = np.maximum(np.einsum("nchwyx,fcyx->nfhw", windows, w) + b[None, :, None, None], 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_tile_rows_prefer_a_divisor_near_the_budget_to_a_predicate():
    from schedlab.dlight.cpu.conv import tile_rows

    # AVX2 (8 accumulators, up to 13) and AVX-512 (14, up to 16) budgets
    assert [tile_rows(c, 8, 13) for c in (56, 28, 27, 13, 55, 111)] == [8, 7, 9, 13, 5, 8]
    assert [tile_rows(c, 14, 16) for c in (56, 28, 14, 27, 13, 55)] == [14, 14, 14, 9, 13, 11]


def test_channel_blocks_go_outermost_when_the_weight_outgrows_the_l2():
    """A weight over half the L2 is read once per channel block; a small one stays cached
    while the output rows go by (the parallel loop's name shows the order)."""
    func, _ = workloads.get("conv2d_nchw", CI=64, H=7, W=7, CO=64, kernel=3)  # 147 KiB weight
    small, _, _ = schedule(func)
    big, _, _ = schedule(func, l2_bytes=128 * 1024)
    assert "nn_yy_ff_0_fused" in small.func.script()
    assert "ff_0_nn_yy_fused" in big.func.script()

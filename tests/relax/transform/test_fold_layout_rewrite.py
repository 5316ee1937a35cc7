"""FoldLayoutRewrite: a kernel that starts by packing a parameter is split into the packing
copy and the rest; where that parameter is a constant, the copy runs at compile time and the
call reads the packed constant; where it is not, the call is left alone. Numerics preserved."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import schedlab
from schedlab import dlight, workloads
from schedlab.relax import VirtualMachine
from schedlab.relax.frontend.onnx import from_onnx
from schedlab.relax.transform.fold_layout_rewrite import split_layout_rewrite
from schedlab.target import Target


def scheduled_conv(**sizes):
    func, reference = workloads.get("conv2d_nchw", **sizes)
    sch, fired = dlight.schedule_func(func, dlight.cpu.default_rules(), Target("cpu"))
    assert fired["conv2d_nchw"] == "Conv"
    return sch.func, reference


def test_split_kernel_composes_to_the_original():
    func, reference = scheduled_conv(CI=5, H=9, W=11, CO=32)
    split = split_layout_rewrite(func)
    assert split is not None and len(split.rewrites) == 1
    (rewrite,) = split.rewrites
    assert rewrite.index == 1 and rewrite.packed.name == "weight_global"
    assert [b.name for b in split.compute.buffers] == ["data", "weight_global", "conv2d_nchw"]
    assert "weight_global" not in [b.name for b in split.compute.body.block.alloc_buffers]
    data, weight, out = workloads.make_args(func, seed=1)
    packed = np.zeros([int(d) for d in rewrite.packed.shape], "float32")
    schedlab.interpret(rewrite.preproc, weight, packed)
    assert packed.shape[-1] == 16 and not np.array_equal(packed.ravel(), weight.ravel())
    schedlab.build(split.compute)(data, packed, out)
    np.testing.assert_allclose(out, reference(data, weight), rtol=1e-4, atol=1e-4)


def test_kernel_without_a_packing_stage_is_not_split():
    func, _ = workloads.get("conv2d_nchw", CI=5, H=9, W=11, CO=7)  # no Conv tile: no packing
    sch, _ = dlight.schedule_func(func, dlight.cpu.default_rules(), Target("cpu"))
    assert split_layout_rewrite(sch.func) is None
    assert split_layout_rewrite(func) is None


def conv_model(weight_is_input: bool):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((32, 4, 3, 3)).astype("float32")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 10, 13])]
    initializers = []
    if weight_is_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.shape)))
    else:
        initializers.append(numpy_helper.from_array(w, "w"))
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 10, 13])
    graph = helper.make_graph([node], "conv", inputs, [out], initializer=initializers)
    return from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])), w


def reference_conv(x, w):
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    return np.einsum("nchwyx,fcyx->nfhw", windows, w)


def kernel_names(executable) -> list[str]:
    return sorted(executable.kernels)


def test_constant_weight_is_packed_at_compile_time():
    mod, w = conv_model(weight_is_input=False)
    # in NCHW (the blocked layout's pass would re-lay the weight out itself, at compile time)
    executable = schedlab.compile(mod, Target("cpu", blocked_layout=False))
    names = kernel_names(executable)
    assert any(n.endswith("_packed") for n in names) and not any("global" in n for n in names)
    x = np.random.default_rng(0).standard_normal((1, 4, 10, 13)).astype("float32")
    got = np.asarray(VirtualMachine(executable)["main"](x))
    np.testing.assert_allclose(got, reference_conv(x, w), rtol=1e-4, atol=1e-4)


def test_weight_given_at_run_time_keeps_the_packing_kernel():
    mod, w = conv_model(weight_is_input=True)
    executable = schedlab.compile(mod, "cpu")
    assert not any(n.endswith("_packed") for n in kernel_names(executable))
    x = np.random.default_rng(0).standard_normal((1, 4, 10, 13)).astype("float32")
    got = np.asarray(VirtualMachine(executable)["main"](x, w))
    np.testing.assert_allclose(got, reference_conv(x, w), rtol=1e-4, atol=1e-4)


def dense_model(rows: int, weight_is_input: bool):
    """x[rows, 96] @ w[96, 40] + b, the weight a constant or an input."""
    rng = np.random.default_rng(4)
    w, b = rng.standard_normal((96, 40)).astype("float32"), rng.standard_normal(40).astype("f4")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 96])]
    initializers = [numpy_helper.from_array(b, "b")]
    if weight_is_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [96, 40]))
    else:
        initializers.append(numpy_helper.from_array(w, "w"))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]),
             helper.make_node("Add", ["y", "b"], ["z"])]  # fmt: skip
    out = helper.make_tensor_value_info("z", TensorProto.FLOAT, [rows, 40])
    graph = helper.make_graph(nodes, "dense", inputs, [out], initializer=initializers)
    return from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])), w, b


def test_constant_weights_are_marked_layout_free_and_packed_even_for_one_row():
    """One row reuses the weight once, too little to pack it at every call; as a constant its
    packing is free (folded at compile time), so AttachLayoutFreeBuffers marks it and the
    Matmul rule packs it (N = 40 padded to whole panels on the way)."""
    from schedlab.relax import transform as T

    mod, w, b = dense_model(1, weight_is_input=False)
    marked = T.AttachLayoutFreeBuffers()(T.FuseTIR()(T.FuseOps()(T.AnnotateTIROpPattern()(
        T.LegalizeOps()(mod)))))  # fmt: skip
    kernels = [f for f in marked.values() if isinstance(f, schedlab.PrimFunc)]
    marks = [f.attrs.get("layout_free_buffers") for f in kernels]
    assert [m for m in marks if m is not None] == [(1, 2)]  # the fused kernel's w and b
    executable = schedlab.compile(mod, "cpu")
    assert any(n.endswith("_packed") for n in kernel_names(executable))
    x = np.random.default_rng(1).standard_normal((1, 96)).astype("float32")
    got = np.asarray(VirtualMachine(executable)["main"](x))
    np.testing.assert_allclose(got, x @ w + b, rtol=1e-4, atol=1e-4)
    mod, w, b = dense_model(1, weight_is_input=True)
    executable = schedlab.compile(mod, "cpu")
    assert not any(n.endswith("_packed") for n in kernel_names(executable))
    got = np.asarray(VirtualMachine(executable)["main"](x, w))
    np.testing.assert_allclose(got, x @ w + b, rtol=1e-4, atol=1e-4)

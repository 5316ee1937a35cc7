"""ConvertToBlockedLayout: a small CNN (stem, pooling, fire-style branches, batch norm, a
residual add, a padded classifier, global average pooling) in NCHW{b}c, equal to the NCHW
graph, with the layout changes only at the edges; the BlockedConv rule schedules its convs."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import schedlab
from schedlab.relax import interpreter
from schedlab.relax.expr import Call
from schedlab.relax.frontend.onnx import from_onnx
from schedlab.relax.transform import ConvertToBlockedLayout
from schedlab.target import Target


def _small_cnn(classes: int = 20, batch: int = 1):
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def const(name, *shape, scale=0.3):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype("float32"), name))  # fmt: skip
        return name

    def conv(x, out, cin, cout, k, stride=1, pad=0):
        nodes.append(helper.make_node(
            "Conv", [x, const(out + "_w", cout, cin, k, k), const(out + "_b", cout)], [out],
            kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4))  # fmt: skip
        return out

    def op(kind, inputs, out, **attrs):
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    x = op("Relu", [conv("x", "stem", 3, 16, 3, stride=2)], "stem_r")
    x = op("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2])
    squeeze = op("Relu", [conv(x, "sq", 16, 16, 1)], "sq_r")
    left = op("Relu", [conv(squeeze, "e1", 16, 16, 1)], "e1_r")
    right = conv(squeeze, "e3", 16, 16, 3, pad=1)
    right = op("BatchNormalization", [right, const("g", 16), const("be", 16), const("m", 16),
               "v"], "bn", epsilon=1e-5)  # fmt: skip
    inits.append(numpy_helper.from_array(rng.uniform(0.5, 2, 16).astype("float32"), "v"))
    right = op("Relu", [right], "e3_r")
    x = op("Concat", [left, right], "cat", axis=1)
    x = op("Add", [x, conv(x, "res", 32, 32, 3, pad=1)], "res_add")
    x = op("Relu", [conv(x, "cls", 32, classes, 1)], "cls_r")  # classes: not whole blocks
    x = op("GlobalAveragePool", [x], "gap")
    x = op("Flatten", [x], "flat")
    op("Softmax", [x], "y", axis=1)
    graph = helper.make_graph(
        nodes,
        "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 31, 29])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, classes])],
        initializer=inits,
    )
    return from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def _calls(mod) -> list[Call]:
    found = []
    for block in mod["main"].body.blocks:
        found += [b.value for b in block.bindings if isinstance(b.value, Call)]
    return found


@pytest.mark.parametrize("block", [8, 16])
def test_converted_graph_equals_the_nchw_graph(block):
    mod = _small_cnn()
    x = np.random.default_rng(1).standard_normal((1, 3, 31, 29)).astype("float32")
    converted = ConvertToBlockedLayout(block)(mod)
    calls = _calls(converted)
    convs = [c for c in calls if c.op == "relax.nn.conv2d"]
    assert len(convs) == 6 and all(c.attrs["out_layout"] == f"NCHW{block}c" for c in convs)
    assert convs[0].attrs["data_layout"] == "NCHW3c"  # the RGB image: a block of its 3 channels
    transforms = [c for c in calls if c.op == "relax.layout_transform"]
    # into the blocked layout once (the image), out once (the pooled classes, cropped to 20)
    assert [t.attrs["dst_layout"] for t in transforms] == ["NCHW3c", "NCHW"]
    assert transforms[-1].attrs["channels"] == 20
    assert not any(c.op == "relax.nn.batch_norm" for c in calls)  # a multiply-add now
    want = interpreter.run(mod, x)
    np.testing.assert_allclose(interpreter.run(converted, x), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("simd_width, batch", [(256, 1), (512, 1), (512, 2)])
def test_cpu_pipeline_runs_the_cnn_blocked(simd_width, batch):
    mod = _small_cnn(batch=batch)
    x = np.random.default_rng(2).standard_normal((batch, 3, 31, 29)).astype("float32")
    target = Target("cpu", simd_width=simd_width)
    lowered = schedlab.relax.get_default_pipeline(target)(mod)
    rules = " ".join(str(f.attrs.get("dlight.rules", "")) for f in lowered.values()
                     if hasattr(f, "buffer_map"))  # fmt: skip
    assert rules.count("=BlockedConv") >= 6, rules
    vm = schedlab.relax.VirtualMachine(schedlab.compile(mod, target))
    np.testing.assert_allclose(np.asarray(vm["main"](x)), interpreter.run(mod, x), rtol=1e-4,
                               atol=1e-6)  # fmt: skip


def test_what_stays_nchw():
    """A conv with a computed weight and a grouped conv keep the NCHW layout: a graph with
    nothing else to convert comes back unchanged."""
    from schedlab.relax import expr as X
    from schedlab.relax.block_builder import BlockBuilder
    from schedlab.relax.struct_info import TensorStructInfo

    bb = BlockBuilder()
    x = X.Var("x", TensorStructInfo((1, 8, 6, 6), "float32"))
    w = X.Var("w", TensorStructInfo((16, 8, 1, 1), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(X.Call("relax.nn.conv2d", (x, w), {}))  # the weight is not a constant
            grouped = np.ones((16, 4, 1, 1), "float32")
            z = bb.emit(X.Call("relax.nn.conv2d", (x, X.Constant(grouped)), {"groups": 2}))
            out = bb.emit_output(X.Call("relax.add", (y, z)))
        bb.emit_func_output(out)
    mod = bb.get()
    assert ConvertToBlockedLayout(8)(mod) is mod


def test_pass_factory_checks_the_block():
    with pytest.raises(ValueError, match="block must be an int >= 2"):
        ConvertToBlockedLayout(1)


def test_a_lone_convolution_keeps_nchw():
    """One conv alone would pay two layout transforms for one blocked kernel: left in NCHW."""
    from schedlab.relax import expr as X
    from schedlab.relax.block_builder import BlockBuilder
    from schedlab.relax.struct_info import TensorStructInfo

    bb = BlockBuilder()
    x = X.Var("x", TensorStructInfo((1, 16, 6, 6), "float32"))
    weight = X.Constant(np.ones((16, 16, 3, 3), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(X.Call("relax.nn.conv2d", (x, weight), {"padding": 1}))
            out = bb.emit_output(X.Call("relax.nn.relu", (y,)))
        bb.emit_func_output(out)
    mod = bb.get()
    assert ConvertToBlockedLayout(8)(mod) is mod

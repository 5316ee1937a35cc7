"""The ONNX importer: small models built with onnx.helper are imported, evaluated by the graph
interpreter and compared with onnxruntime; unsupported ops and corrupt files give one clear
error."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from schedlab.relax.frontend.onnx import OnnxImportError, from_onnx  # noqa: E402
from schedlab.relax.interpreter import run  # noqa: E402

RNG = np.random.default_rng(7)


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def make_model(nodes, inputs, outputs, inits=(), opset=17):
    """A model from nodes; `inputs`/`outputs` are (name, shape) pairs (float32)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v), name=k) for k, v in dict(inits).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def check_against_ort(model, feeds: dict, shape_dict=None):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    mod = from_onnx(model, shape_dict)
    got = run(mod, *feeds.values())
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    return mod


def test_mlp():
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("Gemm", ["h2", "w2", "b2"], ["y"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Sigmoid", ["y"], ["out"]),
    ]
    inits = {"w1": rand(5, 7), "b1": rand(7), "w2": rand(3, 7), "b2": rand(3)}
    model = make_model(nodes, [("x", [4, 5])], [("out", [4, 3])], inits)
    check_against_ort(model, {"x": rand(4, 5)})


def test_mlp_with_symbolic_batch():
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Tanh", ["h"], ["out"]),
    ]
    model = make_model(nodes, [("x", ["batch", 5])], [("out", ["batch", 3])], {"w": rand(5, 3)})
    mod = from_onnx(model)
    assert str(mod["main"].params[0].struct_info_) == "Tensor((batch, 5), float32)"
    x = rand(6, 5)
    np.testing.assert_allclose(run(mod, x), np.tanh(x @ model_init(model, "w")), rtol=1e-5)
    fixed = from_onnx(model, {"x": (2, 5)})
    assert str(fixed["main"].params[0].struct_info_) == "Tensor((2, 5), float32)"


def model_init(model, name):
    for init in model.graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    raise KeyError(name)


def conv_bn_relu(prefix, x, cin, cout, inits, stride=1):
    """Conv (3x3, pad 1) -> BatchNormalization -> Relu nodes."""
    inits[f"{prefix}_w"] = rand(cout, cin, 3, 3, scale=0.3)
    inits[f"{prefix}_b"] = rand(cout)
    inits[f"{prefix}_g"] = rand(cout) * 0.2 + 1
    inits[f"{prefix}_be"] = rand(cout)
    inits[f"{prefix}_m"] = rand(cout)
    inits[f"{prefix}_v"] = np.abs(rand(cout)) + 0.5
    return [
        helper.make_node(
            "Conv",
            [x, f"{prefix}_w", f"{prefix}_b"],
            [f"{prefix}_c"],
            pads=[1, 1, 1, 1],
            strides=[stride, stride],
        ),  # fmt: skip
        helper.make_node(
            "BatchNormalization",
            [f"{prefix}_c", f"{prefix}_g", f"{prefix}_be", f"{prefix}_m", f"{prefix}_v"],
            [f"{prefix}_bn"],
            epsilon=1e-3,
        ),
        helper.make_node("Relu", [f"{prefix}_bn"], [f"{prefix}_out"]),
    ]


def test_small_resnet():
    inits = {}
    nodes = conv_bn_relu("stem", "x", 3, 4, inits)
    nodes.append(helper.make_node("MaxPool", ["stem_out"], ["p"], kernel_shape=[3, 3],
                                  strides=[2, 2], pads=[1, 1, 1, 1]))  # fmt: skip
    nodes += conv_bn_relu("b1", "p", 4, 4, inits)
    nodes.append(helper.make_node("Add", ["b1_out", "p"], ["res"]))
    nodes += conv_bn_relu("b2", "res", 4, 3, inits)
    nodes += [
        helper.make_node("Concat", ["res", "b2_out"], ["cat"], axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["out"], axis=1),
    ]
    inits["fc_w"], inits["fc_b"] = rand(5, 7), rand(5)
    model = make_model(nodes, [("x", [2, 3, 9, 11])], [("out", [2, 5])], inits, opset=13)
    check_against_ort(model, {"x": rand(2, 3, 9, 11)})


def test_transformer_encoder_block():
    seq, dim, heads = 5, 8, 2
    head_dim = dim // heads
    inits = {
        "wq": rand(dim, dim, scale=0.4), "wk": rand(dim, dim, scale=0.4),
        "wv": rand(dim, dim, scale=0.4), "wo": rand(dim, dim, scale=0.4),
        "ln1_g": rand(dim) + 1, "ln1_b": rand(dim), "ln2_g": rand(dim) + 1, "ln2_b": rand(dim),
        "w1": rand(dim, 12, scale=0.4), "b1": rand(12), "w2": rand(12, dim, scale=0.4),
        "b2": rand(dim), "split_shape": np.array([1, seq, heads, head_dim], np.int64),
        "merge_shape": np.array([1, seq, dim], np.int64),
        "scale": np.array(1 / np.sqrt(head_dim), np.float32),
    }  # fmt: skip
    nodes = []
    for name in "qkv":
        nodes += [
            helper.make_node("MatMul", ["x", f"w{name}"], [f"{name}0"]),
            helper.make_node("Reshape", [f"{name}0", "split_shape"], [f"{name}1"]),
        ]
    nodes += [
        helper.make_node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["q", "kt"], ["s0"]),
        helper.make_node("Mul", ["s0", "scale"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["a0"]),
        helper.make_node("Transpose", ["a0"], ["a1"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["a1", "merge_shape"], ["a2"]),
        helper.make_node("MatMul", ["a2", "wo"], ["a"]),
        helper.make_node("Add", ["x", "a"], ["r1"]),
        helper.make_node("LayerNormalization", ["r1", "ln1_g", "ln1_b"], ["n1"], axis=-1),
        helper.make_node("MatMul", ["n1", "w1"], ["f0"]),
        helper.make_node("Add", ["f0", "b1"], ["f1"]),
        helper.make_node("Gelu", ["f1"], ["f2"]),
        helper.make_node("MatMul", ["f2", "w2"], ["f3"]),
        helper.make_node("Add", ["f3", "b2"], ["f4"]),
        helper.make_node("Add", ["n1", "f4"], ["r2"]),
        helper.make_node(
            "LayerNormalization", ["r2", "ln2_g", "ln2_b"], ["out"], epsilon=1e-6
        ),  # fmt: skip
    ]
    model = make_model(nodes, [("x", [1, seq, dim])], [("out", [1, seq, dim])], inits, 20)
    check_against_ort(model, {"x": rand(1, seq, dim)})


@pytest.mark.parametrize(
    "op, attrs, shape, opset",
    [
        ("Softmax", {"axis": 1}, [2, 3, 4], 11),
        ("LogSoftmax", {"axis": 1}, [2, 3, 4], 13),
        ("LeakyRelu", {"alpha": 0.2}, [3, 4], 17),
        ("Elu", {"alpha": 0.7}, [3, 4], 17),
        ("Selu", {}, [3, 4], 17),
        ("HardSigmoid", {}, [3, 4], 17),
        ("HardSwish", {}, [3, 4], 17),
        ("Softsign", {}, [3, 4], 17),
        ("Softplus", {}, [3, 4], 17),
        ("Erf", {}, [3, 4], 17),
        ("Gelu", {"approximate": "tanh"}, [3, 4], 20),
        ("ReduceMean", {"axes": [1], "keepdims": 0}, [2, 3, 4], 13),
        ("ReduceSumSquare", {"axes": [0, 2]}, [2, 3, 4], 13),
        ("ReduceLogSumExp", {"axes": [2], "keepdims": 0}, [2, 3, 4], 13),
        ("Transpose", {"perm": [2, 0, 1]}, [2, 3, 4], 13),
        ("Flatten", {"axis": 2}, [2, 3, 4], 13),
        ("LRN", {"size": 3, "alpha": 1e-3}, [1, 5, 3, 3], 13),
        (
            "AveragePool",
            {"kernel_shape": [2, 2], "pads": [0, 1, 1, 0], "count_include_pad": 1},
            [1, 2, 5, 5],
            13,
        ),  # fmt: skip
        (
            "MaxPool",
            {"kernel_shape": [3], "auto_pad": "SAME_UPPER", "strides": [2]},
            [1, 2, 7],
            13,
        ),
        ("Abs", {}, [3, 4], 13),
        ("Neg", {}, [3, 4], 13),
        ("Sign", {}, [3, 4], 13),
        ("Exp", {}, [3, 4], 13),
        ("Reciprocal", {}, [3, 4], 13),
        ("Shrink", {"lambd": 0.4, "bias": 0.1}, [3, 4], 13),
        ("GlobalMaxPool", {}, [2, 3, 4, 2], 13),
        ("Identity", {}, [3, 4], 13),
        ("Dropout", {}, [3, 4], 13),
        ("ReduceL2", {"axes": [1]}, [2, 3, 4], 13),
        ("ReduceL1", {"axes": [0], "keepdims": 0}, [2, 3, 4], 13),
        ("ThresholdedRelu", {"alpha": 0.3}, [3, 4], 13),
        ("Celu", {"alpha": 0.8}, [3, 4], 13),
        ("Mish", {}, [3, 4], 18),
        ("LpNormalization", {"axis": 1, "p": 1}, [3, 4], 13),
        ("LpNormalization", {"axis": 0}, [3, 4], 13),
        ("MeanVarianceNormalization", {}, [2, 3, 2, 2], 13),
        ("DepthToSpace", {"blocksize": 2}, [1, 8, 2, 3], 13),
        ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}, [1, 8, 2, 3], 13),
        ("SpaceToDepth", {"blocksize": 2}, [1, 2, 4, 6], 13),
    ],
)
def test_single_op(op, attrs, shape, opset):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    model = make_model([node], [("x", shape)], [("y", None)], opset=opset)
    check_against_ort(model, {"x": rand(*shape)})


def test_opset_differences_axes_as_input_or_attribute():
    for opset, node_extra, inits in [
        (11, {"axes": [1]}, {}),
        (13, {}, {"axes": np.array([1], np.int64)}),
    ]:
        inputs = ["x", "axes"] if inits else ["x"]
        nodes = [
            helper.make_node("Unsqueeze", inputs, ["u"], **node_extra),
            helper.make_node("Squeeze", ["u", "axes"] if inits else ["u"], ["y"], **node_extra),
        ]
        model = make_model(nodes, [("x", [3, 4])], [("y", [3, 4])], inits, opset)
        check_against_ort(model, {"x": rand(3, 4)})


def test_shape_ops_split_slice_pad_gather_expand_where():
    inits = {
        "starts": np.array([1, 0], np.int64), "ends": np.array([100, -1], np.int64),
        "axes": np.array([0, 1], np.int64), "steps": np.array([2, 1], np.int64),
        "pads": np.array([0, 1, 2, 0], np.int64), "idx": np.array([[2, -1]], np.int64),
        "eshape": np.array([2, 1, 1], np.int64), "tile": np.array([1, 2], np.int64),
        "lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32),
    }  # fmt: skip
    nodes = [
        helper.make_node("Split", ["x"], ["s0", "s1"], axis=1, num_outputs=2),
        helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["sl"]),
        helper.make_node("Pad", ["sl", "pads"], ["pd"]),
        helper.make_node("Gather", ["x", "idx"], ["g"], axis=1),
        helper.make_node("Expand", ["s1", "eshape"], ["ex"]),
        helper.make_node("Greater", ["s0", "s1"], ["gt"]),
        helper.make_node("Where", ["gt", "s0", "s1"], ["wh"]),
        helper.make_node("Tile", ["wh", "tile"], ["ti"]),
        helper.make_node("Clip", ["ti", "lo", "hi"], ["cl"]),
        helper.make_node("Split", ["x"], ["u0", "u1"], axis=0, num_outputs=2),  # 3 + 2 rows
    ]
    outs = [("pd", None), ("g", None), ("ex", None), ("cl", None), ("u0", None), ("u1", None)]
    model = make_model(nodes, [("x", [5, 6])], outs, inits, opset=18)
    check_against_ort(model, {"x": rand(5, 6)})


def test_constant_shape_computations_fold():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write it."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node(
            "Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))
        ),  # fmt: skip
        helper.make_node("Gather", ["shp", "zero"], ["n"]),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = {"ax": np.array([0], np.int64), "minus1": np.array([-1], np.int64)}
    model = make_model(nodes, [("x", [2, 3, 4])], [("y", [2, 12])], inits, opset=13)
    mod = check_against_ort(model, {"x": rand(2, 3, 4)})
    (block,) = mod["main"].body.blocks
    assert len(block.bindings) == 2  # the reshape and the output; the rest became constants


def test_unsupported_ops_listed_in_one_error():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="r"),
        helper.make_node("NonZero", ["a"], ["b"], name="nz1"),
        helper.make_node("TopK", ["x", "k"], ["c", "d"], name="topk"),
        helper.make_node("NonZero", ["x"], ["e"], name="nz2"),
    ]
    model = make_model(nodes, [("x", [3])], [("b", None)], {"k": np.array([1], np.int64)})
    with pytest.raises(OnnxImportError) as info:
        from_onnx(model)
    message = str(info.value)
    assert "2 unsupported ONNX op type(s)" in message
    assert "NonZero (nodes: nz1, nz2)" in message and "TopK (nodes: topk)" in message


def test_corrupt_and_truncated_files(tmp_path):
    node = helper.make_node("Relu", ["x"], ["y"])
    good = make_model([node], [("x", [3])], [("y", [3])]).SerializeToString()
    cases = {"garbage.onnx": b"\x08\x07garbage\xff\xff\xff", "cut.onnx": good[: len(good) // 2]}
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(OnnxImportError) as info:
            from_onnx(str(path))
        message = str(info.value)
        assert "\n" not in message and name in message and "not a valid ONNX model" in message
    with pytest.raises(OnnxImportError, match="no such file"):
        from_onnx(str(tmp_path / "missing.onnx"))


def test_non_constant_shape_input_is_a_clear_error():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxImportError, match=r"node rs \(Reshape\): shape must be a constant"):
        from_onnx(model)


def _with_inits(op, inputs, inits, attrs, shape, opset):
    node = helper.make_node(op, ["x", *inputs], ["y"], **attrs)
    return make_model([node], [("x", shape)], [("y", None)], inits, opset)


@pytest.mark.parametrize(
    "op, inputs, inits, attrs, shape, opset",
    [
        ("ConvTranspose", ["w", "b"], {"w": rand(2, 3, 3, 3), "b": rand(3)},
         {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 0]}, [1, 2, 4, 5], 13),
        ("ConvTranspose", ["w"], {"w": rand(4, 1, 3)}, {"group": 2, "strides": [2]},
         [1, 4, 5], 13),
        ("Conv", ["w"], {"w": rand(4, 1, 3, 3)}, {"group": 2, "auto_pad": "SAME_LOWER",
         "strides": [2, 2]}, [1, 2, 7, 8], 13),
        ("Conv", ["w"], {"w": rand(2, 3, 3, 3, 3)}, {}, [1, 3, 4, 5, 5], 11),
        ("GroupNormalization", ["s", "b"], {"s": rand(6), "b": rand(6)},
         {"num_groups": 3}, [2, 6, 3, 2], 21),
        ("InstanceNormalization", ["s", "b"], {"s": rand(3), "b": rand(3)},
         {"epsilon": 1e-3}, [2, 3, 4, 5], 13),
        ("PRelu", ["s"], {"s": rand(3, 1, 1)}, {}, [2, 3, 4, 2], 13),
        ("Pow", ["p"], {"p": np.array([2.0, 3.0, 0.5], np.float32)}, {}, [4, 3], 13),
        ("Gather", ["i"], {"i": np.array([[0, -1], [2, 1]], np.int64)}, {"axis": 0}, [3, 4], 13),
        ("GatherElements", ["i"], {"i": np.array([[0, 2], [1, 0]], np.int64)}, {"axis": 1},
         [2, 3], 13),
        ("Slice", [], {}, {"starts": [1, -3], "ends": [99, -1], "axes": [0, 1]}, [4, 5], 9),
        ("Slice", ["st", "en", "ax", "sp"], {"st": np.array([-1], np.int64),
         "en": np.array([-100], np.int64), "ax": np.array([1], np.int64),
         "sp": np.array([-2], np.int64)}, {}, [3, 6], 13),
        ("Pad", ["p"], {"p": np.array([1, 2, 2, 0], np.int64)}, {"mode": "reflect"}, [4, 4], 13),
        ("Pad", ["p"], {"p": np.array([0, 3, 1, 1], np.int64)}, {"mode": "edge"}, [3, 2], 13),
        ("Pad", [], {}, {"pads": [1, 0, 0, 2], "value": 1.5}, [2, 3], 2),
        ("ReduceMax", ["a"], {"a": np.array([-1], np.int64)}, {"keepdims": 0}, [2, 3, 4], 18),
        ("ReduceSum", ["a"], {"a": np.array([], np.int64)}, {"noop_with_empty_axes": 1},
         [2, 3], 13),
        ("ReduceProd", [], {}, {}, [2, 3], 13),
        ("Clip", [], {}, {"min": -0.3, "max": 0.4}, [3, 4], 6),
        ("Expand", ["s"], {"s": np.array([3, 1, 4], np.int64)}, {}, [2, 1], 13),
        ("Tile", ["r"], {"r": np.array([2, 1, 3], np.int64)}, {}, [2, 3, 1], 13),
        ("Mean", ["c"], {"c": rand(3)}, {}, [2, 3], 13),
        ("Max", ["c", "d"], {"c": rand(3), "d": rand(2, 1)}, {}, [2, 3], 13),
        ("Sum", ["c"], {"c": rand(1, 3)}, {}, [2, 3], 13),
        ("Split", [], {}, {"axis": 1, "split": [1, 3]}, [2, 4], 11),
    ],
)  # fmt: skip
def test_ops_with_parameters(op, inputs, inits, attrs, shape, opset):
    model = _with_inits(op, inputs, inits, attrs, shape, opset)
    if op == "Split":
        model.graph.node[0].output.append("y2")
        model.graph.output.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, None))
    check_against_ort(model, {"x": rand(*shape)})


def test_cast_argmax_and_integer_outputs():
    nodes = [
        helper.make_node("ArgMax", ["x"], ["am"], axis=1, keepdims=0),
        helper.make_node("ArgMin", ["x"], ["an"], axis=-1),
        helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT32),
        helper.make_node("Cast", ["xi"], ["y"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("am", TensorProto.INT64, None),
         helper.make_tensor_value_info("an", TensorProto.INT64, None),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    check_against_ort(model, {"x": rand(3, 4, scale=3.0)})


def test_group_norm_opset18_per_group_scale():
    """Opset 18 GroupNormalization takes one scale/bias per group (21: per channel)."""
    scale, bias = rand(3), rand(3)
    model = _with_inits("GroupNormalization", ["s", "b"], {"s": scale, "b": bias},
                        {"num_groups": 3, "epsilon": 1e-4}, [2, 6, 5], 18)  # fmt: skip
    x = rand(2, 6, 5)
    groups = x.reshape(2, 3, 10)
    norm = (groups - groups.mean(-1, keepdims=True)) / np.sqrt(groups.var(-1, keepdims=True) + 1e-4)
    expected = norm.reshape(2, 6, 5) * np.repeat(scale, 2)[:, None] + np.repeat(bias, 2)[:, None]
    np.testing.assert_allclose(run(from_onnx(model), x), expected, rtol=1e-4, atol=1e-5)


def test_cnn_with_symbolic_batch():
    nodes = conv_bn_relu("c", "x", 2, 3, inits := {})
    nodes.append(helper.make_node("GlobalAveragePool", ["c_out"], ["out"]))
    model = make_model(nodes, [("x", ["N", 2, 5, 5])], [("out", ["N", 3, 1, 1])], inits, 13)
    mod = from_onnx(model)
    for batch in (1, 3):
        x = rand(batch, 2, 5, 5)
        expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
        np.testing.assert_allclose(run(mod, x), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "attrs, scales, sizes, shape, opset",
    [
        ({"mode": "nearest"}, [1, 1, 2, 3], None, [1, 2, 3, 2], 13),
        ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
          "nearest_mode": "floor"}, [1, 1, 0.6, 1.5], None, [1, 1, 5, 4], 13),
        ({"mode": "linear"}, [1, 1, 2, 2.5], None, [1, 2, 3, 4], 13),
        ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None,
         [1, 1, 7, 5], [1, 1, 3, 4], 13),
        ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, None,
         [2, 3, 1, 6], [2, 3, 4, 3], 13),
        ({"mode": "nearest", "axes": [2]}, [3.0], None, [1, 2, 2, 2], 18),
    ],
)  # fmt: skip
def test_resize(attrs, scales, sizes, shape, opset):
    inits = {"roi": np.array([], np.float32)}
    names = ["x", "roi"]
    if scales is not None:
        inits["scales"] = np.array(scales, np.float32)
        names.append("scales")
    else:
        inits["sizes"] = np.array(sizes, np.int64)
        names += ["", "sizes"]
    node = helper.make_node("Resize", names, ["y"], **attrs)
    model = make_model([node], [("x", shape)], [("y", None)], inits, opset)
    check_against_ort(model, {"x": rand(*shape)})


def test_upsample_opset7_and_9():
    node7 = helper.make_node("Upsample", ["x"], ["y"], mode="nearest", scales=[1.0, 1.0, 2.0, 3.0])
    check_against_ort(make_model([node7], [("x", [1, 2, 3, 2])], [("y", None)], opset=7),
                      {"x": rand(1, 2, 3, 2)})  # fmt: skip
    node9 = helper.make_node("Upsample", ["x", "s"], ["y"], mode="linear")
    inits = {"s": np.array([1, 1, 2, 2], np.float32)}
    model = make_model([node9], [("x", [1, 1, 3, 4])], [("y", None)], inits, opset=9)
    check_against_ort(model, {"x": rand(1, 1, 3, 4)})


def test_symbolic_batch_through_flatten_and_reshape():
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"]),
        helper.make_node("Gemm", ["f", "w"], ["g"], transB=1),
        helper.make_node("Reshape", ["g", "s"], ["r"]),  # 0 copies the symbolic batch
        helper.make_node("Softmax", ["r"], ["y"], axis=1),
    ]
    inits = {"w": rand(4, 6), "s": np.array([0, 2, 2], np.int64)}
    model = make_model(nodes, [("x", ["N", 2, 3])], [("y", None)], inits, opset=11)
    mod = from_onnx(model)
    assert str(mod["main"].ret_struct_info) == "Tensor((N, 2, 2), float32)"
    for batch in (1, 4):
        x = rand(batch, 2, 3)
        expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
        np.testing.assert_allclose(run(mod, x), expected, rtol=1e-4, atol=1e-5)


def test_logical_ops_and_integer_mod():
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["p"]),
        helper.make_node("Less", ["x", "half"], ["q"]),
        helper.make_node("And", ["p", "q"], ["a"]),
        helper.make_node("Or", ["p", "q"], ["o"]),
        helper.make_node("Xor", ["p", "q"], ["xo"]),
        helper.make_node("Not", ["a"], ["n"]),
        helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT64),
        helper.make_node("Mod", ["xi", "three"], ["m"]),
    ]
    bool_out = [
        helper.make_tensor_value_info(n, TensorProto.BOOL, None) for n in "a o xo n".split()
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [*bool_out, helper.make_tensor_value_info("m", TensorProto.INT64, None)],
        [numpy_helper.from_array(np.array(0, np.float32), "zero"),
         numpy_helper.from_array(np.array(0.5, np.float32), "half"),
         numpy_helper.from_array(np.array([3, -3, 3, -3, 3], np.int64), "three")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    check_against_ort(model, {"x": rand(2, 5, scale=5.0)})


def test_constant_producers_range_size_constant_of_shape():
    nodes = [
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Constant", [], ["one"], value_int=1),
        helper.make_node("Constant", [], ["zero"], value_int=0),
        helper.make_node("Range", ["zero", "n", "one"], ["r"]),
        helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
        helper.make_node("Shape", ["x"], ["shp"], start=-1),
        helper.make_node("ConstantOfShape", ["shp"], ["c"],
                         value=numpy_helper.from_array(np.array([2.5], np.float32))),
        helper.make_node("Reshape", ["rf", "newshape"], ["rr"]),
        helper.make_node("Sub", ["x", "rr"], ["d"]),
        helper.make_node("Div", ["d", "c"], ["y"]),
    ]  # fmt: skip
    inits = {"newshape": np.array([3, 4], np.int64)}
    model = make_model(nodes, [("x", [3, 4])], [("y", [3, 4])], inits, opset=15)
    check_against_ort(model, {"x": rand(3, 4)})


def test_opset6_legacy_broadcast_against_numpy():
    """Before opset 7, Add(broadcast=1, axis=k) aligns B with A starting at axis k."""
    node = helper.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=1)
    b = rand(3)
    model = make_model([node], [("x", [2, 3, 4])], [("y", [2, 3, 4])], {"b": b}, opset=6)
    x = rand(2, 3, 4)
    np.testing.assert_allclose(run(from_onnx(model), x), x + b[:, None], rtol=1e-6)


def test_input_of_unknown_rank_needs_shape_dict():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", None)], [("y", None)])
    with pytest.raises(OnnxImportError, match="'x' has unknown rank; give its shape"):
        from_onnx(model)
    with pytest.raises(OnnxImportError, match="shape_dict names no graph input"):
        from_onnx(model, {"nope": (2,)})
    x = rand(2, 3)
    np.testing.assert_allclose(run(from_onnx(model, {"x": (2, 3)}), x), np.maximum(x, 0))

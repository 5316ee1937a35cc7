"""BlockBuilder: an MLP-like graph from TE functions, checked numerically by evaluating the
graph binding by binding (PrimFuncs through the reference interpreter)."""

import numpy as np
import pytest

from schedlab import interpret, te
from schedlab.ir.expr import IntImm, SizeVar
from schedlab.ir.expr import Var as TirVar
from schedlab.ir.function import PrimFunc
from schedlab.ir.structural import assert_structural_equal
from schedlab.relax import (
    BlockBuilder,
    BlockBuilderError,
    Call,
    DataflowBlock,
    DataflowVar,
    Function,
    GraphTypeError,
    R,
    SeqExpr,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)  # fmt: skip

from .test_r1_ops import ensure_test_ops


@pytest.fixture(autouse=True)
def _ops():
    ensure_test_ops()


def dense(x, w):
    k = te.reduce_axis((0, w.shape[0]), "k")
    return te.compute(
        (x.shape[0], w.shape[1]), lambda i, j: te.sum(x[i, k] * w[k, j], axis=k), name="dense"
    )


def bias_relu(x, b):
    return te.compute(x.shape, lambda i, j: te.max(x[i, j] + b[j], 0.0), name="bias_relu")


def build_mlp():
    n = SizeVar("n")
    x = Var("x", TensorStructInfo((n, 5), "float32"))
    w1 = Var("w1", TensorStructInfo((5, 7), "float32"))
    b1 = Var("b1", TensorStructInfo((7,), "float32"))
    w2 = Var("w2", TensorStructInfo((7, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, w1, b1, w2]):
        with bb.dataflow():
            h = bb.emit_te(dense, x, w1, primfunc_name_hint="dense")
            h = bb.emit_te(bias_relu, h, b1)
            out = bb.emit_te(dense, h, w2, primfunc_name_hint="dense")
            gv = bb.emit_output(Call("test.add", (out, out)))
        bb.emit_func_output(gv)
    return bb.get()


# -- a tiny reference evaluator for the tests (the VM is written elsewhere) ----------------------
def evaluate(mod, name, *arrays):
    func = mod[name]
    env, dims = {}, {}
    for param, array in zip(func.params, arrays):
        _bind_dims(param.struct_info_, array, dims)
        env[param] = array
    for block in func.body.blocks:
        for binding in block.bindings:
            env[binding.var] = _value(mod, binding.value, env, dims)
    return _value(mod, func.body.body, env, dims)


def _bind_dims(sinfo, array, dims):
    for dim, size in zip(sinfo.shape, array.shape):
        if isinstance(dim, TirVar):
            dims[dim] = size


def _dim(dim, dims):
    return dim.value if isinstance(dim, IntImm) else dims[dim]


def _value(mod, value, env, dims):
    if isinstance(value, Var):
        return env[value]
    if isinstance(value, TupleGetItem):
        return _value(mod, value.tuple_value, env, dims)[value.index]
    if isinstance(value, Tuple):
        return tuple(_value(mod, f, env, dims) for f in value.fields)
    if value.op == "test.add":
        a, b = (_value(mod, arg, env, dims) for arg in value.args)
        return a + b
    assert value.op == "relax.call_tir"
    sinfo = value.sinfo_args[0]
    out = np.zeros([_dim(d, dims) for d in sinfo.shape], str(sinfo.dtype))
    args = [_value(mod, a, env, dims) for a in value.args[1].fields]
    interpret(mod[value.args[0].name_hint], *args, out)
    return out


def test_mlp_builds_and_matches_numpy():
    mod = build_mlp()
    assert sorted(mod) == ["bias_relu", "dense", "dense1", "main"]
    assert isinstance(mod["dense"], PrimFunc) and mod["dense1"].attrs["global_symbol"] == "dense1"
    main = mod["main"]
    assert isinstance(main, Function) and isinstance(main.body, SeqExpr)
    (block,) = main.body.blocks
    assert isinstance(block, DataflowBlock)
    kinds = [type(b.var) for b in block.bindings]
    assert kinds == [DataflowVar, DataflowVar, DataflowVar, Var]
    assert str(main.ret_struct_info) == "Tensor((n, 3), float32)"
    rng = np.random.default_rng(0)
    x, w1, b1, w2 = (
        rng.standard_normal(s).astype("float32") for s in [(9, 5), (5, 7), (7,), (7, 3)]
    )
    got = evaluate(mod, "main", x, w1, b1, w2)
    want = 2 * (np.maximum(x @ w1 + b1, 0) @ w2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_prim_funcs_have_their_own_symbolic_dims():
    mod = build_mlp()
    main_n = mod["main"].params[0].struct_info_.shape[0]
    dense_n = mod["dense"].buffers[0].shape[0]
    assert dense_n is not main_n and dense_n.name == "n"


def test_equal_prim_funcs_are_shared():
    x = Var("x", TensorStructInfo((4, 4), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit_te(dense, x, x)
        b = bb.emit_te(dense, a, x)
        bb.emit_func_output(b)
    mod = bb.get()
    assert sorted(mod) == ["dense", "main"]
    (block,) = mod["main"].body.blocks
    assert not isinstance(block, DataflowBlock) and type(block.bindings[0].var) is Var


def test_outputs_and_tuples():
    x = Var("x", TensorStructInfo((2, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("f", [x], attrs={"note": "t"}):
        with bb.dataflow():
            pair = bb.emit(R.tuple(x, x))
            first = bb.emit_output(pair[0])
        gvar = bb.emit_func_output([first, x])
    assert gvar.name_hint == "f"
    func = bb.get()["f"]
    assert func.attrs == {"note": "t"} and len(func.ret_struct_info.fields) == 2


def test_match_cast_binds_a_symbolic_dim():
    m = SizeVar("m")
    x = Var("x", TensorStructInfo(None, "float32", ndim=1))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.match_cast(x, TensorStructInfo((m,), "float32"))
        bb.emit_func_output(y)
    assert_structural_equal(bb.get()["main"].ret_struct_info, TensorStructInfo((m,), "float32"))


def test_shape_mismatch_names_op_shapes_and_binding():
    x = Var("x", TensorStructInfo((4, 3), "float32"))
    y = Var("y", TensorStructInfo((4, 5), "float32"))
    bb = BlockBuilder()
    with pytest.raises(GraphTypeError) as info:
        with bb.function("main", [x, y]):
            bb.emit(Call("test.add", (x, y)), name_hint="summed")
    message = str(info.value)
    assert "test.add" in message and "(4, 3)" in message and "(4, 5)" in message
    assert "'summed'" in message


def test_builder_misuse_is_reported():
    x = Var("x", TensorStructInfo((4,), "float32"))
    bb = BlockBuilder()
    with pytest.raises(BlockBuilderError, match="inside `with bb.function"):
        bb.emit(x)
    with pytest.raises(BlockBuilderError, match="emit_output"):
        with bb.function("main", [x]):
            bb.emit_output(x)
    with pytest.raises(BlockBuilderError, match="without emit_func_output"):
        with bb.function("main", [x]):
            bb.emit(x)
    with pytest.raises(GraphTypeError, match="known shape"):
        with bb.function("main", [Var("u", TensorStructInfo(None, "float32", ndim=2))]) as b:
            b.emit_te(dense, b._frame.params[0], x)
    with pytest.raises(TypeError, match="graph expression"):
        with bb.function("main", [x]):
            bb.emit(3)


def test_unique_binding_names():
    x = Var("x", TensorStructInfo((4,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        names = [bb.emit(Call("test.add", (x, x))).name_hint for _ in range(3)]
        names.append(bb.emit(x, name_hint="x").name_hint)
        bb.emit_func_output(x)
    assert names == ["lv", "lv1", "lv2", "x1"]
    binding = bb.get()["main"].body.blocks[0].bindings[0]
    assert isinstance(binding, VarBinding)


def test_call_te_passes_plain_arguments_through():
    def scale(x, factor):
        return te.compute(x.shape, lambda i: x[i] * factor, name="scale")

    x = Var("x", TensorStructInfo((5,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        out = bb.emit_te(scale, x, 3.0)
        bb.emit_func_output(out)
    mod = bb.get()
    call = mod["main"].body.blocks[0].bindings[0].value
    assert len(call.args[1].fields) == 1
    data = np.arange(5, dtype="float32")
    np.testing.assert_allclose(evaluate(mod, "main", data), 3 * data)


def test_unknown_operator_names_the_binding():
    x = Var("x", TensorStructInfo((4,), "float32"))
    bb = BlockBuilder()
    with pytest.raises(GraphTypeError, match=r"binding 'lv'.*unknown operator 'test\.nope'"):
        with bb.function("main", [x]):
            bb.emit(Call("test.nope", (x,)))

"""LegalizeOps: registered-op calls become call_tir of named, deduplicated PrimFuncs with an
op_pattern; symbolic shapes stay symbolic; numerics are preserved."""

import numpy as np
import pytest

from schedlab.ir.expr import SizeVar
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.transform import PassContext, PassRecorder
from schedlab.relax import BlockBuilder, Call, Function, R, TensorStructInfo, Var
from schedlab.relax.op import OpTypeError
from schedlab.relax.transform import LegalizeOps

from ._graphs import assert_same_results, mlp_inputs, mlp_module


def _calls(func):
    return [b.value for blk in func.body.blocks for b in blk.bindings if isinstance(b.value, Call)]


def test_every_op_becomes_call_tir():
    mod = LegalizeOps()(mlp_module())
    ops = {c.op for c in _calls(mod["main"])}
    assert ops == {"relax.call_tir"}
    callees = {c.args[0].name_hint for c in _calls(mod["main"])}
    # the nested R.multiply is legalized and gets its own binding (normalized for FuseOps)
    assert callees == {"matmul", "add", "nn_relu", "exp", "sum", "multiply"}
    assert all(isinstance(mod[name], PrimFunc) for name in callees)
    assert mod["multiply"].attrs["global_symbol"] == "multiply"


def test_op_pattern_recorded():
    mod = LegalizeOps()(mlp_module())
    kinds = {name: mod[name].attrs["op_pattern"] for name in mod if name != "main"}
    assert kinds == {"matmul": 4, "add": 1, "nn_relu": 0, "exp": 0, "sum": 3, "multiply": 1}


def test_symbolic_shape_kept():
    mod = LegalizeOps()(mlp_module())
    (ret,) = [b for b in mod["main"].body.blocks[0].bindings if b.var.name_hint == "lv2"]
    assert str(ret.var.struct_info_) == "Tensor((n, 7), float32)"
    assert str(mod["main"].ret_struct_info) == str(mlp_module()["main"].ret_struct_info)


@pytest.mark.parametrize("rows", [1, 3, 6])
def test_numerics_preserved(rows):
    before = mlp_module()
    assert_same_results(before, LegalizeOps()(before), *mlp_inputs(rows))


def test_structurally_equal_primfuncs_shared():
    x = Var("x", TensorStructInfo((3, 4), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(R.add(x, x))
        b = bb.emit(R.add(a, a))
        c = bb.emit(R.add(R.sum(b, axis=[0]), R.sum(b, axis=[0])))
        bb.emit_func_output(c)
    mod = LegalizeOps()(bb.get())
    assert sorted(mod) == ["add", "add1", "main", "sum"]  # (3,4)+(3,4) shared, (4,)+(4,) new
    arrays = [np.arange(12, dtype="float32").reshape(3, 4)]
    assert_same_results(bb.get(), mod, *arrays)


def test_identity_legalization_gets_a_copy():
    x = Var("x", TensorStructInfo((2, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(R.reshape(x, shape=[2, 3])))
    mod = LegalizeOps()(bb.get())
    assert_same_results(bb.get(), mod, np.ones((2, 3), "float32"))


def test_no_ops_returns_same_module():
    mod = LegalizeOps()(mlp_module())
    assert LegalizeOps()(mod) is mod


def test_bad_attribute_is_reported():
    x = Var("x", TensorStructInfo((2, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(R.sum(x, axis=[1])))
    mod = bb.get()
    call = mod["main"].body.blocks[0].bindings[0].value
    bad = mod.with_function(
        "main",
        mod["main"].replace(body=mod["main"].body.replace(body=call.replace(attrs={"k": 1}))),
    )
    with pytest.raises(OpTypeError, match="unknown attribute"):
        LegalizeOps()(bad)


def test_recorded():
    recorder = PassRecorder()
    with PassContext(instruments=[recorder]):
        LegalizeOps()(mlp_module())
    assert [r.name for r in recorder.records] == ["LegalizeOps"]
    assert recorder.records[0].changed


def test_size_var_stays_symbolic_in_primfunc():
    mod = LegalizeOps()(mlp_module())
    shape = mod["nn_relu"].buffer_map[mod["nn_relu"].params[0]].shape
    assert isinstance(shape[0], SizeVar)


def test_unknown_operator_is_reported():
    x = Var("x", TensorStructInfo((2,), "float32"))
    func = Function((x,), Call("relax.no_such_op", (x,), sinfo_args=()), x.struct_info_)
    with pytest.raises(KeyError, match="relax.no_such_op"):
        LegalizeOps()(IRModule({"main": func}))

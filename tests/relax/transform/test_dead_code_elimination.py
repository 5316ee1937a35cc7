"""DeadCodeElimination: unused bindings and unreachable functions go; entry points, impure
calls and MatchCasts stay; numerics preserved."""

import pytest

from schedlab.ir.expr import SizeVar
from schedlab.relax import BlockBuilder, GlobalVar, R, TensorStructInfo, Var
from schedlab.relax.transform import DeadCodeElimination, LegalizeOps

from ._graphs import assert_same_results, mlp_inputs, mlp_module


def _names(func):
    return [b.var.name_hint for blk in func.body.blocks for b in blk.bindings]


def test_unused_binding_and_its_primfunc_removed():
    before = LegalizeOps()(mlp_module())
    after = DeadCodeElimination()(before)
    assert "unused" in _names(before["main"]) and "unused" not in _names(after["main"])
    assert "exp" in before and "exp" not in after
    assert sorted(after) == ["add", "main", "matmul", "multiply", "nn_relu", "sum"]
    assert_same_results(before, after, *mlp_inputs(5))


def test_chains_removed_in_one_sweep():
    x = Var("x", TensorStructInfo((4,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(R.exp(x))
            bb.emit(R.add(a, a))
            gv = bb.emit_output(R.negative(x))
        bb.emit_func_output(gv)
    after = DeadCodeElimination()(bb.get())
    assert _names(after["main"]) == ["gv"]


def _module_with_helper():
    x = Var("x", TensorStructInfo((4,), "float32"))
    bb = BlockBuilder()
    with bb.function("helper", [x]):
        bb.emit_func_output(bb.emit(R.exp(x)))
    y = Var("y", TensorStructInfo((4,), "float32"))
    with bb.function("unused_fn", [y]):
        bb.emit_func_output(bb.emit(R.exp(y)))
    z = Var("z", TensorStructInfo((4,), "float32"))
    with bb.function("main", [z]):
        out = bb.emit(R.negative(z))
        bb.emit(R.exp(z), "dead_pure")
        bb.emit(call_function("helper", z), "kept_call")
        bb.emit_func_output(out)
    return bb.get()


def call_function(name, arg):
    """A call of the graph function `name`."""
    from schedlab.relax import Call

    return Call(GlobalVar(name), (arg,))


def test_functions_reachable_from_entry_kept():
    after = DeadCodeElimination()(_module_with_helper())
    assert sorted(after) == ["helper", "main"]
    # outside a dataflow block a call of a graph function may have effects: kept
    assert _names(after["main"]) == ["lv", "kept_call"]


def test_explicit_entry_functions():
    after = DeadCodeElimination(entry_functions=["main", "unused_fn"])(_module_with_helper())
    assert sorted(after) == ["helper", "main", "unused_fn"]
    with pytest.raises(ValueError, match="entry_functions .*'nope'"):
        DeadCodeElimination(entry_functions=["nope"])(_module_with_helper())


def test_match_cast_kept():
    x = Var("x", TensorStructInfo((SizeVar("n"),), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            bb.match_cast(x, TensorStructInfo((4,), "float32"))
            gv = bb.emit_output(R.exp(x))
        bb.emit_func_output(gv)
    mod = bb.get()
    assert DeadCodeElimination()(mod) is mod

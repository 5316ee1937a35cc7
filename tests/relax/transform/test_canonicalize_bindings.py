"""CanonicalizeBindings: `y = x` bindings are folded (chains too); a DataflowVar exposed by a
Var binding is kept; numerics preserved."""

import numpy as np

from schedlab.ir.structural import assert_structural_equal
from schedlab.relax import BlockBuilder, R, TensorStructInfo, Var
from schedlab.relax.transform import CanonicalizeBindings

from ._graphs import assert_same_results


def _names(func):
    return [b.var.name_hint for blk in func.body.blocks for b in blk.bindings]


def _aliasing_module():
    x = Var("x", TensorStructInfo((3,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(x, "y")
        z = bb.emit(y, "z")
        w = bb.emit(R.exp(z), "w")
        v = bb.emit(w, "v")
        bb.emit_func_output(R.add(v, y))
    return bb.get()


def _expected_module():
    x = Var("x", TensorStructInfo((3,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        w = bb.emit(R.exp(x), "w")
        bb.emit_func_output(R.add(w, x))
    return bb.get()


def test_var_to_var_bindings_folded():
    before = _aliasing_module()
    after = CanonicalizeBindings()(before)
    assert _names(after["main"]) == ["w"]
    assert_structural_equal(after["main"], _expected_module()["main"])
    assert_same_results(before, after, np.array([0.5, -1.0, 2.0], "float32"))


def test_dataflow_output_alias_kept():
    x = Var("x", TensorStructInfo((3,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(R.exp(x))
            alias = bb.emit(lv, "alias")
            gv = bb.emit_output(alias)
        bb.emit_func_output(gv)
    after = CanonicalizeBindings()(bb.get())
    # alias folds into lv; gv = lv must stay (lv is not visible after the block)
    assert _names(after["main"]) == ["lv", "gv"]
    assert after["main"].body.blocks[0].bindings[1].value is lv


def test_nothing_to_fold_is_unchanged():
    mod = _expected_module()
    assert CanonicalizeBindings()(mod) is mod

"""FoldConstant: all-constant calls (registered ops and call_tir) become Constants, through
variable bindings; non-constant calls stay; numerics preserved."""

import numpy as np

from schedlab.relax import BlockBuilder, Call, Constant, R, TensorStructInfo, Tuple, Var
from schedlab.relax.transform import DeadCodeElimination, FoldConstant, LegalizeOps

from ._graphs import assert_same_results

C1 = np.arange(6, dtype="float32").reshape(2, 3) - 2.5
C2 = np.linspace(-1, 1, 3).astype("float32")


def constant_module():
    """main(x: (2, 3)) = x + relu(C1 + C2) * exp(C2) and a constant split, only x live."""
    x = Var("x", TensorStructInfo((2, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(R.add(R.const(C1), R.const(C2)))
            b = bb.emit(R.nn.relu(a))
            c = bb.emit(R.multiply(b, R.exp(R.const(C2))))
            parts = bb.emit(R.split(R.const(C1), indices_or_sections=3, axis=1))
            d = bb.emit(R.add(c, parts[1]))
            gv = bb.emit_output(R.add(x, d))
        bb.emit_func_output(gv)
    return bb.get()


def _values(mod):
    return [b.value for blk in mod["main"].body.blocks for b in blk.bindings]


def test_constant_chain_folds():
    before = constant_module()
    after = FoldConstant()(before)
    values = _values(after)
    assert all(isinstance(v, (Constant, Tuple)) for v in values[:-1])
    last = values[-1]
    assert isinstance(last, Call) and isinstance(last.args[1], Constant)
    want = np.maximum(C1 + C2, 0) * np.exp(C2) + C1[:, 1:2]
    np.testing.assert_allclose(last.args[1].data, want, rtol=1e-6)
    x = np.random.default_rng(1).standard_normal((2, 3)).astype("float32")
    assert_same_results(before, after, x)


def test_call_tir_folds_and_dce_cleans_up():
    legal = LegalizeOps()(constant_module())
    folded = DeadCodeElimination()(FoldConstant()(legal))
    assert len(folded) == 2  # only x + const needs a kernel now
    (kernel,) = [name for name in folded if name != "main"]
    assert kernel.startswith("add")
    (binding,) = folded["main"].body.blocks[0].bindings
    assert isinstance(binding.value.args[1].fields[1], Constant)
    x = np.ones((2, 3), "float32")
    assert_same_results(legal, folded, x)


def test_nothing_constant_is_unchanged():
    x = Var("x", TensorStructInfo((2, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(R.exp(x)))
    mod = bb.get()
    assert FoldConstant()(mod) is mod


def test_creation_ops_not_folded():
    bb = BlockBuilder()
    with bb.function("main", []):
        bb.emit_func_output(bb.emit(R.zeros(shape=[2, 2], dtype="float32")))
    mod = bb.get()
    assert FoldConstant()(mod) is mod

"""FuseOps groups call_tir chains by op pattern into Primitive functions; FuseTIR merges each
group into one PrimFunc. Structure and numerics are checked at each step."""

import numpy as np
import pytest

from schedlab import te
from schedlab.ir.expr import SizeVar
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import Block
from schedlab.ir.transform import PassContext, PassRecorder, Sequential
from schedlab.ir.verify import verify
from schedlab.relax import BlockBuilder, Call, Function, GlobalVar, R, TensorStructInfo, Var
from schedlab.relax.transform import (
    AnnotateTIROpPattern,
    DeadCodeElimination,
    FuseOps,
    FuseTIR,
    FuseTIRError,
    LegalizeOps,
)  # fmt: skip
from schedlab.relax.transform.fuse_ops import fused_kind

from ._graphs import assert_same_results, mlp_inputs, mlp_module


def _prepare(mod):
    return DeadCodeElimination()(AnnotateTIROpPattern()(LegalizeOps()(mod)))


def _callees(func):
    out = []
    for block in func.body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, Call) and isinstance(value.op, GlobalVar):
                out.append(value.op.name_hint)
            elif isinstance(value, Call):
                out.append(value.args[0].name_hint)
    return out


def test_fusion_rules():
    assert fused_kind(0, 1) == 1 and fused_kind(2, 0) == 2  # injective chains
    assert fused_kind(1, 3) == 3  # broadcast producer into a reduction
    assert fused_kind(4, 0) == 4 and fused_kind(4, 1) == 4  # matmul + bias/activation
    assert fused_kind(4, 2) is None and fused_kind(3, 0) is None
    assert fused_kind(0, 8) is None and fused_kind(8, 0) is None


def test_matmul_bias_relu_fused():
    before = _prepare(mlp_module())
    fused = FuseOps()(before)
    main = fused["main"]
    assert _callees(main)[0] == "fused_matmul_add_nn_relu"
    prim = fused["fused_matmul_add_nn_relu"]
    assert isinstance(prim, Function) and prim.attrs["Primitive"]
    assert prim.attrs["op_pattern"] == 4
    assert [p.name_hint for p in prim.params] == ["x", "w", "b"]
    for rows in (1, 4):
        assert_same_results(before, fused, *mlp_inputs(rows, seed=rows))


def test_fuse_tir_merges_group():
    before = _prepare(mlp_module())
    merged = DeadCodeElimination()(FuseTIR()(FuseOps()(before)))
    prim = merged["fused_matmul_add_nn_relu"]
    assert isinstance(prim, PrimFunc)
    verify(prim)
    blocks = []
    post_order_visit(prim.body, lambda n: blocks.append(n.name_hint) if isinstance(n, Block) else 0)
    assert blocks == ["matmul", "T_add", "T_relu", "root"]
    assert len(prim.body.block.alloc_buffers) == 2  # the two intermediates
    assert prim.attrs["op_pattern"] == 4
    # sum(multiply(h, h)) was nested: LegalizeOps binds it, so it fuses too
    assert sorted(merged) == ["fused_matmul_add_nn_relu", "fused_multiply_sum", "main"]
    assert_same_results(before, merged, *mlp_inputs(5, seed=3))


def _chain_module():
    """exp -> add (two uses of a) -> transpose -> sum; `a` feeds two consumers."""
    n = SizeVar("n")
    x = Var("x", TensorStructInfo((n, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(R.exp(x))
            b = bb.emit(R.add(a, x))
            c = bb.emit(R.permute_dims(b))
            d = bb.emit(R.sum(c, axis=[1]))
            e = bb.emit(R.nn.relu(d))
            gv = bb.emit_output(R.tuple(e, a))
        bb.emit_func_output(gv)
    return bb.get()


def test_injective_chain_into_reduction():
    before = _prepare(_chain_module())
    fused = FuseOps()(before)
    # `a` is also returned: it ends its own group; add..sum fuse; relu after a reduce does not
    assert _callees(fused["main"]) == ["exp", "fused_add_permute_dims_sum", "nn_relu"]
    assert fused["fused_add_permute_dims_sum"].attrs["op_pattern"] == 3
    x = np.random.default_rng(2).standard_normal((4, 3)).astype("float32")
    assert_same_results(before, fused, x)
    merged = FuseTIR()(fused)
    assert isinstance(merged["fused_add_permute_dims_sum"], PrimFunc)
    assert_same_results(before, merged, x)


def test_opaque_and_non_dataflow_not_fused():
    x = Var("x", TensorStructInfo((3,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(R.exp(x))  # a plain binding block: no fusion there
        b = bb.emit(R.nn.relu(a))
        with bb.dataflow():
            c = bb.emit_te(lambda t: te.compute(t.shape, lambda i: t[2 - i]), b)
            gv = bb.emit_output(R.exp(c))
        bb.emit_func_output(gv)
    mod = LegalizeOps()(bb.get())
    name = [n for n in mod if n.startswith("<lambda>")]
    assert name
    mod = mod.update({k: mod[k].with_attr("op_pattern", 8) for k in name})
    assert FuseOps()(mod) is mod


def test_fuse_tir_rejects_non_call_tir_group():
    x = Var("x", TensorStructInfo((3,), "float32"))
    bb = BlockBuilder()
    with bb.function("prim", [x], attrs={"Primitive": True}):
        bb.emit_func_output(bb.emit(R.exp(x)))
    y = Var("y", TensorStructInfo((3,), "float32"))
    with bb.function("main", [y]):
        bb.emit_func_output(bb.emit(Call(GlobalVar("prim"), (y,))))
    with pytest.raises(FuseTIRError, match="no call_tir"):
        FuseTIR()(bb.get())


def test_recorded_in_pipeline():
    recorder, mod = PassRecorder(), _prepare(mlp_module())
    with PassContext(instruments=[recorder]):
        Sequential([FuseOps(), FuseTIR()])(mod)
    assert [r.name for r in recorder.records] == ["FuseOps", "FuseTIR", "Sequential"]
    assert all(r.changed for r in recorder.records)


def test_conv_bias_relu_pipeline_odd_sizes():
    x = Var("x", TensorStructInfo((1, 3, 7, 5), "float32"))
    w = Var("w", TensorStructInfo((4, 3, 3, 3), "float32"))
    b = Var("b", TensorStructInfo((1, 4, 1, 1), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            y = bb.emit(R.nn.conv2d(x, w, padding=[1, 1]))
            y = bb.emit(R.add(y, b))
            gv = bb.emit_output(R.nn.relu(y))
        bb.emit_func_output(gv)
    before = bb.get()
    after = Sequential([LegalizeOps(), FuseOps(), FuseTIR(), DeadCodeElimination()])(before)
    assert sorted(after) == ["fused_nn_conv2d_add_nn_relu", "main"]
    rng = np.random.default_rng(7)
    arrays = [
        rng.standard_normal(v.struct_info_.static_shape()).astype("float32") for v in (x, w, b)
    ]
    assert_same_results(before, after, *arrays)

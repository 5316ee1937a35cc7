"""All graph passes in one Sequential under a PassRecorder: each shows up, and the result
computes what the input did."""

from schedlab.ir.transform import PassContext, PassRecorder, Sequential
from schedlab.relax import Call, DataflowBlock
from schedlab.relax.transform import (
    AnnotateTIROpPattern,
    CanonicalizeBindings,
    DeadCodeElimination,
    FoldConstant,
    FuseOps,
    FuseTIR,
    LegalizeOps,
    ToNonDataflow,
)  # fmt: skip

from ._graphs import assert_same_results, mlp_inputs, mlp_module

PASSES = [
    LegalizeOps,
    AnnotateTIROpPattern,
    FoldConstant,
    DeadCodeElimination,
    CanonicalizeBindings,
    FuseOps,
    FuseTIR,
    ToNonDataflow,
]


def test_every_pass_recorded_and_numerics_kept():
    recorder = PassRecorder()
    before = mlp_module()
    with PassContext(instruments=[recorder]):
        after = Sequential([make() for make in PASSES], name="graph_pipeline")(before)
    names = [r.name for r in recorder.records]
    assert names == [make.__name__ for make in PASSES] + ["graph_pipeline"]
    assert all(r.depth == 1 for r in recorder.records[:-1])
    main = after["main"]
    assert not any(isinstance(b, DataflowBlock) for b in main.body.blocks)
    values = [b.value for blk in main.body.blocks for b in blk.bindings]
    assert all(isinstance(v, Call) and v.op == "relax.call_tir" for v in values[:-1])
    assert values[0].args[0].name_hint == "fused_matmul_add_nn_relu"
    for rows in (1, 4):
        assert_same_results(before, after, *mlp_inputs(rows, seed=rows))


def test_passes_have_docs():
    for make in PASSES:
        assert make.__doc__ and make().__doc__

"""The lowering pipeline: pass list, instruments, the lowered-form contract, and numerics after
every single pass on odd sizes (the main proof)."""

import pytest

from schedlab.errors import LoweringError
from schedlab.ir import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    IRModule,
    PrimFunc,
    Ramp,
    SizeVar,
    Var,
    const,
    decl_buffer,
    post_order_visit,
)  # fmt: skip
from schedlab.ir.transform import PassContext, PassRecorder
from schedlab.transform import lower, lower_passes, verify_lowered

from . import tir_samples as ts

PASS_NAMES = [
    "LowerInitBlock", "PlanAndUpdateBufferAllocationLocation", "ConvertBlocksToOpaque",
    "LowerOpaqueBlock", "CompactBufferAllocation", "FlattenBuffer", "Simplify", "VectorizeLoop",
    "UnrollLoop", "PromoteInvariantScratch", "RemoveNoOp",
]  # fmt: skip

SAMPLES = {
    "gemm": ts.gemm,
    "gemm_split_rows": ts.gemm_split_rows,
    "row_sum_split": ts.row_sum_split,
    "two_stage": ts.two_stage,
    "two_stage_fused": lambda: ts.two_stage(fused=True),
    "gemm_local_tile": ts.gemm_local_tile,
    "vectorized": ts.scale_add,
    "vectorized_ragged": lambda: ts.scale_add(n=23),
    "unrolled": lambda: ts.scale_add(n=23, lanes=4, kind="unrolled"),
    "auto_unrolled": lambda: ts.scale_add(
        n=21, lanes=4, annotations={"pragma_auto_unroll_max_step": 32}
    ),
}


def _nodes(node, types):
    found = []
    post_order_visit(node, lambda n: found.append(n) if isinstance(n, types) else None)
    return found


def test_pass_list_is_flat_and_named():
    assert [p.name for p in lower_passes("cpu")] == PASS_NAMES
    assert all(p.__doc__ for p in lower_passes("cpu"))


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_numerics_after_every_pass(name):
    func, reference, in_shapes, out_shape = SAMPLES[name]()
    recorder = PassRecorder()
    with PassContext(instruments=[recorder]):
        lowered = lower(func)
    names = [r.name for r in recorder.records]
    assert names == [*PASS_NAMES, "lower"]  # every pass is recorded, then the whole pipeline
    ts.check_numerics(func, reference, in_shapes, out_shape)
    for record in recorder.records[:-1]:
        after = record.after[func.name]
        try:
            ts.check_numerics(after, reference, in_shapes, out_shape)
        except AssertionError as err:
            raise AssertionError(f"wrong numerics after {record.name}:\n{after}") from err
    verify_lowered(lowered)


def _k_loop(func):
    (loop,) = [f for f in _nodes(func.body, For) if f.loop_var.name == "k"]
    return loop


def test_unscheduled_gemm_has_no_branch_in_the_reduction_loop():
    lowered = lower(ts.gemm()[0])["gemm"]
    assert not _nodes(_k_loop(lowered), IfThenElse)
    assert not _nodes(lowered.body, (Block, BlockRealize))


def test_local_tile_is_a_small_constant_array():
    lowered = lower(ts.gemm_local_tile(tm=4, tn=8)[0])["gemm_local_tile"]
    (alloc,) = _nodes(lowered.body, Allocate)
    assert alloc.buffer.scope == "local" and [s.value for s in alloc.buffer.shape] == [32]


def test_vectorized_and_unrolled_forms():
    vector = lower(ts.scale_add()[0])["scale_add"]
    assert _nodes(vector.body, Ramp)
    assert not any(f.kind == ForKind.VECTORIZED for f in _nodes(vector.body, For))
    ragged = lower(ts.scale_add(n=23)[0])["scale_add"]
    assert any(f.kind == ForKind.VECTORIZED for f in _nodes(ragged.body, For))
    unrolled = lower(ts.scale_add(n=23, lanes=4, kind="unrolled")[0])["scale_add"]
    assert not any(f.kind == ForKind.UNROLLED for f in _nodes(unrolled.body, For))


def test_symbolic_shapes_lower():
    M, N = SizeVar("M"), SizeVar("N")
    A, C = decl_buffer((M, N), "float32", "A"), decl_buffer((M, N), "float32", "C")
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    block = ts.realize(
        "C",
        [(vi, M, ts.S), (vj, N, ts.S)],
        (i, j),
        BufferStore(C, A[vi, vj] + const(1.0, "float32"), (vi, vj)),
    )
    func = ts.prim_func("add_one", [A, C], ts.nest([(i, M), (j, N)], block))
    lowered = lower(func)["add_one"]
    assert lowered.attrs["param_shapes"]["A"] == (M, N)
    assert [str(s) for s in lowered.buffers[0].shape] == [str(M * N)]
    for shape in ((3, 5), (7, 2)):  # sizes bound through the logical shapes in param_shapes
        ts.check_numerics(lowered, lambda a: a + 1, [shape], shape)


def test_lower_takes_modules_and_checks_arguments():
    func = ts.gemm()[0]
    mod = lower(IRModule({"a": func, "b": ts.row_sum_split()[0]}))
    assert sorted(mod) == ["a", "b"]
    with pytest.raises(TypeError, match="func_or_mod"):
        lower("gemm")
    with pytest.raises(LoweringError, match="metal"):
        lower(func, target="metal")


def _lowered_func(body, buffers):
    params = [Var(b.name, "handle") for b in buffers]
    return PrimFunc(params, body, dict(zip(params, buffers)), {"global_symbol": "f"})


def test_verify_lowered_names_the_offending_construct():
    with pytest.raises(LoweringError, match="block 'root' remains"):
        verify_lowered(ts.gemm()[0])
    A = decl_buffer((4, 4), "float32", "A")
    with pytest.raises(LoweringError, match="not flat"):
        verify_lowered(_lowered_func(BufferStore(A, const(1.0, "float32"), (0, 0)), [A]))
    n = Var("n")
    B, T = decl_buffer((8,), "float32", "B"), decl_buffer((n,), "float32", "T")
    body = Allocate(T, BufferStore(B, T[0], (0,)))
    with pytest.raises(LoweringError, match="non-constant size"):
        verify_lowered(_lowered_func(body, [B]))

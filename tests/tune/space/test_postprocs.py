"""Postprocessors one by one, and the per-target registry."""

from __future__ import annotations

import pytest

from schedlab import te, workloads
from schedlab.ir.stmt import ForKind
from schedlab.schedule import Schedule
from schedlab.target import Target
from schedlab.tune.space import (
    DisallowDynamicLoop,
    RewriteParallelVectorizeUnroll,
    RewriteReductionBlock,
    default_postprocs,
    default_rules,
    register_space,
    registry,
    run_postprocs,
)  # fmt: skip

from .common import blocks, kinds, loops

CPU = Target("cpu", num_cores=2, simd_width=512)


def marked(func, parallel=32, vectorize=64, unroll=16) -> Schedule:
    sch = Schedule(func, target=CPU)
    root = sch.get_block("root")
    sch.annotate(root, "meta_schedule.parallel", parallel)
    sch.annotate(root, "meta_schedule.vectorize", vectorize)
    if unroll is not None:
        sch.annotate(root, "meta_schedule.unroll_explicit", unroll)
    return sch


def test_parallel_outer_vectorize_inner_unroll_outermost():
    func, _ = workloads.get("gemm", M=64, N=64, K=64)
    sch = marked(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i, j0, k, j1)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    found = {loop.loop_var.name: loop for loop in loops(sch.mod)}
    assert found["i"].kind == ForKind.PARALLEL  # 64 > 32 already: only i
    assert found["j_1"].kind == ForKind.VECTORIZED and found["k"].kind == ForKind.SERIAL
    assert found["i"].annotations == {"pragma_auto_unroll_max_step": 16,
                                      "pragma_unroll_explicit": 1}  # fmt: skip
    assert not sch.get(sch.get_block("root")).annotations  # the marks are consumed


def test_small_contiguous_nest_is_fused_and_vectorized():
    a = te.placeholder((4, 8), name="A")
    b = te.compute((4, 8), lambda i, j: a[i, j] + 1.0, name="B")
    sch = marked(te.create_prim_func([a, b]), unroll=None)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    (loop,) = loops(sch.mod)
    assert loop.kind == ForKind.VECTORIZED and loop.extent.value == 32


def test_transpose_vectorizes_only_the_contiguous_axis():
    func, _ = workloads.get("transpose", M=4, N=8)
    sch = marked(func, unroll=None)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    kinds_by_name = {loop.loop_var.name: loop.kind for loop in loops(sch.mod)}
    assert sorted(kinds_by_name.values()) == sorted([ForKind.PARALLEL, ForKind.VECTORIZED])


def test_rewrite_reduction_block_decomposes_at_the_first_reduction_loop():
    func, _ = workloads.get("gemm", M=16, N=16, K=16)
    sch = Schedule(func, target=CPU)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i, k0, j, k1)
    assert RewriteReductionBlock().apply(sch)
    assert {"C_init", "C_update"} <= set(blocks(sch.mod))
    init_loops = sch.state.loops_above(sch.state.blocks_named("C_init")[0])
    assert [lp.loop_var.name for lp in init_loops][:1] == ["i"] and len(init_loops) == 2


def test_disallow_dynamic_loop():
    m = te.size_var("m")
    a = te.placeholder((m,), name="A")
    b = te.compute((m,), lambda i: a[i] * 2.0, name="B")
    assert not DisallowDynamicLoop().apply(Schedule(te.create_prim_func([a, b])))
    func, _ = workloads.get("transpose", M=4, N=8)
    assert DisallowDynamicLoop().apply(Schedule(func))


def test_run_postprocs_marks_the_trace():
    func, _ = workloads.get("transpose", M=4, N=8)
    sch = marked(func, unroll=None)
    assert run_postprocs(sch, default_postprocs(CPU))
    assert kinds(sch.trace)[3] == "EnterPostproc"
    assert len(sch.trace.as_json(remove_postproc=True)["insts"]) == 3


def test_registry_falls_back_to_gpu_key_and_can_be_extended():
    with pytest.raises(ValueError, match="register_space"):
        default_rules(Target("rocm"))
    register_space("gpu", rules=lambda t: ["gpu rules"], postprocs=lambda t: [],
                   mutators=lambda t: {})  # fmt: skip
    try:
        assert default_rules(Target("rocm")) == ["gpu rules"]
        with pytest.raises(ValueError, match="already"):
            register_space("gpu", rules=list, postprocs=list, mutators=dict)
    finally:
        del registry._SPACES["gpu"]
    names = [type(rule).__name__ for rule in default_rules(CPU)]
    assert names == ["AutoInline", "AddRFactor", "ConvTiling", "BlockedConvTiling",
                     "MultiLevelTiling", "ParallelizeVectorizeUnroll",
                     "RandomComputeLocation"]  # fmt: skip

"""Compute location: compute_at, reverse_compute_at, compute_inline, reverse_compute_inline and
sample_compute_location, plus the legality analyses behind them (stage pipeline, block kinds,
region cover).

Per primitive: the IR after it (expected TVMScript text), the trace round trip, numerics through
the interpreter and compiled C at odd sizes on several workloads, and one test per precondition
error (which must leave the schedule as it was)."""

import numpy as np
import pytest

from schedlab import interpret, te, workloads
from schedlab.ir.stmt import Block, For
from schedlab.schedule import Schedule, ScheduleError
from schedlab.schedule.analysis import region_cover, stage_pipeline
from schedlab.schedule.errors import NotCompleteBlockError, NotReductionBlockError
from schedlab.schedule.primitives.compute_inline import (
    BodyPatternError,
    HasInitError,
    NonSingleProducerError,
    NotSingleBufferError,
    OpaqueAccessError,
    ProducerPredicateError,
)
from schedlab.schedule.primitives.compute_location import (
    BlocksNotUnderLoopError,
    DependencyError,
    InsertionPointError,
    NotInSameScopeError,
    NotStagePipelineError,
    OnlyLeafError,
    OutputBlockError,
    RegionCoverError,
    UnsolvableDomainError,
    _replayed,
    collect_compute_locations,
)
from schedlab.script import from_source

from .helpers import (
    assert_error_keeps_state,
    assert_same_numerics,
    assert_script_equal,
    assert_trace_roundtrip,
)

SIZES = {
    "matmul_bias_relu": dict(M=5, N=7, K=3),
    "softmax": dict(M=3, N=7),
    "layer_norm": dict(M=5, N=7),
    "conv2d_nchw": dict(N=1, CI=3, H=7, W=5, CO=2, kernel=3),
    "gemm": dict(M=10, N=7, K=5),
}


def _workload(name: str):
    return workloads.get(name, **SIZES[name])[0]


def _func(text: str):
    func = from_source(text)
    return func if not hasattr(func, "functions") else func[next(iter(func))]


def _loops(sch: Schedule, block: str) -> list:
    return sch.get_loops(sch.get_block(block))


def _chain(n: int = 7):
    """B = A * 2 then C = B + 1 (elementwise, 1-D), made with te."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    return te.create_prim_func([A, C])


# A reduction C = A @ B consumed by a relu D under non-divisible 4x3 tiles (10x7 output).
TILED = """
@T.prim_func
def tiled(A: T.Buffer((10, 3), "float32"), B: T.Buffer((3, 7), "float32"),
          D: T.Buffer((10, 7), "float32")):
    C = T.alloc_buffer((10, 7), "float32")
    for i, j, k in T.grid(10, 7, 3):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i_0, j_0, i_1, j_1 in T.grid(3, 3, 4, 3):
        with T.block("D"):
            vi = T.axis.spatial(10, i_0 * 4 + i_1)
            vj = T.axis.spatial(7, j_0 * 3 + j_1)
            T.where(i_0 * 4 + i_1 < 10 and j_0 * 3 + j_1 < 7)
            T.reads(C[vi, vj])
            T.writes(D[vi, vj])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))
"""

# gemm accumulating in a local cache under 4x3 tiles, with the write-back still at the root
CACHED = """
@T.prim_func
def cached(A: T.Buffer((10, 5), "float32"), B: T.Buffer((5, 7), "float32"),
           C: T.Buffer((10, 7), "float32")):
    C_local = T.alloc_buffer((10, 7), "float32", scope="local")
    for i_0, j_0, k, i_1, j_1 in T.grid(3, 3, 5, 4, 3):
        with T.block("C"):
            vi = T.axis.spatial(10, i_0 * 4 + i_1)
            vj = T.axis.spatial(7, j_0 * 3 + j_1)
            vk = T.axis.reduce(5, k)
            T.where(i_0 * 4 + i_1 < 10 and j_0 * 3 + j_1 < 7)
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C_local[vi, vj])
            with T.init():
                C_local[vi, vj] = T.float32(0)
            C_local[vi, vj] = C_local[vi, vj] + A[vi, vk] * B[vk, vj]
    for ax0, ax1 in T.grid(10, 7):
        with T.block("C_local"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(C_local[v0, v1])
            T.writes(C[v0, v1])
            C[v0, v1] = C_local[v0, v1]
"""


# -- compute_at: structure --------------------------------------------------------------------
def test_compute_at_under_non_divisible_tiles_adds_a_predicate():
    func = _func(TILED)
    sch = Schedule(func)
    sch.compute_at(sch.get_block("C"), _loops(sch, "D")[1])
    assert_script_equal(sch.func, """
@T.prim_func
def tiled(A: T.Buffer((10, 3), "float32"), B: T.Buffer((3, 7), "float32"),
          D: T.Buffer((10, 7), "float32")):
    C = T.alloc_buffer((10, 7), "float32")
    for i_0, j_0 in T.grid(3, 3):
        for ax0, ax1, ax2 in T.grid(4, 3, 3):
            with T.block("C"):
                vi = T.axis.spatial(10, i_0 * 4 + ax0)
                vj = T.axis.spatial(7, j_0 * 3 + ax1)
                vk = T.axis.reduce(3, ax2)
                T.where(i_0 * 4 + ax0 < 10 and j_0 * 3 + ax1 < 7)
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
        for i_1, j_1 in T.grid(4, 3):
            with T.block("D"):
                vi = T.axis.spatial(10, i_0 * 4 + i_1)
                vj = T.axis.spatial(7, j_0 * 3 + j_1)
                T.where(i_0 * 4 + i_1 < 10 and j_0 * 3 + j_1 < 7)
                T.reads(C[vi, vj])
                T.writes(D[vi, vj])
                D[vi, vj] = T.max(C[vi, vj], T.float32(0))
""")  # fmt: skip
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_compute_at_clips_the_domain_to_the_buffer_instead_of_a_predicate():
    # at i_0 the consumers need columns 0..8 of a 7-column buffer: the loop covers 0..6 exactly
    func = _func(TILED)
    sch = Schedule(func)
    sch.compute_at(sch.get_block("C"), _loops(sch, "D")[0], preserve_unit_loops=True)
    block = sch.get(sch.get_block("C"))
    extents = [loop.extent.value for loop in sch.state.loops_above(block)]
    assert extents == [3, 4, 7, 3]
    assert str(sch.state.realize_of(block).predicate) == "i_0 * 4 + ax0 < 10"
    assert_same_numerics(func, sch.func)


def test_compute_at_keeps_handles_and_removes_old_loops():
    sch = Schedule(_chain())
    block = sch.get_block("B")
    old_loop = _loops(sch, "B")[0]
    sch.compute_at(block, _loops(sch, "C")[0])
    assert sch.get(block).name_hint == "B"
    with pytest.raises(ScheduleError, match=r"removed by compute_at \(step \d+\)"):
        sch.get(old_loop)


def test_compute_at_unit_loops_are_dropped_or_kept():
    for preserve, expected in [(False, []), (True, ["ax0"])]:
        sch = Schedule(_chain())
        sch.compute_at(sch.get_block("B"), _loops(sch, "C")[0], preserve_unit_loops=preserve)
        names = [sch.get(loop).loop_var.name for loop in _loops(sch, "B")]
        assert names == ["i", *expected]


def test_compute_at_index_picks_the_insertion_position():
    # under softmax's row loop the exp block can only go first, whatever the index says
    func = _workload("softmax")
    for index in (-1, -2, 0):
        sch = Schedule(func)
        i = _loops(sch, "T_softmax_norm")[0]
        sch.compute_at(sch.get_block("T_softmax_expsum"), i)
        sch.compute_at(sch.get_block("T_softmax_exp"), i, index=index)
        names = [b.name_hint for b in sch.state.child_blocks(sch.get(i))]
        assert names == ["T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"]


# P and an unrelated U share a loop; C consumes P's output
SIBLINGS = """
@T.prim_func
def siblings(A: T.Buffer((8,), "float32"), U: T.Buffer((8,), "float32"),
             C: T.Buffer((8,), "float32")):
    X = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("P"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(X[vi])
            X[vi] = A[vi] * T.float32(2)
        with T.block("U"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(U[vi])
            U[vi] = A[vi] + T.float32(1)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.reads(X[vi])
            T.writes(C[vi])
            C[vi] = X[vi] + T.float32(1)
"""


@pytest.mark.parametrize("index, order", [(-1, "PUC"), (-2, "PCU"), (1, "PCU"), (2, "PUC")])
def test_reverse_compute_at_index_picks_the_insertion_position(index, order):
    func = _func(SIBLINGS)
    sch = Schedule(func)
    i = _loops(sch, "P")[0]
    sch.reverse_compute_at(sch.get_block("C"), i, index=index)
    assert "".join(b.name_hint for b in sch.state.child_blocks(sch.get(i))) == order
    assert_same_numerics(func, sch.func, compiled=False)


# -- compute_at / reverse_compute_at: numerics on workloads -----------------------------------
def _matmul_at_relu_j(sch):
    sch.compute_at(sch.get_block("matmul"), _loops(sch, "T_relu")[1])


def _relu_at_matmul_i(sch):
    sch.reverse_compute_at(sch.get_block("T_relu"), _loops(sch, "matmul")[0])


def _softmax_rows(sch):
    i = _loops(sch, "T_softmax_norm")[0]
    for name in ("T_softmax_expsum", "T_softmax_exp", "T_softmax_maxelem"):
        sch.compute_at(sch.get_block(name), i)


def _softmax_rows_reversed(sch):
    i = _loops(sch, "T_softmax_exp")[0]
    sch.reverse_compute_at(sch.get_block("T_softmax_expsum"), i)  # the whole row: not split
    sch.reverse_compute_at(sch.get_block("T_softmax_norm"), i)
    sch.compute_at(sch.get_block("T_softmax_maxelem"), i)


def _layer_norm_rows(sch):
    i = _loops(sch, "T_layer_norm")[0]
    sch.compute_at(sch.get_block("T_var_sum"), i)
    sch.compute_at(sch.get_block("T_sum"), i)


def _conv_pad_at_rows(sch):
    sch.compute_at(sch.get_block("pad_temp"), _loops(sch, "conv2d_nchw")[2])


def _gemm_register_tile(sch):
    block = sch.get_block("C")
    write_back = sch.cache_write(block, 0, "local")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 3])
    sch.reorder(i0, j0, k, i1, j1)
    sch.reverse_compute_at(write_back, j0)


SCHEDULES = {
    "matmul_bias_relu": [_matmul_at_relu_j, _relu_at_matmul_i],
    "softmax": [_softmax_rows, _softmax_rows_reversed],
    "layer_norm": [_layer_norm_rows],
    "conv2d_nchw": [_conv_pad_at_rows],
    "gemm": [_gemm_register_tile],
}


@pytest.mark.parametrize(
    "name, schedule",
    [(name, fn) for name, fns in SCHEDULES.items() for fn in fns],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_compute_at_numerics_and_trace(name, schedule):
    func = _workload(name)
    sch = Schedule(func)
    schedule(sch)
    assert_same_numerics(func, sch.func, rtol=1e-4, atol=1e-4)
    assert_trace_roundtrip(sch, func)


def test_compute_at_of_a_shared_cache_covers_every_thread():
    # a shared buffer is filled cooperatively: the region is relaxed over the threadIdx loops
    func = workloads.get("gemm", M=16, N=16, K=8)[0]
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i0, j0, i1, j1, k)
    for loop, tag in [(i0, "blockIdx.x"), (j0, "blockIdx.y"), (i1, "threadIdx.x")]:
        sch.bind(loop, tag)
    shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(shared, j1)
    new_loops = sch.get_loops(shared)[4:]
    assert [sch.get(loop).extent.value for loop in new_loops] == [4, 8]
    assert_same_numerics(func, sch.func, compiled=False)


def test_reverse_compute_at_moves_the_write_back_under_the_tiles():
    func = _func(CACHED)
    sch = Schedule(func)
    sch.reverse_compute_at(sch.get_block("C_local"), _loops(sch, "C")[1])
    assert_script_equal(sch.func, """
@T.prim_func
def cached(A: T.Buffer((10, 5), "float32"), B: T.Buffer((5, 7), "float32"),
           C: T.Buffer((10, 7), "float32")):
    C_local = T.alloc_buffer((10, 7), "float32", scope="local")
    for i_0, j_0 in T.grid(3, 3):
        for k, i_1, j_1 in T.grid(5, 4, 3):
            with T.block("C"):
                vi = T.axis.spatial(10, i_0 * 4 + i_1)
                vj = T.axis.spatial(7, j_0 * 3 + j_1)
                vk = T.axis.reduce(5, k)
                T.where(i_0 * 4 + i_1 < 10 and j_0 * 3 + j_1 < 7)
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C_local[vi, vj])
                with T.init():
                    C_local[vi, vj] = T.float32(0)
                C_local[vi, vj] = C_local[vi, vj] + A[vi, vk] * B[vk, vj]
        for ax0, ax1 in T.grid(4, 3):
            with T.block("C_local"):
                v0 = T.axis.spatial(10, i_0 * 4 + ax0)
                v1 = T.axis.spatial(7, j_0 * 3 + ax1)
                T.where(i_0 * 4 + ax0 < 10 and j_0 * 3 + ax1 < 7)
                T.reads(C_local[v0, v1])
                T.writes(C[v0, v1])
                C[v0, v1] = C_local[v0, v1]
""")  # fmt: skip
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


# -- compute_at / reverse_compute_at: errors --------------------------------------------------
WAR = """
@T.prim_func
def war(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.reads(B[vi])
            T.writes(C[vi])
            C[vi] = B[vi] + T.float32(1)
    for i in range(8):
        with T.block("A_update"):
            vi = T.axis.spatial(8, i)
            T.reads(C[vi])
            T.writes(A[vi])
            A[vi] = C[vi]
"""

TWO_WRITERS = """
@T.prim_func
def two_writers(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
    for i in range(8):
        with T.block("B_again"):
            vi = T.axis.spatial(8, i)
            T.reads(B[vi])
            T.writes(B[vi])
            B[vi] = B[vi] + T.float32(1)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.reads(B[vi])
            T.writes(C[vi])
            C[vi] = B[vi]
"""

PARTIAL = """
@T.prim_func
def partial(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(5):
        with T.block("B"):
            vi = T.axis.spatial(5, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.reads(B[vi])
            T.writes(C[vi])
            C[vi] = B[vi]
"""

FLATTEN = """
@T.prim_func
def flatten(A: T.Buffer((4, 4), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj])
            T.writes(B[vi * 4 + vj])
            B[vi * 4 + vj] = A[vi, vj]
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            T.reads(B[vi])
            T.writes(C[vi])
            C[vi] = B[vi]
"""

MODULO = """
@T.prim_func
def modulo(A: T.Buffer((4,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((4,), "float32")
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.reads(B[vi % 4])
            T.writes(C[vi])
            C[vi] = B[vi % 4]
"""

STENCIL = """
@T.prim_func
def stencil(A: T.Buffer((8,), "float32"), C: T.Buffer((7,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi] * T.float32(2)
    for i in range(7):
        with T.block("C"):
            vi = T.axis.spatial(7, i)
            T.reads(B[vi:vi + 2])
            T.writes(C[vi])
            C[vi] = B[vi] + B[vi + 1]
"""


def _compute_at_error(func, block: str, loop_block: str, loop: int, error, match, **kwargs):
    sch = Schedule(func)
    target, moved = _loops(sch, loop_block)[loop], sch.get_block(block)
    assert_error_keeps_state(sch, lambda: sch.compute_at(moved, target, **kwargs), error, match)


def _reverse_at_error(func, block: str, loop_block: str, loop: int, error, match, **kwargs):
    sch = Schedule(func)
    target, moved = _loops(sch, loop_block)[loop], sch.get_block(block)
    call = lambda: sch.reverse_compute_at(moved, target, **kwargs)  # noqa: E731
    assert_error_keeps_state(sch, call, error, match)


def test_compute_at_needs_a_stage_pipeline():
    _compute_at_error(_func(WAR), "B", "C", 0, NotStagePipelineError, "write-after-read")


def test_compute_at_needs_a_complete_or_reduction_block():
    _compute_at_error(_func(TWO_WRITERS), "B", "C", 0, NotReductionBlockError, "only writer")


def test_compute_at_loop_must_not_enclose_the_block():
    _compute_at_error(_chain(), "B", "B", 0, NotInSameScopeError, "encloses the block")


def test_compute_at_refuses_an_output_block():
    func = _workload("matmul_bias_relu")
    _compute_at_error(func, "T_relu", "matmul", 0, OutputBlockError, "T_relu")


def test_compute_at_needs_every_consumer_under_the_loop():
    func = _workload("softmax")
    _compute_at_error(func, "T_softmax_exp", "T_softmax_norm", 0, BlocksNotUnderLoopError,
                      "T_softmax_expsum")  # fmt: skip


def test_compute_at_rejects_an_invalid_index():
    func = _workload("matmul_bias_relu")
    _compute_at_error(func, "matmul", "T_relu", 0, InsertionPointError, "from 0 to 0", index=3)
    _reverse_at_error(_func(SIBLINGS), "C", "P", 0, InsertionPointError, "from 1 to 2", index=0)


def test_compute_at_needs_the_block_to_write_what_consumers_read():
    _compute_at_error(_func(PARTIAL), "B", "C", 0, RegionCoverError, r"B\[0:7 \+ 1\]")


def test_compute_at_needs_solvable_write_indices():
    _compute_at_error(_func(FLATTEN), "B", "C", 0, UnsolvableDomainError, "several iter vars")


def test_compute_at_loop_must_be_a_loop():
    sch = Schedule(_chain())
    block = sch.get_block("B")
    other = sch.get_block("C")
    assert_error_keeps_state(
        sch, lambda: sch.compute_at(block, other), ScheduleError, "needs a loop handle"
    )


def test_reverse_compute_at_needs_every_producer_under_the_loop():
    func = _workload("layer_norm")
    _reverse_at_error(func, "T_layer_norm", "T_var_sum", 0, BlocksNotUnderLoopError, "T_sum")


def test_reverse_compute_at_does_not_split_a_reduction():
    func = _workload("softmax")
    _reverse_at_error(func, "T_softmax_expsum", "T_softmax_exp", 1, UnsolvableDomainError,
                      "split its reduction")  # fmt: skip


def test_reverse_compute_at_refuses_reads_of_unproduced_data():
    _reverse_at_error(_func(MODULO), "C", "B", 0, RegionCoverError, "not produced yet")


def test_reverse_compute_at_refuses_multi_element_reads():
    _reverse_at_error(_func(STENCIL), "C", "B", 0, UnsolvableDomainError, "single-element")


def test_reverse_compute_at_keeps_consumers_after_the_block():
    # T_sum has no producer, but moving it under T_layer_norm's loop would pass T_var_sum
    func = _workload("layer_norm")
    _reverse_at_error(func, "T_sum", "T_layer_norm", 0, DependencyError, "T_var_sum")


def test_reverse_compute_at_needs_a_stage_pipeline():
    _reverse_at_error(_func(WAR), "C", "B", 0, NotStagePipelineError, "write-after-read")


def test_reverse_compute_at_needs_the_producers_to_write_what_it_reads():
    _reverse_at_error(_func(PARTIAL), "C", "B", 0, RegionCoverError, "producers to write")


# -- reverse_compute_at of a guarded read (padding) -------------------------------------------
# P pads B with a zero column on each side: its border instances read B out of bounds (guarded
# by if_then_else) and must still run once when P moves under B's loops.
PAD = """
@T.prim_func
def padded(A: T.Buffer((3, 5), "float32"), C: T.Buffer((3, 7), "float32")):
    B = T.alloc_buffer((3, 5), "float32")
    P = T.alloc_buffer((3, 7), "float32")
    for i, j in T.grid(3, 5):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(3, 7):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            P[vi, vj] = T.if_then_else(1 <= vj and vj < 6, B[vi, vj - 1], T.float32(0))
    for i, j in T.grid(3, 7):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = P[vi, vj] + T.float32(1)
"""


def test_reverse_compute_at_keeps_the_instances_of_a_guarded_read():
    func = _func(PAD)
    sch = Schedule(func, debug=True)
    sch.reverse_compute_at(sch.get_block("P"), _loops(sch, "B")[0])
    assert_script_equal(sch.func, """
@T.prim_func
def padded(A: T.Buffer((3, 5), "float32"), C: T.Buffer((3, 7), "float32")):
    B = T.alloc_buffer((3, 5), "float32")
    P = T.alloc_buffer((3, 7), "float32")
    for i in range(3):
        for j in range(5):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for ax0 in range(7):
            with T.block("P"):
                vi, vj = T.axis.remap("SS", [i, ax0])
                T.reads(B[vi, vj - 1])
                T.writes(P[vi, vj])
                P[vi, vj] = T.if_then_else(1 <= vj and vj < 6, B[vi, vj - 1], T.float32(0))
    for i, j in T.grid(3, 7):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(P[vi, vj])
            T.writes(C[vi, vj])
            C[vi, vj] = P[vi, vj] + T.float32(1)
""")  # fmt: skip
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


@pytest.mark.parametrize("loop", [0, 1])
def test_reverse_compute_at_of_padding_after_cache_read(loop):
    # the soak test's find: pad_temp moved under its input's cache copy lost the zero border
    func = workloads.get("conv2d_nchw", N=2, CI=3, H=5, W=7, CO=3, kernel=3, padding=1)[0]
    sch = Schedule(func, debug=True)
    sch.cache_read(sch.get_block("pad_temp"), 0, "global")
    sch.reverse_compute_at(sch.get_block("pad_temp"), _loops(sch, "data_global")[loop])
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


UPSAMPLE = """
@T.prim_func
def up(A: T.Buffer((3, 5), "float32"), C: T.Buffer((3, 12), "float32")):
    B = T.alloc_buffer((3, 5), "float32")
    P = T.alloc_buffer((3, 12), "float32")
    for i, j in T.grid(3, 5):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(3, 12):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            P[vi, vj] = T.if_then_else(vj < 10, B[vi, vj // 2], T.float32(0))
    for i, j in T.grid(3, 12):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = P[vi, vj] + T.float32(1)
"""


def test_reverse_compute_at_keeps_guarded_instances_of_a_divided_read():
    # P's last two columns read B[vi, 5] (guarded): they go with the iteration writing B's end
    func = _func(UPSAMPLE)
    sch = Schedule(func, debug=True)
    sch.reverse_compute_at(sch.get_block("P"), _loops(sch, "B")[0])
    assert [sch.get(loop).extent.value for loop in _loops(sch, "P")] == [3, 12]
    assert_same_numerics(func, sch.func)
    _reverse_at_error(func, "P", "B", 1, UnsolvableDomainError, "produces the last element")


def test_reverse_compute_at_refuses_to_drop_the_instances_of_a_guarded_read():
    # under B's inner loop no iteration is known statically to own P's border columns
    _reverse_at_error(_func(PAD), "P", "B", 1, UnsolvableDomainError, "read outside the buffer")
    func = workloads.get("conv2d_nchw", N=1, CI=2, H=5, W=3, CO=2, kernel=3, padding=1)[0]
    sch = Schedule(func)
    sch.cache_read(sch.get_block("pad_temp"), 0, "global")
    target, moved = _loops(sch, "data_global")[2], sch.get_block("pad_temp")
    call = lambda: sch.reverse_compute_at(moved, target)  # noqa: E731
    assert_error_keeps_state(sch, call, UnsolvableDomainError, "guarded read")


# -- compute_inline -----------------------------------------------------------------------------
def test_compute_inline_pad_into_conv():
    func = _workload("conv2d_nchw")
    sch = Schedule(func)
    sch.compute_inline(sch.get_block("pad_temp"))
    assert_script_equal(sch.func, """
@T.prim_func
def conv2d_nchw(data: T.Buffer((1, 3, 7, 5), "float32"), weight: T.Buffer((2, 3, 3, 3), "float32"),
                conv2d_nchw: T.Buffer((1, 2, 7, 5), "float32")):
    for nn, ff, yy, xx, rc, ry, rx in T.grid(1, 2, 7, 5, 3, 3, 3):
        with T.block("conv2d_nchw"):
            vnn, vff, vyy, vxx, vrc, vry, vrx = T.axis.remap(
                "SSSSRRR", [nn, ff, yy, xx, rc, ry, rx])
            T.reads(data[vnn, vrc, vyy + vry - 1, vxx + vrx - 1], weight[vff, vrc, vry, vrx])
            T.writes(conv2d_nchw[vnn, vff, vyy, vxx])
            with T.init():
                conv2d_nchw[vnn, vff, vyy, vxx] = T.float32(0)
            conv2d_nchw[vnn, vff, vyy, vxx] = conv2d_nchw[vnn, vff, vyy, vxx] + T.if_then_else(
                vyy + vry >= 1 and vyy + vry < 8 and vxx + vrx >= 1 and vxx + vrx < 6,
                data[vnn, vrc, vyy + vry - 1, vxx + vrx - 1], T.float32(0)
            ) * weight[vff, vrc, vry, vrx]
""")  # fmt: skip
    assert_same_numerics(func, sch.func, rtol=1e-4, atol=1e-4)
    assert_trace_roundtrip(sch, func)


@pytest.mark.parametrize("name, block", [("softmax", "T_softmax_exp"), ("layer_norm", None)])
def test_compute_inline_numerics(name, block):
    func = _workload(name)
    sch = Schedule(func)
    if block is None:  # layer_norm has no inlinable block: inline a te chain into it instead
        func = _chain(9)
        sch = Schedule(func)
        block = "B"
    sch.compute_inline(sch.get_block(block))
    assert_same_numerics(func, sch.func, rtol=1e-4, atol=1e-4)
    assert_trace_roundtrip(sch, func)


def test_compute_inline_after_compute_at_of_its_consumer():
    func = _workload("conv2d_nchw")
    sch = Schedule(func)
    sch.compute_at(sch.get_block("pad_temp"), _loops(sch, "conv2d_nchw")[2])
    sch.compute_inline(sch.get_block("pad_temp"))
    assert not any(b.name == "pad_temp" for b in sch.func.body.block.alloc_buffers)
    assert_same_numerics(func, sch.func, rtol=1e-4, atol=1e-4)


SINGLE = """
@T.prim_func
def single(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
"""

TWO_OUTPUTS = """
@T.prim_func
def two_outputs(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    B2 = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi], B2[vi])
            B[vi] = A[vi]
            B2[vi] = A[vi]
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.reads(B[vi], B2[vi])
            T.writes(C[vi])
            C[vi] = B[vi] + B2[vi]
"""

REVERSED = """
@T.prim_func
def reversed_index(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[7 - vi])
            B[7 - vi] = A[vi]
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.reads(B[vi])
            T.writes(C[vi])
            C[vi] = B[vi]
"""

MATCHED = """
@T.prim_func
def matched(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
    with T.block("C"):
        T.reads(B[0:8])
        T.writes(C[0:8])
        Bm = T.match_buffer(B[0:8], (8,), "float32")
        for i in range(8):
            C[i] = Bm[i]
"""


def _inline_error(func, block: str, error, match, reverse: bool = False):
    sch = Schedule(func)
    primitive = sch.reverse_compute_inline if reverse else sch.compute_inline
    handle = sch.get_block(block)
    assert_error_keeps_state(sch, lambda: primitive(handle), error, match)


def test_compute_inline_refuses_a_reduction():
    _inline_error(_workload("matmul_bias_relu"), "matmul", HasInitError, "init statement")


def test_compute_inline_needs_a_single_written_buffer():
    _inline_error(_func(TWO_OUTPUTS), "B", NotSingleBufferError, "writes 2")


def test_compute_inline_needs_a_stage_pipeline():
    _inline_error(_func(WAR), "B", NotStagePipelineError, "write-after-read")


def test_compute_inline_refuses_an_output_block():
    _inline_error(_workload("matmul_bias_relu"), "T_relu", OutputBlockError, "T_relu")


def test_compute_inline_needs_a_complete_block():
    _inline_error(_func(TWO_WRITERS), "B_again", NotCompleteBlockError, "only writer")


def test_compute_inline_needs_plain_store_indices():
    _inline_error(_func(REVERSED), "B", BodyPatternError, r"B\[7 - vi\]")


def test_compute_inline_refuses_a_matched_buffer():
    _inline_error(_func(MATCHED), "B", OpaqueAccessError, "matched into")


def test_compute_inline_refuses_the_only_block_of_a_scope():
    _inline_error(_func(SINGLE), "B", OnlyLeafError, "only block")


# -- reverse_compute_inline -------------------------------------------------------------------
def test_reverse_compute_inline_folds_the_epilogue_into_its_producer():
    A = te.placeholder((5, 7), name="A")
    B = te.compute((5, 7), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((7, 5), lambda j, i: te.exp(B[i, j]), name="C")  # a transposing epilogue
    func = te.create_prim_func([A, C])
    sch = Schedule(func)
    producer = sch.get_block("B")
    sch.reverse_compute_inline(sch.get_block("C"))
    assert sch.get(producer).name_hint == "B"
    assert_script_equal(sch.func, """
@T.prim_func
def main(A: T.Buffer((5, 7), "float32"), C: T.Buffer((7, 5), "float32")):
    for i, j in T.grid(5, 7):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj])
            T.writes(C[vj, vi])
            C[vj, vi] = T.exp(A[vi, vj] * T.float32(2))
""")  # fmt: skip
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_reverse_compute_inline_with_an_offset_adds_a_predicate():
    A = te.placeholder((9,), name="A")
    B = te.compute((9,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((7,), lambda i: B[i + 2] * 3.0, name="C")
    func = te.create_prim_func([A, C])
    sch = Schedule(func)
    sch.reverse_compute_inline(sch.get_block("C"))
    realize = sch.state.realize_of(sch.get(sch.get_block("B")))
    assert str(realize.predicate) == "i >= 2"
    assert_same_numerics(func, sch.func)


PREDICATED = """
@T.prim_func
def predicated(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.where(i < 6)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.reads(B[vi])
            T.writes(C[vi])
            C[vi] = B[vi]
"""

OUTPUT_PRODUCER = """
@T.prim_func
def output_producer(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
                    C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.reads(B[vi])
            T.writes(C[vi])
            C[vi] = B[vi]
"""

NOT_SPATIAL = """
@T.prim_func
def not_spatial(A: T.Buffer((8,), "float32"), C: T.Buffer((1,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
    for i in range(8):
        with T.block("C"):
            vi = T.axis.reduce(8, i)
            T.reads(B[vi])
            T.writes(C[0])
            C[0] = B[vi]
"""

SHORT_PRODUCER = PARTIAL


def test_reverse_compute_inline_refuses_a_reduction():
    func = _workload("softmax")
    _inline_error(func, "T_softmax_expsum", HasInitError, "init statement", reverse=True)


def test_reverse_compute_inline_needs_one_produced_input():
    func = _workload("layer_norm")
    _inline_error(func, "T_layer_norm", NotSingleBufferError, "reads 2", reverse=True)


def test_reverse_compute_inline_needs_a_complete_single_producer():
    func = _workload("matmul_bias_relu")
    _inline_error(func, "T_relu", NonSingleProducerError, "not complete", reverse=True)


def test_reverse_compute_inline_needs_one_index_pattern():
    _inline_error(_func(STENCIL), "C", BodyPatternError, "different indices", reverse=True)


def test_reverse_compute_inline_needs_an_implied_producer_predicate():
    _inline_error(_func(PREDICATED), "C", ProducerPredicateError, "i < 6", reverse=True)


def test_reverse_compute_inline_keeps_outputs_written():
    _inline_error(_func(OUTPUT_PRODUCER), "C", OutputBlockError, "unwritten", reverse=True)


def test_reverse_compute_inline_needs_a_complete_consumer():
    _inline_error(_func(NOT_SPATIAL), "C", NotCompleteBlockError, "not spatial", reverse=True)


def test_reverse_compute_inline_needs_the_producer_to_cover_the_consumer():
    _inline_error(_func(SHORT_PRODUCER), "C", NonSingleProducerError, "only yields", reverse=True)


def test_reverse_compute_inline_needs_a_stage_pipeline():
    _inline_error(_func(WAR), "C", NotStagePipelineError, "write-after-read", reverse=True)


# -- sample_compute_location ------------------------------------------------------------------
def test_sample_compute_location_candidates():
    sch = Schedule(_workload("conv2d_nchw"))
    found = collect_compute_locations(sch.state, sch.get(sch.get_block("pad_temp")))
    names = [(d, loc.name_hint if isinstance(loc, Block) else loc.loop_var.name)
             for d, loc in found]  # fmt: skip
    # nn (extent 1) is skipped; rc/ry/rx are reduction loops below the spatial ones
    assert names == [(-2, "pad_temp"), (-1, "root"), (1, "ff"), (2, "yy"), (3, "xx")]


@pytest.mark.parametrize("decision", [-2, -1, 1, 2, 3])
def test_sample_compute_location_decisions_feed_compute_at(decision):
    func = _workload("conv2d_nchw")
    sch = Schedule(func)
    block = sch.get_block("pad_temp")
    location = sch.sample_compute_location(block, decision=decision)
    target = sch.get(location)
    assert isinstance(target, Block if decision < 0 else For)
    sch.compute_at(block, location)
    if decision == -1:
        assert sch.mod is sch.history[-3].mod  # "stay at root" changes nothing
    assert_same_numerics(func, sch.func, compiled=decision in (-2, 2), rtol=1e-4, atol=1e-4)
    assert_trace_roundtrip(sch, func)


def test_sample_compute_location_is_seeded_and_recorded():
    func = _workload("matmul_bias_relu")
    decisions = []
    for _ in range(2):
        sch = Schedule(func, seed=5)
        block = sch.get_block("matmul")
        for _ in range(4):
            sch.sample_compute_location(block)
        decisions.append(list(sch.trace.decisions.values()))
    assert decisions[0] == decisions[1]
    assert set(decisions[0]) <= {-1, 0, 1}


def test_sample_compute_location_replay_falls_back_to_a_legal_decision():
    sch = Schedule(_workload("matmul_bias_relu"))
    block = sch.get_block("matmul")
    location = sch.sample_compute_location(block, decision=5)  # only -1, 0, 1 are legal
    assert sch.get(location).loop_var.name == "j"
    assert list(sch.trace.decisions.values()) == [1]
    sch.sample_compute_location(block, decision=-2)  # not inlinable: falls back to root
    assert list(sch.trace.decisions.values())[-1] == -1


def test_sample_compute_location_replay_never_searches_blindly():
    assert _replayed(-7, [-2, -1, 0, 2]) == 1  # below every candidate: stay at the root
    assert _replayed(1, [-1, 0, 2]) == 1  # between candidates: the one before
    assert _replayed(-7, [0, 2]) == 0  # no root entry (not produced today): the first


def test_collect_compute_locations_stops_where_the_consumers_part():
    # B feeds C and D, which share only loop i: j is not a candidate for B
    func = _func("""
@T.prim_func
def fork(A: T.Buffer((4, 6), "float32"), C: T.Buffer((4, 6), "float32"),
         D: T.Buffer((4, 6), "float32")):
    B = T.alloc_buffer((4, 6), "float32")
    for i, j in T.grid(4, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i in range(4):
        for j in range(6):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.float32(1)
        for j in range(6):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = B[vi, vj] - T.float32(1)
""")  # fmt: skip
    sch = Schedule(func)
    found = collect_compute_locations(sch.state, sch.get(sch.get_block("B")))
    assert [decision for decision, _ in found] == [-2, -1, 0]  # inline, root, loop i
    assert found[2][1] is sch.get(_loops(sch, "C")[0])


def test_sample_compute_location_errors():
    sch = Schedule(_workload("matmul_bias_relu"))
    block = sch.get_block("matmul")
    assert_error_keeps_state(
        sch, lambda: sch.sample_compute_location(block, decision="x"), ScheduleError, "int"
    )
    root = sch.get_block("root")
    assert_error_keeps_state(
        sch, lambda: sch.sample_compute_location(root), ScheduleError, "root block"
    )


def test_reverse_compute_at_accepts_sampled_marks():
    A = te.placeholder((6,), name="A")
    B = te.compute((6,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((6,), lambda i: B[i] + 1.0, name="C")
    func = te.create_prim_func([A, C])
    sch = Schedule(func)
    consumer = sch.get_block("C")
    sch.reverse_compute_at(consumer, consumer)  # the "inline" mark: reverse_compute_inline
    assert [b.name_hint for b in sch.state.child_blocks(sch.func.body.block)] == ["B"]
    assert_same_numerics(func, sch.func, compiled=False)


# -- analyses ---------------------------------------------------------------------------------
def test_block_kind_facts():
    sch = Schedule(_workload("matmul_bias_relu"))
    state = sch.state
    matmul, relu = sch.get(sch.get_block("matmul")), sch.get(sch.get_block("T_relu"))
    assert stage_pipeline.is_reduction_block(state, matmul)
    assert not stage_pipeline.is_complete_block(state, matmul)
    assert stage_pipeline.is_complete_block(state, relu)
    assert stage_pipeline.is_output_block(state, relu)
    assert not stage_pipeline.is_output_block(state, matmul)
    assert stage_pipeline.is_stage_pipeline(state, sch.get(sch.get_block("root")))
    war = Schedule(_func(WAR))
    assert not stage_pipeline.is_stage_pipeline(war.state, war.get(war.get_block("root")))


def test_region_cover_facts():
    sch = Schedule(_func(PARTIAL))
    consumer = sch.get(sch.get_block("C"))
    assert not region_cover.has_region_cover(sch.state, consumer)
    found = region_cover.uncovered_read(sch.state, consumer)
    assert (found.buffer_name, str(found.read[0].max), str(found.produced[0].max)) == (
        "B",
        "7",
        "4",
    )
    tiled = Schedule(_func(TILED))
    assert region_cover.has_region_cover(tiled.state, tiled.get(tiled.get_block("D")))


@pytest.mark.parametrize("reverse", [True, False])
def test_moving_a_block_keeps_its_own_predicate(reverse):
    """A padded gemm's write-back stores only `v1 < 7` (its predicate after reverse_compute_inline
    of the crop); moving it under the row loop must keep that, or it writes C out of bounds.
    compute_at of a block predicated by a non-dividing split stays correct too."""
    func, reference = workloads.get("gemm", M=5, N=7, K=3)
    sch = Schedule(func)
    if reverse:
        sch.pad_einsum(sch.get_block("C"), [1, 8, 1])
        write_back = sch.cache_write(sch.get_block("C"), 0, "local")
        sch.reverse_compute_inline(sch.get_block("C_pad"))
        sch.reverse_compute_at(write_back, sch.get_loops(sch.get_block("C"))[0])
        assert "T.where(ax0 < 7)" in sch.func.script()
    else:
        read = sch.cache_read(sch.get_block("C"), 1, "global")  # B's copy
        _, inner = sch.split(sch.get_loops(read)[1], [None, 4])  # 7 = 2 x 4, predicated
        sch.compute_at(read, sch.get_loops(sch.get_block("C"))[0])
    args = workloads.make_args(sch.func, seed=5)
    interpret(sch.func, *args)
    np.testing.assert_allclose(args[-1], reference(*args[:-1]), rtol=1e-5, atol=1e-5)
    assert_trace_roundtrip(sch, func)

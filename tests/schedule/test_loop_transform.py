"""Loop transformations: split, fuse, reorder, merge, add_unit_loop, loop_partition.

Per primitive: the IR after it (expected TVMScript text), the trace round trip, numerics through
the interpreter and compiled C at odd sizes, and one test per precondition error (which must
leave the schedule as it was)."""

import re

import numpy as np
import pytest

import schedlab
from schedlab import workloads
from schedlab.ir.stmt import For, SeqStmt
from schedlab.schedule import (
    DependencyError,
    HandleError,
    NonAffineBindingError,
    NotSingleChildError,
    Schedule,
    ScheduleError,
)
from schedlab.schedule.analysis.affine import (
    check_affine_binding,
    is_affine_binding,
    is_bijective_binding,
    loop_domains,
)
from schedlab.schedule.analysis.loops import block_accesses, iteration_conflict
from schedlab.schedule.primitives.loop_transform import (
    BlockIterTypeError,
    DependentLoopError,
    FactorError,
    LoopAnnotationError,
    LoopNestMismatchError,
    LoopsNotAChainError,
    LoopStartError,
    RepeatedLoopError,
    SymbolicExtentError,
)
from schedlab.schedule.primitives.loop_transform.merge import _positions as merge_positions
from schedlab.script import from_source

from .helpers import (
    assert_error_keeps_state,
    assert_same_numerics,
    assert_script_equal,
    assert_trace_roundtrip,
)


def _gemm(m=10, n=16, k=16):
    return workloads.get("gemm", M=m, N=n, K=k)[0]


def _loops(sch: Schedule, block: str):
    return sch.get_loops(sch.get_block(block))


def _names(sch: Schedule, block: str) -> list[str]:
    return [sch.get(loop).loop_var.name for loop in _loops(sch, block)]


def _func(text: str):
    func = from_source(text)
    return func if not hasattr(func, "functions") else func[next(iter(func))]


# Hand-written functions for the cases the workloads do not have.
TWO_STAGES = """
@T.prim_func
def main(A: T.Buffer((9, 5), "float32"), B: T.Buffer((9, 5), "float32"),
         C: T.Buffer((9, 5), "float32")):
    for i, j in T.grid(9, 5):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(9, 5):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
"""

SHIFTED_STAGES = """
@T.prim_func
def main(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32"),
         C: T.Buffer((9,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(9):
        with T.block("C"):
            vi = T.axis.spatial(9, i)
            C[vi] = B[vi + 1] + T.float32(1)
"""

SAME_LOOP_TWO_BLOCKS = """
@T.prim_func
def main(A: T.Buffer((6, 6), "float32"), B: T.Buffer((6, 6), "float32"),
         C: T.Buffer((6, 6), "float32")):
    for i, j in T.grid(6, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
"""

TRANSPOSED_TWO_BLOCKS = """
@T.prim_func
def main(A: T.Buffer((6, 6), "float32"), B: T.Buffer((6, 6), "float32"),
         C: T.Buffer((6, 6), "float32")):
    for i, j in T.grid(6, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vj, vi] + T.float32(1)
"""

ANNOTATED = """
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i in T.serial(8, annotations={"pragma_auto_unroll_max_step": 16}):
        for j in T.thread_binding(8, thread="threadIdx.x"):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)
"""

OFFSET_LOOP = """
@T.prim_func
def main(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(2, 10):
        for j in range(1):
            with T.block("B"):
                vi = T.axis.spatial(10, i + j)
                B[vi] = A[vi] + T.float32(1)
"""

TRIANGLE = """
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i in range(8):
        for j in range(i + 1):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(8, j)
                B[vi, vj] = A[vi, vj] + T.float32(1)
"""

SPLIT_BODY = """
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"),
         C: T.Buffer((4, 4), "float32")):
    for i in range(4):
        for j in range(4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)
        for j in range(4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] * T.float32(2)
"""


# =============================================================================================
# split
# =============================================================================================
def test_split_non_divisible_adds_a_predicate():
    func = _gemm()
    sch = Schedule(func)
    i, _, _ = _loops(sch, "C")
    outs = sch.split(i, [None, 4])
    assert [sch.get(o).extent.value for o in outs] == [3, 4]
    assert_script_equal(sch.func, """
@T.prim_func
def gemm(A: T.Buffer((10, 16), "float32"), B: T.Buffer((16, 16), "float32"),
         C: T.Buffer((10, 16), "float32")):
    for i_0, i_1, j, k in T.grid(3, 4, 16, 16):
        with T.block("C"):
            vi = T.axis.spatial(10, i_0 * 4 + i_1)
            vj, vk = T.axis.remap("SR", [j, k])
            T.where(i_0 * 4 + i_1 < 10)
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""")  # fmt: skip
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_split_divisible_three_ways_has_no_predicate():
    func = _gemm(4, 24, 2)
    sch = Schedule(func)
    _, j, _ = _loops(sch, "C")
    sch.split(j, [2, None, 4])
    assert_script_equal(sch.func, """
@T.prim_func
def gemm(A: T.Buffer((4, 2), "float32"), B: T.Buffer((2, 24), "float32"),
         C: T.Buffer((4, 24), "float32")):
    for i, j_0, j_1, j_2, k in T.grid(4, 2, 3, 4, 2):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            vj = T.axis.spatial(24, j_0 * 12 + j_1 * 4 + j_2)
            vk = T.axis.reduce(2, k)
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""")  # fmt: skip
    assert_trace_roundtrip(sch, func)


def test_split_unit_factor_and_preserve_unit_iters():
    func = _gemm(4, 4, 4)
    kept = Schedule(func)
    kept.split(_loops(kept, "C")[0], [1, None])
    assert str(kept.get(kept.get_block("C")).iter_vars[0].var.name) == "vi"
    realize = kept.state.realize_of(kept.get(kept.get_block("C")))
    assert "i_0" in str(realize.iter_values[0])  # the unit loop stays in the binding
    dropped = Schedule(func)
    dropped.split(_loops(dropped, "C")[0], [1, None], preserve_unit_iters=False)
    realize = dropped.state.realize_of(dropped.get(dropped.get_block("C")))
    assert str(realize.iter_values[0]) == "i_1"
    assert_trace_roundtrip(dropped, func)
    assert_same_numerics(func, dropped.func, compiled=False)


def test_split_disable_predication_leaves_no_guard():
    func = _gemm(8, 16, 16)
    sch = Schedule(func)
    sch.split(_loops(sch, "C")[0], [3, 3], disable_predication=True)
    realize = sch.state.realize_of(sch.get(sch.get_block("C")))
    assert realize.predicate.value is True or realize.predicate.value == 1


def test_split_with_sampled_factors_round_trips():
    func = _gemm(12, 16, 16)
    sch = Schedule(func, seed=7)
    i, j, k = _loops(sch, "C")
    factors = sch.sample_perfect_tile(j, n=3, max_innermost_factor=4)
    loops = sch.split(j, factors)
    assert [sch.get(loop).extent.value for loop in loops] == [sch.get(f) for f in factors]
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func, compiled=False)


@pytest.mark.parametrize(
    "name, sizes, block, loop_index, factors",
    [
        ("gemm", dict(M=13, N=7, K=9), "C", 2, [None, 4]),  # a reduction loop, with a guard
        ("conv2d_nchw", dict(N=1, CI=3, H=7, W=9, CO=5), "conv2d_nchw", 3, [2, None, 2]),
        ("conv2d_nchw", dict(N=1, CI=3, H=7, W=9, CO=5), "pad_temp", 2, [None, 4]),
        ("softmax", dict(M=5, N=11), "T_softmax_norm", 1, [None, 3]),
        ("layer_norm", dict(M=3, N=13), None, 1, [4, None]),
        ("matmul_bias_relu", dict(M=7, N=9, K=5), "T_relu", 0, [None, 2]),
    ],
)
def test_split_numerics(name, sizes, block, loop_index, factors):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func)
    block = block or sch.get(sch.get_child_blocks(sch.get_block("root"))[-1]).name_hint
    loop = _loops(sch, block)[loop_index]
    sch.split(loop, factors)
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_split_symbolic_extent():
    func = _func("""
@T.prim_func
def main(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi] + T.float32(1)
""")  # fmt: skip
    sch = Schedule(func)
    i0, i1 = sch.split(_loops(sch, "B")[0], [None, 4])
    assert "3" in str(sch.get(i0).extent) and "4" in str(sch.get(i0).extent)
    realize = sch.state.realize_of(sch.get(sch.get_block("B")))
    assert "<" in str(realize.predicate)
    assert_trace_roundtrip(sch, func)
    a = np.arange(11, dtype="float32")
    b = np.zeros(11, dtype="float32")
    schedlab.interpret(sch.func, a, b)
    np.testing.assert_allclose(b, a + 1)
    assert_error_keeps_state(sch, lambda: sch.split(i0, [4]), FactorError, "multiply to 4")


def test_split_old_handle_names_the_primitive():
    sch = Schedule(_gemm())
    i = _loops(sch, "C")[0]
    sch.split(i, [None, 4])
    with pytest.raises(HandleError, match=r"split \(step 3\)"):
        sch.get(i)


def test_split_error_annotation():
    func = _func(ANNOTATED)
    sch = Schedule(func)
    i, j = _loops(sch, "B")
    err = assert_error_keeps_state(sch, lambda: sch.split(i, [2, 4]), LoopAnnotationError,
                                   "annotations")  # fmt: skip
    assert err.nodes == (sch.get(i),) and "^" in str(err)
    assert_error_keeps_state(sch, lambda: sch.split(j, [2, 4]), LoopAnnotationError, "threadIdx")


def test_split_error_loop_must_start_at_zero():
    sch = Schedule(_func(OFFSET_LOOP))
    i = _loops(sch, "B")[0]
    assert_error_keeps_state(sch, lambda: sch.split(i, [2, 4]), LoopStartError, "starts at 2")


def test_split_error_two_none_factors():
    sch = Schedule(_gemm())
    i = _loops(sch, "C")[0]
    assert_error_keeps_state(sch, lambda: sch.split(i, [None, None]), FactorError,
                             "only one factor can be None")  # fmt: skip


@pytest.mark.parametrize("bad", [[0, None], [-2, 5], [2.5, None], [True, None], []])
def test_split_error_bad_factor(bad):
    sch = Schedule(_gemm())
    i = _loops(sch, "C")[0]
    assert_error_keeps_state(sch, lambda: sch.split(i, bad), FactorError)


def test_split_error_huge_factors_are_shortened():
    sch = Schedule(_gemm())
    i = _loops(sch, "C")[0]
    huge, short = 10**400 + 7, "100000...000007 (401 digits)"
    cases = [
        ([None, huge], "factors[1] must fit the loop variable's dtype int32 (at most "
                       f"2147483647), got {short}"),
        ([-huge, None], f"factors[0] must be a positive int, got -{short}"),
        ([None, None, huge], f"only one factor can be None (inferred), got [None, None, {short}]"),
        ([2**20, 2**20], "the factors [1048576, 1048576] multiply to 1099511627776, more than "
                         "the loop variable's dtype int32 holds (2147483647)"),
    ]  # fmt: skip
    for factors, message in cases:
        err = assert_error_keeps_state(sch, lambda f=factors: sch.split(i, f), FactorError,
                                       re.escape(message))  # fmt: skip
        assert len(str(err).splitlines()[0]) < 200


def test_split_a_factor_near_the_dtype_limit_infers_one():
    sch = Schedule(_gemm())
    i = _loops(sch, "C")[0]
    outer, inner = sch.split(i, [None, 2**31 - 1])  # extent + factor - 1 overflows int32
    assert [int(sch.get(loop).extent) for loop in (outer, inner)] == [1, 2**31 - 1]


def test_split_error_product_too_small():
    sch = Schedule(_gemm())
    i = _loops(sch, "C")[0]
    assert_error_keeps_state(sch, lambda: sch.split(i, [2, 4]), FactorError,
                             "multiply to 8, less than the extent 10")  # fmt: skip


def test_split_error_not_a_loop():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    assert_error_keeps_state(sch, lambda: sch.split(block, [2, None]), ScheduleError,
                             "must be a loop handle")  # fmt: skip


# =============================================================================================
# fuse
# =============================================================================================
def test_fuse_two_loops():
    func = workloads.get("gemm", M=4, N=6, K=8)[0]
    sch = Schedule(func)
    i, j, _ = _loops(sch, "C")
    fused = sch.fuse(i, j)
    assert sch.get(fused).extent.value == 24
    assert_script_equal(sch.func, """
@T.prim_func
def gemm(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 6), "float32"),
         C: T.Buffer((4, 6), "float32")):
    for i_j_fused, k in T.grid(24, 8):
        with T.block("C"):
            vi = T.axis.spatial(4, i_j_fused // 6)
            vj = T.axis.spatial(6, i_j_fused % 6)
            vk = T.axis.reduce(8, k)
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""")  # fmt: skip
    assert_trace_roundtrip(sch, func)
    assert "sch.fuse(l1, l2, preserve_unit_iters=True)" in sch.trace.as_python()


def test_fuse_three_loops_and_a_list_argument():
    func = workloads.get("conv2d_nchw", N=1, CI=3, H=5, W=7, CO=3)[0]
    sch = Schedule(func)
    n, f, y, x = _loops(sch, "conv2d_nchw")[:4]
    fused = sch.fuse([f, y, x])
    assert sch.get(fused).extent.value == 3 * 5 * 7
    assert sch.get(fused).loop_var.name == "ff_yy_xx_fused"
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_fuse_after_split_restores_the_binding():
    func = _gemm(12, 16, 4)
    sch = Schedule(func)
    i0, i1 = sch.split(_loops(sch, "C")[0], [3, 4])
    sch.fuse(i0, i1)
    realize = sch.state.realize_of(sch.get(sch.get_block("C")))
    assert str(realize.iter_values[0]) == "i_0_i_1_fused"


def test_fuse_unit_loops():
    func = workloads.get("conv2d_nchw", N=1, CI=2, H=3, W=5, CO=2)[0]
    sch = Schedule(func)
    n, f = _loops(sch, "conv2d_nchw")[:2]
    sch.fuse(n, f)
    assert_same_numerics(func, sch.func, compiled=False)
    assert_trace_roundtrip(sch, func)


def test_fuse_error_not_consecutive():
    sch = Schedule(_gemm())
    i, _, k = _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.fuse(i, k), LoopsNotAChainError,
                             "not directly inside")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.fuse(k, i), LoopsNotAChainError)


def test_fuse_error_not_only_child():
    sch = Schedule(_func(SPLIT_BODY))
    i, j = _loops(sch, "B")
    assert_error_keeps_state(sch, lambda: sch.fuse(i, j), NotSingleChildError,
                             "not the only statement")  # fmt: skip


def test_fuse_error_annotation():
    sch = Schedule(_func(ANNOTATED))
    i, j = _loops(sch, "B")
    assert_error_keeps_state(sch, lambda: sch.fuse(i, j), LoopAnnotationError)


def test_fuse_error_loop_start():
    sch = Schedule(_func(OFFSET_LOOP))
    i, j = _loops(sch, "B")
    assert_error_keeps_state(sch, lambda: sch.fuse(i, j), LoopStartError)


def test_fuse_error_dependent_extent():
    sch = Schedule(_func(TRIANGLE))
    i, j = _loops(sch, "B")
    assert_error_keeps_state(sch, lambda: sch.fuse(i, j), DependentLoopError, "depends on")


def test_fuse_error_no_loops():
    sch = Schedule(_gemm())
    assert_error_keeps_state(sch, lambda: sch.fuse(), ScheduleError, "at least one loop")


# =============================================================================================
# reorder
# =============================================================================================
def test_reorder_non_adjacent_loops():
    func = workloads.get("gemm", M=4, N=6, K=8)[0]
    sch = Schedule(func)
    i, j, k = _loops(sch, "C")
    sch.reorder(k, i)
    assert_script_equal(sch.func, """
@T.prim_func
def gemm(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 6), "float32"),
         C: T.Buffer((4, 6), "float32")):
    for k, j, i in T.grid(8, 6, 4):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""")  # fmt: skip
    assert [sch.get(x).loop_var.name for x in (i, j, k)] == ["i", "j", "k"]  # handles follow
    assert_trace_roundtrip(sch, func)
    assert "sch.reorder(l3, l1)" in sch.trace.as_python()
    assert_same_numerics(func, sch.func)


def test_reorder_tiles():
    func = _gemm(13, 7, 9)
    sch = Schedule(func)
    i, j, k = _loops(sch, "C")
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [2, None])
    k0, k1 = sch.split(k, [None, 2])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    assert _names(sch, "C") == ["i_0", "j_0", "k_0", "i_1", "j_1", "k_1"]
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


@pytest.mark.parametrize(
    "name, sizes, block, order",
    [
        ("conv2d_nchw", dict(N=1, CI=3, H=5, W=7, CO=3), "conv2d_nchw", [4, 1, 6, 2]),
        ("softmax", dict(M=5, N=7), "T_softmax_maxelem", [1, 0]),
        ("max_pool2d_nchw", dict(N=1, C=3, H=9, W=7), None, [3, 1]),
        ("matmul_bias_relu", dict(M=7, N=9, K=5), "T_relu", [1, 0]),
    ],
)
def test_reorder_numerics(name, sizes, block, order):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func)
    block = block or sch.get(sch.get_child_blocks(sch.get_block("root"))[-1]).name_hint
    loops = _loops(sch, block)
    sch.reorder(*[loops[index] for index in order])
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_reorder_single_loop_is_a_no_op():
    sch = Schedule(_gemm())
    mod = sch.mod
    sch.reorder(_loops(sch, "C")[0])
    assert sch.mod is mod and len(sch.trace) == 3


def test_reorder_two_blocks_touching_data_in_the_same_iteration():
    func = _func(SAME_LOOP_TWO_BLOCKS)
    sch = Schedule(func)
    i, j = _loops(sch, "B")
    sch.reorder(j, i)
    assert _names(sch, "C") == ["j", "i"]
    assert_same_numerics(func, sch.func)


def test_reorder_error_dependence_across_iterations():
    sch = Schedule(_func(TRANSPOSED_TWO_BLOCKS))
    i, j = _loops(sch, "B")
    err = assert_error_keeps_state(sch, lambda: sch.reorder(j, i), DependencyError,
                                   "buffer B")  # fmt: skip
    assert {b.name_hint for b in err.nodes} == {"B", "C"}


def test_reorder_error_repeated_loop():
    sch = Schedule(_gemm())
    i, j, _ = _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.reorder(i, j, i), RepeatedLoopError,
                             "more than once")  # fmt: skip


def test_reorder_error_loops_in_different_branches():
    sch = Schedule(_func(SPLIT_BODY))
    (_, j1), (_, j2) = _loops(sch, "B"), _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.reorder(j2, j1), LoopsNotAChainError,
                             "different branches")  # fmt: skip


def test_reorder_error_loops_in_different_scopes():
    sch = Schedule(_func(TWO_STAGES))
    (i1, _), (_, j2) = _loops(sch, "B"), _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.reorder(j2, i1), LoopsNotAChainError)


def test_reorder_error_non_single_branch():
    func = _func("""
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"),
         C: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            C[vi] = A[vi, 0]
        for j in range(4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)
""")  # fmt: skip
    sch = Schedule(func)
    i, j = _loops(sch, "B")
    assert_error_keeps_state(sch, lambda: sch.reorder(j, i), LoopsNotAChainError,
                             "more than one child")  # fmt: skip


def test_reorder_error_non_affine_binding():
    func = _func("""
@T.prim_func
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi = T.axis.spatial(16, i * j)
            B[vi] = A[vi] + T.float32(1)
""")  # fmt: skip
    sch = Schedule(func)
    i, j = _loops(sch, "B")
    err = assert_error_keeps_state(sch, lambda: sch.reorder(j, i), NonAffineBindingError,
                                   "affine binding")  # fmt: skip
    assert err.nodes[0].name_hint == "B"


def test_reorder_error_reduction_with_a_repeating_loop():
    func = _func("""
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4,), "float32")):
    for i, k, r in T.grid(4, 4, 2):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
""")  # fmt: skip
    sch = Schedule(func)
    _, k, r = _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.reorder(r, k), NonAffineBindingError,
                             "one-to-one")  # fmt: skip


def test_reorder_error_loop_feeding_spatial_and_reduction():
    sch = Schedule(_gemm(4, 3, 5))
    i, j, k = _loops(sch, "C")
    sch.reorder(i, k, j)
    fused = sch.fuse(k, j)
    outer, inner = sch.split(fused, [4, None])
    # each element's k=0 instance is no longer first once inner runs outside outer
    assert_error_keeps_state(sch, lambda: sch.reorder(inner, outer), NonAffineBindingError,
                             "feeds both a spatial and a reduction")  # fmt: skip


def test_reorder_error_opaque_iter_var():
    func = _func("""
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi = T.axis.opaque(4, i)
            vj = T.axis.spatial(4, j)
            B[vi, vj] = A[vi, vj]
""")  # fmt: skip
    sch = Schedule(func)
    i, j = _loops(sch, "B")
    assert_error_keeps_state(sch, lambda: sch.reorder(j, i), BlockIterTypeError, "opaque")


def test_reorder_error_dependent_loop():
    sch = Schedule(_func(TRIANGLE))
    i, j = _loops(sch, "B")
    assert_error_keeps_state(sch, lambda: sch.reorder(j, i), DependentLoopError,
                             "range of loop j")  # fmt: skip


# =============================================================================================
# merge
# =============================================================================================
def test_merge_two_levels():
    func = _func(TWO_STAGES)
    sch = Schedule(func)
    (_, j1), (_, j2) = _loops(sch, "B"), _loops(sch, "C")
    merged = sch.merge(j1, j2)
    assert sch.get(merged).loop_var.name == "j_m"
    assert_script_equal(sch.func, """
@T.prim_func
def main(A: T.Buffer((9, 5), "float32"), B: T.Buffer((9, 5), "float32"),
         C: T.Buffer((9, 5), "float32")):
    for i_m, j_m in T.grid(9, 5):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i_m, j_m])
            T.reads(A[vi, vj])
            T.writes(B[vi, vj])
            B[vi, vj] = A[vi, vj] * T.float32(2)
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i_m, j_m])
            T.reads(B[vi, vj])
            T.writes(C[vi, vj])
            C[vi, vj] = B[vi, vj] + T.float32(1)
""")  # fmt: skip
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_merge_outer_level_only():
    func = _func(TWO_STAGES)
    sch = Schedule(func)
    (i1, _), (i2, _) = _loops(sch, "B"), _loops(sch, "C")
    sch.merge(i1, i2)
    assert _names(sch, "B") == ["i_m", "j"] and _names(sch, "C") == ["i_m", "j"]
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_merge_independent_nests_in_any_order():
    func = _func(TWO_STAGES.replace("B[vi, vj] + T.float32(1)", "A[vi, vj] + T.float32(1)"))
    sch = Schedule(func)
    (i1, _), (i2, _) = _loops(sch, "B"), _loops(sch, "C")
    sch.merge(i2, i1)
    blocks = [sch.get(b).name_hint for b in sch.get_child_blocks(_loops(sch, "B")[0])]
    assert blocks == ["C", "B"]
    assert_same_numerics(func, sch.func, compiled=False)


def test_merge_error_shifted_dependence():
    sch = Schedule(_func(SHIFTED_STAGES.replace("range(10)", "range(9)")))
    (i1,), (i2,) = _loops(sch, "B"), _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.merge(i1, i2), DependencyError,
                             "different iterations")  # fmt: skip


def test_merge_error_swapped_dependent_nests():
    sch = Schedule(_func(TWO_STAGES))
    (i1, _), (i2, _) = _loops(sch, "B"), _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.merge(i2, i1), DependencyError, "program order")


def test_merge_error_extent_mismatch():
    sch = Schedule(_func(SHIFTED_STAGES))
    (i1,), (i2,) = _loops(sch, "B"), _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.merge(i1, i2), LoopNestMismatchError,
                             "differ in extent")  # fmt: skip


def test_merge_error_depth_mismatch():
    sch = Schedule(_func(TWO_STAGES))
    (_, j1), (i2, _) = _loops(sch, "B"), _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.merge(j1, i2), LoopNestMismatchError, "deep")


def test_merge_error_nested_loops():
    sch = Schedule(_gemm())
    i, j, _ = _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.merge(i, j), LoopsNotAChainError, "contains")


def test_merge_positions_refuse_a_nest_outside_the_sequence():
    # _nests always hands over direct children; should the IR paths disagree, merge refuses
    # with its own error rather than a bare StopIteration
    sch = Schedule(_func(TWO_STAGES))
    (i1, _), (i2, _) = _loops(sch, "B"), _loops(sch, "C")
    first, second = sch.get(i1), sch.get(i2)
    with pytest.raises(LoopsNotAChainError, match="not a direct statement"):
        merge_positions(SeqStmt([first]), [[first], [second]])
    assert merge_positions(SeqStmt([first, second]), [[second], [first]]) == [1, 0]


def test_merge_error_not_siblings():
    sch = Schedule(_func(SPLIT_BODY))
    (_, j1), (_, j2) = _loops(sch, "B"), _loops(sch, "C")
    sch.merge(j1, j2)  # siblings inside loop i: fine
    assert _names(sch, "C") == ["i", "j_m"]
    sch2 = Schedule(_func(TWO_STAGES))
    (_, j1), (i2, j2) = _loops(sch2, "B"), _loops(sch2, "C")
    assert_error_keeps_state(sch2, lambda: sch2.merge(j1, j2, i2), LoopsNotAChainError)


def test_merge_error_statements_in_between():
    between = """    for i in range(9):
        with T.block("D"):
            vi = T.axis.spatial(9, i)
            A[vi, 0] = T.float32(0)
"""
    head, tail = TWO_STAGES.split('    for i, j in T.grid(9, 5):\n        with T.block("C")')
    sch = Schedule(_func(head + between + "    for i, j in T.grid(9, 5):\n"
                         '        with T.block("C")' + tail))  # fmt: skip
    (i1, _), (i2, _) = _loops(sch, "B"), _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.merge(i1, i2), LoopsNotAChainError,
                             "stand between")  # fmt: skip


def test_merge_error_needs_two_loops():
    sch = Schedule(_gemm())
    i = _loops(sch, "C")[0]
    assert_error_keeps_state(sch, lambda: sch.merge(i), ScheduleError, "at least two")
    assert_error_keeps_state(sch, lambda: sch.merge(i, i), RepeatedLoopError)


def test_merge_error_annotation():
    func = _func("""
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
         C: T.Buffer((8,), "float32")):
    for i in T.serial(8, annotations={"pragma_auto_unroll_max_step": 16}):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + T.float32(1)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = A[vi] + T.float32(1)
""")  # fmt: skip
    sch = Schedule(func)
    (i1,), (i2,) = _loops(sch, "B"), _loops(sch, "C")
    assert_error_keeps_state(sch, lambda: sch.merge(i1, i2), LoopAnnotationError)


# =============================================================================================
# add_unit_loop
# =============================================================================================
def test_add_unit_loop_above_a_block_and_a_loop():
    func = workloads.get("gemm", M=3, N=5, K=7)[0]
    sch = Schedule(func)
    u = sch.add_unit_loop(sch.get_block("C"))
    i = _loops(sch, "C")[0]
    v = sch.add_unit_loop(i)
    assert sch.get(u).extent.value == 1 and sch.get(v).body is sch.get(i)
    assert_script_equal(sch.func, """
@T.prim_func
def gemm(A: T.Buffer((3, 7), "float32"), B: T.Buffer((7, 5), "float32"),
         C: T.Buffer((3, 5), "float32")):
    for u, i, j, k, u_1 in T.grid(1, 3, 5, 7, 1):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""")  # fmt: skip
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)
    sch.reorder(u, v)  # the unit loops do not upset the affine checks
    assert_same_numerics(func, sch.func, compiled=False)


def test_add_unit_loop_error_root_block():
    sch = Schedule(_gemm())
    root = sch.get_block("root")
    assert_error_keeps_state(sch, lambda: sch.add_unit_loop(root), ScheduleError, "root block")


# =============================================================================================
# loop_partition
# =============================================================================================
def test_loop_partition_with_a_rest_part():
    func = _func(TWO_STAGES)
    sch = Schedule(func)
    i = _loops(sch, "B")[0]
    parts = sch.loop_partition(i, [2, 3])
    assert [(sch.get(p).min.value, sch.get(p).extent.value) for p in parts] == [
        (0, 2), (2, 3), (5, 4)
    ]  # fmt: skip
    assert [sch.get(p).loop_var.name for p in parts] == ["i0", "i1", "i2"]
    for name in ("B_i0", "B_i1", "B_i2"):
        sch.get_block(name)
    block = sch.get(sch.get_block("B_i1"))
    assert (block.iter_vars[0].dom.min.value, block.iter_vars[0].dom.extent.value) == (2, 3)
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)
    with pytest.raises(HandleError, match="loop_partition"):
        sch.get(i)


def test_loop_partition_structure():
    func = _func("""
@T.prim_func
def main(A: T.Buffer((5,), "float32"), B: T.Buffer((5,), "float32")):
    for i in range(5):
        with T.block("B"):
            vi = T.axis.spatial(5, i)
            B[vi] = A[vi] + T.float32(1)
""")  # fmt: skip
    sch = Schedule(func)
    sch.loop_partition(_loops(sch, "B")[0], [None, 2])
    assert_script_equal(sch.func, """
@T.prim_func
def main(A: T.Buffer((5,), "float32"), B: T.Buffer((5,), "float32")):
    for i0 in range(3):
        with T.block("B_i0"):
            vi = T.axis.spatial((0, 3), i0)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi] + T.float32(1)
    for i1 in range(3, 5):
        with T.block("B_i1"):
            vi = T.axis.spatial((3, 5), i1)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi] + T.float32(1)
""")  # fmt: skip


def test_loop_partition_reduction_loop_drops_the_later_inits():
    func = _gemm(5, 3, 7)
    sch = Schedule(func)
    k = _loops(sch, "C")[2]
    sch.loop_partition(k, [3])
    assert sch.get(sch.get_block("C_k0")).init is not None
    assert sch.get(sch.get_block("C_k1")).init is None
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


@pytest.mark.parametrize(
    "name, sizes, block, loop_index, factors",
    [
        ("conv2d_nchw", dict(N=1, CI=3, H=7, W=5, CO=3), "conv2d_nchw", 2, [1, None]),
        ("conv2d_nchw", dict(N=1, CI=3, H=7, W=5, CO=3), "conv2d_nchw", 4, [1]),
        ("softmax", dict(M=5, N=7), "T_softmax_exp", 0, [2, 2]),
    ],
)
def test_loop_partition_numerics(name, sizes, block, loop_index, factors):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func)
    sch.loop_partition(_loops(sch, block)[loop_index], factors)
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_loop_partition_error_sum_too_large():
    sch = Schedule(_gemm())
    i = _loops(sch, "C")[0]
    assert_error_keeps_state(sch, lambda: sch.loop_partition(i, [4, 6]), FactorError,
                             "add up to 10")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.loop_partition(i, [None, None]), FactorError)


def test_loop_partition_error_symbolic_extent():
    func = _func("""
@T.prim_func
def main(a: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    for i in range(n):
        with T.block("A"):
            vi = T.axis.spatial(n, i)
            A[vi] = T.float32(1)
""")  # fmt: skip
    sch = Schedule(func)
    i = _loops(sch, "A")[0]
    assert_error_keeps_state(sch, lambda: sch.loop_partition(i, [2]), SymbolicExtentError)


def test_loop_partition_error_annotation():
    sch = Schedule(_func(ANNOTATED))
    i = _loops(sch, "B")[0]
    assert_error_keeps_state(sch, lambda: sch.loop_partition(i, [2]), LoopAnnotationError)


def test_loop_partition_error_block_with_buffers():
    func = _func("""
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            tmp = T.alloc_buffer((1,), "float32")
            tmp[0] = A[vi]
            B[vi] = tmp[0]
""")  # fmt: skip
    sch = Schedule(func)
    i = _loops(sch, "B")[0]
    assert_error_keeps_state(sch, lambda: sch.loop_partition(i, [2]), ScheduleError,
                             "allocates or matches buffers")  # fmt: skip


# =============================================================================================
# sequences and analyses
# =============================================================================================
def test_tiling_sequence_on_gemm():
    func = _gemm(17, 23, 11)
    sch = Schedule(func, seed=3)
    i, j, k = _loops(sch, "C")
    i0, i1, i2 = sch.split(i, sch.sample_perfect_tile(i, n=3, max_innermost_factor=4))
    j0, j1 = sch.split(j, [None, 8])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, k1, i2, j1)
    fused = sch.fuse(i0, j0)
    sch.add_unit_loop(fused)
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_affine_analysis():
    sch = Schedule(_gemm(12, 16, 4))
    block = sch.get_block("C")
    i0, i1 = sch.split(_loops(sch, "C")[0], [3, 4])
    state, node = sch.state, sch.get(block)
    assert is_affine_binding(state, node) and is_bijective_binding(state, node)
    assert list(loop_domains(state, node, top=sch.get(i1))) == [
        sch.get(i1).loop_var, *(sch.get(x).loop_var for x in _loops(sch, "C")[2:])
    ]  # fmt: skip
    check_affine_binding(state, node, bijective=True)
    func = _func("""
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(4, i // 2)
            B[vi] = A[vi]
""")  # fmt: skip
    sch = Schedule(func)
    block = sch.get(sch.get_block("B"))
    assert is_affine_binding(sch.state, block)
    assert not is_bijective_binding(sch.state, block)
    with pytest.raises(NonAffineBindingError, match="one-to-one"):
        check_affine_binding(sch.state, block, bijective=True)


def test_iteration_conflict_analysis():
    sch = Schedule(_func(TRANSPOSED_TWO_BLOCKS))
    i, j = (sch.get(x) for x in _loops(sch, "B"))
    first, second = block_accesses(j.body)
    assert (first.block.name_hint, second.block.name_hint) == ("B", "C")
    from schedlab.ir.expr import Range

    domains = {i.loop_var: Range(i.min, i.extent), j.loop_var: Range(j.min, j.extent)}
    assert iteration_conflict(first, second, domains).name == "B"
    sch = Schedule(_func(SAME_LOOP_TWO_BLOCKS))
    i, j = (sch.get(x) for x in _loops(sch, "B"))
    first, second = block_accesses(j.body)
    domains = {i.loop_var: Range(i.min, i.extent), j.loop_var: Range(j.min, j.extent)}
    assert iteration_conflict(first, second, domains) is None
    tiles = block_accesses(i.body)  # relaxed over j: B[i, 0:6] on both sides, one tile per i
    assert iteration_conflict(*tiles, {i.loop_var: Range(i.min, i.extent)}) is None
    assert isinstance(i, For)


RANDOM_WORKLOADS = [
    ("gemm", dict(M=7, N=5, K=6)),
    ("softmax", dict(M=3, N=7)),
    ("layer_norm", dict(M=3, N=5)),
    ("matmul_bias_relu", dict(M=5, N=3, K=4)),
    ("batch_matmul", dict(batch=2, M=3, N=5, K=3)),
]


def _random_step(sch: Schedule, rng) -> None:
    """One random loop primitive on a random block; refusals (ScheduleError) are fine."""
    blocks = [b for b in sch.state.child_blocks(sch.get(sch.get_block("root")))]
    loops = _loops(sch, rng.choice(blocks).name_hint)
    if not loops:
        return
    kind = rng.choice(["split", "split", "reorder", "fuse", "partition", "unit"])
    try:
        if kind == "split":
            extent = sch.get(loop := rng.choice(loops)).extent.value
            sch.split(loop, rng.choice([[None, rng.randint(1, extent + 1)], [2, None, 2]]))
        elif kind == "reorder":
            sch.reorder(*rng.sample(loops, min(len(loops), rng.randint(2, 4))))
        elif kind == "fuse":
            start = rng.randrange(len(loops))
            sch.fuse(*loops[start : start + rng.randint(1, 3)])
        elif kind == "partition" and sch.get(loop := rng.choice(loops)).extent.value > 1:
            sch.loop_partition(loop, [rng.randint(1, sch.get(loop).extent.value - 1)])
        elif kind == "unit":
            sch.add_unit_loop(rng.choice(loops))
    except ScheduleError:
        pass


@pytest.mark.parametrize("seed", range(8))
def test_random_loop_sequences_keep_numerics(seed):
    import random

    rng = random.Random(seed)
    name, sizes = RANDOM_WORKLOADS[seed % len(RANDOM_WORKLOADS)]
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func, seed=seed)
    for _ in range(6):
        _random_step(sch, rng)
    assert_same_numerics(func, sch.func, compiled=seed % 4 == 0)
    assert_trace_roundtrip(sch, func)

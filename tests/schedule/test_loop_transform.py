"""Loop transformations: split, fuse, reorder, merge, add_unit_loop, loop_partition.

Per primitive: the IR after it (expected TVMScript text), the trace round trip, numerics through
the interpreter and compiled C at odd sizes, and one test per precondition error (which must
leave the schedule as it was)."""

import numpy as np
import pytest

import schedlab
from schedlab import workloads
from schedlab.ir.stmt import For
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
    assert "sch.fuse(l1, l2, preserve_unit_iters=True)" in sch.trace.as_python_function()


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

"""Loop kinds and annotations: parallel, vectorize, unroll, bind, annotate, unannotate."""

import math
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedlab
from schedlab import workloads
from schedlab.arith import detect_iter_map
from schedlab.ir import FloatImm, ForKind, IntImm, IterType, Range, Var, assert_structural_equal
from schedlab.schedule import (
    AnnotationError,
    HandleError,
    LoopKindError,
    NonAffineBindingError,
    Schedule,
)
from schedlab.schedule.analysis import loop_kind
from schedlab.schedule.analysis.affine import mixed_radix_binding
from schedlab.schedule.primitives.annotation import (
    AnnotationValueError,
    CrossIterationDependenceError,
    LoopInvariantWriteError,
    NotCompactDataflowError,
    NotStagePipelineError,
    ThreadAxisError,
    WrongIterTypeError,
)
from schedlab.script import from_source
from schedlab.script import tir as T

from .helpers import (
    assert_error_keeps_state,
    assert_same_numerics,
    assert_script_equal,
    assert_trace_roundtrip,
)


def _gemm(m=13, n=7, k=11):
    return workloads.get("gemm", M=m, N=n, K=k)[0]


def _func(text):
    return from_source(text)


# A gemm tiled by hand (as split/reorder/decompose_reduction would leave it): rows in tiles of
# 4 with a predicate for the odd size, the init decomposed, j innermost.
TILED_GEMM = """
@T.prim_func
def gemm(A: T.Buffer((13, 11), "float32"), B: T.Buffer((11, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i0, i1 in T.grid(4, 4):
        for j_init in range(7):
            with T.block("C_init"):
                vi = T.axis.spatial(13, i0 * 4 + i1)
                vj = T.axis.spatial(7, j_init)
                T.where(i0 * 4 + i1 < 13)
                T.reads()
                T.writes(C[vi, vj])
                C[vi, vj] = T.float32(0)
        for k, j in T.grid(11, 7):
            with T.block("C_update"):
                vi = T.axis.spatial(13, i0 * 4 + i1)
                vj = T.axis.spatial(7, j)
                vk = T.axis.reduce(11, k)
                T.where(i0 * 4 + i1 < 13)
                T.reads(C[vi, vj], A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


# -- parallel -----------------------------------------------------------------------------------
def test_parallel_structure_trace_and_numerics():
    func = _gemm()
    sch = Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def gemm(A: T.Buffer((13, 11), "float32"), B: T.Buffer((11, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i in T.parallel(13):
        for j, k in T.grid(7, 11):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    )
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)
    assert sch.trace.as_json()["insts"][-1] == ["Parallel", ["l1"], [], []]


def test_parallel_and_vectorize_compile_to_openmp_and_simd():
    func = _func(TILED_GEMM)
    sch = Schedule(func)
    i0, i1, k, j = sch.get_loops(sch.get_block("C_update"))
    sch.parallel(i0)
    sch.vectorize(j)
    sch.vectorize(sch.get_loops(sch.get_block("C_init"))[-1])
    kernel = schedlab.build(sch.func, target="cpu")
    assert "#pragma omp parallel for" in kernel.source
    assert "omp simd" in kernel.source or "vector_size" in kernel.source
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_parallel_keeps_handles_and_marks_the_kind():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.parallel(j)
    assert sch.get(j).kind == ForKind.PARALLEL
    assert sch.get(i).kind == ForKind.SERIAL
    assert sch.get(block).name_hint == "C"
    sch.undo()
    assert sch.get(j).kind == ForKind.SERIAL


WORKLOADS = [
    ("gemm", {"M": 13, "N": 7, "K": 11}),
    ("batch_matmul", {"batch": 3, "M": 5, "N": 7, "K": 9}),
    ("softmax", {"M": 5, "N": 9}),
    ("layer_norm", {"M": 5, "N": 9}),
    ("conv2d_nchw", {"N": 1, "CI": 3, "H": 7, "W": 9, "CO": 5, "kernel": 3}),
    ("max_pool2d_nchw", {"N": 1, "C": 3, "H": 9, "W": 7}),
    ("matmul_bias_relu", {"M": 7, "N": 5, "K": 3}),
]


def _spatial_loops(sch, block):
    """The block's loops bound only to spatial iter vars, outermost first."""
    realize = sch.state.realize_of(sch.get(block))
    loops = sch.get_loops(block)
    result = []
    for handle in loops:
        var = sch.get(handle).loop_var
        kinds = {
            iv.iter_type
            for iv, value in zip(realize.block.iter_vars, realize.iter_values)
            if any(v is var for v in schedlab.ir.collect_vars(value))
        }
        if kinds == {IterType.SPATIAL}:
            result.append(handle)
    return result


@pytest.mark.parametrize("name,sizes", WORKLOADS, ids=[w[0] for w in WORKLOADS])
def test_parallel_outer_and_vectorize_inner_spatial_loops(name, sizes):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func)
    for block in sch.get_child_blocks(sch.get_block("root")):
        loops = _spatial_loops(sch, block)
        if loops:
            sch.parallel(loops[0])
        if len(loops) > 1:
            sch.vectorize(loops[-1])
    kinds = [sch.get(x).kind for x in sch.get_loops(sch.get_child_blocks(sch.get_block("root"))[0])]
    assert ForKind.PARALLEL in kinds
    assert_same_numerics(func, sch.func, rtol=1e-4, atol=1e-5)
    assert_trace_roundtrip(sch, func)


def test_parallel_of_a_reduction_loop_is_refused():
    sch = Schedule(_gemm())
    i, j, k = sch.get_loops(sch.get_block("C"))
    err = assert_error_keeps_state(sch, lambda: sch.parallel(k), WrongIterTypeError, "reduce")
    assert isinstance(err, LoopKindError)
    assert "^^^" in str(err)


def test_vectorize_of_a_reduction_loop_is_refused():
    sch = Schedule(_gemm())
    i, j, k = sch.get_loops(sch.get_block("C"))
    assert_error_keeps_state(sch, lambda: sch.vectorize(k), WrongIterTypeError, "vectorize")


NON_AFFINE = """
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(16, i * i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
"""


def test_parallel_needs_affine_bindings():
    sch = Schedule(_func(NON_AFFINE))
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(sch, lambda: sch.parallel(i), NonAffineBindingError, "affine")


SHIFTED_SELF_READ = """
@T.prim_func
def f(B: T.Buffer((17,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            T.reads(B[vi + 1])
            T.writes(B[vi])
            B[vi] = B[vi + 1] * T.float32(2)
"""


def test_parallel_needs_compact_dataflow():
    sch = Schedule(_func(SHIFTED_SELF_READ))
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(
        sch, lambda: sch.parallel(i), NotCompactDataflowError, "other elements"
    )


REDUCE_INDEXES_OUTPUT = """
@T.prim_func
def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(4, 8):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, vk])
            T.writes(B[vk])
            with T.init():
                B[vk] = T.float32(0)
            B[vk] = B[vk] + A[vi, vk]
"""


def test_parallel_refuses_a_reduction_indexing_its_output_by_reduce_vars():
    sch = Schedule(_func(REDUCE_INDEXES_OUTPUT))
    i, k = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(sch, lambda: sch.parallel(i), NotCompactDataflowError, "vk")


WRITE_AFTER_READ = """
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
        with T.block("A"):
            vi = T.axis.spatial(16, i)
            T.reads(B[vi])
            T.writes(A[vi])
            A[vi] = B[vi] + T.float32(1)
"""


def test_parallel_needs_a_stage_pipeline_no_write_after_read():
    sch = Schedule(_func(WRITE_AFTER_READ))
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(sch, lambda: sch.parallel(i), NotStagePipelineError, "stage pipeline")


CROSS_ITERATION_READ = """
@T.prim_func
def f(A: T.Buffer((16,), "float32"), C: T.Buffer((15,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(15):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
        with T.block("C"):
            vi = T.axis.spatial(15, i)
            T.reads(B[vi + 1])
            T.writes(C[vi])
            C[vi] = B[vi + 1]
"""


def test_parallel_needs_what_is_read_produced_in_the_same_iteration():
    sch = Schedule(_func(CROSS_ITERATION_READ))
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(
        sch, lambda: sch.parallel(i), CrossIterationDependenceError, "same iteration"
    )


PRODUCER_UNDER_CONSUMER_LOOP = """
@T.prim_func
def f(A: T.Buffer((13, 9), "float32"), C: T.Buffer((13, 9), "float32")):
    B = T.alloc_buffer((13, 9), "float32")
    for i0, i1 in T.grid(4, 4):
        for j in range(9):
            with T.block("B"):
                vi = T.axis.spatial(13, i0 * 4 + i1)
                vj = T.axis.spatial(9, j)
                T.where(i0 * 4 + i1 < 13)
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for j in range(9):
            with T.block("C"):
                vi = T.axis.spatial(13, i0 * 4 + i1)
                vj = T.axis.spatial(9, j)
                T.where(i0 * 4 + i1 < 13)
                T.reads(B[vi, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = B[vi, vj] + T.float32(1)
"""


def test_parallel_over_a_producer_consumer_pair_in_one_iteration():
    func = _func(PRODUCER_UNDER_CONSUMER_LOOP)
    sch = Schedule(func)
    i0, i1, j = sch.get_loops(sch.get_block("C"))
    sch.parallel(i0)
    sch.vectorize(j)
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


LOOP_INVARIANT_WRITE = """
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
      C: T.Buffer((4, 8), "float32")):
    for i in range(4):
        for j in range(8):
            with T.block("B"):
                vj = T.axis.spatial(8, j)
                T.reads(A[vj])
                T.writes(B[vj])
                B[vj] = A[vj]
        for j in range(8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(B[vj])
                T.writes(C[vi, vj])
                C[vi, vj] = B[vj]
"""


def test_parallel_refuses_shared_writes_that_do_not_depend_on_the_loop():
    sch = Schedule(_func(LOOP_INVARIANT_WRITE))
    i, j = sch.get_loops(sch.get_block("C"))
    assert_error_keeps_state(
        sch, lambda: sch.parallel(i), LoopInvariantWriteError, "same elements of B"
    )


def test_parallel_allows_loop_invariant_writes_to_buffers_private_to_the_loop():
    text = LOOP_INVARIANT_WRITE.replace('B: T.Buffer((8,), "float32"),\n      C', "C").replace(
        "    for i in range(4):", '    B = T.alloc_buffer((8,), "float32")\n    for i in range(4):'
    )
    func = _func(text)
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    assert_same_numerics(func, sch.func)


def test_parallel_needs_a_loop_handle():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    assert_error_keeps_state(sch, lambda: sch.parallel(block), schedlab.ScheduleError, "loop")


# -- vectorize / unroll -------------------------------------------------------------------------
def test_vectorize_structure_trace_and_numerics():
    func = _gemm()
    sch = Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.vectorize(j)
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def gemm(A: T.Buffer((13, 11), "float32"), B: T.Buffer((11, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i in range(13):
        for j in T.vectorized(7):
            for k in range(11):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    )
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_unroll_has_no_precondition_even_on_a_reduction_loop():
    func = _gemm()
    sch = Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.unroll(k)
    sch.unroll(j)
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def gemm(A: T.Buffer((13, 11), "float32"), B: T.Buffer((11, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i in range(13):
        for j in T.unroll(7):
            for k in T.unroll(11):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    )
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_unroll_replaces_a_thread_binding():
    sch = Schedule(_gemm())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.unroll(i)
    assert sch.get(i).kind == ForKind.UNROLLED and sch.get(i).thread_tag is None


def test_unroll_needs_a_loop_handle():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    assert_error_keeps_state(sch, lambda: sch.unroll(block), schedlab.ScheduleError, "loop")


# -- bind ---------------------------------------------------------------------------------------
def test_bind_structure_trace_and_numerics():
    func = _gemm()
    sch = Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def gemm(A: T.Buffer((13, 11), "float32"), B: T.Buffer((11, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i in T.thread_binding(13, thread="blockIdx.x"):
        for j in T.thread_binding(7, thread="threadIdx.x"):
            for k in range(11):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    )
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func, compiled=False)  # GPU bindings: interpreter only
    assert sch.trace.as_json()["insts"][-1] == ["Bind", ["l2"], ["threadIdx.x"], []]


def test_bind_threadidx_may_cover_a_reduction():
    func = workloads.get("reduce_sum", M=5, N=9)[0]
    sch = Schedule(func)
    i, k = sch.get_loops(sch.get_block("A_red"))
    sch.bind(i, "blockIdx.x")
    sch.bind(k, "threadIdx.x")
    assert sch.get(k).thread_tag == "threadIdx.x"
    assert_same_numerics(func, sch.func, compiled=False)
    assert_trace_roundtrip(sch, func)


@pytest.mark.parametrize("tag", ["blockIdx.y", "vthread.x"])
def test_bind_other_axes_cannot_cover_a_reduction(tag):
    sch = Schedule(_gemm())
    i, j, k = sch.get_loops(sch.get_block("C"))
    assert_error_keeps_state(sch, lambda: sch.bind(k, tag), WrongIterTypeError, tag)


def test_bind_rejects_an_unknown_thread_axis():
    sch = Schedule(_gemm())
    i, j, k = sch.get_loops(sch.get_block("C"))
    err = assert_error_keeps_state(
        sch, lambda: sch.bind(i, "threadIdx.w"), ThreadAxisError, "threadIdx.w"
    )
    assert isinstance(err, AnnotationError)


def test_bind_needs_affine_bindings():
    sch = Schedule(_func(NON_AFFINE))
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(
        sch, lambda: sch.bind(i, "threadIdx.x"), NonAffineBindingError, "affine"
    )


# -- annotate / unannotate ----------------------------------------------------------------------
def test_annotate_loop_and_block_structure_and_trace():
    func = _gemm()
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    sch.annotate(block, "meta_schedule.tiling_structure", "SSRSRS")
    sch.annotate(block, "schedlab.hint", T.int32(4))
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def gemm(A: T.Buffer((13, 11), "float32"), B: T.Buffer((11, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i in T.serial(13, annotations={"pragma_auto_unroll_max_step": 16}):
        for j, k in T.grid(7, 11):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                T.block_attr({"meta_schedule.tiling_structure": "SSRSRS",
                              "schedlab.hint": T.int32(4)})
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    )
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)
    insts = sch.trace.as_json()["insts"]
    assert insts[-2] == ["Annotate", ["b0", '"SSRSRS"'], ["meta_schedule.tiling_structure"], []]


VALUES = [
    True,
    -3,
    2.5,
    "b0",
    "None",
    T.float32(0.5),
    [1, "x", [2.0, False]],
    {"a": [1, 2], "b": {"c": "d"}, "e": T.int64(7)},
    (1, 2),
]


@pytest.mark.parametrize("value", VALUES, ids=[repr(v) for v in VALUES])
def test_annotation_values_survive_the_trace_round_trip(value):
    func = _gemm(3, 3, 3)
    sch = Schedule(func)
    block = sch.get_block("C")
    sch.annotate(block, "key", value)
    stored = sch.get(block).annotations["key"]
    assert _same_value(stored, list(value) if isinstance(value, tuple) else value)
    assert_trace_roundtrip(sch, func)


def _same_value(a, b) -> bool:
    if isinstance(b, (IntImm, FloatImm)):
        return type(a) is type(b) and a.dtype == b.dtype and a.value == b.value
    if isinstance(b, list):
        return isinstance(a, list) and len(a) == len(b) and all(map(_same_value, a, b))
    if isinstance(b, dict):
        return (
            isinstance(a, dict) and a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in b)
        )
    return type(a) is type(b) and a == b


def test_annotate_overwrites_and_takes_a_sampled_value():
    func = _gemm()
    sch = Schedule(func, seed=5)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    step = sch.sample_categorical([0, 16, 64], [0.0, 0.0, 1.0])
    sch.annotate(i, "pragma_auto_unroll_max_step", step)
    assert sch.get(i).annotations == {"pragma_auto_unroll_max_step": 64}
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


BAD_VALUES = [None, object(), math.nan, {1: 2}, [1, None], {"__type__": "IntImm"}]


@pytest.mark.parametrize("value", BAD_VALUES, ids=[repr(v)[:20] for v in BAD_VALUES])
def test_annotate_rejects_values_a_trace_cannot_carry(value):
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    assert_error_keeps_state(
        sch, lambda: sch.annotate(block, "key", value), AnnotationValueError, "allowed values"
    )


@pytest.mark.parametrize("key", ["", 3])
def test_annotate_needs_a_string_key(key):
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    assert_error_keeps_state(
        sch, lambda: sch.annotate(block, key, 1), AnnotationValueError, "non-empty str"
    )


def test_unannotate_structure_trace_and_numerics():
    func = _gemm()
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.annotate(i, "a", 1)
    sch.annotate(i, "b", "two")
    sch.annotate(block, "c", [3])
    sch.unannotate(i, "a")
    sch.unannotate(block, "c")
    assert sch.get(i).annotations == {"b": "two"}
    assert sch.get(block).annotations == {}
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def gemm(A: T.Buffer((13, 11), "float32"), B: T.Buffer((11, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i in T.serial(13, annotations={"b": "two"}):
        for j, k in T.grid(7, 11):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    )
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)
    assert sch.trace.as_json()["insts"][-1] == ["Unannotate", ["b0"], ["c"], []]


def test_unannotate_of_a_missing_key_names_the_existing_ones():
    sch = Schedule(_gemm())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.annotate(i, "a", 1)
    assert_error_keeps_state(sch, lambda: sch.unannotate(i, "b"), AnnotationError, "'a'")


def test_annotate_needs_a_block_or_loop():
    sch = Schedule(_gemm(), seed=1)
    value = sch.sample_categorical([1], [1.0])
    assert_error_keeps_state(
        sch, lambda: sch.annotate(value, "k", 1), schedlab.ScheduleError, "block or loop"
    )


def test_handles_of_annotated_nodes_keep_working():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.annotate(block, "x", 1)
    sch.parallel(i)
    assert sch.get(block).annotations == {"x": 1}
    assert [sch.get(x).loop_var.name for x in sch.get_loops(block)] == ["i", "j", "k"]
    with pytest.raises(HandleError):
        Schedule(_gemm()).get(block)


def _needs(*methods):
    missing = [m for m in methods if not hasattr(Schedule, m)]
    return pytest.mark.skipif(bool(missing), reason=f"primitives not available: {missing}")


@_needs("split", "reorder", "fuse", "cache_write", "reverse_compute_at", "decompose_reduction")
def test_register_tiled_gemm_runs_parallel_and_simd():
    """The benchmark's shape of schedule at odd sizes: tiles, a local accumulator written back
    under the tile loops, the init decomposed, fused parallel tiles, SIMD inner loops."""
    func = _gemm(67, 45, 29)
    sch = Schedule(func)
    block = sch.get_block("C")
    sch.cache_write(block, 0, "local")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, k1, i1, j1)
    blocks = sch.get_child_blocks(sch.get_block("root"))
    write_back = next(b for b in blocks if sch.get(b).init is None)
    sch.reverse_compute_at(write_back, j0)
    init = sch.decompose_reduction(block, k0)
    tiles = sch.fuse(i0, j0)
    sch.parallel(tiles)
    sch.vectorize(j1)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.unroll(i1)
    sch.vectorize(sch.get_loops(write_back)[-1])
    source = schedlab.build(sch.func, target="cpu").source
    assert source.count("#pragma omp parallel for") == 1
    assert "omp simd" in source
    assert_same_numerics(func, sch.func, rtol=1e-4)
    assert_trace_roundtrip(sch, func)


@_needs("fuse")
def test_unroll_of_a_fused_reduction_compiles():
    # unrolling leaves sequences whose other statements are no-ops (SeqStmt.flatten regression)
    func = workloads.get("reduce_sum", M=3, N=9)[0]
    sch = Schedule(func)
    i, k = sch.get_loops(sch.get_block("A_red"))
    fused = sch.fuse(i, k)
    sch.unroll(fused)
    sch.annotate(fused, "pragma_auto_unroll_max_step", 4)
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_parallel_and_vectorize_allow_a_loop_of_one_iteration():
    # A loop of extent 1 the block does not use (split with preserve_unit_iters=False) has no
    # other iteration to race with: the loop-invariant-write condition does not apply.
    func = _gemm()
    sch = Schedule(func, debug=True)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [1, None], preserve_unit_iters=False)
    sch.parallel(i0)
    assert sch.get(i0).kind == ForKind.PARALLEL
    sch.vectorize(i0)
    assert sch.get(i0).kind == ForKind.VECTORIZED
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_parallel_of_one_iteration_writing_a_shared_buffer():
    text = LOOP_INVARIANT_WRITE.replace("for i in range(4)", "for i in range(1)").replace(
        "(4, 8)", "(1, 8)"
    )
    func = _func(text)
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
      C: T.Buffer((1, 8), "float32")):
    for i in T.parallel(1):
        for j in range(8):
            with T.block("B"):
                vj = T.axis.spatial(8, j)
                T.reads(A[vj])
                T.writes(B[vj])
                B[vj] = A[vj]
        for j in range(8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(B[vj])
                T.writes(C[vi, vj])
                C[vi, vj] = B[vj]
""",
    )
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


# -- the fast paths of the legality checks ------------------------------------------------------
# parallel/vectorize/reorder/decompose_reduction first try structural tests (mixed-radix
# bindings, exactly written boxes) before the general analyses; they may only ever say "yes"
# where the general analysis would too.
def _loops(extents):
    return [SimpleNamespace(loop_var=Var(f"l{n}", "int32"), min=IntImm("int32", 0),
                            extent=IntImm("int32", e)) for n, e in enumerate(extents)]  # fmt: skip


def _radix_value(draw, loops):
    """A mixed-radix number of digits (whole loops or splits of them), or a random sum."""
    digits = []
    for loop in draw(st.lists(st.sampled_from(loops), max_size=3)):
        c = draw(st.sampled_from([1, 2, 3, 4]))
        form = draw(st.sampled_from(["whole", "div", "mod"]))
        var = loop.loop_var
        digits.append((var if form == "whole" else var // c if form == "div" else var % c,
                       loop.extent.value if form == "whole" else c))  # fmt: skip
    value, scale = IntImm("int32", draw(st.integers(0, 2))), 1
    for digit, extent in digits:
        value = value + digit * (scale if draw(st.booleans()) else draw(st.integers(1, 8)))
        scale *= extent
    return value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mixed_radix_fast_path_only_accepts_affine_bindings(data):
    loops = _loops(data.draw(st.lists(st.sampled_from([1, 2, 3, 4, 6, 8]), min_size=1,
                                      max_size=4)))  # fmt: skip
    values = [_radix_value(data.draw, loops) for _ in range(data.draw(st.integers(1, 3)))]
    realize = SimpleNamespace(iter_values=tuple(values), predicate=IntImm("bool", 1))
    domains = {x.loop_var: Range(x.min, x.extent) for x in loops}
    for level in ("surjective", "bijective"):
        if mixed_radix_binding(realize, loops, level == "bijective"):
            assert detect_iter_map(values, domains, True, level), (level, values)


def test_mixed_radix_fast_path_recognises_what_split_fuse_and_reorder_leave():
    loops = _loops([4, 2, 4, 12, 5])
    i0, i1, i2, f, k = (x.loop_var for x in loops)
    cases = [  # values, recognised as surjective, as bijective
        ((i0 * 8 + i1 * 4 + i2, f, k), True, True),
        (((i0 * 2 + i1) * 4 + i2, f // 3, f % 3, k), True, True),
        ((f // 3 * 8 + i1 * 4 + i2, f % 3 * 4 + i0, k), True, True),
        ((i0 * 8 + i1 * 4 + i2, k), True, False),  # f unused: not bijective
        ((i0 * 8 + i1 * 4 + i2, f // 3, k), False, False),  # part of f: left to the detector
        ((i0 + i2, f, k, i1), False, False),  # overlapping digits: not affine
        ((i0 * 8 + i2, f, k, i1), False, False),  # coefficients are not a mixed radix
    ]
    for values, surjective, bijective in cases:
        realize = SimpleNamespace(iter_values=values, predicate=IntImm("bool", 1))
        assert mixed_radix_binding(realize, loops, False) == surjective, values
        assert mixed_radix_binding(realize, loops, True) == bijective, values
    predicated = SimpleNamespace(iter_values=(i0, f, k, i1 * 4 + i2), predicate=i0 < 3)
    assert not mixed_radix_binding(predicated, loops, False)
    assert mixed_radix_binding(predicated, loops, True, with_predicate=False)


def _tiled_reduction_schedule(size=16):
    func = workloads.get("matmul_bias_relu", M=size, N=size, K=size)[0]
    sch = Schedule(func, debug=True)
    block = sch.get_block("matmul")
    i, j, k = sch.get_loops(block)
    i0, i1, i2 = sch.split(i, [None, 2, 4])
    j0, j1, j2 = sch.split(j, [None, 2, 4])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, i1, j1, k0, i2, k1, j2)
    write_back = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(write_back, j1)
    sch.reverse_compute_inline(sch.get_block("T_relu"))
    sch.decompose_reduction(block, k0)
    return func, sch, sch.fuse(i0, j0), j2


def test_the_exact_box_cover_agrees_with_the_general_cover_check(monkeypatch):
    func, sch, fused, j2 = _tiled_reduction_schedule()
    decided = []
    fast = loop_kind._one_exact_producer_covers
    monkeypatch.setattr(loop_kind, "_one_exact_producer_covers",
                        lambda *args: decided.append(fast(*args)) or decided[-1])  # fmt: skip
    sch.parallel(fused)
    sch.vectorize(j2)
    assert decided and all(decided)  # the init/update/write-back chain is shown by the fast path
    monkeypatch.setattr(loop_kind, "_one_exact_producer_covers", lambda *args: False)
    _, general, fused, j2 = _tiled_reduction_schedule()
    general.parallel(fused)
    general.vectorize(j2)
    assert_structural_equal(general.mod, sch.mod)
    assert_same_numerics(func, sch.func)


STRIDED_AND_DIAGONAL = """
@T.prim_func
def f(A: T.Buffer((16, 16), "float32"), C: T.Buffer((4,), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for o, i in T.grid(4, 4):
        with T.block("strided"):
            vo, vi = T.axis.remap("SS", [o, i])
            T.reads(A[vo, vi])
            T.writes(B[vo * 4, vi * 2])
            B[vo * 4, vi * 2] = A[vo, vi]
        with T.block("diagonal"):
            vo, vi = T.axis.remap("SS", [o, i])
            T.reads(A[vo, vi])
            T.writes(B[vo * 4 + vi, vo * 4 + vi])
            B[vo * 4 + vi, vo * 4 + vi] = A[vo, vi]
        with T.block("row"):
            vo, vi = T.axis.remap("SS", [o, i])
            T.reads(A[vo, vi])
            T.writes(B[vo * 4 + vi, 0])
            B[vo * 4 + vi, 0] = A[vo, vi]
"""


def test_the_exact_box_needs_a_write_that_fills_its_box():
    sch = Schedule(_func(STRIDED_AND_DIAGONAL))
    o, i = sch.get_loops(sch.get_block("row"))
    state, loop = sch.state, sch.get(o)
    boxes = {}
    for name in ("strided", "diagonal", "row"):
        block = sch.get(sch.get_block(name))
        write = block.writes[0]
        boxes[name] = loop_kind._affine_iteration_box(state, block, write, loop, exact=True)
        assert loop_kind._affine_iteration_box(state, block, write, loop) is not None
    assert boxes["strided"] is None  # every other column only
    assert boxes["diagonal"] is None  # 4 of the 16 elements of its box
    ((row_start, rows), (col_start, cols)) = boxes["row"]
    assert (rows, cols) == (4, 1) and str(row_start) == "o * 4"

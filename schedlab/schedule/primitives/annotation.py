"""Loop kinds and annotations: `parallel`, `vectorize`, `unroll`, `bind`, `annotate`,
`unannotate` (TVM's instructions Parallel, Vectorize, Unroll, Bind, Annotate, Unannotate).

They change how a loop runs, or attach metadata (pragmas, `meta_schedule.*` hints) to a loop or
block; the loop nest itself stays the same. The lowering (schedlab.transform) and the code
generators give the kinds their meaning: OpenMP `parallel for`, `omp simd` / vector code,
unrolled straight-line code, GPU thread indices.
"""

from __future__ import annotations

import math

from schedlab.ir.expr import FloatImm, IntImm
from schedlab.ir.stmt import THREAD_TAGS, Block, For, ForKind

from ..analysis.loop_kind import (
    CrossIterationDependenceError,
    LoopInvariantWriteError,
    NotCompactDataflowError,
    WrongIterTypeError,
    check_parallelizable,
)
from ..analysis.stage_pipeline import NotStagePipelineError
from ..errors import AnnotationError, ScheduleError
from ..instruction import PrimitiveContext, primitive

__all__ = [
    "parallel", "vectorize", "unroll", "bind", "annotate", "unannotate", "ThreadAxisError",
    "AnnotationValueError", "WrongIterTypeError", "NotCompactDataflowError",
    "NotStagePipelineError", "CrossIterationDependenceError", "LoopInvariantWriteError",
]  # fmt: skip


class ThreadAxisError(AnnotationError):
    """The thread axis given to `bind` is not a known thread tag."""


class AnnotationValueError(AnnotationError):
    """An annotation key or value that cannot be recorded (traces must carry it as data)."""


@primitive("Parallel", inputs=("loop",))
def parallel(ctx: PrimitiveContext, loop: For):
    """Run the iterations of `loop` in parallel (OpenMP threads on CPU).

    Preconditions: every block under the loop has an affine binding; the loop variable is used
    only in bindings of spatial iter vars (a reduction loop cannot be parallel); the blocks
    under the loop form a stage pipeline (no block overwrites what another reads, and what a
    block reads from another was produced in the same iteration); a block that does not depend
    on the loop writes only buffers private to it.

    Parameters: `loop` -- the loop to parallelize.

    >>> sch = Schedule(workloads.get("gemm", M=16, N=16, K=16)[0])
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> print(sch.func.script(show_header=False))  # before  # doctest: +ELLIPSIS
    @T.prim_func
    def gemm(...):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i, j, k in T.grid(16, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    >>> sch.parallel(i)
    >>> print(sch.func.script(show_header=False))  # after  # doctest: +ELLIPSIS
    @T.prim_func
    def gemm(...):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i in T.parallel(16):
            for j, k in T.grid(16, 16):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    """
    return _set_kind(ctx, loop, ForKind.PARALLEL, "parallel")


@primitive("Vectorize", inputs=("loop",))
def vectorize(ctx: PrimitiveContext, loop: For):
    """Run the iterations of `loop` as SIMD lanes (vector code, or `omp simd` on CPU).

    Preconditions: the same as `parallel` (affine bindings, the loop variable only in bindings
    of spatial iter vars, a stage pipeline under the loop, no loop-invariant shared writes).

    Parameters: `loop` -- the loop to vectorize (usually an innermost loop of small extent).

    >>> sch = Schedule(workloads.get("gemm", M=4, N=4, K=4)[0])
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> sch.vectorize(j)
    >>> print(sch.func.script(show_header=False))  # doctest: +ELLIPSIS
    @T.prim_func
    def gemm(...):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i in range(4):
            for j in T.vectorized(4):
                for k in range(4):
                    with T.block("C"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        T.reads(A[vi, vk], B[vk, vj])
                        T.writes(C[vi, vj])
                        with T.init():
                            C[vi, vj] = T.float32(0)
                        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    """
    return _set_kind(ctx, loop, ForKind.VECTORIZED, "vectorize")


@primitive("Unroll", inputs=("loop",))
def unroll(ctx: PrimitiveContext, loop: For):
    """Unroll `loop`: the lowering repeats its body once per iteration.

    Preconditions: none (any loop can be unrolled; its extent should be a small constant).

    Parameters: `loop` -- the loop to unroll.

    >>> sch = Schedule(workloads.get("gemm", M=4, N=4, K=4)[0])
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> sch.unroll(k)
    >>> print(sch.func.script(show_header=False))  # doctest: +ELLIPSIS
    @T.prim_func
    def gemm(...):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i, j in T.grid(4, 4):
            for k in T.unroll(4):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    """
    _expect_loop(loop, "unroll")
    new = loop.replace(kind=ForKind.UNROLLED, thread_tag=None)
    return ctx.state.replace(loop, new), None


@primitive("Bind", inputs=("loop",))
def bind(ctx: PrimitiveContext, loop: For, thread_axis: str):
    """Bind `loop` to a GPU thread axis: its iterations run on the blocks or threads of that
    axis (`for i in T.thread_binding(n, thread="threadIdx.x")`).

    Preconditions: `thread_axis` is one of blockIdx.x/y/z, threadIdx.x/y/z, vthread(.x/y/z);
    every block under the loop has an affine binding; the loop variable is used only in
    bindings of spatial iter vars, except that a `threadIdx.*` loop may also cover reduce iter
    vars (a cross-thread reduction); the blocks under the loop form a stage pipeline.

    Parameters: `loop` -- the loop to bind; `thread_axis` -- the thread tag.

    >>> sch = Schedule(workloads.get("gemm", M=4, N=4, K=4)[0])
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> sch.bind(i, "blockIdx.x")
    >>> sch.bind(j, "threadIdx.x")
    >>> print(sch.func.script(show_header=False))  # doctest: +ELLIPSIS
    @T.prim_func
    def gemm(...):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i in T.thread_binding(4, thread="blockIdx.x"):
            for j in T.thread_binding(4, thread="threadIdx.x"):
                for k in range(4):
                    with T.block("C"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        T.reads(A[vi, vk], B[vk, vj])
                        T.writes(C[vi, vj])
                        with T.init():
                            C[vi, vj] = T.float32(0)
                        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    """
    _expect_loop(loop, "bind")
    if thread_axis not in THREAD_TAGS:
        raise ThreadAxisError(
            f"bind: thread_axis must be one of {', '.join(THREAD_TAGS)}, got {thread_axis!r}",
            [loop],
        )
    check_parallelizable(ctx.state, loop, ForKind.THREAD_BINDING, thread_axis)
    new = loop.replace(kind=ForKind.THREAD_BINDING, thread_tag=thread_axis)
    return ctx.state.replace(loop, new), None


def _set_kind(ctx: PrimitiveContext, loop: For, kind: ForKind, name: str):
    _expect_loop(loop, name)
    check_parallelizable(ctx.state, loop, kind)
    new = loop.replace(kind=kind, thread_tag=None)
    return ctx.state.replace(loop, new), None


def _expect_loop(loop, name: str) -> None:
    if not isinstance(loop, For):
        raise ScheduleError(f"{name}: expected a loop handle, got {type(loop).__name__}")


@primitive("Annotate", inputs=("block_or_loop", "ann_val"))
def annotate(ctx: PrimitiveContext, block_or_loop: Block | For, ann_key: str, ann_val):
    """Set the annotation `ann_key` of a block or loop to `ann_val` (replacing an old value).

    Annotations are hints for later passes and tools: `pragma_auto_unroll_max_step` on a loop,
    `meta_schedule.*` on blocks, software pipelining, ... They do not change what is computed.

    Preconditions: `ann_key` is a non-empty string; `ann_val` is a str, int, float, bool,
    constant expression (T.int32(4), T.float32(0.5)), or a list/dict of those (dict keys are
    strings) -- plain data, so that traces carry it through JSON and Python.

    Parameters: `block_or_loop` -- what to annotate; `ann_key` -- the annotation name;
    `ann_val` -- its value (an ExprRV from a sampling instruction gives its integer).

    >>> sch = Schedule(workloads.get("gemm", M=4, N=4, K=4)[0])
    >>> block = sch.get_block("C")
    >>> i, j, k = sch.get_loops(block)
    >>> sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    >>> sch.annotate(block, "meta_schedule.tiling_structure", "SSRSRS")
    >>> print(sch.func.script(show_header=False))  # doctest: +ELLIPSIS
    @T.prim_func
    def gemm(...):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i in T.serial(4, annotations={"pragma_auto_unroll_max_step": 16}):
            for j, k in T.grid(4, 4):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    T.block_attr({"meta_schedule.tiling_structure": "SSRSRS"})
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    """
    _expect_annotatable(block_or_loop, "annotate")
    _check_key(ann_key, block_or_loop)
    value = _checked_value(ann_val, block_or_loop, ann_key)
    annotations = {**block_or_loop.annotations, ann_key: value}
    new = block_or_loop.replace(annotations=annotations)
    return ctx.state.replace(block_or_loop, new), None


@primitive("Unannotate", inputs=("block_or_loop",))
def unannotate(ctx: PrimitiveContext, block_or_loop: Block | For, ann_key: str):
    """Remove the annotation `ann_key` from a block or loop.

    Preconditions: the block or loop has an annotation named `ann_key`.

    Parameters: `block_or_loop` -- what to change; `ann_key` -- the annotation to remove.

    >>> sch = Schedule(workloads.get("gemm", M=4, N=4, K=4)[0])
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    >>> sch.get(i).annotations
    {'pragma_auto_unroll_max_step': 16}
    >>> sch.unannotate(i, "pragma_auto_unroll_max_step")
    >>> sch.get(i).annotations
    {}
    """
    _expect_annotatable(block_or_loop, "unannotate")
    _check_key(ann_key, block_or_loop)
    if ann_key not in block_or_loop.annotations:
        known = ", ".join(repr(k) for k in block_or_loop.annotations) or "none"
        raise AnnotationError(
            f"unannotate: {_describe(block_or_loop)} has no annotation {ann_key!r} "
            f"(its annotations: {known})",
            [block_or_loop],
        )
    annotations = {k: v for k, v in block_or_loop.annotations.items() if k != ann_key}
    new = block_or_loop.replace(annotations=annotations)
    return ctx.state.replace(block_or_loop, new), None


def _expect_annotatable(node, name: str) -> None:
    if not isinstance(node, (Block, For)):
        raise ScheduleError(f"{name}: expected a block or loop handle, got {type(node).__name__}")


def _describe(node) -> str:
    if isinstance(node, Block):
        return f"block {node.name_hint!r}"
    return f"loop {node.loop_var.name}"


def _check_key(key, node) -> None:
    if not isinstance(key, str) or not key:
        raise AnnotationValueError(
            f"the annotation key must be a non-empty str, got {key!r}", [node]
        )


def _checked_value(value, node, key: str):
    """The value as stored (tuples become lists), or an
    AnnotationValueError naming what cannot be recorded."""
    problem = _value_problem(value)
    if problem is None:
        return _normalized(value)
    raise AnnotationValueError(
        f"annotation {key!r} of {_describe(node)}: {problem}; allowed values are str, int, "
        "float, bool, constant expressions (T.int32(4)) and lists/dicts of those",
        [node],
    )


def _value_problem(value) -> str | None:
    if isinstance(value, (bool, int, str, IntImm)):
        return None
    if isinstance(value, (float, FloatImm)):
        number = value if isinstance(value, float) else value.value
        return None if math.isfinite(number) else f"{value!r} is not a finite number"
    if isinstance(value, (list, tuple)):
        return next((p for p in map(_value_problem, value) if p), None)
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str) or k == "__type__"]
        if bad:
            return f"dict keys must be strings (other than '__type__'), got {bad[0]!r}"
        return next((p for p in map(_value_problem, value.values()) if p), None)
    return f"a {type(value).__name__} ({value!r}) cannot be recorded in a trace"


def _normalized(value):
    if isinstance(value, (list, tuple)):
        return [_normalized(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items()}
    return value

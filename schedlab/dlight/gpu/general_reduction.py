"""`GeneralReduction`: a chain of reductions and elementwise stages over the same rows, fused
into one kernel with one thread block per row (TVM's dlight gpu.GeneralReduction; RMSNorm
is its two-stage case).

softmax is four stages over each row i: max_j, exp(x - max), sum_j, exp / sum. Scheduled one
stage at a time (Reduction, Elementwise) that is four kernels and three round trips through
global memory. Here the last stage's rows are bound to blockIdx.x and its row split over
threadIdx.x; every earlier stage is moved into that row (compute_at) and split over the same
threads, the reductions cooperatively (the GPU lowering combines the threads' parts: warp
shuffles on CUDA/HIP, a shared-memory tree on OpenCL); each stage's result for the row lives
in shared memory, where all the row's threads read it (after a barrier the lowering inserts):

    for i in blockIdx.x:                       # one row per thread block
        for tx in threadIdx.x: for k_o: max_shared[0] = max(max_shared[0], A[i, k_o*T + tx])
        for tx in threadIdx.x: for k_o: sum_shared[0] += exp(A[i, ..] - max_shared[0])
        for j_o: for tx in threadIdx.x: out[i, j_o*T + tx] = exp(..) / sum_shared[0]

Elementwise stages between reductions (softmax's exp) are inlined into their readers
(recomputed, no buffer), or kept as a row in shared memory when they cannot be.

Takes a reduction block when it and every root block after it form such a chain: each one
has the reduction's spatial loops (the rows) outermost with the same extents, its other loops
cover the row (the same length), the last is elementwise, and the row is at least
`MIN_REDUCTION` long. The chain's other blocks are annotated `dlight.claimed`, which
ApplyDefaultSchedule reads as "scheduled by this rule" (it reports them as such and gives them
no other rule).
"""

from __future__ import annotations

from schedlab.ir.stmt import IterType

from ..analysis import BlockInfo, block_info, conv_axes
from ..base import CLAIMED, ScheduleRule, attempt, root_block_names
from .reduction import MIN_REDUCTION, bind_reduction, reduction_threads


class GeneralReduction(ScheduleRule):
    """One thread block per row for a chain of row reductions and elementwise stages (softmax,
    layer_norm, rms_norm); see the module docstring."""

    name = "GeneralReduction"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        if not info.is_reduction or conv_axes(info) is not None:
            return False
        chain = _chain(sch, info)
        if chain is None:
            return False
        rows, length = chain[0][1], chain[0][2]
        threads = reduction_threads(length, target)
        *stages, last = [name for name, _, _ in chain]
        loops = sch.get_loops(sch.get_block(last))
        row = _fused(sch, loops[: len(rows)])
        inner = _fused(sch, loops[len(rows) :])
        _, tx = sch.split(inner, [None, threads])
        sch.bind(row, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        for name in reversed(stages):
            _into_row(sch, name, row, threads)
        for name, _, _ in chain[1:]:
            if sch.state.blocks_named(name):  # not inlined
                sch.annotate(sch.get_block(name), CLAIMED, 1)
        return True


def _chain(sch, anchor: BlockInfo) -> list[tuple[str, list[int], int]] | None:
    """[(name, row extents, row length)] of the anchor and every root block after it, or None
    when they do not form a chain over the anchor's rows."""
    names = root_block_names(sch)
    start = names.index(anchor.block.name_hint)
    rows = _extents([li for li in anchor.loops if li.kind == IterType.SPATIAL])
    length = _product(_extents(anchor.reduce()) or [0])
    if rows is None or not rows or length < MIN_REDUCTION or len(names) - start < 2:
        return None
    chain = []
    for name in names[start:]:
        blocks = sch.state.blocks_named(name)
        info = block_info(sch.state, blocks[0]) if len(blocks) == 1 else None
        if info is None or not (info.is_reduction or info.is_injective):
            return None
        extents = _extents(info.loops)
        if (
            extents is None
            or extents[: len(rows)] != rows
            or _product(extents[len(rows) :]) != length
        ):
            return None
        kinds = [li.kind for li in info.loops]
        if any(kind != IterType.SPATIAL for kind in kinds[: len(rows)]):
            return None
        if info.is_reduction and any(kind != IterType.REDUCE for kind in kinds[len(rows) :]):
            return None
        chain.append((name, rows, length))
    last = sch.state.blocks_named(chain[-1][0])[0]
    return chain if block_info(sch.state, last).is_injective else None


def _into_row(sch, name: str, row, threads: int) -> None:
    """Stage `name` computed inside the row loop, split over the threads (a reduction's
    threads cooperate), its result in shared memory; an elementwise stage is inlined into its
    readers where it can be."""
    block = sch.get_block(name)
    info = block_info(sch.state, sch.get(block))
    if info is not None and info.is_injective and attempt(sch, lambda: _inline(sch, block)):
        return
    sch.compute_at(block, row)
    block = sch.get_block(name)
    loops = sch.get_loops(block)[1:]  # below the row loop: the row's own loops
    if info is not None and info.is_reduction:
        bind_reduction(sch, loops, threads)
    else:
        _, tx = sch.split(_fused(sch, loops), [None, threads])
        sch.bind(tx, "threadIdx.x")
    sch.set_scope(block, 0, "shared")


def _inline(sch, block) -> bool:
    sch.compute_inline(block)
    return True


def _fused(sch, loops):
    return sch.fuse(*loops) if len(loops) > 1 else loops[0]


def _extents(loops) -> list[int] | None:
    values = [getattr(li.loop.extent, "value", None) for li in loops]
    return None if any(v is None for v in values) else values


def _product(values) -> int:
    total = 1
    for v in values:
        total *= v
    return total


__all__ = ["GeneralReduction"]

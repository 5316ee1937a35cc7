"""Helpers of the GPU rules: thread counts from the target, binding a fused spatial loop."""

from __future__ import annotations

from schedlab.ir.expr import IntImm
from schedlab.ir.stmt import IterType

DEFAULT_THREADS = 256


def max_threads(target) -> int:
    """Threads per block the rules use: 256, or the target's maximum when smaller."""
    limit = int(target.attrs.get("max_threads_per_block", DEFAULT_THREADS) or DEFAULT_THREADS)
    return min(DEFAULT_THREADS, limit)


def spatial_first(sch, block, info) -> list:
    """The block's loops reordered spatial-first (reductions inside); returns the spatial
    loops (a handle list)."""
    loops = sch.get_loops(block)
    spatial = [loop for loop, li in zip(loops, info.loops) if li.kind == IterType.SPATIAL]
    reduce = [loop for loop, li in zip(loops, info.loops) if li.kind != IterType.SPATIAL]
    if reduce and spatial and loops[: len(spatial)] != spatial:
        sch.reorder(*spatial, *reduce)
    return spatial


def bind_spatial(sch, loops, threads: int, inner: int = 1):
    """Fuse `loops`, split it as (blocks, [inner,] threads) and bind blockIdx.x/threadIdx.x;
    the thread loop is innermost so neighbouring threads touch neighbouring elements. Returns
    the (block, thread) loops."""
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    extent = sch.get(fused).extent
    if isinstance(extent, IntImm):
        threads = max(1, min(threads, extent.value))
    if inner > 1:
        outer, middle, thread = sch.split(fused, [None, inner, threads])
        sch.unroll(middle)
    else:
        outer, thread = sch.split(fused, [None, threads])
    sch.bind(outer, "blockIdx.x")
    sch.bind(thread, "threadIdx.x")
    return outer, thread

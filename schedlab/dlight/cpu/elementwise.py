"""`Elementwise`: injective blocks (elementwise maps, padding, transposes, broadcasts)."""

from __future__ import annotations

from math import prod

from ..analysis import BlockInfo, dense_suffix
from ..base import ScheduleRule
from ._common import (
    extent_of,
    output_dtype,
    parallel_prefix,
    parallelize,
    rows_before_channel_blocks,
    vector_lanes,
    vectorize_innermost,
)


class Elementwise(ScheduleRule):
    """Split the innermost loop to the SIMD width and vectorize it; fuse the outer loops, as
    few as give every core several chunks, into one parallel loop (when the block does enough
    work to pay for threads, see `MIN_PARALLEL_WORK`); the loops between stay serial.

    Matches a block with no init whose iter vars are all spatial and bound one to one by
    serial loops of constant extent."""

    name = "Elementwise"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        if not info.is_injective or not info.loops:
            return False
        if any(extent_of(sch, loop) is None for loop in sch.get_loops(block)):
            return False
        info = rows_before_channel_blocks(sch, block, info)
        loops = sch.get_loops(block)
        extents = [extent_of(sch, loop) for loop in loops]
        lanes = vector_lanes(target, output_dtype(info.block))
        fused = dense_suffix(info)
        if fused > 1:  # one contiguous run: fewer, longer vector loops
            loops = [*loops[:-fused], sch.fuse(*loops[-fused:])]
            extents = [*extents[:-fused], prod(extents[-fused:])]
        outer = vectorize_innermost(sch, loops[-1], extents[-1], lanes)
        parallel = [*loops[:-1], *([outer] if outer is not None else [])]
        parallelize(sch, parallel[: parallel_prefix(sch, parallel, target)], info)
        return True

"""`BlockedConvTiling`: the default BlockedConv rule's structure with its sizes sampled (a CPU
addition to TVM's rules, the NCHW{b}c counterpart of `ConvTiling`).

A convolution in the channel-blocked layout (`relax.transform.ConvertToBlockedLayout`) keeps
its channel block in the vector lanes, output columns in register rows, and needs no weight
copy (the weight is already OIHW{i}i{b}o). Which tile is fastest differs from layer to layer
(Zen 5, one thread: 3x3 64->64 at 56 columns 247 GFLOP/s with 8 columns x 2 blocks and 225
with 14 x 2; 3x3 512->512 at 7: 212 with 7 x 4 and 178 with 7 x 2), so the search picks:

- the register rows (output columns per tile): a `sample_perfect_tile` of the column loop;
- the channel blocks per tile: a `sample_perfect_tile` of the channel-block loop (up to 4);
- the order of the parallel loops: channel blocks innermost (the input rows stay cached) or
  outermost (the weight is read once) — two design spaces.

The block is marked tiled, so MultiLevelTiling leaves it; the space without this rule's
schedule is kept as well.
"""

from __future__ import annotations

from schedlab.dlight.analysis import blocked_conv_axes, dim_of
from schedlab.dlight.cpu._common import inline_epilogue
from schedlab.schedule import BlockRV, Schedule
from schedlab.schedule.errors import ScheduleError

from .analysis import const_extent
from .conv_tiling import OrderedTiling
from .multi_level_tiling import TILING_STRUCTURE
from .rule import target_of, vector_lanes

MAX_BLOCKS = 4  # channel blocks per register tile
MAX_ROWS = 16  # output columns per register tile


class BlockedConvTiling(OrderedTiling):
    """See the module docstring. `orders`: the parallel-loop orders to offer ("rows": channel
    blocks innermost, "channels": outermost)."""

    name = "BlockedConvTiling"

    def planner(self, sch: Schedule, block: BlockRV, node, info):
        axes = blocked_conv_axes(info)
        if axes is None or axes.channel is None:
            return None
        extents = [const_extent(sch.get(loop)) for loop in sch.get_loops(block)]
        lanes = vector_lanes(target_of(sch), node.writes[0].buffer.dtype)
        if None in extents or lanes < 2 or extents[info.position(axes.lane)] != lanes:
            return None  # a channel block of exactly one vector (what the pass makes)
        return lambda new, handle, order: _plan(new, handle, info, axes, order)


def _plan(sch: Schedule, block, info, axes, order: str) -> None:
    sch.annotate(block, TILING_STRUCTURE, f"blocked-conv-{order}")
    loop_of = info.loops_by_var(sch.get_loops(block))
    channel, lane = loop_of[axes.channel], loop_of[axes.lane]
    c0, c1 = sch.split(
        channel, sch.sample_perfect_tile(channel, n=2, max_innermost_factor=MAX_BLOCKS)
    )
    row = loop_of[axes.row]
    r0, r1 = sch.split(row, sch.sample_perfect_tile(row, n=2, max_innermost_factor=MAX_ROWS))
    spatial = [loop_of[v] for v in axes.outer]
    outer = [*spatial, c0] if order == "rows" else [c0, *spatial]
    reduce = [loop_of[v] for v in axes.reduce]
    sch.reorder(*outer, r0, *reduce, r1, c1, lane)
    write_back = sch.cache_write(block, 0, "local")
    try:  # a bias/ReLU epilogue in the write-back
        inline_epilogue(sch, write_back)
        inline_epilogue(sch, write_back)
    except ScheduleError:
        pass
    # unit loops kept: the write-back has one loop per output dimension whatever the sampled
    # sizes, so every replay of the trace finds the loops it names
    sch.reverse_compute_at(write_back, r0, preserve_unit_loops=True)
    depth = next(i for i, loop in enumerate(sch.get_loops(block)) if sch.get(loop) is sch.get(r0))
    tile_loops = sch.get_loops(write_back)[depth + 1 :]
    write = info.block.writes[0]
    stores = [tile_loops[dim_of(write, v)] for v in (axes.row, axes.channel, axes.lane)]
    init = sch.decompose_reduction(block, reduce[0])
    sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])
    for stage in (block, init):
        *_, rows, blocks, vector = sch.get_loops(stage)
        sch.unroll(rows)
        sch.unroll(blocks)
        sch.vectorize(vector)
    rows, blocks, vector = stores
    sch.unroll(blocks)
    sch.unroll(rows)
    sch.vectorize(vector)


__all__ = ["BlockedConvTiling"]

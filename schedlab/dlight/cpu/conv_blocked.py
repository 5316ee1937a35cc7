"""`BlockedConv`: convolutions in the channel-blocked layout (NCHW{b}c data and output, the
weight OIHW{i}i{b}o: what `relax.transform.ConvertToBlockedLayout` makes), register-tiled
over output columns x channel blocks with the channel block in the vector lanes."""

from __future__ import annotations

from schedlab.target import Target

from ..analysis import BlockedConvAxes, BlockInfo, blocked_conv_axes
from ..base import ScheduleRule, attempt
from ._common import (
    constant_loops,
    extent_of,
    inline_epilogue,
    output_dtype,
    parallelize,
    register_tile,
    vector_lanes,
    vector_registers,
)
from .conv import ConvTile
from .packing import nbytes

# With the accumulators an array of vectors (the C back end declares whole-vector scratch so)
# gcc keeps up to 28 in registers (13 columns x 2 blocks: 231 GFLOP/s against 199 as 13 x 1);
# more spill.
MAX_BLOCKED_ACCUMULATORS = 28


class BlockedConv(ScheduleRule):
    """The `Conv` rule's plan on blocked data, where it needs no packing and no scattered
    write-back: for each (batch, output row, channel block) in parallel — channel blocks
    outermost when the weight is over half the L2, so each block's weights are read once —
    and each tile of `rows` output columns, a `rows x vectors x lanes` accumulator tile in
    "local" scope is updated over the input channel blocks, the taps and the channels within
    an input block by one broadcast input element times one weight vector (the weight's
    innermost axis is the output channel block: contiguous), then written back with the
    fused epilogue, each vector one contiguous store into the NCHW{b}c output.

    The tile follows `Conv`'s: rows x vectors accumulators up to half the vector registers
    and at most MAX_ACCUMULATORS, two channel blocks at a time when the image is narrow."""

    name = "BlockedConv"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        axes = blocked_conv_axes(info)
        if axes is None:
            return False
        loops = constant_loops(sch, block)
        if loops is None:
            return False
        tile = blocked_tile(sch, loops, info, axes, target)
        if tile is None:
            return False
        return attempt(sch, lambda: _tiled_plan(sch, block, info, axes, tile))


def blocked_tile(sch, loops, info: BlockInfo, axes: BlockedConvAxes,
                 target: Target) -> ConvTile | None:  # fmt: skip
    """The register tile: `lanes` = the channel block when a vector holds it (a block of two
    or more vectors counts as that many vectors), else two channel blocks at a time when they
    pair up; `tile_columns` columns."""
    block_extent = extent_of(sch, loops[info.position(axes.lane)])
    columns = extent_of(sch, loops[info.position(axes.row)])
    lanes = vector_lanes(target, output_dtype(info.block))
    if block_extent <= lanes:
        lanes, vectors = block_extent, 1
    elif block_extent % lanes == 0:
        vectors = block_extent // lanes
    else:
        return None
    accumulators = min(MAX_BLOCKED_ACCUMULATORS, vector_registers(target) - 4)
    channel = axes.channel
    channel_blocks = extent_of(sch, loops[info.position(channel)]) if channel is not None else 1
    if vectors == 1 and channel_blocks % 2 == 0 and 2 * min(columns, 8) <= accumulators:
        vectors = 2
    if vectors > accumulators:
        return None
    rows = tile_columns(columns, accumulators // vectors)
    return ConvTile(rows, vectors, lanes, int(target.attrs.get("l2_bytes", 1 << 20)))


def tile_columns(columns: int, most: int) -> int:
    """Output columns per tile, at most `most`: the whole row when it fits in 14; else the
    divisor from 5 to 14 nearest 7.5 (the larger on a tie), else 8 with a predicated last
    tile. Measured on Zen 5 (one thread, two channel blocks, NCHW16c, GFLOP/s): 3x3 128->128
    at 28 columns 251 as 7-column tiles, 223 as 14; 3x3 64->64 at 56: 249 as 8, 220 as 14;
    1x1 256->64 at 56: 242 as 8, 139 as 14; 55 columns: 228 as 11, 218 as 5; 13 as one tile:
    231."""
    most = max(min(most, 14), 1)
    if columns <= most:
        return columns
    divisors = [d for d in range(5, most + 1) if columns % d == 0]
    if divisors:
        return min(divisors, key=lambda d: (abs(d - 7.5), -d))
    return min(8, most)


def _weight_bytes(info: BlockInfo, axes: BlockedConvAxes) -> int:
    out = info.block.writes[0].buffer
    for region in info.block.reads:
        if region.buffer is not out and region.region[-1].min is axes.lane:
            return nbytes(region.buffer)
    return 0


def _tiled_plan(sch, block, info: BlockInfo, axes: BlockedConvAxes, tile: ConvTile) -> bool:
    loop_of = info.loops_by_var(sch.get_loops(block))
    lane = loop_of[axes.lane]
    inner = []  # the vector loops besides the lanes: channel blocks or a wide block's vectors
    if extent_of(sch, lane) > tile.lanes:
        vector, lane = sch.split(lane, [None, tile.lanes])
        inner.append(vector)
    channel = loop_of[axes.channel] if axes.channel is not None else None
    if tile.vectors > 1 and not inner:
        channel, vector = sch.split(channel, [None, tile.vectors])
        inner.append(vector)
    r0, r1 = sch.split(loop_of[axes.row], [None, tile.rows])
    outer = [loop_of[v] for v in axes.outer] + ([channel] if channel is not None else [])
    if channel is not None and _weight_bytes(info, axes) > tile.l2_bytes // 2:
        outer = [channel, *outer[:-1]]  # the weight streams: each block's part read once
    reduce = [loop_of[v] for v in axes.reduce]
    sch.reorder(*outer, r0, *reduce, r1, *inner, lane)
    write_back = sch.cache_write(block, 0, "local")
    while attempt(sch, lambda: inline_epilogue(sch, write_back)):
        pass
    sch.reverse_compute_at(write_back, r0)
    init = sch.decompose_reduction(block, reduce[0])
    parallelize(sch, outer, info)
    tiled = 2 + len(inner)
    register_tile(sch, sch.get_loops(block)[-tiled:])
    register_tile(sch, sch.get_loops(init)[-tiled:])
    stores = sch.get_loops(write_back)
    if extent_of(sch, stores[-1]) > tile.lanes:  # a block of several vectors: one at a time
        sch.split(stores[-1], [None, tile.lanes])
    register_tile(sch, sch.get_loops(write_back)[-tiled:])
    return True

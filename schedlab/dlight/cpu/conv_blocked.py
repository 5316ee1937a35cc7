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

# With the accumulators declared as an array of vectors (the C back end does for whole-vector
# scratch), gcc keeps up to 28 in registers: 13 x 2 and 7 x 4 tiles beat 13 x 1 and 7 x 2
# (3x3 64->256 at 13 columns: 231 against 199 GFLOP/s; 512->512 at 7: 212 against 178).
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
    or more vectors counts as that many vectors); else two channel blocks at a time when
    they pair up (four for images of at most 7 columns), and `tile_columns` columns."""
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
    channel_blocks = (
        extent_of(sch, loops[info.position(axes.channel)]) if axes.channel is not None else 1
    )
    if vectors == 1:
        for count in (4, 2):
            if channel_blocks % count == 0 and (count < 4 or columns <= 7):
                vectors = count
                break
    while vectors > 1 and vectors * min(columns, 8) > accumulators:
        vectors //= 2
    if vectors > accumulators:
        return None
    rows = tile_columns(columns, accumulators // vectors)
    return ConvTile(rows, vectors, lanes, int(target.attrs.get("l2_bytes", 1 << 20)))


def tile_columns(columns: int, most: int) -> int:
    """Output columns per tile, at most `most`: the whole row when it fits; else the largest
    divisor from 8 to 14 that leaves at least 5 tiles per row, else the largest divisor from 8
    to 14, else from 4 to 7, else 8 with a predicated last tile. Measured on Zen 5 (one
    thread, two channel blocks): 3x3 64->64 at 56 columns 247 GFLOP/s as 8-column tiles, 225
    as 14; 1x1 256->64 at 56: 241 against 99 (14); 3x3 128->128 at 28: 228 as 14 against 177
    as 7; 55 columns as 11: 229."""
    most = max(most, 1)
    if columns <= most:
        return columns
    divisors = [d for d in range(min(14, most), 0, -1) if columns % d == 0]
    for usable in ([d for d in divisors if d >= 8 and columns // d >= 5],
                   [d for d in divisors if d >= 8], [d for d in divisors if d >= 4]):  # fmt: skip
        if usable:
            return usable[0]
    return min(8, most)


def _weight_bytes(info: BlockInfo, axes: BlockedConvAxes) -> int:
    out = info.block.writes[0].buffer
    for region in info.block.reads:
        if region.buffer is not out and region.region[-1].min is axes.lane:
            return nbytes(region.buffer)
    return 0


def _tiled_plan(sch, block, info: BlockInfo, axes: BlockedConvAxes, tile: ConvTile) -> bool:
    loops = sch.get_loops(block)
    loop_of = {info.loops[i].var: loops[i] for i in range(len(loops))}
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

"""`Conv`: direct convolutions (NCHW conv1d/2d/3d, any stride, padding or dilation), register-
tiled over output channels x output columns with the weights packed."""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.schedule.index_map import IndexMap
from schedlab.target import Target

from ..analysis import BlockInfo, ConvAxes, conv_axes, dim_of, region_vars
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
from .packing import nbytes, pack_vector_operands

# Measured on Zen 5 (2 cores, GFLOP/s of 3x3 layers at 64@56 / 128@28 / 256@14 / 512@7):
# AVX-512 (32 registers): 14 rows x 1 vector 318/378/411/360, 7 x 2 310/396/411/430, 28 x 1
# a third of that (spills); AVX2 code (16 registers): 8 x 1 95/186/190/191, 6 x 2
# 119/180/108/101, 6 x 1 105/120/58/51.
MAX_ACCUMULATORS = 14


@dataclass(frozen=True)
class ConvTile:
    """A register tile: `rows` output columns x (`vectors` x `lanes`) output channels."""

    rows: int
    vectors: int
    lanes: int
    l2_bytes: int = 1 << 20


class Conv(ScheduleRule):
    """Direct convolution with the output channels in the vector lanes, as oneDNN's and
    onnxruntime's NCHWc kernels do, on the NCHW layout the graph keeps:

    - the weight is packed to [channel blocks, reduce axes.., vectors, lanes] (one contiguous
      vector per tap and input channel: `packing.pack_vector_operands`);
    - for each (batch, output row, channel block) in parallel (channel blocks innermost: the
      input rows one output row reads stay in cache while every block uses them; 3x3 layers
      at 64@56..512@7 went from 314-431 to 369-453 GFLOP/s), or (channel block, batch, output
      row) when the weight is over half the L2 (each block's weights then read once:
      light_resnet50 32.5 -> 29.0 ms, light_squeezenet unchanged), and each tile of `rows`
      output columns, a `rows x vectors*lanes` accumulator tile in "local" scope, laid out
      channel-innermost, is updated over the input channels and taps by one broadcast input
      element times one weight vector per accumulator vector (rows and vectors unrolled, lanes
      vectorized), then written back (with the fused bias/ReLU/batch-norm epilogue) column by
      column.

    Measured on Zen 5 (AVX-512, 2 cores), resnet-style 3x3 layers at 56/28/14 columns: 390-440
    GFLOP/s against 60-77 for the `Reduction` rule's plan (which vectorizes the columns).

    The tile comes from the target: `lanes` = SIMD width / dtype bits, rows x vectors
    accumulators up to half the vector registers and at most MAX_ACCUMULATORS, one vector of
    channels unless the image is narrower than half of that.
    Matches what `conv_axes` recognizes with at least a vector of output channels; a count
    that no channel group divides (1000 classes) is padded first (`pad_einsum`: the packed
    weight gets zero channels, the write-back stores the real ones): light_squeezenet's
    classifier, 512 -> 1000 at 13x13, went from 8-lane vectors at 112 GFLOP/s to 186 (one
    thread)."""

    name = "Conv"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        axes = conv_axes(info)
        if axes is None:
            return False
        loops = constant_loops(sch, block)
        if loops is None:
            return False
        tile = conv_tile(sch, loops, info, axes, target)
        if tile is None:
            return False
        return attempt(sch, lambda: _tiled_plan(sch, block, info, axes, tile))


def conv_tile(sch, loops, info: BlockInfo, axes: ConvAxes, target: Target) -> ConvTile | None:
    """The register tile for this block on `target` (half-width vectors for a few channels that
    they divide), or None when there are fewer channels than one vector."""
    channels = extent_of(sch, loops[info.position(axes.channel)])
    columns = extent_of(sch, loops[info.position(axes.row)])
    lanes = vector_lanes(target, output_dtype(info.block))
    if channels % lanes and channels % (lanes // 2) == 0 and lanes // 2 >= 4 and channels < 64:
        lanes //= 2  # a few channels: half vectors beat padding (24 = 3 x 8, not 32)
    if channels < lanes:
        return None
    # accumulators: enough to hide the FMA latency, few enough to stay in registers
    registers = vector_registers(target)
    budget = min(MAX_ACCUMULATORS, registers // 2)
    vectors = 1 if columns > budget // 2 or channels < 2 * lanes else 2
    limit = min(registers - 3, MAX_ACCUMULATORS + 2)  # + one weight and one input register
    rows = tile_rows(columns, budget // vectors, limit // vectors)
    return ConvTile(rows, vectors, lanes, int(target.attrs.get("l2_bytes", 1 << 20)))


def tile_rows(columns: int, budget: int, limit: int) -> int:
    """Output columns per register tile: the divisor of `columns` nearest `budget` (the smaller
    on a tie) among those from budget/2 up to `limit`; without one, `budget` with a predicated
    last tile. A predicate in the reduction loop is slow (AVX2 code, 27 columns as 8 + 8 + 8
    + 3: 70 GFLOP/s; as 3 x 9: see the module's figures), so a divisor a little over the
    budget is preferred to it."""
    candidates = range(1, min(columns, limit) + 1)
    divisors = [d for d in candidates if columns % d == 0 and 2 * d >= budget]
    if divisors:
        return min(divisors, key=lambda d: (abs(d - budget), d))
    return min(budget, columns)


def weight_bytes(info: BlockInfo, axes: ConvAxes) -> int:
    """Bytes of the block's weight (the read indexed by the channel and reduce vars only)."""
    out = info.block.writes[0].buffer
    for region in info.block.reads:
        if region.buffer is not out and axes.row not in region_vars(region):
            return nbytes(region.buffer)
    return 0


def _tiled_plan(sch, block, info: BlockInfo, axes: ConvAxes, tile: ConvTile) -> bool:
    pad_channels(sch, block, info, axes, tile.vectors * tile.lanes)
    loop_of = info.loops_by_var(sch.get_loops(block))
    c0, c1, c2 = sch.split(loop_of[axes.channel], [None, tile.vectors, tile.lanes])
    r0, r1 = sch.split(loop_of[axes.row], [None, tile.rows])
    outer = [*(loop_of[v] for v in axes.outer), c0]
    if weight_bytes(info, axes) > tile.l2_bytes // 2:  # the weight streams: read it once
        outer = [c0, *outer[:-1]]
    reduce = [loop_of[v] for v in axes.reduce]
    sch.reorder(*outer, r0, *reduce, r1, c1, c2)
    pack_vector_operands(sch)  # the weight, one vector per (tap, input channel)
    write_back = sch.cache_write(block, 0, "local")
    while attempt(sch, lambda: inline_epilogue(sch, write_back)):  # the crop, then the epilogue
        pass
    channels_last(sch, block, ("write", 0), info.block.writes[0], axes.channel)
    sch.reverse_compute_at(write_back, r0)
    init = sch.decompose_reduction(block, reduce[0])
    parallelize(sch, outer, info)
    register_tile(sch, sch.get_loops(block)[-3:])
    register_tile(sch, sch.get_loops(init)[-3:])
    *_, channel, column = sch.get_loops(write_back)
    sch.reorder(column, channel)
    vectors, lanes = sch.split(channel, [None, tile.lanes])
    register_tile(sch, [column, vectors, lanes])
    return True


def pad_channels(sch, block, info: BlockInfo, axes: ConvAxes, group: int) -> None:
    """Pad the block's output channels to a multiple of `group` when they are not one (1000
    classes computed as 1008; the write-back stores the 1000)."""
    channels = extent_of(sch, sch.get_loops(block)[info.position(axes.channel)])
    if channels % group:
        sch.pad_einsum(block, [group if iv.var is axes.channel else 1
                               for iv in info.block.iter_vars])  # fmt: skip


def channels_last(sch, block, buffer, region, channel) -> None:
    """Re-lay out `buffer` of `block` (accessed as `region`) with the dimension `channel`
    indexes moved last: for the local accumulators, the vector of channels the reduction
    updates becomes contiguous (the output keeps its layout)."""
    dims = len(region.region)
    position = dim_of(region, channel)
    order = [d for d in range(dims) if d != position] + [position]
    index_map = IndexMap.from_func(lambda *x: tuple(x[d] for d in order), ndim=dims)
    sch.transform_layout(block, buffer, index_map)

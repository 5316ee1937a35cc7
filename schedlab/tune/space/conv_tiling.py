"""`ConvTiling`: the default Conv rule's structure with its sizes sampled (a CPU addition to
TVM's rules).

MultiLevelTiling tiles a convolution like any reduction and vectorizes its output columns; the
default rule (`dlight.cpu.Conv`) puts the output channels in the vector lanes and the columns in
register rows over a packed weight, which is 3-8x faster on resnet-style layers. With only the
generic space the tuner could not find that structure, so tuned CNNs lost to untuned ones.
This rule adds it to the design space with its choices left to the search:

- the register rows (output columns per tile): a `sample_perfect_tile` of the column loop;
- the vectors of channels per tile: a `sample_perfect_tile` of the channel blocks (up to 4);
- the order of the parallel loops: two design spaces, channel blocks innermost (the input rows
  stay cached) or outermost (the weight is read once).

Output channels that no vector divides are padded first (`pad_einsum`, as the default rule
does). The weight is copied, once per call, into blocks of one vector of channels (a layout that
depends on the target's lanes only, so a replay with other sizes makes the same copy;
`FoldLayoutRewrite` moves it to compile time when the weight is a constant). The block is
marked tiled, so MultiLevelTiling leaves it; the space without this rule's schedule is kept
as well. A plain GEMM (which `conv_axes` also recognizes) is left to MultiLevelTiling.
"""

from __future__ import annotations

from schedlab.dlight.analysis import block_info, conv_axes, dim_of, gemm_axes
from schedlab.dlight.cpu._common import inline_epilogue
from schedlab.dlight.cpu.conv import channels_last, pad_channels
from schedlab.dlight.cpu.packing import padded_params
from schedlab.schedule import BlockRV, Schedule
from schedlab.schedule.errors import ScheduleError
from schedlab.schedule.index_map import IndexMap

from .analysis import block_of, const_extent
from .multi_level_tiling import TILING_STRUCTURE
from .rule import ScheduleRule, target_of, vector_lanes

MAX_VECTORS = 4  # channel vectors per register tile
MAX_ROWS = 16  # output columns per register tile


class OrderedTiling(ScheduleRule):
    """A rule that offers one design space per order of the parallel loops ("rows": channel
    blocks innermost, "channels": outermost), the block's tile sizes left to the search.
    Subclasses give `planner`: for a block they tile, a function applying the plan in one
    order; else None (the block is left to the other rules)."""

    def __init__(self, orders: tuple[str, ...] = ("rows", "channels")):
        unknown = set(orders) - {"rows", "channels"}
        if unknown or not orders:
            raise ValueError(f"{self.name}: orders must be among 'rows', 'channels', got {orders}")
        self.orders = tuple(orders)

    def planner(self, sch: Schedule, block: BlockRV, node, info):
        raise NotImplementedError

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        node = block_of(sch, block)
        if node is None or TILING_STRUCTURE in node.annotations:
            return [sch]
        info = block_info(sch.state, node)
        plan = self.planner(sch, block, node, info) if info is not None else None
        if plan is None:
            return [sch]
        results = []
        for order in self.orders:
            new = sch.copy()
            try:
                plan(new, new.get_block(node.name_hint), order)
            except ScheduleError:
                continue
            results.append(new)
        return [*results, sch]


class ConvTiling(OrderedTiling):
    """See the module docstring. `orders`: the parallel-loop orders to offer ("rows": channel
    blocks innermost, "channels": outermost)."""

    name = "ConvTiling"

    def planner(self, sch: Schedule, block: BlockRV, node, info):
        axes = conv_axes(info)
        if axes is None or gemm_axes(info) is not None:  # a plain GEMM is MultiLevelTiling's
            return None
        extents = [const_extent(sch.get(loop)) for loop in sch.get_loops(block)]
        lanes = vector_lanes(target_of(sch), node.writes[0].buffer.dtype)
        if None in extents or lanes < 2 or extents[info.position(axes.channel)] < lanes:
            return None
        return lambda new, handle, order: _plan(new, handle, info, axes, lanes, order)


def _plan(sch: Schedule, block, info, axes, lanes: int, order: str) -> None:
    sch.annotate(block, TILING_STRUCTURE, f"conv-{order}")
    pad_channels(sch, block, info, axes, lanes)
    loop_of = info.loops_by_var(sch.get_loops(block))
    blocks, c2 = sch.split(loop_of[axes.channel], [None, lanes])
    c0, c1 = sch.split(
        blocks, sch.sample_perfect_tile(blocks, n=2, max_innermost_factor=MAX_VECTORS)
    )
    row = loop_of[axes.row]
    r0, r1 = sch.split(row, sch.sample_perfect_tile(row, n=2, max_innermost_factor=MAX_ROWS))
    spatial = [loop_of[v] for v in axes.outer]
    outer = [*spatial, c0] if order == "rows" else [c0, *spatial]
    reduce = [loop_of[v] for v in axes.reduce]
    sch.reorder(*outer, r0, *reduce, r1, c1, c2)
    _pack_weight(sch, block, axes, lanes)
    write_back = sch.cache_write(block, 0, "local")
    for _ in range(2):  # a padded output's crop, then a bias/ReLU epilogue: in the write-back
        try:
            inline_epilogue(sch, write_back)
        except ScheduleError:
            break
    channels_last(sch, block, ("write", 0), info.block.writes[0], axes.channel)
    # unit loops kept: the write-back has one loop per output dimension whatever the sampled
    # sizes, so every replay of the trace finds the loops it names
    sch.reverse_compute_at(write_back, r0, preserve_unit_loops=True)
    depth = next(i for i, loop in enumerate(sch.get_loops(block)) if sch.get(loop) is sch.get(r0))
    tile_loops = sch.get_loops(write_back)[depth + 1 :]
    channel = tile_loops[dim_of(info.block.writes[0], axes.channel)]
    column = tile_loops[-1]
    init = sch.decompose_reduction(block, reduce[0])
    sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])
    for stage in (block, init):
        *_, rows, vectors, vector = sch.get_loops(stage)
        sch.unroll(rows)
        sch.unroll(vectors)
        sch.vectorize(vector)
    sch.reorder(column, channel)
    sch.unroll(column)
    vectors, vector = sch.split(channel, [None, lanes])
    sch.unroll(vectors)
    sch.vectorize(vector)


def _pack_weight(sch: Schedule, block, axes, lanes: int) -> None:
    """Copy the weight (the input indexed by the channel, not by the columns) into blocks of
    `lanes` channels, channels innermost: [channel / lanes, other dims.., lanes], so each tap's
    vector is contiguous and a tile streams its block (a plain channels-last copy measured
    13% slower: its taps sit a whole channel row apart). The map depends on the target's lanes
    only, never on a sampled size, so every replay makes the same copy."""
    node = sch.get(block)
    out = node.writes[0].buffer
    for index, region in enumerate(node.reads):
        position = dim_of(region, axes.channel)
        if region.buffer is out or position is None:
            continue
        index_map = IndexMap.from_func(_blocked(position, len(region.region), lanes),
                                       ndim=len(region.region))  # fmt: skip
        producer = padded_params(sch).get(region.buffer)
        copy = sch.cache_read(block, index, "global")
        if producer is not None:  # one stage: the copy reads the weight, zero-padded
            sch.compute_inline(sch.get_block(producer))
        sch.transform_layout(copy, ("write", 0), index_map)
        return


def _blocked(position: int, dims: int, lanes: int):
    """(.., c, ..) -> (c // lanes, the other dims.., c % lanes) for the dim at `position`."""

    def index(*x):
        rest = tuple(x[d] for d in range(dims) if d != position)
        return (x[position] // lanes, *rest, x[position] % lanes)

    return index


__all__ = ["ConvTiling"]

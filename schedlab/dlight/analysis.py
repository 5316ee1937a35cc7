"""Block analysis for the default-schedule rules: which loop binds which iter var, whether a
block is injective or a reduction, and whether a reduction is GEMM-like (batch x M x N x K),
decided from iter vars and access patterns, never from names."""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.ir.expr import Var
from schedlab.ir.functor import collect_vars, post_order_visit
from schedlab.ir.stmt import Block, BufferStore, For, ForKind, IterType


@dataclass(frozen=True)
class LoopInfo:
    """One loop above a block: the loop, the block iter var it binds, and that var's kind."""

    loop: For
    var: Var
    kind: IterType


@dataclass(frozen=True)
class BlockInfo:
    """A block whose loops bind its iter vars one to one (a "trivial" binding)."""

    block: Block
    loops: tuple[LoopInfo, ...]

    @property
    def is_reduction(self) -> bool:
        return self.block.init is not None and any(
            info.kind == IterType.REDUCE for info in self.loops
        )

    @property
    def is_injective(self) -> bool:
        return self.block.init is None and all(info.kind == IterType.SPATIAL for info in self.loops)

    def work(self) -> int | None:
        """Block instances executed (the product of the loop extents); None if symbolic."""
        total = 1
        for info in self.loops:
            extent = getattr(info.loop.extent, "value", None)
            if extent is None:
                return None
            total *= int(extent)
        return total

    def spatial(self) -> list[LoopInfo]:
        return [info for info in self.loops if info.kind == IterType.SPATIAL]

    def reduce(self) -> list[LoopInfo]:
        return [info for info in self.loops if info.kind == IterType.REDUCE]

    def position(self, var: Var) -> int:
        """The index (outermost 0) of the loop binding block iter var `var`."""
        return next(i for i, info in enumerate(self.loops) if info.var is var)

    def loops_by_var(self, loops) -> dict:
        """The schedule's handles `loops` of this block's loops (outermost first, as
        `sch.get_loops` gives them before any split) keyed by the iter var each binds."""
        return {info.var: loop for info, loop in zip(self.loops, loops)}


def block_info(state, block: Block) -> BlockInfo | None:
    """The loop/iter-var map of `block`, or None when its binding is not trivial (an iter value
    that is not exactly one loop var, a loop binding nothing or two vars, a loop that is not
    serial, or an iter var that is neither spatial nor reduce)."""
    loops = state.loops_above(block)
    realize = state.realize_of(block)
    by_loop_var = {loop.loop_var: loop for loop in loops}
    bound: dict[Var, tuple[Var, IterType]] = {}
    for iter_var, value in zip(block.iter_vars, realize.iter_values):
        if iter_var.iter_type not in (IterType.SPATIAL, IterType.REDUCE):
            return None
        if not isinstance(value, Var) or value not in by_loop_var or value in bound:
            return None
        bound[value] = (iter_var.var, iter_var.iter_type)
    if len(bound) != len(loops) or any(loop.kind != ForKind.SERIAL for loop in loops):
        return None
    if not _predicate_is_true(realize.predicate):
        return None
    infos = tuple(LoopInfo(loop, *bound[loop.loop_var]) for loop in loops)
    return BlockInfo(block, infos)


def _predicate_is_true(predicate) -> bool:
    value = getattr(predicate, "value", None)
    return predicate is True or value is True or value == 1


@dataclass(frozen=True)
class GemmAxes:
    """The roles of a GEMM-like block's iter vars: C[batch, M, N] += A[batch, M, K] *
    B[batch, K, N] (in any index order)."""

    batch: tuple[Var, ...]
    m: Var
    n: Var
    k: Var


def gemm_axes(info: BlockInfo) -> GemmAxes | None:
    """The batch/M/N/K roles when `info` is a GEMM-like reduction, else None.

    GEMM-like: one store into one output buffer, two other buffers read, every index of every
    access a single iter var; the output is indexed by exactly the spatial vars; exactly one
    spatial var only in (output, A) -> M, exactly one only in (output, B) -> N, exactly one
    reduce var, in both A and B -> K; the remaining spatial vars are in all three -> batch."""
    block = info.block
    if not info.is_reduction or len(block.writes) != 1:
        return None
    out = block.writes[0].buffer
    inputs = [region for region in block.reads if region.buffer is not out]
    if len(inputs) != 2 or not _single_store(block):
        return None
    index_sets = [_index_vars(block.writes[0])] + [_index_vars(r) for r in inputs]
    if any(s is None for s in index_sets):
        return None
    out_vars, a_vars, b_vars = index_sets
    spatial = {i.var for i in info.spatial()}
    reduce = {i.var for i in info.reduce()}
    if out_vars != spatial or len(reduce) != 1:
        return None
    m = [v for v in spatial if v in a_vars and v not in b_vars]
    n = [v for v in spatial if v in b_vars and v not in a_vars]
    batch = [v for v in spatial if v in a_vars and v in b_vars]
    (k,) = reduce
    if len(m) != 1 or len(n) != 1 or len(batch) + 2 != len(spatial):
        return None
    if k not in a_vars or k not in b_vars or a_vars - spatial - reduce or b_vars - spatial - reduce:
        return None
    return GemmAxes(tuple(sorted(batch, key=info.position)), m[0], n[0], k)


def _index_vars(region) -> set[Var] | None:
    """The vars of a region whose every dimension is one point at a plain var, else None."""
    found = set()
    for rng in region.region:
        if not isinstance(rng.min, Var) or getattr(rng.extent, "value", None) != 1:
            return None
        found.add(rng.min)
    return found


def _single_store(block: Block) -> bool:
    stores = []
    post_order_visit(block.body, lambda n: stores.append(n) if isinstance(n, BufferStore) else None)
    return len(stores) == 1


def innermost_write_var(info: BlockInfo) -> Var | None:
    """The block iter var indexing the last dimension of the block's (single) output, when it
    is a spatial var bound by a loop: the axis whose consecutive values are adjacent in memory."""
    if len(info.block.writes) != 1 or not info.block.writes[0].region:
        return None
    last = info.block.writes[0].region[-1].min
    spatial = {i.var for i in info.spatial()}
    return last if isinstance(last, Var) and last in spatial else None


@dataclass(frozen=True)
class ConvAxes:
    """The roles of a convolution-like block's iter vars: out[.., channel, .., row] += data[..
    row ..] * weight[channel, reduce..] — `channel` indexes the weight and the output but not
    the data, `row` (the output's last axis) indexes the data but not the weight; `outer` are the
    other spatial vars (batch, output rows of an image), `reduce` the reduction vars."""

    outer: tuple[Var, ...]
    channel: Var
    row: Var
    reduce: tuple[Var, ...]


def conv_axes(info: BlockInfo) -> ConvAxes | None:
    """The roles when `info` is a convolution-like reduction (see `ConvAxes`), else None.

    Convolution-like: one store into one output indexed by exactly the spatial vars (plain vars),
    two other buffers read; the weight indexed by plain vars only: one spatial var (the channel)
    and reduce vars; the data indexed by expressions of the other vars, the output's last var
    among them and the channel not. An NCHW conv2d (any stride, padding, dilation, a 1x1 or a
    kxk kernel) and conv1d/conv3d are; a depthwise conv is not (its channel indexes the data)."""
    block = info.block
    if not info.is_reduction or len(block.writes) != 1 or not _single_store(block):
        return None
    out = block.writes[0].buffer
    inputs = [region for region in block.reads if region.buffer is not out]
    out_vars = _index_vars(block.writes[0])
    row = innermost_write_var(info)
    spatial = {i.var for i in info.spatial()}
    if len(inputs) != 2 or out_vars != spatial or row is None:
        return None
    for weight, data in (inputs, inputs[::-1]):
        weight_vars = _index_vars(weight)
        if weight_vars is None:
            continue
        channels = weight_vars & spatial
        data_vars = region_vars(data)
        if len(channels) != 1 or row not in data_vars or channels & data_vars:
            continue
        (channel,) = channels
        reduce = tuple(sorted((i.var for i in info.reduce()), key=info.position))
        outer = tuple(sorted(spatial - {channel, row}, key=info.position))
        if channel is row or not set(reduce) <= weight_vars | data_vars:
            continue
        return ConvAxes(outer, channel, row, reduce)
    return None


@dataclass(frozen=True)
class BlockedConvAxes:
    """The roles of a channel-blocked convolution's iter vars (NCHW{b}c, TVM's conv2d_NCHWc):
    out[.., channel, .., row, lane] += data[.. row ..] * weight[channel, .., lane] — `lane`
    (the output's last axis: channels within a block) indexes the weight's last axis and not
    the data, `row` (the output's next-to-last axis) indexes the data and not the weight,
    `channel` (the channel block; None when the weight has none) the weight and the output;
    `outer` are the other spatial vars, `reduce` the reduction vars."""

    outer: tuple[Var, ...]
    channel: Var | None
    row: Var
    lane: Var
    reduce: tuple[Var, ...]


def blocked_conv_axes(info: BlockInfo) -> BlockedConvAxes | None:
    """The roles when `info` is a channel-blocked convolution (see `BlockedConvAxes`)."""
    block = info.block
    if not info.is_reduction or len(block.writes) != 1 or not _single_store(block):
        return None
    write = block.writes[0]
    out_vars = _index_vars(write)
    spatial = {i.var for i in info.spatial()}
    inputs = [region for region in block.reads if region.buffer is not write.buffer]
    if len(inputs) != 2 or out_vars != spatial or len(write.region) < 3:
        return None
    lane, row = write.region[-1].min, write.region[-2].min
    for weight, data in (inputs, inputs[::-1]):
        weight_vars = _index_vars(weight)
        if weight_vars is None or weight.region[-1].min is not lane:
            continue
        data_vars = region_vars(data)
        if row in weight_vars or row not in data_vars or lane in data_vars:
            continue
        channels = (weight_vars & spatial) - {lane}
        if len(channels) > 1:
            continue
        channel = next(iter(channels), None)
        reduce = tuple(sorted((i.var for i in info.reduce()), key=info.position))
        if not set(reduce) <= weight_vars | data_vars:
            continue
        outer = tuple(sorted(spatial - {channel, row, lane}, key=info.position))
        return BlockedConvAxes(outer, channel, row, lane, reduce)
    return None


def dense_suffix(info: BlockInfo) -> int:
    """How many innermost loops of `info` (at least one) can be fused without breaking any
    access's contiguity: in the block's output and in every read that uses their vars, those
    vars index exactly the last dimensions, in loop order, one point each, and each such
    dimension is as long as its loop (so `[.., i2, i3]` of a 55x55 image fuses into one
    contiguous run of 3025 elements)."""
    loops = info.loops
    regions = [*info.block.writes, *info.block.reads]
    count = 1
    while count < len(loops):
        suffix = loops[len(loops) - count - 1 :]
        if not all(_ends_with(region, suffix) for region in regions):
            break
        count += 1
    return count


def _ends_with(region, suffix) -> bool:
    """Whether `region` either uses none of the `suffix` loops' vars or indexes its last
    dimensions exactly with them (one point each, full extents) and nowhere else."""
    wanted = {loop.var for loop in suffix}
    used = region_vars(region) & wanted
    if not used:
        return True
    dims = region.region
    if len(dims) < len(suffix):
        return False
    head, tail = dims[: len(dims) - len(suffix)], dims[len(dims) - len(suffix) :]
    shape = region.buffer.shape[len(dims) - len(suffix) :]
    for rng, loop, size in zip(tail, suffix, shape):
        extent = getattr(loop.loop.extent, "value", None)
        if rng.min is not loop.var or getattr(rng.extent, "value", None) != 1:
            return False
        if extent is None or getattr(size, "value", None) != extent:
            return False
    return not any((set(collect_vars(r.min)) | set(collect_vars(r.extent))) & wanted
                   for r in head)  # fmt: skip


def dim_of(region, var: Var) -> int | None:
    """The dimension of `region` indexed by exactly `var` (None when none is)."""
    return next((i for i, r in enumerate(region.region) if r.min is var), None)


def region_vars(region, last: bool = False) -> set[Var]:
    """The vars in a region's bounds (of its last dimension only, with `last`)."""
    found: set[Var] = set()
    for rng in region.region[-1:] if last else region.region:
        found |= set(collect_vars(rng.min)) | set(collect_vars(rng.extent))
    return found

"""`Reduction`: reduction blocks that are not GEMM-like (row reductions, gemv, convolution,
pooling)."""

from __future__ import annotations

from schedlab.arith.linear import linear_coefficient
from schedlab.ir.stmt import IterType

from ..analysis import BlockInfo, innermost_write_var, region_vars
from ..base import ScheduleRule, attempt
from ._common import (
    MIN_PARALLEL_WORK,
    constant_loops,
    extent_of,
    fit_lanes,
    output_dtype,
    parallel_prefix,
    parallelize,
    rows_before_channel_blocks,
    vector_lanes,
    vector_registers,
)

# Vectorize an inner spatial axis only when it is at least this long (shorter vectors cost
# more in predicates than they save).
MIN_VECTOR_EXTENT = 4
# Rows a row reduction runs side by side (independent chains of additions). Measured on Zen 5,
# one thread (1000 x 169 sum / 1024 x 768 layer_norm / 4096 x 1024 softmax, us): one row
# 62 / 626 / 32700, 2 rows 38 / 448 / 30800, 4 rows 32 / 380 / 27900, 8 rows 34 / 350 / 61600
# (gcc packs 8 strided rows into gathers).
INTERLEAVED_ROWS = 4


class Reduction(ScheduleRule):
    """Spatial loops outside, reduction loops serial inside them.

    When the output's last axis steps through an input's last dimension by more than one (a
    stride-2 pooling window): a whole output row accumulates locally (`_strided_row_plan`).
    When the output's last axis is also in the last index of an input (contiguous vector loads
    and stores, e.g. `ow` of a convolution, or `j` of a column sum): that axis is split to the
    SIMD width, its vector part moved inside the reduction loops and vectorized, the init
    decomposed out of them, the accumulators kept in "local" scope (with register rows over an
    axis the vector loads do not depend on, when there is one); the outer spatial loops are
    fused and parallel (as many as give every core several chunks). Otherwise (a row
    reduction such as softmax's row max, layer_norm's mean, gemv): the spatial loops are
    fused and parallel, and each reduction runs serially in one thread, so its result is the
    same as unscheduled. A reduction to one value (no spatial axis) is split into parallel
    partial reductions with rfactor."""

    name = "Reduction"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        if not info.is_reduction:
            return False
        loops = constant_loops(sch, block)
        if loops is None:
            return False
        if not info.spatial():
            return _all_reduce_plan(sch, block, info, target)
        if attempt(sch, lambda: _strided_row_plan(sch, block, info, target)):
            return True
        for tiled in (True, False):
            if attempt(sch, lambda t=tiled: _vector_plan(sch, block, info, target, t)):
                return True
        return _row_plan(sch, block, info)


def _strided_row_plan(sch, block, info: BlockInfo, target) -> bool:
    """A window reduction whose output columns step through the input by more than one (a
    stride-2 pooling): one output row accumulates in "local" scope, the window loops run
    outside the row loop, and the whole row is one `omp simd` loop (gcc deinterleaves the
    strided loads); the outer loops are parallel. Measured on a 3x3/2 max pool of 64x111x111
    (Zen 5): 0.48 ms with the vector plan's 11-lane strided tiles, 0.135 ms this way."""
    var = innermost_write_var(info)
    if var is None or not _strided_in_some_input(info, var):
        return False
    loops = sch.get_loops(block)
    spatial, reduce = _split_kinds(loops, info)
    row = loops[info.position(var)]
    outer = [h for h in spatial if h is not row]
    if not outer or not reduce:
        return False
    sch.reorder(*outer, *reduce, row)
    write_back = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(write_back, outer[-1])
    init = sch.decompose_reduction(block, reduce[0])
    for stage in (block, init, write_back):
        sch.vectorize(sch.get_loops(stage)[-1])
    parallelize(sch, outer[: parallel_prefix(sch, outer, target)], info)
    return True


def _strided_in_some_input(info: BlockInfo, var) -> bool:
    """Whether `var` indexes the last dimension of an input with a constant step above one."""
    out = info.block.writes[0].buffer
    for region in info.block.reads:
        if region.buffer is out or not region.region:
            continue
        step = linear_coefficient(region.region[-1].min, var)
        if step is not None and step > 1:
            return True
    return False


def _vector_plan(sch, block, info: BlockInfo, target, tiled: bool) -> bool:
    var = innermost_write_var(info)
    if var is None or not _contiguous_in_some_input(info, var):
        return False
    info = rows_before_channel_blocks(sch, block, info)
    loops = sch.get_loops(block)
    pos = info.position(var)
    extent = extent_of(sch, loops[pos])
    if extent < MIN_VECTOR_EXTENT:
        return False
    row_var = None
    if tiled:
        row_var = reuse_var(info, var)
        row_var = independent_var(info, var) if row_var is None else row_var
    if tiled and row_var is None:
        return False
    lanes = fit_lanes(extent, vector_lanes(target, output_dtype(info.block)))
    spatial, reduce = _split_kinds(loops, info)
    inner = []
    if row_var is not None:
        row_loop = loops[info.position(row_var)]
        rows = fit_rows(extent_of(sch, row_loop), vector_registers(target) // 4)
        row_outer, row_inner = sch.split(row_loop, [None, rows])
        spatial = [row_outer if h is row_loop else h for h in spatial]
        inner.append(row_inner)
    outer = [h for h in spatial if h is not loops[pos]]
    if extent > lanes:
        vec_outer, vec = sch.split(loops[pos], [None, lanes])
        outer.append(vec_outer)
    else:
        vec = loops[pos]
    if not outer:
        return False
    sch.reorder(*outer, *reduce, *inner, vec)
    _accumulate_locally(sch, block, outer[-1], reduce[0], len(inner))
    parallelize(sch, outer[: parallel_prefix(sch, outer, target)], info)
    return True


def _accumulate_locally(sch, block, tile_loop, first_reduce, unrolled: int) -> None:
    """Accumulators for one tile in "local" scope (cache_write, written back under
    `tile_loop`), zeroed outside the reduction loops; the innermost loop of each of the three
    blocks vectorized and the `unrolled` loops just outside it unrolled."""
    write_back = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(write_back, tile_loop)
    init = sch.decompose_reduction(block, first_reduce)
    for stage in (block, init, write_back):
        *_, vec = sch.get_loops(stage)
        for loop in sch.get_loops(stage)[-1 - unrolled : -1]:
            sch.unroll(loop)
        sch.vectorize(vec)


def _contiguous_in_some_input(info: BlockInfo, var) -> bool:
    """Whether `var` appears in the last index of an input: vector loads along it are
    contiguous (a convolution's output column; not gemv's row, which strides by K)."""
    out = info.block.writes[0].buffer
    return any(
        region.buffer is not out and region.region and var in region_vars(region, last=True)
        for region in info.block.reads
    )


def reuse_var(info: BlockInfo, vec_var):
    """A spatial iter var to tile as register rows: one that some input indexed by `vec_var`
    does not depend on, so each vector loaded from that input serves every row (a
    convolution's output channel for its data, or its output column for its weights). The
    innermost such var, or None."""
    out = info.block.writes[0].buffer
    candidates = []
    for region in info.block.reads:
        used = region_vars(region)
        if region.buffer is out or vec_var not in used:
            continue
        candidates += [i.var for i in info.spatial() if i.var not in used and i.var is not vec_var]
    return max(candidates, key=info.position) if candidates else None


def independent_var(info: BlockInfo, vec_var):
    """Without a var to reuse loads along, the next spatial var inside-out: its rows share no
    load but are independent chains, so several at once fill the pipeline where one vector's
    chain of window maxima is latency bound (a 3x3/2 max pool in NCHW16c, 64x111x111: XX ->
    XX us, Zen 5, one thread). None when there is no other spatial var."""
    others = [i.var for i in info.spatial() if i.var is not vec_var]
    return max(others, key=info.position) if others else None


def fit_rows(extent: int, limit: int) -> int:
    """Rows of a register tile: the largest divisor of `extent` up to `limit` when it is at
    least limit/2 (no predicate), else `limit` capped at `extent`."""
    divisors = [d for d in range(min(limit, extent), 0, -1) if extent % d == 0]
    best = divisors[0] if divisors else 1
    return best if best * 2 >= min(limit, extent) else min(limit, extent)


def _all_reduce_plan(sch, block, info: BlockInfo, target) -> bool:
    """A reduction to a single value (e.g. a 0-d norm): the outermost reduction loop (or, if
    short, all of them fused) split into `4 x cores` chunks, each chunk reduced into its own
    slot by rfactor in parallel, then the slots reduced serially. Changes the order of the
    additions, not the result beyond rounding."""
    if info.work() < MIN_PARALLEL_WORK:
        return False
    first = sch.get_loops(block)[0]
    parts = 4 * int(target.attrs.get("num_cores", 1) or 1)
    if extent_of(sch, first) < 2 * parts:  # too short to split: fuse all to get a long one
        loops = sch.get_loops(block)
        first = sch.fuse(*loops) if len(loops) > 1 else first
        if extent_of(sch, first) < 2 * parts:
            return False
    outer, _ = sch.split(first, [parts, None])
    partial = sch.rfactor(outer, 0)
    sch.parallel(sch.get_loops(partial)[0])
    return True


def _row_plan(sch, block, info: BlockInfo) -> bool:
    spatial, reduce = _split_kinds(sch.get_loops(block), info)
    if reduce and any(info.position(i.var) < info.position(info.spatial()[-1].var)
                      for i in info.reduce()):  # fmt: skip
        sch.reorder(*spatial, *reduce)
    rows = _interleaved_rows(extent_of(sch, spatial[-1]))
    if reduce and rows > 1 and attempt(sch, lambda: _interleave(sch, block, spatial, reduce, rows)):
        parallelize(sch, [*spatial[:-1], sch.get_loops(block)[len(spatial) - 1]], info)
        return True
    # the running value in a "local" scalar (a register), stored once per output
    attempt(sch, lambda: _scalar_accumulator(sch, block, spatial[-1]))
    parallelize(sch, spatial, info)
    return True


def _interleaved_rows(extent: int | None) -> int:
    """How many rows to reduce side by side: a divisor of `extent` from INTERLEAVED_ROWS down
    to half of it, else 1."""
    if extent is None:
        return 1
    return next((d for d in range(INTERLEAVED_ROWS, INTERLEAVED_ROWS // 2 - 1, -1)
                 if extent % d == 0), 1)  # fmt: skip


def _interleave(sch, block, spatial, reduce, rows: int) -> bool:
    """`rows` rows reduced side by side, each in its own "local" accumulator, each in the
    unscheduled order: one row's sum is a chain of dependent additions (latency bound), so
    independent rows fill the pipeline (a 1000 x 169 mean, one thread: 65 -> XX us)."""
    outer, inner = sch.split(spatial[-1], [None, rows])
    sch.reorder(outer, *reduce, inner)
    sch.unroll(inner)
    write_back = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(write_back, outer)
    sch.decompose_reduction(block, reduce[0])
    return True


def _scalar_accumulator(sch, block, loop) -> bool:
    write_back = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(write_back, loop)
    return True


def _split_kinds(loops, info: BlockInfo) -> tuple[list, list]:
    """The loop handles binding spatial iter vars, and those binding reduce iter vars."""
    spatial = [h for h, i in zip(loops, info.loops) if i.kind == IterType.SPATIAL]
    reduce = [h for h, i in zip(loops, info.loops) if i.kind == IterType.REDUCE]
    return spatial, reduce

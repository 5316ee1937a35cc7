"""`Reduction`: reduction blocks that are not GEMM-like (row reductions, gemv, convolution,
pooling)."""

from __future__ import annotations

from schedlab.ir.stmt import IterType

from ..analysis import BlockInfo, innermost_write_var
from ..base import ScheduleRule, attempt
from ._common import extent_of, fit_lanes, output_dtype, vector_lanes

# Vectorize an inner spatial axis only when it is at least this long (shorter vectors cost
# more in predicates than they save).
MIN_VECTOR_EXTENT = 4


class Reduction(ScheduleRule):
    """Spatial loops outside, reduction loops serial inside them.

    With a second spatial axis and an output axis contiguous in memory (the last index of the
    output, e.g. `ow` of a convolution): that axis is split to the SIMD width, its vector part
    moved inside the reduction loops and vectorized, the init decomposed out of them; the other
    spatial loops are fused and parallel. Otherwise (a row reduction such as softmax's row max,
    layer_norm's mean, gemv): the spatial loops are fused and parallel, and each reduction runs
    serially in one thread, so its result is the same as unscheduled."""

    name = "Reduction"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        if not info.is_reduction or not info.spatial():
            return False
        loops = sch.get_loops(block)
        if any(extent_of(sch, loop) is None for loop in loops):
            return False
        if attempt(sch, lambda: _vector_plan(sch, block, info, target)):
            return True
        return _row_plan(sch, block, info)


def _vector_plan(sch, block, info: BlockInfo, target) -> bool:
    var = innermost_write_var(info)
    if var is None or len(info.spatial()) < 2:
        return False
    loops = sch.get_loops(block)
    pos = info.position(var)
    extent = extent_of(sch, loops[pos])
    if extent < MIN_VECTOR_EXTENT:
        return False
    lanes = fit_lanes(extent, vector_lanes(target, output_dtype(info.block)))
    spatial, reduce = _split_kinds(loops, info)
    outer_spatial = [loop for loop in spatial if loop is not loops[pos]]
    if extent > lanes:
        vec_outer, vec = sch.split(loops[pos], [None, lanes])
        outer_spatial.append(vec_outer)
    else:
        vec = loops[pos]
    sch.reorder(*outer_spatial, *reduce, vec)
    # one vector of accumulators in "local" scope, written back once per output vector
    write_back = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(write_back, outer_spatial[-1])
    init = sch.decompose_reduction(block, reduce[0])
    sch.vectorize(vec)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.vectorize(sch.get_loops(write_back)[-1])
    _parallel(sch, outer_spatial)
    return True


def _row_plan(sch, block, info: BlockInfo) -> bool:
    spatial, reduce = _split_kinds(sch.get_loops(block), info)
    if reduce and any(info.position(i.var) < info.position(info.spatial()[-1].var)
                      for i in info.reduce()):  # fmt: skip
        sch.reorder(*spatial, *reduce)
    _parallel(sch, spatial)
    return True


def _split_kinds(loops, info: BlockInfo) -> tuple[list, list]:
    """The loop handles binding spatial iter vars, and those binding reduce iter vars."""
    spatial = [h for h, i in zip(loops, info.loops) if i.kind == IterType.SPATIAL]
    reduce = [h for h, i in zip(loops, info.loops) if i.kind == IterType.REDUCE]
    return spatial, reduce


def _parallel(sch, loops) -> None:
    """Fuse the (adjacent, outermost) loops and parallelize the result."""
    if loops:
        sch.parallel(sch.fuse(*loops) if len(loops) > 1 else loops[0])

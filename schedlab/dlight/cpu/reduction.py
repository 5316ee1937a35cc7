"""`Reduction`: reduction blocks that are not GEMM-like (row reductions, gemv, convolution,
pooling)."""

from __future__ import annotations

from ..analysis import BlockInfo, innermost_write_var
from ..base import ScheduleRule, attempt
from ._common import extent_of, output_dtype, vector_lanes, vectorize_innermost

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
    lanes = vector_lanes(target, output_dtype(info.block))
    inner_loops = [loops[i] for i, loop in enumerate(info.loops) if i != pos]
    spatial = [loops[i] for i, loop in enumerate(info.loops) if loop.kind.value == "spatial"]
    reduce = [loops[i] for i, loop in enumerate(info.loops) if loop.kind.value == "reduce"]
    del inner_loops
    outer_spatial = [loop for loop in spatial if loop is not loops[pos]]
    if extent > lanes:
        vec_outer, vec = sch.split(loops[pos], [None, lanes])
        outer_spatial.append(vec_outer)
    else:
        vec = loops[pos]
    sch.reorder(*outer_spatial, *reduce, vec)
    init = sch.decompose_reduction(block, reduce[0])
    sch.vectorize(vec)
    sch.vectorize(sch.get_loops(init)[-1])
    _parallel(sch, outer_spatial)
    return True


def _row_plan(sch, block, info: BlockInfo) -> bool:
    loops = sch.get_loops(block)
    spatial = [loops[i] for i, loop in enumerate(info.loops) if loop.kind.value == "spatial"]
    reduce = [loops[i] for i, loop in enumerate(info.loops) if loop.kind.value == "reduce"]
    if reduce and any(info.position(i.var) < info.position(info.spatial()[-1].var)
                      for i in info.reduce()):  # fmt: skip
        sch.reorder(*spatial, *reduce)
    _parallel(sch, spatial)
    return True


def _parallel(sch, loops) -> None:
    """Fuse the (adjacent, outermost) loops and parallelize the result."""
    if loops:
        sch.parallel(sch.fuse(*loops) if len(loops) > 1 else loops[0])


__all__ = ["Reduction", "vectorize_innermost"]

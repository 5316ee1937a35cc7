"""`AddRFactor`: parallelism for reductions whose spatial extent is too small (TVM's rule).

For a plain reduction nest that needs it, the rule keeps the original and adds one design
space per part of a sampled two-way split of the (fused) reduction loops: `rfactor` on that
part makes it a spatial loop of a new `<name>_rf` block, which `ParallelizeVectorizeUnroll`
can then run in parallel. The original block is annotated
`meta_schedule.random_compute_producer` so `RandomComputeLocation` also places its rf producer.
"""

from __future__ import annotations

from schedlab.ir.stmt import BlockRealize, IterType
from schedlab.schedule import BlockRV, Schedule
from schedlab.schedule.analysis.stage_pipeline import is_reduction_block
from schedlab.schedule.errors import ScheduleError

from .analysis import (
    OPAQUE,
    block_of,
    cumulative_lengths,
    is_trivial_binding,
    loop_iter_type,
    needs_multi_level_tiling,
)  # fmt: skip
from .rule import ScheduleRule, num_cores, target_of

RANDOM_COMPUTE_PRODUCER = "meta_schedule.random_compute_producer"


class AddRFactor(ScheduleRule):
    name = "AddRFactor"

    def __init__(self, max_jobs_per_core: int = 16, max_innermost_factor: int | None = None):
        self.max_jobs_per_core = max_jobs_per_core
        self.max_innermost_factor = max_innermost_factor

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        node = block_of(sch, block)
        cores = num_cores(target_of(sch))
        if node is None or not needs_rfactor(sch, node, cores * self.max_jobs_per_core, cores):
            return [sch]
        original = sch.copy()
        fused, num_spatial = _reorder_and_fuse_reduction(sch, block)
        limit = self.max_innermost_factor or sch.get(fused).extent.value
        factors = sch.sample_perfect_tile(fused, n=2, max_innermost_factor=limit)
        results = []
        for part in sch.split(fused, factors):
            fork = sch.copy()
            try:
                fork.rfactor(part, num_spatial)
                fork.annotate(block, RANDOM_COMPUTE_PRODUCER, 1)
            except ScheduleError:
                continue
            results.append(fork)
        return results + [original]


def needs_rfactor(sch: Schedule, block, max_parallel_extent: int, max_parallel_basic: int) -> bool:
    """TVM's NeedsRFactorOrCrossThreadReduction: a reduction block with a trivial binding, a
    perfect nest of spatial and reduce loops directly around it, and too little spatial
    parallelism for its reduction."""
    if not block.writes or "meta_schedule.tiling_structure" in block.annotations:
        return False
    if not is_reduction_block(sch.state, block) or not is_trivial_binding(sch, block):
        return False
    loops = sch.state.loops_above(block)
    kinds = [loop_iter_type(loop) for loop in loops]
    if OPAQUE in kinds or IterType.REDUCE not in kinds or not _perfect_nest(loops, block):
        return False
    lengths = cumulative_lengths(sch, block)
    if lengths is None:
        return False
    space, reduce = lengths
    if needs_multi_level_tiling(sch, block):
        return not (space >= reduce or space > max_parallel_extent)
    return reduce > 1 and reduce > max_parallel_basic


def _perfect_nest(loops, block) -> bool:
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            return False
    last = loops[-1].body
    return isinstance(last, BlockRealize) and last.block is block


def _reorder_and_fuse_reduction(sch: Schedule, block: BlockRV):
    """Spatial loops first, then the reduction loops fused into one; returns (fused loop,
    number of spatial loops)."""
    loops = sch.get_loops(block)
    kinds = [loop_iter_type(sch.get(loop)) for loop in loops]
    spatial = [lp for lp, kind in zip(loops, kinds) if kind == IterType.SPATIAL]
    reduce = [lp for lp, kind in zip(loops, kinds) if kind == IterType.REDUCE]
    if spatial + reduce != loops:
        sch.reorder(*spatial, *reduce)
    fused = sch.fuse(*reduce) if len(reduce) > 1 else reduce[0]
    return fused, len(spatial)

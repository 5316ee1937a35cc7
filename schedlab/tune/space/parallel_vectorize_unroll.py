"""`ParallelizeVectorizeUnroll`: mark the root block with how much to parallelize, vectorize and
unroll (TVM's rule); the postprocessor `RewriteParallelVectorizeUnroll` turns the marks into
loop kinds once every other decision is taken.

- `meta_schedule.parallel` = cores x `max_jobs_per_core` (cores from the target),
- `meta_schedule.vectorize` = `max_vectorize_extent`,
- `meta_schedule.unroll_explicit` (or `_implicit`) = a `sample_categorical` over
  `unroll_max_steps`, uniform; only for functions with a reduction (as TVM).
A value of -1 (or an empty `unroll_max_steps`) turns that part off.
"""

from __future__ import annotations

from schedlab.schedule import BlockRV, Schedule

from .analysis import block_of, is_root, is_spatial_func
from .rule import ScheduleRule, num_cores, target_of

PARALLEL = "meta_schedule.parallel"
VECTORIZE = "meta_schedule.vectorize"
UNROLL_EXPLICIT = "meta_schedule.unroll_explicit"
UNROLL_IMPLICIT = "meta_schedule.unroll_implicit"


class ParallelizeVectorizeUnroll(ScheduleRule):
    name = "ParallelizeVectorizeUnroll"

    def __init__(self, max_jobs_per_core: int = 16, max_vectorize_extent: int = 16,
                 unroll_max_steps: list[int] | None = None,
                 unroll_explicit: bool = True):  # fmt: skip
        self.max_jobs_per_core = max_jobs_per_core
        self.max_vectorize_extent = max_vectorize_extent
        self.unroll_max_steps = list(unroll_max_steps or [])
        self.unroll_explicit = unroll_explicit

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        node = block_of(sch, block)
        if node is None or not is_root(sch, node):
            return [sch]
        if self.max_jobs_per_core != -1:
            extent = num_cores(target_of(sch)) * self.max_jobs_per_core
            sch.annotate(block, PARALLEL, extent)
        if self.max_vectorize_extent != -1:
            sch.annotate(block, VECTORIZE, self.max_vectorize_extent)
        if self.unroll_max_steps and not is_spatial_func(sch.state.func_of(node.uid)):
            steps = self.unroll_max_steps
            step = sch.sample_categorical(steps, [1.0 / len(steps)] * len(steps))
            sch.annotate(block, UNROLL_EXPLICIT if self.unroll_explicit else UNROLL_IMPLICIT, step)
        return [sch]

"""`RandomComputeLocation`: move untiled producer stages to a sampled loop of their consumers
(TVM's rule): `sample_compute_location` + `compute_at`, so the location (stay at the root,
inline, or one of the legal loops) is a decision the search re-samples and mutates.

It takes a block directly under the root with loops of its own and at least one consumer, not
tiled by MultiLevelTiling. When `AddRFactor` marked a block `meta_schedule.random_compute_producer`,
its rf producer is placed too (collected first: an inlined block has no producers to ask
for). Unlike TVM, the rf producer is placed even when the marked block itself is not (TVM
skips both when the marked block writes the output, leaving the partial sums at the root).
"""

from __future__ import annotations

from schedlab.schedule import BlockRV, Schedule
from schedlab.schedule.analysis.dependence import consumers

from .analysis import block_of, is_root
from .multi_level_tiling import TILING_STRUCTURE
from .rfactor import RANDOM_COMPUTE_PRODUCER
from .rule import ScheduleRule


class RandomComputeLocation(ScheduleRule):
    name = "RandomComputeLocation"

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        node = block_of(sch, block)
        if node is None or is_root(sch, node):
            return [sch]
        producer = None
        if RANDOM_COMPUTE_PRODUCER in node.annotations:
            found = sch.get_producers(block)
            sch.unannotate(block, RANDOM_COMPUTE_PRODUCER)
            producer = found[0] if len(found) == 1 else None
        if _movable(sch, sch.get(block)):
            _compute_at_sampled(sch, block)
        if producer is not None and _movable(sch, sch.get(producer)):
            _compute_at_sampled(sch, producer)
        return [sch]


def _movable(sch: Schedule, node) -> bool:
    state = sch.state
    scope = state.scope_block(node)
    if scope is None or state.scope_block(scope) is not None:
        return False  # only the root's direct children
    loops = state.loops_above(node)
    if not loops or len(state.child_blocks(loops[0])) > 1:
        return False
    if TILING_STRUCTURE in node.annotations:
        return False
    return bool(consumers(state, node))


def _compute_at_sampled(sch: Schedule, block: BlockRV) -> None:
    location = sch.sample_compute_location(block)
    sch.compute_at(block, location, True)

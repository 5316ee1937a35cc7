"""`Fallback`: every block gets a valid GPU schedule (TVM's dlight gpu.Fallback)."""

from __future__ import annotations

from ..analysis import BlockInfo
from ..base import ScheduleRule
from ._common import bind_spatial, max_threads, spatial_first


class Fallback(ScheduleRule):
    """Spatial loops first and fused, split by the thread count (256, or the target's
    `max_threads_per_block` when smaller), bound to blockIdx.x / threadIdx.x; reduction loops
    stay serial inside each thread. A block without spatial loops (a full reduction to one
    value) runs as one thread of one block: slow, but correct."""

    name = "Fallback"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        spatial = spatial_first(sch, block, info)
        if spatial:
            bind_spatial(sch, spatial, max_threads(target))
        return True

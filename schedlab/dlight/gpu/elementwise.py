"""`Elementwise`: injective blocks, one element per thread or a few when there are many."""

from __future__ import annotations

from ..analysis import BlockInfo
from ..base import ScheduleRule
from ._common import bind_spatial, max_threads

ELEMENTS_PER_THREAD = 4


class Elementwise(ScheduleRule):
    """Fuse all loops, split (blocks, threads) and bind them; when there is enough work to
    keep every SM busy with several blocks even so, each thread takes `ELEMENTS_PER_THREAD`
    elements a block apart (an unrolled loop outside the thread loop: accesses stay
    coalesced)."""

    name = "Elementwise"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        if not info.is_injective or not info.loops:
            return False
        threads = max_threads(target)
        work = info.work()
        busy = ELEMENTS_PER_THREAD * threads * 4 * int(target.attrs.get("num_sms", 1) or 1)
        inner = ELEMENTS_PER_THREAD if work is not None and work >= busy else 1
        bind_spatial(sch, sch.get_loops(block), threads, inner)
        return True

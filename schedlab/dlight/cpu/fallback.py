"""`Fallback`: the last rule: parallelize what can be, leave the rest."""

from __future__ import annotations

from schedlab.ir.stmt import IterType

from ..analysis import BlockInfo
from ..base import ScheduleRule
from ._common import parallelize


class Fallback(ScheduleRule):
    """Parallelize the outermost loop when it binds a spatial iter var (running its
    iterations concurrently cannot race: each writes its own outputs). Declines blocks
    without such a loop, or too small to pay for threads: they stay as they are."""

    name = "Fallback"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        if not info.loops or info.loops[0].kind != IterType.SPATIAL:
            return False
        return parallelize(sch, sch.get_loops(block)[:1], info)

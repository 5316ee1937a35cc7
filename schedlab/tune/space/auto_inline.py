"""`AutoInline`: inline elementwise / injective blocks into their consumers (TVM's rule).

In a function with reductions, a block is inlined only when it has one write, calls none of
`disallow_op` (exp by default on CPU: inlining it into a reduction recomputes it per use), has
no if-then-else (a padding stage inlined into a convolution tests its condition in the inner
loop), and each read is an injective, ordered image of its write (a transpose is not inlined:
its consumer would read across rows). A purely spatial function inlines whatever is legal.
"""

from __future__ import annotations

from schedlab.schedule import BlockRV, Schedule
from schedlab.schedule.analysis.dependence import consumers, producers
from schedlab.schedule.analysis.stage_pipeline import is_complete_block
from schedlab.schedule.errors import ScheduleError

from .analysis import (
    block_of,
    has_if_then_else,
    has_op,
    is_root,
    is_spatial_func,
    read_write_pattern,
)  # fmt: skip
from .rule import ScheduleRule


class AutoInline(ScheduleRule):
    name = "AutoInline"

    def __init__(self, into_producer: bool = False, into_consumer: bool = True,
                 inline_const_tensor: bool = True, disallow_if_then_else: bool = True,
                 require_injective: bool = True, require_ordered: bool = True,
                 disallow_op: tuple[str, ...] = ("exp",)):  # fmt: skip
        self.into_producer = into_producer
        self.into_consumer = into_consumer
        self.inline_const_tensor = inline_const_tensor
        self.disallow_if_then_else = disallow_if_then_else
        self.require_injective = require_injective
        self.require_ordered = require_ordered
        self.disallow_op = tuple(disallow_op)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        node = block_of(sch, block)
        if node is None or is_root(sch, node) or len(node.writes) != 1:
            return [sch]
        # a failing primitive changes nothing and records nothing, so trying is the check
        try:
            if self._into_consumer(sch, node):
                sch.compute_inline(block)
            elif self._into_producer(sch, node):
                sch.reverse_compute_inline(block)
        except ScheduleError:
            pass
        return [sch]

    def _into_consumer(self, sch: Schedule, node) -> bool:
        if not self.into_consumer or not consumers(sch.state, node):
            return False
        if self.inline_const_tensor and not node.reads:
            return True
        return self._inlinable(sch, node)

    def _into_producer(self, sch: Schedule, node) -> bool:
        if not self.into_producer or not self._inlinable(sch, node):
            return False
        found = producers(sch.state, node)
        return len(found) == 1 and is_complete_block(sch.state, found[0])

    def _inlinable(self, sch: Schedule, node) -> bool:
        if is_spatial_func(sch.state.func_of(node.uid)):
            return True
        if self.disallow_op and has_op(node, self.disallow_op):
            return False
        if self.disallow_if_then_else and has_if_then_else(node):
            return False
        for read in node.reads:
            pattern = read_write_pattern(read, node.writes[0])
            if self.require_injective and not pattern.injective:
                return False
            if self.require_ordered and not pattern.ordered:
                return False
        return True

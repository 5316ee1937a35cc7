"""Postprocessors: the last, deterministic steps of every candidate (TVM's meta_schedule.Postproc).

`postproc.apply(sch) -> bool` rewrites the schedule in place with primitives (so the trace
records them, after `EnterPostproc`) and returns False to reject the candidate. They run in
order after `sch.enter_postproc()`; see `run_postprocs`.
"""

from __future__ import annotations

from collections.abc import Sequence

from schedlab.ir import expr as E
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import Block, For, IterType
from schedlab.schedule import Schedule
from schedlab.schedule.errors import ScheduleError

from .analysis import loop_iter_type


class Postproc:
    """Base class: `apply(sch) -> bool`."""

    name = "Postproc"

    def apply(self, sch: Schedule) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement apply(sch)")

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({params})"


def run_postprocs(sch: Schedule, postprocs: Sequence[Postproc]) -> bool:
    """Mark the trace (`enter_postproc`) and apply each postprocessor; False when one rejects
    the schedule or a primitive it calls refuses."""
    sch.enter_postproc()
    for postproc in postprocs:
        try:
            if not postproc.apply(sch):
                return False
        except ScheduleError:
            return False
    return True


class DisallowDynamicLoop(Postproc):
    """Reject schedules with a loop whose extent is not a constant."""

    name = "DisallowDynamicLoop"

    def apply(self, sch: Schedule) -> bool:
        dynamic = []
        for func in sch.mod.functions().values():
            body = getattr(func, "body", None)
            if body is not None:
                post_order_visit(
                    body,
                    lambda n: dynamic.append(n)
                    if isinstance(n, For) and not isinstance(n.extent, E.IntImm) else None,
                )  # fmt: skip
        return not dynamic


class RewriteReductionBlock(Postproc):
    """`decompose_reduction` of every reduction block at its first loop that is not purely
    spatial (TVM's FindDecomposePoint): the init runs once per output tile, before the
    reduction loops, instead of being tested inside them. A block whose decomposition a
    primitive refuses keeps its init (still correct code)."""

    name = "RewriteReductionBlock"

    def apply(self, sch: Schedule) -> bool:
        refused: set[str] = set()
        while True:
            name = self._next(sch, refused)
            if name is None:
                return True
            block = sch.get_block(name)
            loops = sch.get_loops(block)
            point = _decompose_point(sch, loops)
            try:
                sch.decompose_reduction(block, loops[point])
            except ScheduleError:
                refused.add(name)

    def _next(self, sch: Schedule, refused: set[str]) -> str | None:
        for block in _all_blocks(sch):
            if block.init is None or block.name_hint in refused:
                continue
            if any(iv.iter_type == IterType.REDUCE for iv in block.iter_vars):
                loops = sch.state.loops_above(block)
                if any(loop.thread_tag for loop in loops):
                    continue
                if any(loop_iter_type(loop) != IterType.SPATIAL for loop in loops):
                    if len(sch.state.blocks_named(block.name_hint)) == 1:
                        return block.name_hint
            refused.add(block.name_hint)
        return None


def _decompose_point(sch: Schedule, loops) -> int:
    return next(
        i for i, loop in enumerate(loops) if loop_iter_type(sch.get(loop)) != IterType.SPATIAL
    )


def _all_blocks(sch: Schedule) -> list[Block]:
    found: list[Block] = []
    for func in sch.mod.functions().values():
        body = getattr(func, "body", None)
        if body is not None:
            post_order_visit(body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return found

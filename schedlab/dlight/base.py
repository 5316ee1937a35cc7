"""`ScheduleRule` and `ApplyDefaultSchedule`, in the shape of TVM's Dlight.

A rule schedules the blocks it recognizes; `ApplyDefaultSchedule(*rules)` is a module pass that
gives every block of every not-yet-scheduled PrimFunc the first rule that matches it (rules are
tried in order, so put a fallback last), then marks the function scheduled
(attr "tir.is_scheduled") and records which rule scheduled which block (attr "dlight.rules").
A rule that meets a primitive's ScheduleError rolls its steps back and tries a simpler plan or
declines: a rule never leaves a half-applied or illegal schedule behind.
"""

from __future__ import annotations

from collections.abc import Callable

from schedlab.ir.expr import Call, Select
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import BlockRealize
from schedlab.ir.transform import Pass
from schedlab.schedule import Schedule
from schedlab.schedule.errors import ScheduleError
from schedlab.target import Target

from .analysis import BlockInfo, block_info

SCHEDULED_ATTR = "tir.is_scheduled"
INLINE = "Inline"  # the name reported for a stage inlined into its consumer
RULES_ATTR = "dlight.rules"
CLAIMED = "dlight.claimed"  # block annotation: scheduled by the rule of an earlier block


class ScheduleRule:
    """A default-schedule rule class.

    Subclasses implement `schedule_block(sch, block, info, target) -> bool`: schedule one root
    block (a BlockRV whose loops bind its iter vars one to one, described by `info`) and return
    True, or return False when the block is not theirs. They may raise ScheduleError: the
    caller undoes every step the rule took on that block."""

    name = "ScheduleRule"

    def schedule_block(self, sch: Schedule, block, info: BlockInfo, target: Target) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement schedule_block")

    def apply(self, func: PrimFunc, target, tunable: bool = False) -> Schedule | None:
        """Schedule every block of `func` this rule matches; None when it matches none.

        `tunable` is accepted for TVM compatibility: these rules make no sampled decisions."""
        sch = Schedule(func, target=Target(target), debug=False)
        fired = {}
        for name in root_block_names(sch):
            if try_rule(self, sch, name, sch.target):
                fired[name] = self.name
        return sch if fired else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def root_block_names(sch: Schedule) -> list[str]:
    """The names of the root block's child blocks, in program order (none when the function
    has no root block, e.g. a hand-written loop nest without blocks)."""
    body = sch.func.body
    if not isinstance(body, BlockRealize):
        return []
    return [block.name_hint for block in sch.state.child_blocks(body.block)]


def try_rule(rule: ScheduleRule, sch: Schedule, name: str, target: Target) -> bool:
    """Apply `rule` to the block named `name`; False (with nothing changed) when the block is
    gone, its binding is not trivial, the rule declines, or a primitive refuses."""
    blocks = sch.state.blocks_named(name)
    if len(blocks) != 1:
        return False
    info = block_info(sch.state, blocks[0])
    if info is None:
        return False
    return attempt(sch, lambda: rule.schedule_block(sch, sch.get_block(name), info, target))


def attempt(sch: Schedule, plan: Callable[[], bool | None]) -> bool:
    """Run `plan` on `sch`; if it raises ScheduleError or returns False, undo its steps."""
    mark = len(sch.history)
    try:
        ok = plan() is not False
    except ScheduleError:
        ok = False
    if not ok:
        while len(sch.history) > mark:
            sch.undo()
    return ok


def schedule_func(
    func: PrimFunc, rules, target="cpu", debug: bool = False
) -> tuple[Schedule, dict[str, str]]:
    """Schedule each root block of `func` with the first rule in `rules` that takes it,
    after inlining elementwise producers into their single consumer (reported as "Inline").

    Returns the schedule and {block name: rule name} for the blocks some rule scheduled.
    `debug=True` verifies the IR after every primitive (slower; for tests)."""
    target = Target(target)
    sch = Schedule(func, target=target, debug=debug)
    fired: dict[str, str] = {name: INLINE for name in inline_injective_producers(sch)}
    names = [name for name in root_block_names(sch) if name not in fired]
    for name in names:
        for rule in rules:
            if try_rule(rule, sch, name, target):
                fired[name] = rule.name
                # blocks the rule folded into this one (an inlined epilogue) are its too
                for other in _vanished(sch, names, fired):
                    fired[other] = rule.name
                break
    return sch, fired


def inline_injective_producers(sch: Schedule) -> list[str]:
    """compute_inline each elementwise stage that writes an intermediate buffer read by one
    consumer block (a chain such as add -> relu in a fused function becomes one loop nest,
    with no intermediate buffer). Stages with a conditional (padding) are kept: their
    consumer's inner loop would test the condition at every step. Returns the inlined names."""
    inlined = []
    for name in root_block_names(sch):
        blocks = sch.state.blocks_named(name)
        info = block_info(sch.state, blocks[0]) if len(blocks) == 1 else None
        if info is None or not info.is_injective or not _plain_intermediate(sch, info.block):
            continue
        block = sch.get_block(name)
        if len(sch.get_consumers(block)) == 1 and attempt(sch, lambda b=block: _inline(sch, b)):
            inlined.append(name)
    return inlined


def _inline(sch: Schedule, block) -> bool:
    sch.compute_inline(block)
    return True


def _plain_intermediate(sch: Schedule, block) -> bool:
    """One store into a buffer allocated by the root block, with no if_then_else / Select."""
    allocated = sch.func.body.block.alloc_buffers
    if len(block.writes) != 1 or not any(b is block.writes[0].buffer for b in allocated):
        return False
    conditional = []
    post_order_visit(
        block.body,
        lambda n: (
            conditional.append(n)
            if isinstance(n, Select) or (isinstance(n, Call) and n.op == "if_then_else")
            else None
        ),
    )
    return not conditional


def _vanished(sch: Schedule, names: list[str], fired: dict[str, str]) -> list[str]:
    """Blocks not yet given a rule that the last one removed, or scheduled along with its own
    and marked so (annotation CLAIMED: a fused chain's later stages)."""
    return [
        n for n in names if n not in fired and (not sch.state.blocks_named(n) or _claimed(sch, n))
    ]


def _claimed(sch: Schedule, name: str) -> bool:
    return any(block.annotations.get(CLAIMED) for block in sch.state.blocks_named(name))


def is_scheduled(func: PrimFunc) -> bool:
    return bool(func.attrs.get(SCHEDULED_ATTR, False))


def ApplyDefaultSchedule(*rules: ScheduleRule, target=None) -> Pass:  # noqa: N802 (TVM name)
    """A module pass giving each PrimFunc not marked "tir.is_scheduled" a default schedule
    from `rules` (first match per block). The result is marked scheduled, and its
    "dlight.rules" attr says which rule took which block ("name=Rule,..." text).

    The target is `target`, else the one entered with `with Target(...):` when the pass runs
    (as in TVM), else `Target("cpu")`."""
    if not rules:
        raise ValueError("ApplyDefaultSchedule: give at least one rule (e.g. *cpu.default_rules())")
    for rule in rules:
        if not isinstance(rule, ScheduleRule):
            raise TypeError(f"ApplyDefaultSchedule: expected ScheduleRule, got {rule!r}")
    fixed = None if target is None else Target(target)

    def run(mod: IRModule) -> IRModule:
        current = fixed or Target.current() or Target("cpu")
        updated = {}
        for key, func in mod.items():
            if isinstance(func, PrimFunc) and not is_scheduled(func):
                updated[key] = _scheduled(func, rules, current)
        return mod.update(updated) if updated else mod

    return Pass(run, "ApplyDefaultSchedule", 0, doc=ApplyDefaultSchedule.__doc__)


def _scheduled(func: PrimFunc, rules, target: Target) -> PrimFunc:
    if not isinstance(func.body, BlockRealize):  # no blocks: nothing a rule can read
        return func
    sch, fired = schedule_func(func, rules, target)
    result = sch.func
    text = ",".join(f"{name}={rule}" for name, rule in fired.items())
    return result.with_attr(SCHEDULED_ATTR, True).with_attr(RULES_ATTR, text)


def rules_of(func: PrimFunc) -> dict[str, str]:
    """{block name: rule name} recorded by ApplyDefaultSchedule on `func`."""
    text = func.attrs.get(RULES_ATTR, "")
    text = getattr(text, "value", text)
    return dict(item.split("=", 1) for item in text.split(",") if item)

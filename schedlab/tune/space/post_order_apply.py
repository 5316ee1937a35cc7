"""`PostOrderApply`: the design space of a function, and its candidates (TVM's space generator).

    space = PostOrderApply()                                  # rules etc. from the target
    designs = space.generate_design_space(func, "cpu")        # [Schedule]: gemm gives 6
    sch = space.sample_candidate(func, "cpu", designs[0].trace, seed=7)   # or None
    again = space.apply_trace(func, "cpu", sch.trace)         # the same module

Design spaces: each rule in order is applied to every block, consumers first (the block list,
children before parents, is walked from the end); a rule may fork a schedule, and every
resulting schedule is a design space. The blocks are the ones that exist before the first
rule: blocks a rule creates (caches, rfactor partials) are left to the rule that made them.

A candidate is a design space replayed with every decision sampled afresh, then
post-processed: `enter_postproc()` marks the trace and the postprocessors append their
instructions, so a stored candidate trace replays exactly, postprocessing included (TVM stores
records the same way). `apply_trace` replays such a trace as it is, and runs the postprocessors
again only for a trace without the EnterPostproc marker (a mutated trace: mutators drop it).
"""

from __future__ import annotations

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.schedule import Schedule, Trace
from schedlab.schedule.errors import ScheduleError
from schedlab.schedule.trace import POSTPROC_MARKER
from schedlab.target import Target

from .analysis import block_names_post_order, block_of
from .mutator import Mutator
from .postproc import Postproc, run_postprocs
from .registry import default_mutators, default_postprocs, default_rules
from .replay import new_schedule, replay
from .rule import ScheduleRule

CUSTOM_RULE = "schedule_rule"  # a block annotated with it is left to a custom rule (TVM)


class PostOrderApply:
    """The space generator. `rules`, `postprocs` and `mutators` default to the target's set
    (see registry.py); `seed` seeds the design-space sampling."""

    def __init__(self, rules: list[ScheduleRule] | None = None,
                 postprocs: list[Postproc] | None = None,
                 mutators: dict[Mutator, float] | None = None, seed: int = 0):  # fmt: skip
        self.rules = None if rules is None else list(rules)
        self.postprocs = None if postprocs is None else list(postprocs)
        self._mutators = None if mutators is None else dict(mutators)
        self.seed = seed

    def rules_for(self, target) -> list[ScheduleRule]:
        return self.rules if self.rules is not None else default_rules(Target(target))

    def postprocs_for(self, target) -> list[Postproc]:
        return self.postprocs if self.postprocs is not None else default_postprocs(Target(target))

    def mutators(self, target) -> dict[Mutator, float]:
        """{mutator: probability} the evolutionary search draws from."""
        return self._mutators if self._mutators is not None else default_mutators(Target(target))

    def generate_design_space(self, func: PrimFunc | IRModule, target) -> list[Schedule]:
        return generate_design_space(func, target, self.rules_for(target), self.seed)

    def sample_candidate(
        self, func, target, design_space_trace: Trace, seed: int
    ) -> Schedule | None:
        return sample_candidate(func, target, design_space_trace, seed, self.postprocs_for(target))

    def apply_trace(self, func, target, trace: Trace) -> Schedule | None:
        return apply_trace(func, target, trace, self.postprocs_for(target))

    def __repr__(self) -> str:
        return f"PostOrderApply(rules={self.rules!r}, postprocs={self.postprocs!r})"


def generate_design_space(func: PrimFunc | IRModule, target, rules=None,
                          seed: int = 0) -> list[Schedule]:  # fmt: skip
    """Every design space of `func`: `rules` (default: the target's) in post order."""
    rules = default_rules(Target(target)) if rules is None else rules
    sch = new_schedule(func, target, seed)
    names = block_names_post_order(sch.func)
    if len(set(names)) != len(names):
        raise ValueError(f"generate_design_space: block names must be unique, got {names}")
    blocks = [sch.get_block(name) for name in names]
    spaces = [sch]
    for rule in rules:
        spaces = [out for space in spaces for out in _apply_rule(rule, space, blocks)]
    return spaces


def _apply_rule(rule: ScheduleRule, sch: Schedule, blocks: list) -> list[Schedule]:
    results = [sch]
    for block in reversed(blocks):
        produced = []
        for space in results:
            node = block_of(space, block)
            if node is None or CUSTOM_RULE in node.annotations:
                produced.append(space)
            else:
                produced.extend(_applied(rule, space, block))
        results = produced
    return results


def _applied(rule: ScheduleRule, sch: Schedule, block) -> list[Schedule]:
    """The rule's schedules; if a primitive refuses midway, the schedule as it was (a rule
    that assumed too much must not end the search)."""
    mark = len(sch.history)
    try:
        return rule.apply(sch, block)
    except ScheduleError:
        while len(sch.history) > mark:
            sch.undo()
        return [sch]


def sample_candidate(func, target, design_space_trace: Trace, seed: int,
                     postprocs: list[Postproc] | None = None) -> Schedule | None:  # fmt: skip
    """The design space replayed with every decision re-sampled (from `seed`), then
    post-processed; None when a primitive or a postprocessor refuses the sample."""
    postprocs = default_postprocs(Target(target)) if postprocs is None else postprocs
    sch = replay(func, target, design_space_trace, seed, True, lambda *_: None)
    if sch is None or not run_postprocs(sch, postprocs):
        return None
    return sch


def apply_trace(func, target, trace: Trace,
                postprocs: list[Postproc] | None = None) -> Schedule | None:  # fmt: skip
    """Replay `trace` with its decisions; post-process it when it was stored without its
    postprocessing. None when an instruction or postprocessor refuses."""
    sch = replay(func, target, trace)
    if sch is None:
        return None
    if any(inst.kind == POSTPROC_MARKER for inst in trace.insts):
        return sch
    postprocs = default_postprocs(Target(target)) if postprocs is None else postprocs
    return sch if run_postprocs(sch, postprocs) else None

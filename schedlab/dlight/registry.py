"""Rules that extensions add to the default schedules (entry-point group
`schedlab.schedule_rules`):

    register_rule(MyRule, target="cpu", before="Elementwise")

`cpu.default_rules()` and `gpu.default_rules()` then hold a fresh `MyRule()` right before the
built-in rule named `before` (default: before the fallback, which stays last). A registered
rule sees every block first-match order gives it; it declines the blocks (and the targets) it
does not want by returning False from `schedule_block`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .base import ScheduleRule

KEYS = ("cpu", "gpu")  # the rule sets: dlight.cpu and dlight.gpu


@dataclass(frozen=True)
class RegisteredRule:
    factory: Callable[[], ScheduleRule]
    key: str
    before: str | None
    name: str


_RULES: list[RegisteredRule] = []


def register_rule(factory: Callable[[], ScheduleRule], target: str = "cpu",
                  before: str | None = None) -> Callable[[], ScheduleRule]:  # fmt: skip
    """Add the rule made by `factory` (a ScheduleRule subclass, or a function returning a
    rule) to the default rules of `target` ("cpu" or "gpu"), right before the built-in rule
    named `before` ("Matmul", "Conv", "Reduction", "Elementwise", ...; None: before the
    fallback). Returns `factory`, so it works as a class decorator. Registering the same
    factory twice for one target is an error."""
    if target not in KEYS:
        raise ValueError(f"register_rule: target must be one of {', '.join(KEYS)}, got {target!r}")
    rule = factory()
    if not isinstance(rule, ScheduleRule):
        raise TypeError(f"register_rule: {factory!r} made {rule!r}, not a dlight ScheduleRule")
    if any(r.factory is factory and r.key == target for r in _RULES):
        raise ValueError(f"register_rule: {rule.name} is registered for {target} already")
    _RULES.append(RegisteredRule(factory, target, before, rule.name))
    return factory


def registered_rules(target: str = "cpu") -> list[RegisteredRule]:
    """The rules extensions registered for `target` (installed extensions loaded first)."""
    from schedlab import plugins

    plugins.load("schedlab.schedule_rules")
    return [r for r in _RULES if r.key == target]


def with_registered(target: str, builtin: tuple) -> tuple:
    """`builtin` (fresh rule instances, the fallback last) with the registered rules of
    `target` inserted, each before the rule its registration names."""
    rules = list(builtin)
    for extra in registered_rules(target):
        names = [r.name for r in rules]
        if extra.before is None:
            at = len(rules) - 1
        elif extra.before in names:
            at = names.index(extra.before)
        else:
            raise ValueError(f"rule {extra.name} is registered before {extra.before!r}, which "
                             f"is not a {target} rule; the rules: {', '.join(names)}")  # fmt: skip
        rules.insert(at, extra.factory())
    return tuple(rules)


def unregister_rule(factory: Callable[[], ScheduleRule], target: str = "cpu") -> None:
    """Remove a registration (tests; a notebook trying a rule out)."""
    _RULES[:] = [r for r in _RULES if not (r.factory is factory and r.key == target)]

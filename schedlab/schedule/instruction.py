"""The registry of schedule primitives ("instruction kinds").

A primitive is a function `fn(ctx, *inputs, **attrs) -> (ScheduleState, outputs)` registered
with `@primitive`. It receives IR nodes (the Schedule resolves handles to the current For/Block
and sampled integers before the call) and returns the new state plus the loops/blocks/integers it
creates; the Schedule turns those into handles, records an `Instruction` in the trace and keeps
the old state for undo. `Schedule.<method>` is generated from this registry, with the
primitive's signature and docstring.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .state import ScheduleState

OUTPUT_KINDS = (None, "loop", "loops", "block", "blocks", "expr", "exprs")
# kinds whose last input (a list) TVM's trace JSON writes spread out, besides `*loops` ones:
# ["Split", ["l1", "None", 16], ...] rather than ["Split", ["l1", ["None", 16]], ...]
_SPREAD_LAST_INPUT = frozenset({"Split", "LoopPartition"})


@dataclass
class PrimitiveContext:
    """What a primitive sees besides its arguments: the current state, the schedule's random
    number generator (sampling primitives only) and the recorded decision (None: sample one)."""

    state: ScheduleState
    rng: Any = None
    decision: Any = None
    debug: bool = False


@dataclass(frozen=True)
class InstructionKind:
    name: str  # TVM's instruction name, e.g. "Split"
    method: str  # the Schedule method, e.g. "split"
    fn: Callable = field(repr=False)
    inputs: tuple[str, ...]  # parameters recorded as trace inputs (handles, values)
    attrs: tuple[str, ...]  # parameters recorded as trace attributes (plain data)
    outputs: str | None
    is_pure: bool  # retrieval/sampling: no IR change (dropped by Trace.simplified if unused)
    is_sampling: bool
    signature: inspect.Signature = field(repr=False)

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.fn) or ""

    @property
    def varargs(self) -> str | None:
        """The name of a `*loops`-style parameter, if the primitive has one."""
        for param in self.signature.parameters.values():
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                return param.name
        return None

    @property
    def spreads_last_input(self) -> bool:
        """Whether trace JSON writes the last input (a list) flat, as TVM does for `*loops`
        parameters and split factors."""
        return bool(self.inputs) and (
            self.varargs == self.inputs[-1] or self.name in _SPREAD_LAST_INPUT
        )

    def call(self, ctx: PrimitiveContext, kwargs: dict):
        """Call the primitive with arguments by name (a varargs parameter takes a list)."""
        name = self.varargs
        if name is None:
            return self.fn(ctx, **kwargs)
        kwargs = dict(kwargs)
        return self.fn(ctx, *kwargs.pop(name), **kwargs)


INSTRUCTION_KINDS: dict[str, InstructionKind] = {}
_BY_METHOD: dict[str, InstructionKind] = {}


def primitive(name: str, *, inputs: tuple[str, ...], outputs: str | None = None,
              pure: bool = False, sampling: bool = False, method: str | None = None):  # fmt: skip
    """Register a primitive. `inputs` names the parameters recorded as trace inputs; every other
    parameter (after `ctx`) is an attribute. Sampling primitives get `ctx.decision` and must set
    it to the decision they took."""
    if outputs not in OUTPUT_KINDS:
        raise ValueError(f"primitive {name}: outputs must be one of {OUTPUT_KINDS}")

    def register(fn: Callable) -> Callable:
        signature = inspect.signature(fn)
        params = list(signature.parameters)[1:]  # drop ctx
        unknown = [p for p in inputs if p not in params]
        if unknown:
            raise ValueError(f"primitive {name}: inputs {unknown} are not parameters of {fn}")
        # a sampling primitive's `decision` is recorded in Trace.decisions, not as an attribute
        attrs = tuple(p for p in params if p not in inputs and p != "decision")
        kind = InstructionKind(
            name, method or fn.__name__, fn, tuple(inputs), attrs, outputs, pure or sampling,
            sampling, signature.replace(parameters=list(signature.parameters.values())[1:]),
        )  # fmt: skip
        if name in INSTRUCTION_KINDS:
            raise ValueError(f"primitive {name} is registered twice")
        INSTRUCTION_KINDS[name] = kind
        _BY_METHOD[kind.method] = kind
        fn.instruction_kind = kind
        return fn

    return register


def kind_by_method(method: str) -> InstructionKind | None:
    _load_primitives()
    return _BY_METHOD.get(method)


def get_kind(name: str) -> InstructionKind:
    _load_primitives()
    try:
        return INSTRUCTION_KINDS[name]
    except KeyError:
        raise KeyError(
            f"unknown instruction kind {name!r}; known: {', '.join(sorted(INSTRUCTION_KINDS))}"
        ) from None


def all_kinds() -> list[InstructionKind]:
    _load_primitives()
    return list(INSTRUCTION_KINDS.values())


def _load_primitives() -> None:
    from schedlab import plugins

    from . import primitives  # noqa: F401  (importing registers every family)

    # extensions' primitives (entry-point group `schedlab.primitives`): loaded before
    # `install_methods` runs, so each gets its Schedule method too
    plugins.load("schedlab.primitives")


def is_builtin(kind: InstructionKind) -> bool:
    """Whether `kind` is one of schedlab's own primitives (not an extension's)."""
    return kind.fn.__module__.startswith("schedlab.")

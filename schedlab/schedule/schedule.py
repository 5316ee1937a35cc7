"""`Schedule`: apply primitives to a PrimFunc one at a time, with handles, a trace, undo/redo.

    sch = schedlab.Schedule(func, seed=0)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 16])
    sch.trace.as_json()

Every version of the IR is kept (it is immutable, so versions share what did not change):
`undo`/`redo` move between them and `copy` forks cheaply. A failing primitive raises a
`ScheduleError` and changes nothing. The methods (`split`, `fuse`, ...) come from the primitive
registry (`instruction.py`); `help(Schedule.split)` shows each one's preconditions and example.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from dataclasses import dataclass, field

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.stmt import Block, For
from schedlab.ir.structural import structural_fingerprint
from schedlab.ir.verify import VerifyError, verify
from schedlab.target import Target

from .errors import RENDER_LEVELS, HandleError, ScheduleError
from .handles import BlockRV, ExprRV, LoopRV, is_handle
from .instruction import PrimitiveContext, all_kinds, get_kind
from .rng import RandomEngine, normalize_seed
from .state import ScheduleState
from .trace import Instruction, Trace


@dataclass(frozen=True)
class Step:
    """One version of the schedule: the instruction that made it (None for the start)."""

    index: int
    instruction: Instruction | None
    mod: IRModule
    trace: Trace


@dataclass(frozen=True)
class _Version:
    state: ScheduleState
    handles: dict = field(default_factory=dict)  # id(handle) -> (handle, uid | int)
    removed: dict = field(default_factory=dict)  # uid -> "split (step 3)"
    trace: Trace = field(default_factory=Trace)
    rng_state: int = 1
    instruction: Instruction | None = None


class Schedule:
    """A schedulable module: primitives rewrite it, the trace records them.

    `target` (default: the host CPU, `Target("cpu")`) is what schedule rules read and what a
    replayed trace must have been recorded for (`Trace.apply_to_schedule(..., retarget=True)`
    replays one recorded for another target)."""

    def __init__(self, func_or_mod: PrimFunc | IRModule, seed: int | None = 0,
                 debug: bool = True, error_render_level: str = "detail", target=None):  # fmt: skip
        mod = _as_module(func_or_mod)
        if error_render_level not in RENDER_LEVELS:
            raise ValueError(
                f"error_render_level must be one of {RENDER_LEVELS}, got {error_render_level!r}"
            )
        try:
            verify(mod)
        except VerifyError as err:
            raise ValueError(f"Schedule: the function is not well-formed: {err}") from None
        self.debug = debug
        self.error_render_level = error_render_level
        # no target means the host CPU (what `build` compiles for by default), so a trace made
        # for another kind does not replay here unnoticed (see Trace.apply_to_schedule)
        target = "cpu" if target is None else target
        self.target = Target(target)
        self.workload_fingerprint = structural_fingerprint(mod)
        # the trace keeps the target as given: a bare kind ("cpu") replays on any target of
        # that kind (a portable trace), a full Target only on an equal one
        recorded = target if isinstance(target, str) else str(self.target)
        trace = Trace(workload=self.workload_fingerprint, target=recorded)
        self._versions = [_Version(ScheduleState(mod), trace=trace, rng_state=normalize_seed(seed))]
        self._cursor = 0

    # -- state ------------------------------------------------------------------------------
    @property
    def _current(self) -> _Version:
        return self._versions[self._cursor]

    @property
    def state(self) -> ScheduleState:
        return self._current.state

    @property
    def mod(self) -> IRModule:
        """The module as scheduled so far."""
        return self._current.state.mod

    @property
    def func(self) -> PrimFunc:
        """The scheduled function (the only PrimFunc, or "main")."""
        prims = [f for f in self.mod.functions().values() if isinstance(f, PrimFunc)]
        return prims[0] if len(prims) == 1 else self.mod["main"]

    @property
    def trace(self) -> Trace:
        return self._current.trace

    @property
    def history(self) -> list[Step]:
        """Every version up to the current one, oldest first."""
        return [
            Step(i, v.instruction, v.state.mod, v.trace)
            for i, v in enumerate(self._versions[: self._cursor + 1])
        ]

    @property
    def undone(self) -> list[Step]:
        """The versions `redo` would bring back, next first (empty after a new primitive)."""
        return [
            Step(i, v.instruction, v.state.mod, v.trace)
            for i, v in enumerate(self._versions)
            if i > self._cursor
        ]

    @property
    def seed(self) -> int:
        return self._current.rng_state

    def copy(self) -> Schedule:
        """An independent schedule with the same history (versions are shared, not copied).

        The random generator forks, as TVM's does: the copy samples its own stream, seeded from
        this schedule's generator (which advances), so copies differ from each other and from
        the original, yet the same seed and the same calls always give the same decisions."""
        rng = RandomEngine(self._current.rng_state)
        child_seed = rng.fork_seed()
        self._versions[self._cursor] = dataclasses.replace(self._current, rng_state=rng.state)
        other = object.__new__(Schedule)
        other.__dict__.update(self.__dict__)
        other._versions = list(self._versions)
        other._versions[other._cursor] = dataclasses.replace(
            self._current, rng_state=normalize_seed(child_seed)
        )
        return other

    def undo(self) -> bool:
        """Go back one primitive; False when already at the start."""
        if self._cursor == 0:
            return False
        self._cursor -= 1
        return True

    def redo(self) -> bool:
        """Re-apply the primitive undone last; False when there is none."""
        if self._cursor + 1 >= len(self._versions):
            return False
        self._cursor += 1
        return True

    def show(self) -> str:
        return f"{self.mod.script()}\n\n{self.trace}"

    # -- handles ----------------------------------------------------------------------------
    def get(self, handle):
        """The IR node (For/Block) behind a handle, or the integer behind an ExprRV."""
        return self._resolve(handle, self._current)

    def _resolve(self, value, version: _Version):
        if isinstance(value, (list, tuple)):
            return [self._resolve(v, version) for v in value]
        if not is_handle(value):
            return value
        entry = version.handles.get(id(value))
        if entry is None:
            raise HandleError(f"{value!r} does not belong to this schedule (or to this version)")
        if isinstance(value, ExprRV):
            return entry[1]
        uid = entry[1]
        if version.state.has(uid):
            return version.state.node(uid)
        what = "block" if isinstance(value, BlockRV) else "loop"
        reason = version.removed.get(uid, "an earlier primitive")
        raise HandleError(
            f"the {what} behind {value!r} no longer exists: it was removed by {reason}"
        )

    # -- applying primitives ----------------------------------------------------------------
    @contextlib.contextmanager
    def _all_or_nothing(self):
        """Run a series of primitives (a trace replay) as one: when anything inside raises, the
        schedule gets back its versions and cursor, so no prefix of the series stays applied
        (what a single failing primitive guarantees by never pushing a version)."""
        versions, cursor = list(self._versions), self._cursor
        try:
            yield
        except BaseException:  # an interrupt mid-replay must not leave half a trace either
            self._versions, self._cursor = versions, cursor
            raise

    def _apply_instruction(self, kind_name: str, inputs, attrs, decision=None):
        kind = get_kind(kind_name)
        version = self._current
        rng = RandomEngine(version.rng_state)
        ctx = PrimitiveContext(version.state, rng, decision, self.debug)
        kwargs = {name: self._resolve(v, version) for name, v in zip(kind.inputs, inputs)}
        kwargs.update(zip(kind.attrs, attrs))
        if kind.is_sampling:
            kwargs["decision"] = decision
        try:
            state, outputs = kind.call(ctx, kwargs)
        except ScheduleError as err:
            err.attach(kind.method, self._error_func(err), self.error_render_level)
            raise
        if self.debug and state is not version.state:
            _check_well_formed(state, kind.method)
        out_handles, table = self._wrap_outputs(kind.outputs, outputs, version.handles)
        inst = Instruction(kind_name, tuple(inputs), tuple(attrs), tuple(_flat(out_handles)))
        removed = dict(version.removed)
        step = self._cursor + 1
        for uid in version.state.uids() - state.uids():
            removed.setdefault(uid, f"{kind.method} (step {step})")
        self._push(_Version(state, table, removed, version.trace.append(inst, ctx.decision),
                            rng.state, inst))  # fmt: skip
        return out_handles

    def _wrap_outputs(self, spec: str | None, outputs, handles: dict):
        table = dict(handles)

        def wrap(value, cls):
            # the hint is the loop's or block's name now: the variable the trace's Python
            # gives the handle (Trace.as_python(named=True)), matching the printed IR
            hint = value.loop_var.name if isinstance(value, For) else ""
            handle = cls(value.name_hint if isinstance(value, Block) else hint)
            table[id(handle)] = (handle, value.uid if isinstance(value, (For, Block)) else value)
            return handle

        if spec is None:
            return None, table
        cls = {"loop": LoopRV, "block": BlockRV, "expr": ExprRV}[spec.rstrip("s")]
        if spec.endswith("s"):
            return [wrap(v, cls) for v in outputs], table
        return wrap(outputs, cls), table

    def _push(self, version: _Version) -> None:
        del self._versions[self._cursor + 1 :]
        self._versions.append(version)
        self._cursor += 1

    def _error_func(self, err: ScheduleError):
        state = self.state
        for node in err.nodes:
            try:
                return state.mod[state.location(node).func_name]
            except KeyError:
                continue
        return self.func if len(self.mod) == 1 else self.mod

    def __repr__(self) -> str:
        return f"Schedule({len(self.trace)} instructions, step {self._cursor})"


def _as_module(func_or_mod) -> IRModule:
    if isinstance(func_or_mod, PrimFunc):
        return IRModule.from_expr(func_or_mod)
    if isinstance(func_or_mod, IRModule):
        return func_or_mod
    raise TypeError(f"Schedule: expected a PrimFunc or IRModule, got {type(func_or_mod).__name__}")


def _flat(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _check_well_formed(state: ScheduleState, method: str) -> None:
    try:
        verify(state.mod)
    except VerifyError as err:  # a primitive produced broken IR: a bug in schedlab, say so
        raise AssertionError(f"internal error: {method} produced malformed IR: {err}") from err


def _make_method(kind):
    signature = kind.signature

    def method(self, *args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{kind.method}: {err}") from None
        bound.apply_defaults()
        values = bound.arguments
        inputs = [_listed(values[name]) if name == kind.varargs else values[name]
                  for name in kind.inputs]  # fmt: skip
        attrs = [values[name] for name in kind.attrs]
        return self._apply_instruction(kind.name, inputs, attrs, values.get("decision"))

    method.__name__ = kind.method
    method.__qualname__ = f"Schedule.{kind.method}"
    method.__doc__ = kind.doc
    method.__signature__ = signature.replace(
        parameters=[_self_param(), *signature.parameters.values()]
    )
    return method


def _listed(value):
    return list(value)


def _self_param():
    import inspect

    return inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)


@functools.cache
def install_methods() -> None:
    """Attach one method per registered primitive (called when the package is imported)."""
    for kind in all_kinds():
        if kind.method in Schedule.__dict__ and not hasattr(
            Schedule.__dict__[kind.method], "_generated"
        ):
            raise RuntimeError(
                f"primitive method {kind.method} clashes with Schedule.{kind.method}"
            )
        method = _make_method(kind)
        method._generated = True
        setattr(Schedule, kind.method, method)

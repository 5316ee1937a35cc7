"""Pass infrastructure shared by the loop IR and the graph IR: `Pass`, `Sequential`,
`PassContext` and instruments that observe each pass (name, wall time, IR before and after).

A pass maps an IRModule to an IRModule. `prim_func_pass` lifts a PrimFunc -> PrimFunc function
to a module pass. Passes run through `PassContext.current()`, so instruments see every pass,
nested Sequentials included.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .function import IRModule, PrimFunc


@dataclass(frozen=True)
class PassInfo:
    name: str
    opt_level: int = 0
    required: tuple[str, ...] = ()


class Pass:
    """A named module -> module transformation."""

    def __init__(
        self,
        fn: Callable[[IRModule], IRModule],
        name: str,
        opt_level: int = 0,
        doc: str | None = None,
    ):
        self.fn = fn
        self.info = PassInfo(name, opt_level)
        self.__doc__ = doc or fn.__doc__

    @property
    def name(self) -> str:
        return self.info.name

    def __call__(self, mod):
        was_func = isinstance(mod, PrimFunc)
        module = IRModule.from_expr(mod) if was_func else mod
        result = PassContext.current().run(self, module)
        if was_func:
            return result[next(iter(result))]
        return result

    def __repr__(self) -> str:
        return f"Pass({self.name})"


class Sequential(Pass):
    """Runs passes in order; skipped ones are those above the context's opt_level."""

    def __init__(self, passes, name: str = "Sequential", opt_level: int = 0):
        self.passes = list(passes)
        super().__init__(self._run_all, name, opt_level)

    def _run_all(self, mod: IRModule) -> IRModule:
        context = PassContext.current()
        for item in self.passes:
            if item.info.opt_level <= context.opt_level or item.name in context.required_pass:
                mod = context.run(item, mod)
        return mod

    def __repr__(self) -> str:
        return f"Sequential({self.name}: {', '.join(p.name for p in self.passes)})"


def module_pass(fn=None, *, name: str | None = None, opt_level: int = 0):
    """Decorator: an IRModule -> IRModule function as a Pass."""

    def wrap(function):
        return Pass(function, name or function.__name__, opt_level)

    return wrap(fn) if fn is not None else wrap


def prim_func_pass(fn=None, *, name: str | None = None, opt_level: int = 0):
    """Decorator: a PrimFunc -> PrimFunc function as a Pass applied to every PrimFunc."""

    def wrap(function):
        def run(mod: IRModule) -> IRModule:
            updated = {}
            for key, func in mod.items():
                if isinstance(func, PrimFunc):
                    new = function(func)
                    if new is not func:
                        updated[key] = new
            return mod.update(updated) if updated else mod

        return Pass(run, name or function.__name__, opt_level, doc=function.__doc__)

    return wrap(fn) if fn is not None else wrap


class PassInstrument:
    """Observes passes. Override any of the hooks."""

    def enter_pass_ctx(self) -> None: ...

    def exit_pass_ctx(self) -> None: ...

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None: ...

    def run_after_pass(self, mod: IRModule, info: PassInfo, seconds: float) -> None: ...


@dataclass
class PassRecord:
    """What `PassRecorder` keeps for one pass run."""

    name: str
    seconds: float
    before: IRModule
    after: IRModule
    depth: int
    changed: bool


@dataclass
class PassRecorder(PassInstrument):
    """Records each pass: name, wall time, IR before and after, nesting depth."""

    records: list[PassRecord] = field(default_factory=list)
    _stack: list[IRModule] = field(default_factory=list)

    def run_before_pass(self, mod, info):
        self._stack.append(mod)

    def run_after_pass(self, mod, info, seconds):
        before = self._stack.pop()
        self.records.append(
            PassRecord(info.name, seconds, before, mod, len(self._stack), before is not mod)
        )


class PassContext:
    """Settings and instruments for the passes run inside `with PassContext(...):`."""

    _local = threading.local()

    def __init__(self, opt_level: int = 2, instruments=(), required_pass=(), config=None):
        self.opt_level = opt_level
        self.instruments = list(instruments)
        self.required_pass = set(required_pass)
        self.config = dict(config or {})

    @classmethod
    def current(cls) -> PassContext:
        stack = getattr(cls._local, "stack", None)
        if not stack:
            return _DEFAULT_CONTEXT
        return stack[-1]

    def __enter__(self) -> PassContext:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        self._local.stack.append(self)
        for instrument in self.instruments:
            instrument.enter_pass_ctx()
        return self

    def __exit__(self, *exc) -> None:
        for instrument in self.instruments:
            instrument.exit_pass_ctx()
        self._local.stack.pop()

    def run(self, item: Pass, mod: IRModule) -> IRModule:
        for instrument in self.instruments:
            instrument.run_before_pass(mod, item.info)
        start = time.perf_counter()
        result = item.fn(mod)
        seconds = time.perf_counter() - start
        if not isinstance(result, IRModule):
            raise TypeError(f"pass {item.name} returned {type(result).__name__}, not an IRModule")
        for instrument in self.instruments:
            instrument.run_after_pass(result, item.info, seconds)
        return result


_DEFAULT_CONTEXT = PassContext()

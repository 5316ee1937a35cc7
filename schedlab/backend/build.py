"""`build(func, target)`: lower a PrimFunc, generate code, compile it and load it as a `Kernel`.

    kernel = schedlab.build(func, target="cpu")
    kernel(A, B, C)                  # runs in place on numpy arrays
    kernel.source                    # the generated C
    kernel.benchmark(A, B, C)        # Timings(min, median, mean, std, all, number), in seconds

Arguments are checked with `schedlab.arguments.bind_arguments` against the function as written
(before lowering), so a wrong count, shape or dtype is a ValueError naming the parameter, the
expected and the actual value, never a crash.
"""

from __future__ import annotations

import numpy as np

from schedlab.arguments import BoundArguments, bind_arguments
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.target import Target
from schedlab.timing import Timings


def build(func_or_mod: PrimFunc | IRModule, target: str | Target = "cpu", name: str | None = None):
    """Compile one PrimFunc (or the function `name` of a module) for `target`; returns a Kernel.

    Lowering runs `schedlab.transform.lower` under the current PassContext (instruments record
    every pass); the generated library is cached on disk, so building the same kernel twice
    compiles it once."""
    from schedlab.backend import get_backend
    from schedlab.transform import lower

    target = Target(target)
    mod, name = _select(func_or_mod, name)
    backend = get_backend(target)
    lowered = lower(IRModule({name: mod[name]}), target)
    library = backend.build_module(lowered, target)
    return library.kernel(name, original=mod[name])


def _select(func_or_mod, name: str | None) -> tuple[IRModule, str]:
    if isinstance(func_or_mod, PrimFunc):
        symbol = name or func_or_mod.name
        return IRModule({symbol: func_or_mod}), symbol
    if not isinstance(func_or_mod, IRModule):
        raise TypeError(
            f"build: expected a PrimFunc or an IRModule, got {type(func_or_mod).__name__}"
        )
    prims = [key for key, func in func_or_mod.items() if isinstance(func, PrimFunc)]
    if name is None:
        if len(prims) != 1:
            raise ValueError(
                f"build: the module has {len(prims)} PrimFuncs ({', '.join(prims) or 'none'}); "
                f"pass name= to choose one"
            )
        name = prims[0]
    if name not in prims:
        raise ValueError(f"build: no PrimFunc named {name!r}; the module has {', '.join(prims)}")
    return func_or_mod, name


class Kernel:
    """A compiled PrimFunc. Call it with numpy arrays (in place); read `.source`, `.lowered`,
    `.target`; time it with `.benchmark(...)`. Backends subclass it with `_launch(bound)` and
    `_run_timed(bound, number)`."""

    def __init__(self, name: str, func: PrimFunc, lowered: IRModule, target: Target, source: str):
        self.name = name
        self.func = func
        self.lowered = lowered
        self.target = target
        self.source = source
        self.last_timings: Timings | None = None

    def __repr__(self) -> str:
        params = ", ".join(p.name for p in self.func.params)
        return f"<Kernel {self.name}({params}) for {self.target.kind}>"

    def __call__(self, *args) -> None:
        """Run the kernel on `args` (numpy arrays for buffers, numbers for scalars)."""
        self._launch(self.bind(args))

    def bind(self, args) -> BoundArguments:
        """Check `args` against the function's parameters (ValueError on a mismatch)."""
        bound = bind_arguments(self.func, args)
        self._check_writable(bound)
        return bound

    def _check_writable(self, bound: BoundArguments) -> None:
        outputs = self.written_params()
        for param, value in zip(self.func.params, bound.values):
            if param.name in outputs and isinstance(value, np.ndarray):
                if not value.flags.writeable:
                    raise ValueError(
                        f"{self.name}: argument {param.name}: expected a writable array (the "
                        f"kernel stores to it), got a read-only array"
                    )

    def written_params(self) -> set[str]:
        """Names of the buffer parameters the kernel stores to."""
        return set()

    # -- timing ---------------------------------------------------------------------------------
    def benchmark(
        self,
        *args,
        number: int | None = None,
        repeat: int = 5,
        min_repeat_ms: float = 50.0,
        flush_cache: bool = False,
    ) -> Timings:
        """Seconds per call: one warm-up call, `number` calls per repeat (calibrated so a repeat
        lasts at least `min_repeat_ms` when None), `repeat` repeats. Min/median/mean/std/all.

        `flush_cache` (CPU kernels): before every call, every array argument but the first is
        evicted from the caches and only the calls are timed: the kernel as a model runs it,
        its weights coming from memory (the first argument is the input a previous layer has
        just written). TVM's CPU runner offers the same flush."""
        if repeat < 1:
            raise ValueError(f"benchmark: repeat must be >= 1, got {repeat}")
        if number is not None and number < 1:
            raise ValueError(f"benchmark: number must be >= 1 or None, got {number}")
        bound = self.bind(args)
        timed = self._run_cold if flush_cache else self._run_timed
        timed(bound, 1)
        number = number or self._calibrate(timed, bound, min_repeat_ms)
        samples = [timed(bound, number) / number for _ in range(repeat)]
        self.last_timings = Timings.from_samples(samples, number)
        return self.last_timings

    def _run_cold(self, bound: BoundArguments, number: int) -> float:
        total = 0.0
        for _ in range(number):
            self._flush_caches(bound)
            total += self._run_timed(bound, 1)
        return total

    def _calibrate(self, timed, bound: BoundArguments, min_repeat_ms: float) -> int:
        number, goal = 1, min_repeat_ms / 1e3
        while True:
            elapsed = timed(bound, number)
            if elapsed >= goal or number >= 1 << 30:
                return number
            number = max(number * 2, int(number * goal / max(elapsed, 1e-9) * 1.1) + 1)

    @property
    def time_per_call(self) -> float | None:
        """Median seconds per call of the last `benchmark` (None before the first)."""
        return None if self.last_timings is None else self.last_timings.median

    # -- backend interface ----------------------------------------------------------------------
    def _launch(self, bound: BoundArguments) -> None:
        raise NotImplementedError

    def _run_timed(self, bound: BoundArguments, number: int) -> float:
        """Total seconds of `number` back-to-back calls."""
        raise NotImplementedError

    def _flush_caches(self, bound: BoundArguments) -> None:
        """Evict every array argument but the first from the caches (see `benchmark`)."""
        raise ValueError(
            f"benchmark: flush_cache is for CPU kernels; {self.name} runs on "
            f"{self.target.kind}, whose caches the host cannot flush"
        )


__all__ = ["build", "Kernel", "Timings"]

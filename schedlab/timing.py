"""Timing callables the way benchmarks should: warm up, calibrate the inner count so a repeat
lasts long enough to trust the clock, repeat, report min/median/mean/std. Also used to time
numpy side by side with compiled kernels (interleaved, in one process)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Timings:
    """Seconds per call over `repeat` measurements of `number` calls each."""

    min: float
    median: float
    mean: float
    std: float
    all: tuple[float, ...]
    number: int

    @staticmethod
    def from_samples(samples, number: int) -> Timings:
        samples = tuple(samples)
        std = statistics.pstdev(samples) if len(samples) > 1 else 0.0
        return Timings(
            min(samples),
            statistics.median(samples),
            statistics.fmean(samples),
            std,
            samples,
            number,
        )

    def gflops(self, flops: float) -> tuple[float, float]:
        """(best, median) GFLOP/s for a kernel doing `flops` operations per call."""
        return flops / self.min / 1e9, flops / self.median / 1e9


def calibrate(fn: Callable[[], object], min_repeat_ms: float) -> int:
    """How many calls make one repeat last at least `min_repeat_ms`."""
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed * 1e3 >= min_repeat_ms or number >= 1 << 20:
            return number
        grow = (min_repeat_ms / 1e3) / max(elapsed, 1e-9)
        number = max(number * 2, int(number * grow * 1.1) + 1)


def _one_repeat(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def time_callable(
    fn: Callable[[], object],
    number: int | None = None,
    repeat: int = 5,
    min_repeat_ms: float = 50.0,
    warmup: int = 1,
) -> Timings:
    """Time `fn()`; `number` calls per repeat (calibrated when None)."""
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    for _ in range(warmup):
        fn()
    number = number or calibrate(fn, min_repeat_ms)
    return Timings.from_samples((_one_repeat(fn, number) for _ in range(repeat)), number)


def time_side_by_side(
    fns: dict[str, Callable[[], object]],
    repeat: int = 5,
    min_repeat_ms: float = 50.0,
    settle_ms: float = 250.0,
) -> dict[str, Timings]:
    """Time several callables interleaved (A, B, A, B, ...) so machine noise hits all alike.

    Between two candidates the process sleeps `settle_ms`: thread pools (OpenBLAS, OpenMP)
    keep spinning for a while after a call returns, and without the pause they steal the cores
    of whichever candidate runs next (seen: a gemm kernel timed 1.8x slower right after numpy)."""
    for fn in fns.values():
        fn()
    numbers = {name: calibrate(fn, min_repeat_ms) for name, fn in fns.items()}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            time.sleep(settle_ms / 1e3)
            samples[name].append(_one_repeat(fn, numbers[name]))
    return {name: Timings.from_samples(samples[name], numbers[name]) for name in fns}

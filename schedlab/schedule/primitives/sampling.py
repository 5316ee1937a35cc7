"""Sampling: random choices recorded as decisions, so a trace replays them exactly and a tuner
can mutate them (`Trace.with_decision`) instead of editing code."""

from __future__ import annotations

from functools import lru_cache

from schedlab.ir.expr import IntImm
from schedlab.ir.stmt import For

from ..errors import ScheduleError
from ..instruction import PrimitiveContext, primitive

_MAX_TILINGS = 200_000


@primitive("SamplePerfectTile", inputs=("loop",), outputs="exprs", sampling=True)
def sample_perfect_tile(ctx: PrimitiveContext, loop: For, n: int,
                        max_innermost_factor: int = 16, decision=None):  # fmt: skip
    """Sample `n` factors whose product is the loop's (constant) extent, the innermost at most
    `max_innermost_factor`; every such tiling is equally likely. Returns ExprRVs to pass to
    `split`. `decision` (a list of n factors) replays a choice.

    Preconditions: the loop's extent is a constant; n >= 1; max_innermost_factor >= 1; a given
    decision has n positive factors whose product is the extent.

    >>> sch = Schedule(workloads.get("gemm", M=64, N=64, K=64)[0], seed=1)
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> factors = sch.sample_perfect_tile(i, n=3, max_innermost_factor=8)
    >>> [sch.get(f) for f in factors]  # doctest: +SKIP
    [2, 4, 8]
    >>> int(np.prod([sch.get(f) for f in factors]))
    64
    """
    extent = _constant_extent(loop, "sample_perfect_tile")
    if not isinstance(n, int) or n < 1:
        raise ScheduleError(f"sample_perfect_tile: n must be a positive int, got {n!r}", [loop])
    if not isinstance(max_innermost_factor, int) or max_innermost_factor < 1:
        raise ScheduleError(
            f"sample_perfect_tile: max_innermost_factor must be >= 1, got {max_innermost_factor!r}"
        )
    if decision is not None:
        decision = _check_tile_decision(decision, n, extent, loop)
    else:
        options = _tilings(extent, n, max_innermost_factor)
        decision = list(options[ctx.rng.randint(0, len(options))])
    ctx.decision = decision
    return ctx.state, list(decision)


def _constant_extent(loop: For, name: str) -> int:
    if not isinstance(loop, For):
        raise ScheduleError(f"{name}: expected a loop handle, got {type(loop).__name__}")
    if not isinstance(loop.extent, IntImm):
        raise ScheduleError(f"{name}: the loop's extent {loop.extent} is not a constant", [loop])
    return loop.extent.value


def _check_tile_decision(decision, n: int, extent: int, loop: For) -> list[int]:
    values = list(decision)
    product = 1
    for value in values:
        if not isinstance(value, int) or value < 1:
            raise ScheduleError(
                f"sample_perfect_tile: decision {decision} has a bad factor", [loop]
            )
        product *= value
    if len(values) != n or product != extent:
        raise ScheduleError(
            f"sample_perfect_tile: decision {decision} must be {n} factors with product "
            f"{extent}", [loop],
        )  # fmt: skip
    return values


@lru_cache(maxsize=256)
def _tilings(extent: int, n: int, max_innermost: int) -> tuple[tuple[int, ...], ...]:
    """All ordered factorizations of `extent` into n factors, innermost <= max_innermost."""
    results: list[tuple[int, ...]] = []

    def place(remaining: int, prefix: tuple[int, ...]) -> None:
        if len(results) >= _MAX_TILINGS:
            return
        if len(prefix) == n - 1:
            if remaining <= max_innermost:
                results.append(prefix + (remaining,))
            return
        for factor in _divisors(remaining):
            place(remaining // factor, prefix + (factor,))

    place(extent, ())
    return tuple(results) or ((extent,) + (1,) * (n - 1),)


def _divisors(value: int) -> list[int]:
    small = [d for d in range(1, int(value**0.5) + 1) if value % d == 0]
    return sorted(set(small + [value // d for d in small]))


@primitive("SampleCategorical", inputs=(), outputs="expr", sampling=True)
def sample_categorical(ctx: PrimitiveContext, candidates: list, probs: list, decision=None):
    """Pick one of `candidates` (integers) with probabilities `probs`; the decision is the index.

    Preconditions: as many probabilities as candidates, non-negative and not all zero; a given
    decision is a valid index.

    >>> sch = Schedule(workloads.get("gemm", M=8, N=8, K=8)[0], seed=3)
    >>> v = sch.sample_categorical([16, 64, 512], [0.0, 1.0, 0.0])
    >>> sch.get(v)
    64
    """
    candidates, probs = list(candidates), [float(p) for p in probs]
    if not candidates or len(candidates) != len(probs):
        raise ScheduleError(
            f"sample_categorical: need as many probabilities as candidates, got "
            f"{len(candidates)} candidates and {len(probs)} probabilities"
        )
    if decision is None:
        try:
            decision = ctx.rng.choice(probs)
        except ValueError as err:
            raise ScheduleError(f"sample_categorical: {err}") from None
    elif not isinstance(decision, int) or not 0 <= decision < len(candidates):
        raise ScheduleError(f"sample_categorical: decision {decision!r} is not a candidate index")
    ctx.decision = decision
    return ctx.state, candidates[decision]

"""The schedule's seeded, forkable random number generator (a linear congruential engine, as
TVM's, so a seed gives the same decisions every time, everywhere)."""

from __future__ import annotations

MODULUS = 2**31 - 1
MULTIPLIER = 48271


def normalize_seed(seed: int | None) -> int:
    """A valid engine state from any int (None or -1: a fixed default, so runs repeat)."""
    if seed is None or seed == -1:
        seed = 42
    if not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    state = seed % MODULUS
    return state or 1


class RandomEngine:
    """`state` is the whole generator; the Schedule stores it with each version for undo."""

    __slots__ = ("state",)

    def __init__(self, state: int):
        self.state = normalize_seed(state)

    def next(self) -> int:
        self.state = (self.state * MULTIPLIER) % MODULUS
        return self.state

    def uniform(self) -> float:
        """A float in [0, 1)."""
        return (self.next() - 1) / (MODULUS - 1)

    def randint(self, low: int, high: int) -> int:
        """An int in [low, high)."""
        if high <= low:
            raise ValueError(f"randint: empty range [{low}, {high})")
        return low + int(self.uniform() * (high - low))

    def choice(self, weights: list[float]) -> int:
        """An index drawn with the given (non-negative, not all zero) weights."""
        total = sum(weights)
        if total <= 0 or any(w < 0 for w in weights):
            raise ValueError(f"weights must be non-negative and not all zero, got {weights}")
        point = self.uniform() * total
        for index, weight in enumerate(weights):
            point -= weight
            if point < 0:
                return index
        return len(weights) - 1

    def fork_seed(self) -> int:
        """A seed for an independent generator (e.g. a copy of the schedule)."""
        return (self.next() * 32767) % 1999999973

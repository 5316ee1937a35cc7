"""Mutators: edit one sampling decision of a trace (TVM's meta_schedule.Mutator).

`mutator.apply(trace, rng) -> Trace | None` returns a new trace (postprocessing removed: the
caller replays it and runs the postprocessors again) or None when it finds nothing to mutate.
`rng` is a `random.Random`, so a seeded search mutates the same way every time. Mutators edit
decisions and annotation values, never code: the result replays like any recorded trace.
"""

from __future__ import annotations

import random

from schedlab.schedule import Instruction, Trace
from schedlab.schedule.trace import POSTPROC_MARKER

from .parallel_vectorize_unroll import UNROLL_EXPLICIT, UNROLL_IMPLICIT


class Mutator:
    """Base class: `apply(trace, rng) -> Trace | None`."""

    name = "Mutator"

    def apply(self, trace: Trace, rng: random.Random) -> Trace | None:
        raise NotImplementedError(f"{type(self).__name__} must implement apply(trace, rng)")

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({params})"


def design_insts(trace: Trace) -> list[Instruction]:
    """The instructions before EnterPostproc (the ones mutators may touch)."""
    insts = []
    for inst in trace.insts:
        if inst.kind == POSTPROC_MARKER:
            break
        insts.append(inst)
    return insts


class MutateTileSize(Mutator):
    """Move a divisor from one tile of a SamplePerfectTile decision to another (the product
    stays the extent; the innermost tile stays within the instruction's max_innermost_factor)."""

    name = "MutateTileSize"

    def apply(self, trace: Trace, rng: random.Random) -> Trace | None:
        found = [
            (inst, list(trace.decisions[inst]))
            for inst in design_insts(trace)
            if inst.kind == "SamplePerfectTile" and _mutable_tiles(trace.decisions.get(inst))
        ]
        while found:
            inst, tiles = found.pop(rng.randrange(len(found)))
            new = mutate_tiles(tiles, int(inst.attrs[1]), rng)
            if new is not None:
                return trace.with_decision(inst, new, remove_postproc=True)
        return None


def _mutable_tiles(decision) -> bool:
    return decision is not None and len(decision) >= 2 and _product(decision) >= 2


def mutate_tiles(tiles: list[int], max_innermost: int, rng: random.Random) -> list[int] | None:
    """TVM's MutateSampleTileSize: divide tile x by a divisor d > 1 and multiply tile y by it."""
    n = len(tiles)
    sources = [i for i, t in enumerate(tiles) if t > 1]
    if not sources or n < 2:
        return None
    for _ in range(64):
        x = rng.choice(sources)
        y = rng.randrange(n - 1)
        y += y >= x
        divisors = [d for d in _divisors(tiles[x]) if d > 1]
        if y == n - 1:
            divisors = [d for d in divisors if d * tiles[y] <= max_innermost]
        if not divisors:
            if n <= 2:
                return None
            continue
        factor = rng.choice(divisors)
        new = list(tiles)
        new[x] //= factor
        new[y] *= factor
        return new
    return None


def _divisors(value: int) -> list[int]:
    return [d for d in range(1, value + 1) if value % d == 0]


def _product(values) -> int:
    result = 1
    for value in values:
        result *= value
    return result


class MutateUnroll(Mutator):
    """Pick another candidate of the SampleCategorical behind a `meta_schedule.unroll_*`
    annotation (drawn with the original probabilities, the current one excluded)."""

    name = "MutateUnroll"

    def apply(self, trace: Trace, rng: random.Random) -> Trace | None:
        insts = design_insts(trace)
        samples = {id(inst.outputs[0]): inst for inst in insts
                   if inst.kind == "SampleCategorical" and inst.outputs}  # fmt: skip
        found = []
        for inst in insts:
            if inst.kind == "Annotate" and inst.attrs[0] in (UNROLL_EXPLICIT, UNROLL_IMPLICIT):
                sample = samples.get(id(inst.inputs[1]))
                if sample is not None and len(sample.attrs[0]) > 1:
                    found.append(sample)
        if not found:
            return None
        sample = rng.choice(found)
        current = trace.decisions.get(sample)
        weights = [float(p) if i != current else 0.0 for i, p in enumerate(sample.attrs[1])]
        if sum(weights) <= 0:
            return None
        choice = rng.choices(range(len(weights)), weights)[0]
        return trace.with_decision(sample, choice, remove_postproc=True)

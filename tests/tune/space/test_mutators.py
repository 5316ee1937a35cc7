"""Mutators edit one decision (or the parallel extent) and keep the trace valid."""

from __future__ import annotations

import random

import pytest

from schedlab.ir.stmt import ForKind
from schedlab.schedule import Trace
from schedlab.target import Target
from schedlab.tune.space import (
    MutateComputeLocation,
    MutateParallel,
    MutateTileSize,
    MutateUnroll,
    PostOrderApply,
    default_mutators,
)  # fmt: skip
from schedlab.tune.space.mutator import mutate_tiles

from .common import kinds, loops, workload

CPU = Target("cpu", num_cores=2, simd_width=512)
SPACE = PostOrderApply()


def candidate(name: str, design: int = 0, seed: int = 3):
    func, _ = workload(name)
    designs = SPACE.generate_design_space(func, CPU)
    return func, SPACE.sample_candidate(func, CPU, designs[design].trace, seed)


def changed_decisions(old: Trace, new: Trace) -> list:
    before = old.as_json(remove_postproc=True)["decisions"]
    return [(a, b) for a, b in zip(before, new.as_json()["decisions"]) if a != b]


def product(values) -> int:
    result = 1
    for value in values:
        result *= value
    return result


def test_mutate_tile_size_moves_a_factor():
    func, sch = candidate("gemm")
    rng = random.Random(0)
    for _ in range(10):
        new = MutateTileSize().apply(sch.trace, rng)
        (((index, old), (_, tiles)),) = changed_decisions(sch.trace, new)
        inst = new.insts[index]
        assert inst.kind == "SamplePerfectTile"
        assert product(tiles) == product(old) and tiles[-1] <= inst.attrs[1]
        assert "EnterPostproc" not in kinds(new)
        assert SPACE.apply_trace(func, CPU, new) is not None


@pytest.mark.parametrize("seed", range(20))
def test_mutate_tiles_keeps_the_product_and_the_innermost_limit(seed):
    rng = random.Random(seed)
    tiles = [rng.choice([1, 2, 3, 4, 6]) for _ in range(rng.choice([2, 3, 4]))]
    limit = max(tiles[-1], rng.choice([1, 4, 8, 64]))
    new = mutate_tiles(tiles, limit, rng)
    if new is not None:
        assert product(new) == product(tiles) and new != tiles and new[-1] <= limit


def test_mutate_unroll_picks_another_step():
    func, sch = candidate("gemm")
    new = MutateUnroll().apply(sch.trace, random.Random(1))
    (((index, old), (_, choice)),) = changed_decisions(sch.trace, new)
    assert new.insts[index].kind == "SampleCategorical" and choice != old and 0 <= choice < 4
    assert SPACE.apply_trace(func, CPU, new) is not None


def test_mutate_compute_location_moves_the_padding():
    func, sch = candidate("conv2d_nchw")
    new = MutateComputeLocation().apply(sch.trace, random.Random(2))
    (((index, old), (_, location)),) = changed_decisions(sch.trace, new)
    assert new.insts[index].kind == "SampleComputeLocation" and location != old
    assert SPACE.apply_trace(func, CPU, new) is not None


def parallel_extents(mod) -> list[int]:
    return [loop.extent.value for loop in loops(mod) if loop.kind == ForKind.PARALLEL]


def test_mutate_parallel_changes_the_fused_extent():
    func, _ = workload("gemm")
    design = SPACE.generate_design_space(func, CPU)[5].trace  # no caches: one loop nest
    samples = (SPACE.sample_candidate(func, CPU, design, seed) for seed in range(2, 30))
    found = ((s, MutateParallel().apply(s.trace, random.Random(0))) for s in samples)
    # a nest with several possible fused prefixes (most samples have one only)
    sch, new = next((s, t) for s, t in found if t is not None)
    assert not changed_decisions(sch.trace, new)
    value = [i for i in new.as_json()["insts"] if i[2] == ["meta_schedule.parallel"]]
    assert value[0][1][1] != 32
    again = SPACE.apply_trace(func, CPU, new)
    assert parallel_extents(again.mod) != parallel_extents(sch.mod)


def test_nothing_to_mutate_is_none():
    func, sch = candidate("reduce_sum", design=2)  # no rfactor: no tiles, one reduction
    transpose = [MutateTileSize(), MutateComputeLocation()]
    assert all(m.apply(sch.trace, random.Random(0)) is None for m in transpose)
    data = sch.trace.as_json()
    data["workload"] = "0" * 64  # a function this process never saw: no replay possible
    assert MutateParallel().apply(Trace.from_json(data), random.Random(0)) is None


def test_mutations_are_seeded():
    _, sch = candidate("gemm")
    first = [MutateTileSize().apply(sch.trace, random.Random(9)).as_json() for _ in range(2)]
    assert first[0] == first[1]


def test_default_probabilities_are_tvms():
    probs = {type(m).__name__: p for m, p in default_mutators(CPU).items()}
    assert probs == {"MutateTileSize": 0.9, "MutateComputeLocation": 0.05, "MutateUnroll": 0.03,
                     "MutateParallel": 0.02}  # fmt: skip

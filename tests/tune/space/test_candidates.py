"""Candidates: random samples of every design space are correct when compiled, replay exactly
from their JSON traces, are reproducible from a seed, and refusals come back as None."""

from __future__ import annotations

import json

import pytest

from schedlab.ir.stmt import ForKind
from schedlab.ir.structural import structural_equal
from schedlab.schedule import Trace
from schedlab.target import Target
from schedlab.tune.space import (
    PostOrderApply,
    Postproc,
    apply_trace,
    generate_design_space,
    sample_candidate,
)  # fmt: skip

from .common import SIZES, assert_correct, blocks, kinds, loops, workload

CPU = Target("cpu", num_cores=2, simd_width=512)


@pytest.mark.parametrize("name", sorted(SIZES))
def test_random_candidates_are_correct(name):
    func, reference = workload(name)
    space = PostOrderApply()
    designs = space.generate_design_space(func, CPU)
    checked = 0
    for index, design in enumerate(designs):
        for seed in range(index, index + 3):  # the first sample the postprocessors accept
            sch = space.sample_candidate(func, CPU, design.trace, seed)
            if sch is not None:
                assert_correct(name, func, reference, sch.mod)
                checked += 1
                break
    assert checked >= len(designs) - 1


def test_candidate_trace_keeps_the_postprocessing():
    func, _ = workload("gemm")
    design = generate_design_space(func, CPU)[0]
    sch = sample_candidate(func, CPU, design.trace, seed=5)
    names = kinds(sch.trace)
    assert names[len(kinds(design.trace))] == "EnterPostproc"
    assert "DecomposeReduction" in names and "C_init" in blocks(sch.mod)
    assert {ForKind.PARALLEL, ForKind.VECTORIZED} <= {loop.kind for loop in loops(sch.mod)}


@pytest.mark.parametrize("name", ["gemm", "conv2d_nchw", "softmax"])
def test_json_round_trip_replays_the_same_module(name):
    func, _ = workload(name)
    designs = generate_design_space(func, CPU)
    sch = next(s for s in (sample_candidate(func, CPU, d.trace, 11) for d in designs) if s)
    text = json.dumps(sch.trace.as_json())
    again = apply_trace(func, CPU, Trace.from_json(text))
    assert structural_equal(again.mod, sch.mod)
    # stored without its postprocessing, the trace gets it again
    bare = Trace.from_json(json.dumps(sch.trace.as_json(remove_postproc=True)))
    assert structural_equal(apply_trace(func, CPU, bare).mod, sch.mod)


def test_same_seed_same_candidate():
    func, _ = workload("conv2d_nchw")
    design = generate_design_space(func, CPU)[1].trace
    first, again = (sample_candidate(func, CPU, design, 42) for _ in range(2))
    other = sample_candidate(func, CPU, design, 43)
    assert first.trace.as_json() == again.trace.as_json()
    assert structural_equal(first.mod, again.mod)
    assert first.trace.as_json()["decisions"] != other.trace.as_json()["decisions"]


class _Reject(Postproc):
    def apply(self, sch) -> bool:
        return False


class _Refuse(Postproc):
    def apply(self, sch) -> bool:
        sch.parallel(sch.get_loops(sch.get_block("C"))[4])  # k0, a reduction loop: refused
        return True


def test_refusals_are_none_not_errors():
    func, _ = workload("gemm")
    design = generate_design_space(func, CPU)[5].trace
    assert sample_candidate(func, CPU, design, 1, [_Reject()]) is None
    assert sample_candidate(func, CPU, design, 1, [_Refuse()]) is None
    sch = sample_candidate(func, CPU, design, 1)
    data = sch.trace.as_json(remove_postproc=True)
    data["decisions"][0][1] = [7, 1, 1, 1]  # not a tiling of 48
    assert apply_trace(func, CPU, Trace.from_json(data)) is None


def test_a_trace_of_another_function_is_an_error():
    func, _ = workload("gemm")
    other, _ = workload("reduce_sum")
    design = generate_design_space(func, CPU)[0].trace
    with pytest.raises(ValueError, match="different function"):
        sample_candidate(other, CPU, design, 1)

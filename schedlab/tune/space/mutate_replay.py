"""Mutators that replay the trace to see the loop nest: `MutateComputeLocation` and
`MutateParallel` (TVM's). The function comes from `replay.recall` (the space remembers every
function it worked on); for a trace of an unknown function they find nothing to mutate."""

from __future__ import annotations

import random

from schedlab.ir.stmt import For
from schedlab.schedule import Instruction, Trace
from schedlab.schedule.primitives.compute_location import collect_compute_locations
from schedlab.target import Target

from .analysis import const_extent, loop_iter_type
from .mutator import Mutator, design_insts
from .parallel_vectorize_unroll import PARALLEL
from .replay import replay_recorded
from .rewrite_parallel import outer_fusible_count
from .rule import num_cores


class MutateComputeLocation(Mutator):
    """Move a SampleComputeLocation decision to another legal location."""

    name = "MutateComputeLocation"

    def apply(self, trace: Trace, rng: random.Random) -> Trace | None:
        if not any(inst.kind == "SampleComputeLocation" for inst in design_insts(trace)):
            return None
        candidates: list[tuple[Instruction, list[int]]] = []

        def inspect(sch, inst, inputs) -> None:
            if inst.kind == "SampleComputeLocation":
                decision = trace.decisions.get(inst)
                locations = collect_compute_locations(sch.state, sch.get(inputs[0]))
                others = [d for d, _ in locations if d != decision]
                if others:
                    candidates.append((inst, others))

        replay_recorded(trace, inspect)
        if not candidates:
            return None
        inst, others = rng.choice(candidates)
        return trace.with_decision(inst, rng.choice(others), remove_postproc=True)


class MutateParallel(Mutator):
    """Change the `meta_schedule.parallel` extent of the root block to one that fuses a
    different number of outer loops in some block (the extents are prefix products of the
    blocks' outer spatial loops, up to cores x max_jobs_per_core)."""

    name = "MutateParallel"

    def __init__(self, max_jobs_per_core: int = 16):
        self.max_jobs_per_core = max_jobs_per_core

    def apply(self, trace: Trace, rng: random.Random) -> Trace | None:
        marks = [inst for inst in design_insts(trace)
                 if inst.kind == "Annotate" and inst.attrs[0] == PARALLEL]  # fmt: skip
        if not marks:
            return None
        sch = replay_recorded(trace)
        if sch is None:
            return None
        inst = marks[-1]
        target = Target(trace.target) if trace.target else Target("cpu")
        nests = _outer_nests(sch)
        limits = _parallel_plans(nests, num_cores(target) * self.max_jobs_per_core)
        current = _plan_of(nests, int(inst.inputs[1]))
        options = [limit for plan, limit in limits.items() if plan != current]
        if not options:
            return None
        return _with_annotation(trace, inst, rng.choice(options))


def _outer_nests(sch) -> list[tuple[list[For], list]]:
    root = sch.func.body.block
    nests = []
    for block in sch.state.child_blocks(root):
        loops = sch.state.loops_above(block)
        if loops:
            nests.append((loops, [loop_iter_type(loop) for loop in loops]))
    return nests


def _parallel_plans(nests, max_extent: int) -> dict[tuple, int]:
    """{plan (parallel extent per block): the smallest limit giving it}, limits up to
    max_extent."""
    limits = {1}
    for loops, _ in nests:
        product = 1
        for loop in loops:
            product *= const_extent(loop) or 1
            if product <= max_extent:
                limits.add(product)
    plans: dict[tuple, int] = {}
    for limit in sorted(limits):
        plans.setdefault(_plan_of(nests, limit), limit)
    return plans


def _plan_of(nests, limit: int) -> tuple:
    """The parallel extent each block would get (fused unit loops change nothing)."""
    plan = []
    for loops, kinds in nests:
        extent = 1
        for loop in loops[: max(outer_fusible_count(loops, kinds, limit), 0)]:
            extent *= const_extent(loop) or 1
        plan.append(extent)
    return tuple(plan)


def _with_annotation(trace: Trace, inst: Instruction, value: int) -> Trace:
    """`trace` without postprocessing, `inst` (an Annotate) writing `value` instead."""
    new = Instruction(inst.kind, (inst.inputs[0], value), inst.attrs, inst.outputs)
    insts = tuple(new if i is inst else i for i in design_insts(trace))
    decisions = {i: d for i, d in trace.decisions.items() if any(i is k for k in insts)}
    return Trace(insts, decisions, trace.workload, trace.target)

"""Replaying traces on the function they were recorded on.

Mutators receive only a trace; the ones that must look at the loop nest (MutateParallel,
MutateComputeLocation) find its function here by the trace's workload fingerprint: every
function the space generates, samples or replays for is remembered (the most recent
`_CAPACITY`), as TVM's mutators read the module from their tune context.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from schedlab.cost.predict import as_func
from schedlab.ir.function import PrimFunc
from schedlab.schedule import Schedule, Trace
from schedlab.schedule.errors import ScheduleError, TraceError

_CAPACITY = 256
_WORKLOADS: OrderedDict[str, PrimFunc] = OrderedDict()


def new_schedule(func, target, seed: int = 0) -> Schedule:
    """A fresh schedule of `func` for `target` (traced, no per-step IR verification: the
    primitives check their own preconditions), its function remembered for the mutators."""
    func = as_func(func)
    # the target as given: a bare kind ("cpu") keeps traces portable across machines of that
    # kind, a Target pins them to equal hardware (see Schedule)
    sch = Schedule(func, seed=seed, debug=False, target=target)
    _WORKLOADS[sch.workload_fingerprint] = func
    _WORKLOADS.move_to_end(sch.workload_fingerprint)
    while len(_WORKLOADS) > _CAPACITY:
        _WORKLOADS.popitem(last=False)
    return sch


def recall(workload: str | None) -> PrimFunc | None:
    """The remembered function with this structural fingerprint."""
    return None if workload is None else _WORKLOADS.get(workload)


def replay(func, target, trace: Trace, seed: int = 0, remove_postproc: bool = False,
           decision_provider: Callable | None = None) -> Schedule | None:  # fmt: skip
    """`trace` replayed on a fresh schedule; None when an instruction refuses. A trace of
    another function is a ValueError (a mix-up, not a bad sample)."""
    sch = new_schedule(func, target, seed)
    if trace.workload is not None and trace.workload != sch.workload_fingerprint:
        raise ValueError("the trace was recorded on a different function (workload "
                         f"{trace.workload[:16]}...), not on this one")  # fmt: skip
    try:
        trace.apply_to_schedule(sch, remove_postproc, decision_provider)
    except (TraceError, ScheduleError):
        return None
    return sch


def replay_recorded(trace: Trace, inspect: Callable | None = None) -> Schedule | None:
    """`trace` without its postprocessing replayed on the function it was recorded on (None
    when that function is unknown here or the replay fails). `inspect(sch, inst, inputs)` is
    called before each instruction, with the schedule as it is at that point."""
    func = recall(trace.workload)
    if func is None:
        return None
    sch = new_schedule(func, trace.target)

    def provider(inst, inputs, attrs, decision):
        inspect(sch, inst, inputs)
        return decision

    try:
        trace.apply_to_schedule(sch, True, provider if inspect else None)
    except (TraceError, ScheduleError):
        return None
    return sch

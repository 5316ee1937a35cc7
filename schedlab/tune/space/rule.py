"""`ScheduleRule`: one step of design-space generation (TVM's meta_schedule.ScheduleRule).

`rule.apply(sch, block) -> list[Schedule]` rewrites one block. A rule that does not apply
returns `[sch]`; a rule that forks the space returns several schedules (`sch.copy()` each).
Whatever a rule decides at random is a sampling instruction of the schedule (sample_perfect_tile,
sample_categorical, sample_compute_location), so the trace records it as a decision: the search
re-samples and mutates decisions, and every candidate replays from its trace.

Rules read the hardware from `sch.target` (the Target the schedule was made for)."""

from __future__ import annotations

from schedlab.schedule import BlockRV, Schedule
from schedlab.target import Target


class ScheduleRule:
    """Base class. Subclasses implement `apply`; `name` is shown in logs and reports."""

    name = "ScheduleRule"

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        raise NotImplementedError(f"{type(self).__name__} must implement apply(sch, block)")

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({params})"


def target_of(sch: Schedule) -> Target:
    """The schedule's target (a plain CPU when the schedule was made without one)."""
    return Target(sch.target) if sch.target is not None else Target("cpu")


def num_cores(target: Target) -> int:
    return max(int(target.attrs.get("num_cores", 1) or 1), 1)


def vector_lanes(target: Target, dtype) -> int:
    """Elements of `dtype` in one SIMD register of the target (1 for GPUs and scalar CPUs)."""
    if target.kind != "cpu":
        return 1
    width = int(target.attrs.get("simd_width", 128) or 128)
    bits = max(int(getattr(dtype, "bits", 32)) * int(getattr(dtype, "lanes", 1)), 8)
    return max(width // bits, 1)

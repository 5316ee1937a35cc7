"""The plain records the explorer model hands to views (no behaviour, no UI library)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from schedlab.ir.function import IRModule


@dataclass(frozen=True)
class Selection:
    """What is selected: a function name, a block uid, a loop uid (each may be None)."""

    func: str | None = None
    block: int | None = None
    loop: int | None = None


@dataclass(frozen=True)
class Event:
    """A change observers hear about: kind is "module", "selection", "step", "branch",
    "target" or "measurement"; data says what changed."""

    kind: str
    data: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ApplyResult:
    """The outcome of `ExplorerModel.apply`. When not ok, `message` is the cause in a line or
    a few (the ScheduleError's or argument error's text), `detail` the function printed with
    the offending loops/blocks marked ^^^ ("" when there is none), `uids` those loops/blocks,
    and nothing changed."""

    ok: bool
    primitive: str
    message: str = ""
    uids: tuple[int, ...] = ()
    outputs: tuple = ()  # uids of the loops/blocks made (ints for sampled values)
    error: Exception | None = None
    detail: str = ""


@dataclass(frozen=True)
class StepInfo:
    """One user-visible step of the current branch: 0 is the unscheduled function."""

    index: int
    label: str  # e.g. "split(loop=i, factors=[None, 16])", "start": the tree's names
    mod: IRModule


@dataclass(frozen=True)
class GeneratedCode:
    """Source for one step and target; `loop_lines` maps loop uid -> LoopSpan (source lines).
    `error` is set (and source empty) when the step cannot be lowered or rendered."""

    target: str
    source: str = ""
    loop_lines: dict = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class PredictionResult:
    """A predicted latency; `available` is False (and seconds None) when there is no model or
    it failed — never a made-up number. `details` is the cost model's own result object."""

    available: bool
    seconds: float | None = None
    reason: str = ""
    details: Any = None


@dataclass(frozen=True)
class Measurement:
    """A measured latency (median seconds per call), or why it failed."""

    ok: bool
    seconds: float | None = None
    reason: str = ""
    stats: dict = field(default_factory=dict)

    @property
    def message(self) -> str:
        return f"{self.seconds * 1e3:.3f} ms" if self.ok else f"failed: {self.reason}"


@dataclass(frozen=True)
class LatencyPoint:
    """One point of the latency chart: predicted and measured seconds (None when unknown)."""

    step: int
    label: str
    predicted: float | None
    measured: float | None
    measure_failure: str = ""

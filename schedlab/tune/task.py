"""`TuneTask`: one PrimFunc to tune for one target, with its weight in the whole model.

A task is named after its function (TVM names tasks by the fused function's global symbol),
keyed by the function's structural fingerprint (the key the Database and traces use), and
weighted by how many times the model calls it: the task scheduler spends trials where they
save the most time."""

from __future__ import annotations

from dataclasses import dataclass, field

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.structural import structural_fingerprint
from schedlab.target import Target


@dataclass(frozen=True, eq=False)
class TuneTask:
    """One function to tune. `workload` is `structural_fingerprint(IRModule.from_expr(func))`,
    the same key `Schedule(func).workload_fingerprint` and recorded traces carry."""

    name: str
    func: PrimFunc
    target: Target
    weight: int = 1
    workload: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.func, PrimFunc):
            raise TypeError(f"TuneTask: func must be a PrimFunc, got {type(self.func).__name__}")
        if not isinstance(self.weight, int) or self.weight < 1:
            raise ValueError(f"TuneTask: weight must be a positive int, got {self.weight!r}")
        object.__setattr__(self, "target", Target(self.target))
        if not self.workload:
            object.__setattr__(self, "workload", workload_key(self.func))

    def __repr__(self) -> str:
        return f"TuneTask({self.name!r}, weight={self.weight}, target={self.target.kind})"


def workload_key(func: PrimFunc) -> str:
    """The structural fingerprint tuning records are keyed by (equal for equal functions)."""
    return structural_fingerprint(IRModule.from_expr(func))

"""Graph pipelines (TVM's relax.get_pipeline / relax.get_default_pipeline).

    mod = schedlab.relax.get_pipeline("zero")(mod)        # legalize, fuse, no schedules
    seq = schedlab.relax.get_default_pipeline("cpu")     # the target's four phases
    seq = schedlab.relax.get_default_pipeline("cpu", database=db)   # tuned schedules first

`get_default_pipeline(target)` reads `schedlab/backend/<kind>/pipeline.py`, which defines
library_dispatch_passes, legalize_passes, dataflow_lower_passes and finalize_passes (each
`target -> list[Pass]`). Everything is one Sequential: instruments (PassRecorder) see each pass.

Tuning hooks in at one point of every backend: the first pass named "ApplyDefaultSchedule"
(dlight's pass; the end of library dispatch + legalize when a backend has none). The passes
before it (`pre_schedule_passes`) make the unscheduled kernels that `schedlab.tune` extracts
as tasks; with a database, `ApplyDatabase` goes in right there, so tuned kernels are scheduled
first and the default schedule only takes the rest. Backends need no tuning code of their own.
"""

from __future__ import annotations

import importlib
import inspect

from schedlab.errors import LoweringError
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.transform import Pass, Sequential, module_pass
from schedlab.target import Target

from . import expr as X

PHASES = ("library_dispatch_passes", "legalize_passes", "dataflow_lower_passes", "finalize_passes")
SCHEDULE_PASS = "ApplyDefaultSchedule"  # where tuned schedules go in (see the module docstring)


def AttachGlobalSymbol() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """Set each function's "global_symbol" attr to its name in the module when missing."""

    @module_pass(name="AttachGlobalSymbol")
    def attach_global_symbol(mod: IRModule) -> IRModule:
        """Name every function by its key in the module."""
        updated = {}
        for name, func in mod.items():
            if func.attrs.get("global_symbol") == name:
                continue
            if isinstance(func, PrimFunc):
                updated[name] = func.with_attr("global_symbol", name)
            elif isinstance(func, X.Function):
                updated[name] = func.replace(attrs={**func.attrs, "global_symbol": name})
        return mod.update(updated) if updated else mod

    return attach_global_symbol


def _zero() -> list[Pass]:
    from . import transform as T

    return [
        T.LegalizeOps(),
        T.AnnotateTIROpPattern(),
        T.FoldConstant(),
        T.FuseOps(),
        T.FuseTIR(),
        T.DeadCodeElimination(),
        T.AttachLayoutFreeBuffers(),  # as the backends' pipelines: tuning keys include it
    ]


def _default_build() -> list[Pass]:
    from . import transform as T

    return [*_zero(), T.ToNonDataflow(), T.CallTIRRewrite(), T.PlanConcatInPlace(),
            T.StaticPlanBlockMemory()]  # fmt: skip


def _static_shape_tuning(*, target, total_trials: int, work_dir="tuning_logs",
                         max_trials_per_task=None, tune_options=None) -> list[Pass]:  # fmt: skip
    from schedlab.tune.relax_integration import ApplyDatabase, TuneIRModule

    tune = []
    if total_trials:  # 0: apply what work_dir holds, tune nothing (as TVM)
        options = tune_options or {}
        tune = [TuneIRModule(target, work_dir, total_trials, max_trials_per_task, **options)]
    return [*pre_schedule_passes(target), *tune, ApplyDatabase(work_dir, target)]


_PIPELINES = {
    "zero": _zero,
    "default_build": _default_build,
    "static_shape_tuning": _static_shape_tuning,
}


def get_pipeline(name: str = "zero", **options) -> Sequential:
    """The named pipeline:

    - "zero": LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR,
      DeadCodeElimination, AttachLayoutFreeBuffers (kernels unscheduled).
    - "default_build": zero, then ToNonDataflow, CallTIRRewrite, StaticPlanBlockMemory: the VM
      form, kernels unscheduled.
    - "static_shape_tuning" (options `target`, `total_trials`, `work_dir="tuning_logs"`,
      `max_trials_per_task=None`, `tune_options=None`: a dict for `tune_tasks`): the target's
      passes up to its default schedule, then tuning every kernel into the database in
      `work_dir` (skipped when `total_trials` is 0), then `ApplyDatabase`. It does not lower:
      `schedlab.compile(mod, target)` follows, and its default schedule takes the kernels the
      database does not cover.
    """
    if name not in _PIPELINES:
        raise ValueError(f"get_pipeline: unknown pipeline {name!r}; known: {', '.join(_PIPELINES)}")
    factory = _PIPELINES[name]
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as err:
        raise TypeError(f"get_pipeline({name!r}): {err}") from None
    return Sequential(factory(**options), name=name)


def backend_pipeline_module(target: Target):
    """The module `schedlab.backend.<kind>.pipeline` of `target`."""
    kind = Target(target).kind
    try:
        return importlib.import_module(f"schedlab.backend.{kind}.pipeline")
    except ModuleNotFoundError as err:
        raise LoweringError(
            f"get_default_pipeline: no graph pipeline for target kind {kind!r} "
            f"(schedlab/backend/{kind}/pipeline.py is missing: {err})"
        ) from None


def pre_schedule_passes(target: str | Target = "cpu") -> list[Pass]:
    """The target's library dispatch and legalize passes up to its first default-schedule pass:
    they leave every kernel fused and unscheduled, as tuning sees it."""
    return _split_at_schedule(Target(target))[0]


def get_default_pipeline(target: str | Target = "cpu", database=None) -> Sequential:
    """The target's pipeline: its four phases, in order, as one Sequential. With `database`
    (a `schedlab.tune.Database` or its work_dir, or schedule bundles: see `schedlab.bundle`),
    `ApplyDatabase` runs just before the default schedule and gives each kernel the database
    holds its best tuned schedule."""
    target = Target(target)
    before, after = _split_at_schedule(target)
    if database is not None:
        from schedlab.tune.relax_integration import ApplyDatabase

        before.append(ApplyDatabase(database, target))
    return Sequential([*before, *after], name=f"default_pipeline[{target.kind}]")


def _split_at_schedule(target: Target) -> tuple[list[Pass], list[Pass]]:
    """All the target's passes, split before the first SCHEDULE_PASS of its library dispatch
    and legalize phases (after them when they have none)."""
    module = backend_pipeline_module(target)
    phases = [getattr(module, phase)(target) for phase in PHASES]
    early = [*phases[0], *phases[1]]
    point = schedule_point(early)
    return early[:point], [*early[point:], *phases[2], *phases[3]]


def schedule_point(passes: list[Pass]) -> int:
    """The index of the first SCHEDULE_PASS in `passes` (a backend may schedule in several
    rounds, as TVM's Adreno pipeline does: tuned kernels go in before the first); the end of
    `passes` when there is none."""
    return next((i for i, p in enumerate(passes) if p.name == SCHEDULE_PASS), len(passes))

"""Tuning a graph model: its kernels as tasks, and tuned schedules back into its pipeline
(TVM's meta_schedule.relax_integration and the MetaScheduleApplyDatabase pass).

    tasks = extract_tasks(mod, "cpu")                     # one per distinct kernel, weighted
    db = tune_tasks(tasks, "runs/mlp", max_trials_global=256).database
    exe = schedlab.compile(mod, "cpu", database=db)       # tuned kernels, dlight for the rest

A kernel is a PrimFunc as the target's pipeline leaves it just before its default schedule
(`schedlab.relax.pipeline.pre_schedule_passes`): fused and unscheduled. Tasks are extracted
there and `ApplyDatabase` runs there, so both see the same functions.

FuseTIR names each fused kernel apart (fused_matmul_add, fused_matmul_add1, ...) and the name
is an attr ("global_symbol") that structural equality compares. A task's function is therefore
the kernel without it (`workload_func`): equal kernels share one workload key, one task and one
tuning record (TVM likewise renames each task's function "main").
"""

from __future__ import annotations

import os
import warnings

from schedlab.dlight.base import SCHEDULED_ATTR, is_scheduled
from schedlab.errors import LoweringError, SchedlabError
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import post_order_visit
from schedlab.ir.transform import Pass, Sequential
from schedlab.relax import expr as X
from schedlab.relax.infer import CALL_TIR
from schedlab.target import Target

from .task import TuneTask, workload_key

FROM_DATABASE_ATTR = "tune.from_database"  # True on kernels ApplyDatabase scheduled


def extract_tasks(mod: IRModule, target: str | Target = "cpu") -> list[TuneTask]:
    """One task per distinct unscheduled kernel of `mod` (a graph module before or after the
    target's pre-schedule passes: they are run here, and are idempotent).

    Kernels are the `call_tir` callees of every graph function, deduplicated by workload key;
    a task is named after its first callee (in module, then program order), and weighted by
    its number of call sites. Kernels marked "tir.is_scheduled" are skipped."""
    from schedlab.relax.pipeline import pre_schedule_passes

    if not isinstance(mod, IRModule):
        raise TypeError(f"extract_tasks: mod must be an IRModule, got {type(mod).__name__}")
    target = Target(target)
    with target:
        lowered = Sequential(pre_schedule_passes(target), name="extract_tasks")(mod)
    return tasks_of(lowered, target)


def tasks_of(mod: IRModule, target: str | Target = "cpu") -> list[TuneTask]:
    """`extract_tasks` on a module already through the pre-schedule passes (no pass is run)."""
    target = Target(target)
    return [
        TuneTask(callees[0], workload_func(mod[callees[0]]), target, len(callees), key)
        for key, callees in callees_by_workload(mod).items()
    ]


def callees_by_workload(mod: IRModule) -> dict[str, list[str]]:
    """The unscheduled kernels `call_tir` calls in `mod` (through the pre-schedule passes),
    grouped by workload key: key -> callee names, one per call site, in module then program
    order. Kernels marked "tir.is_scheduled" are left out, and so are the ones the compiled
    model never runs (`elided_kernels`)."""
    groups: dict[str, list[str]] = {}
    elided = elided_kernels(mod)
    for callee in call_tir_callees(mod):
        func = mod.get(callee)
        if isinstance(func, PrimFunc) and not is_scheduled(func) and callee not in elided:
            groups.setdefault(workload_key(workload_func(func)), []).append(callee)
    return groups


def elided_kernels(mod: IRModule) -> set[str]:
    """Kernels of `mod` (through the pre-schedule passes) that the VM form calls nowhere: the
    concatenations PlanConcatInPlace elides (it drops their PrimFuncs). Tuning them is waste."""
    from schedlab.ir.transform import PassContext
    from schedlab.relax import transform as T
    from schedlab.relax.transform.concat_in_place import CONCAT_AXIS_ATTR

    tagged = {name for name, func in mod.items()
              if isinstance(func, PrimFunc) and CONCAT_AXIS_ATTR in func.attrs}  # fmt: skip
    if not tagged:
        return set()
    with PassContext():  # the caller's instruments are not told of this look ahead
        vm_form = Sequential([T.ToNonDataflow(), T.CallTIRRewrite(), T.PlanConcatInPlace()])(mod)
    return {name for name in tagged if name not in vm_form}


def workload_func(func: PrimFunc) -> PrimFunc:
    """`func` as tuning keys it: without "global_symbol", its name in one module."""
    if "global_symbol" not in func.attrs:
        return func
    return func.replace(attrs={k: v for k, v in func.attrs.items() if k != "global_symbol"})


def call_tir_callees(mod: IRModule) -> list[str]:
    """The callee name of each `call_tir` in each graph function (module, then program order;
    a callee called twice is listed twice)."""
    names: list[str] = []

    def visit(node) -> None:
        if isinstance(node, X.Call) and node.op == CALL_TIR:
            names.append(node.args[0].name_hint)

    for func in mod.values():
        if isinstance(func, X.Function):
            post_order_visit(func, visit)
    return names


def ApplyDatabase(  # noqa: N802 - TVM's name (MetaScheduleApplyDatabase): a pass factory
    database, target: str | Target | None = None, enable_warning: bool = False
) -> Pass:
    """A module pass giving each PrimFunc not marked "tir.is_scheduled" its best schedule from
    `database` (a Database, or the work_dir of one: opened when the pass runs, so a tuning
    pass before it can fill it). A kernel the database holds no record of stays unscheduled
    for the default schedule after it (`enable_warning` warns about each one).

    `database` may also be schedule bundles (`schedlab.bundle`: a Bundle, a list of them or of
    their files, the path of a bundle file): a kernel takes the schedule of the bundle exported
    from it, and, unlike a Database, a bundle for another target kind or for no kernel of the
    module is an error (BundleError naming it and the module's kernels).

    A scheduled kernel keeps its attrs (global_symbol, op_pattern, ...) and gains
    "tir.is_scheduled" and "tune.from_database" (True: its schedule is a tuned one). The target
    is `target`, else the one entered with `with Target(...):`, else `Target("cpu")`.
    Records are matched on the exact target string (host description included)."""
    open_database = _database_opener(database)
    fixed = None if target is None else Target(target)

    def run(mod: IRModule) -> IRModule:
        db = open_database()
        current = fixed or Target.current() or Target("cpu")
        check = getattr(db, "check_module", None)  # bundles: each must fit a kernel here
        if check is not None:
            check(mod, current)
        updated = {}
        for name, func in mod.items():
            if isinstance(func, PrimFunc) and not is_scheduled(func):
                scheduled = _from_database(db, name, func, current, enable_warning)
                if scheduled is not None:
                    updated[name] = scheduled
        return mod.update(updated) if updated else mod

    return Pass(run, "ApplyDatabase", 0, doc=ApplyDatabase.__doc__)


def _database_opener(database):
    """A function returning the Database `database` names (checked now, opened later)."""
    from schedlab.bundle import bundle_database

    bundles = bundle_database(database)  # bundle files are read now: they are not filled later
    if bundles is not None:
        return lambda: bundles
    if isinstance(database, (str, os.PathLike)):
        return lambda: open_database(database)
    if callable(getattr(database, "query_schedule", None)):
        return lambda: database
    raise TypeError(
        "ApplyDatabase: database must be a Database or a work_dir path, "
        f"got {type(database).__name__} (or schedule bundles: see schedlab.bundle)"
    )


def open_database(work_dir: str | os.PathLike):
    """The Database in `work_dir`, which must exist (a mistyped path is an error here, not an
    empty database that silently tunes nothing)."""
    from .database import Database, DatabaseError

    if not os.path.isdir(work_dir):
        raise DatabaseError(f"no tuning database at {os.fspath(work_dir)!r}: no such folder")
    return Database(work_dir)


def _from_database(db, name: str, func: PrimFunc, target: Target, warn: bool) -> PrimFunc | None:
    """`func` with its best tuned schedule, or None when `db` holds no record of it."""
    try:
        sch = db.query_schedule(workload_func(func), target)
    except SchedlabError as err:  # a stored trace that no longer replays (other version?)
        raise LoweringError(
            f"ApplyDatabase: kernel {name!r}: its best record fails: {err}"
        ) from err
    if sch is None:
        if warn:
            warnings.warn(f"ApplyDatabase: no tuning record of kernel {name!r}", stacklevel=2)
        return None
    attrs = {**sch.func.attrs, **func.attrs, SCHEDULED_ATTR: True, FROM_DATABASE_ATTR: True}
    return sch.func.replace(attrs=attrs)


def TuneIRModule(  # noqa: N802 - TVM's name (MetaScheduleTuneIRMod): a pass factory
    target: str | Target,
    work_dir: str | os.PathLike,
    max_trials_global: int,
    max_trials_per_task: int | None = None,
    **options,
) -> Pass:
    """A module pass tuning every kernel of a module already through the pre-schedule passes
    into the database in `work_dir` (resuming what it holds); the module passes through
    unchanged, and an ApplyDatabase after it applies the results. `options` go to
    `tune_tasks` (num_trials_per_iter, strategy, cost_model, progress, ...)."""
    if not isinstance(max_trials_global, int) or max_trials_global < 1:
        raise ValueError(
            f"TuneIRModule: max_trials_global must be a positive int, got {max_trials_global!r}"
        )
    target = Target(target)

    def run(mod: IRModule) -> IRModule:
        from .tuner import tune_tasks

        tasks = tasks_of(mod, target)
        if tasks:  # every kernel already scheduled: nothing to tune
            tune_tasks(tasks, work_dir, max_trials_global,
                       max_trials_per_task=max_trials_per_task, **options)  # fmt: skip
        return mod

    return Pass(run, "TuneIRModule", 0, doc=TuneIRModule.__doc__)


__all__ = [
    "FROM_DATABASE_ATTR",
    "ApplyDatabase",
    "TuneIRModule",
    "call_tir_callees",
    "callees_by_workload",
    "extract_tasks",
    "open_database",
    "tasks_of",
    "workload_func",
]

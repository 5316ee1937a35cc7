"""`tune_tir`, `tune_relax`, `tune_tasks`: the tuning loop (TVM's MetaSchedule entry points).

    db = tune_tir(func, target="cpu", max_trials=64, work_dir="runs/gemm")
    sch = db.query_schedule(func, "cpu")        # the best schedule, replayed from its trace

The loop: the task scheduler picks a task; its search strategy proposes a batch of unmeasured
candidates (the cost model ranks them); the measurer builds them in parallel and runs them one
at a time in an isolated worker; every result (failures too) is appended to the database at
once, the cost model learns from the batch, and an event per candidate goes to the progress
callbacks. It stops at the trial budget, when every task's space is exhausted, or when `stop`
(a threading.Event) is set. At the end each task's best schedule is re-measured in a fresh
process (runners overstate winners) and a summary table is printed.

Resuming: pointing a new run at the same work_dir reads what is stored; stored trials count
against the budget and stored candidates are never measured again.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.target import Target

from .progress import (
    TaskSummary,
    TqdmReporter,
    TrialEvent,
    describe_shapes,
    flop_count,
    summary_table,
)
from .scheduler import TaskProgress, make_task_scheduler
from .search import Candidate, make_strategy
from .task import TuneTask


@dataclass
class TuneResult:
    """What `tune_tasks` returns: the database and one summary row per task."""

    database: object
    summaries: list[TaskSummary]
    stopped: bool = False
    timing: dict | None = None  # seconds spent: {"search": ..., "measure": ...}

    def table(self, target) -> str:
        return summary_table(self.summaries, target, self.timing)


def tune_tir(func: PrimFunc | IRModule, target="cpu", max_trials: int = 64,
             work_dir: str | Path = "schedlab_tune", **options):  # fmt: skip
    """Tune one PrimFunc (or every PrimFunc of a module, as separate tasks) and return the
    Database. Options are those of `tune_tasks`."""
    target = Target(target)
    if isinstance(func, PrimFunc):
        tasks = [TuneTask(func.attrs.get("global_symbol", func.name) or "main", func, target)]
    elif isinstance(func, IRModule):
        tasks = [TuneTask(name, f, target) for name, f in func.items() if isinstance(f, PrimFunc)]
    else:
        raise TypeError(f"tune_tir: expected a PrimFunc or IRModule, got {type(func).__name__}")
    return tune_tasks(tasks, work_dir, max_trials, **options).database


def tune_relax(mod: IRModule, target="cpu", max_trials_global: int = 64,
               work_dir: str | Path = "schedlab_tune", **options):  # fmt: skip
    """Extract the kernels of a relax module (one task per unique PrimFunc, weighted by its
    call count) and tune them together; returns the Database to pass to
    `schedlab.compile(mod, target, database=...)`."""
    from .relax_integration import extract_tasks

    tasks = extract_tasks(mod, Target(target))
    return tune_tasks(tasks, work_dir, max_trials_global, **options).database


def tune_tasks(tasks: list[TuneTask], work_dir: str | Path, max_trials_global: int, *,
               max_trials_per_task: int | None = None, num_trials_per_iter: int = 16,
               strategy="evolutionary", cost_model="xgb", task_scheduler="gradient",
               measurer=None, space=None, seed: int = 0,
               on_event: Callable[[TrialEvent], None] | None = None,
               stop: threading.Event | None = None, progress: bool = True,
               remeasure: bool = True, log: Callable[[str], None] | None = print,
               strategy_options: dict | None = None,
               search_workers: int | None = None,
               flush_cache: bool | str = False) -> TuneResult:  # fmt: skip
    """Tune `tasks` with at most `max_trials_global` measurements in all (and at most
    `max_trials_per_task` each, default the global budget), `num_trials_per_iter` per batch.
    The search replays its candidates on `search_workers` processes (default: one per usable
    CPU, at most 8; 1: in this process), idle while candidates are measured.

    `flush_cache` (for the default measurer; one passed in keeps its own setting): True times
    every call with its arguments but the first evicted from the caches, as a model's layer
    whose weights come from memory (CPU targets only); "auto" does so for the CPU kernels
    whose constant weights outgrow the cores' L2 caches together and times the others warm
    (`measure.flushes_caches`); False (the default) times every kernel warm. See
    docs/tuning.md, "Warm or cold caches", for what each gave on light_resnet50."""
    _check_budget(tasks, max_trials_global, num_trials_per_iter)
    flush_cache = check_flush_cache(tasks, flush_cache)
    loop = _TuningLoop(tasks, work_dir, max_trials_global, max_trials_per_task or
                       max_trials_global, num_trials_per_iter, seed)  # fmt: skip
    loop.setup(strategy, cost_model, task_scheduler, measurer, space, strategy_options or {},
               search_workers, flush_cache)  # fmt: skip
    listeners = [on_event] if on_event else []
    reporter = TqdmReporter(loop.remaining()) if progress else None
    if reporter is not None:
        listeners.append(reporter)
    try:
        stopped = loop.run(listeners, stop or threading.Event())
        summaries = loop.summaries(remeasure and not stopped)
    finally:
        if reporter is not None:
            reporter.close()
        loop.close()
    result = TuneResult(loop.database, summaries, stopped, dict(loop.timing))
    if log is not None:
        log(result.table(tasks[0].target if tasks else "cpu"))
    return result


def check_flush_cache(tasks, flush_cache: bool | str) -> bool | str:
    """`flush_cache` as a policy (True, False, "auto"); True is refused (ValueError) for tasks
    of a target whose caches the host cannot flush."""
    from .measure import flush_policy

    flush_cache = flush_policy(flush_cache)
    if flush_cache is True:
        others = sorted({task.target.kind for task in tasks} - {"cpu"})
        if others:
            raise ValueError(
                f"tune: flush_cache is for CPU targets; the tasks' target is {others[0]}"
            )
    return flush_cache


def _check_budget(tasks, max_trials_global, num_trials_per_iter) -> None:
    if not tasks:
        raise ValueError("tune: no tasks to tune (the module has no PrimFunc left to schedule)")
    for name, value in (("max_trials_global", max_trials_global),
                        ("num_trials_per_iter", num_trials_per_iter)):  # fmt: skip
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"tune: {name} must be a positive int, got {value!r}")


class _TuningLoop:
    """The state of one tuning run (one database, one measurer, one search per task)."""

    def __init__(self, tasks, work_dir, max_global, max_per_task, per_iter, seed):
        from .database import Database

        self.tasks = tasks
        self.database = Database(work_dir)
        self.max_global, self.per_iter, self.seed = max_global, per_iter, seed
        for task in tasks:
            self.database.commit_workload(task.func, task.name)
        self.progress = [self._stored_progress(t, max_per_task) for t in tasks]
        self.flops = [flop_count(t.func) for t in tasks]
        self.shapes = [describe_shapes(t.func) for t in tasks]
        self.searches: list = [None] * len(tasks)
        self.default_offered = [False] * len(tasks)
        self.started = time.perf_counter()
        self.measured_now = 0
        self.timing = {"search": 0.0, "measure": 0.0, "learn": 0.0}

    def _stored_progress(self, task: TuneTask, max_per_task: int) -> TaskProgress:
        records = self.database.records(workload=task.workload, target=str(task.target))
        best = min((r.median_secs for r in records if r.ok), default=math.inf)
        progress = TaskProgress(task.weight, max_per_task, trials=len(records), best=best)
        if records:
            progress.end_round()
        return progress

    def setup(self, strategy, cost_model, task_scheduler, measurer, space, options,
              search_workers, flush_cache: bool | str) -> None:  # fmt: skip
        from .candidates import make_candidate_maker
        from .cost_model import make_cost_model
        from .measure import LocalRunner, Measurer
        from .space import PostOrderApply

        self.strategy_spec, self.options = strategy, options
        self.space = space or PostOrderApply()
        self.cost_model = make_cost_model(cost_model, seed=self.seed)
        self.scheduler = make_task_scheduler(task_scheduler, seed=self.seed)
        self.own_measurer = measurer is None
        self.measurer = measurer or Measurer(runner=LocalRunner(flush_cache=flush_cache))
        self.maker = make_candidate_maker(search_workers)
        self._train_on_stored()

    def _train_on_stored(self) -> None:
        """A resumed run's model starts from what the database holds."""
        from schedlab.schedule import Trace

        from .candidates import SearchContext

        for task in self.tasks:
            records = self.database.records(workload=task.workload, target=str(task.target))
            jobs = [("replay", Trace.from_json(record.trace)) for record in records]
            replayed = self.maker.map(SearchContext.of(task, self.space), jobs)
            kept = [(c.mod, r.median_secs if r.ok else None)
                    for c, r in zip(replayed, records) if c is not None]  # fmt: skip
            if kept:
                self.cost_model.update(task, [mod for mod, _ in kept], [s for _, s in kept])

    def remaining(self) -> int:
        stored = sum(p.trials for p in self.progress)
        alive = sum(max(p.max_trials - p.trials, 0) for p in self.progress)
        return max(min(self.max_global - stored, alive), 0)

    def run(self, listeners, stop: threading.Event) -> bool:
        while not stop.is_set():
            budget = self.max_global - sum(p.trials for p in self.progress)
            index = self.scheduler.next_task(self.progress) if budget > 0 else None
            if index is None:
                return False
            self._round(index, min(self.per_iter, budget), listeners, stop)
        return True

    def _round(self, index: int, budget: int, listeners, stop) -> None:
        task, progress = self.tasks[index], self.progress[index]
        search = self._search(index)
        count = min(budget, progress.max_trials - progress.trials)
        started = time.perf_counter()
        candidates = self._with_default_first(index, search, count)
        self.timing["search"] += time.perf_counter() - started
        if not candidates:
            progress.done = True  # the space is exhausted
            return
        started = time.perf_counter()
        results = self._measure(index, candidates, listeners, stop)
        self.timing["measure"] += time.perf_counter() - started
        candidates = candidates[: len(results)]  # a stop may cut the batch short
        search.notify(candidates, results)
        secs = [r.median_secs if r.ok else None for r in results]
        started = time.perf_counter()
        self.cost_model.update(task, [c.mod for c in candidates], secs)
        self.timing["learn"] += time.perf_counter() - started
        progress.end_round()

    def _with_default_first(self, index: int, search, count: int) -> list[Candidate]:
        """`search.generate(count)`, led the first time by the task's default schedule (the
        dlight rules') unless it is stored: the tuned kernel is then never slower than the
        untuned one, and the search's model learns where the default stands."""
        default = None
        if not self.default_offered[index]:
            self.default_offered[index] = True
            default = default_candidate(self.tasks[index])
            if default is not None and default.key in search.measured:
                default = None
        if default is None:
            return search.generate(count)
        rest = search.generate(count - 1) if count > 1 else []
        return [default, *(c for c in rest if c.key != default.key)]

    def _search(self, index: int):
        if self.searches[index] is None:
            search = make_strategy(self.strategy_spec, seed=self.seed + index, **self.options)
            search.start(self.tasks[index], self.space, self.database, self.cost_model, self.maker)
            self.searches[index] = search
        return self.searches[index]

    def _measure(self, index, candidates: list[Candidate], listeners, stop) -> list:
        from .measure import MeasureInput

        task = self.tasks[index]
        inputs = [MeasureInput(c.func, task.target, task.name) for c in candidates]

        def on_result(position: int, result) -> None:
            self._record(index, candidates[position], result, listeners)

        return self.measurer.measure(inputs, on_result=on_result, stop=stop)

    def _record(self, index: int, candidate: Candidate, result, listeners) -> None:
        task, progress = self.tasks[index], self.progress[index]
        self.database.commit_record(result.to_record(task, candidate.trace))
        progress.trials += 1
        self.measured_now += 1
        latency = result.median_secs if result.ok else None
        if latency is not None:
            progress.best = min(progress.best, latency)
        event = TrialEvent(
            task=task.name, shapes=self.shapes[index], task_trial=progress.trials,
            task_trials=progress.max_trials, trial=sum(p.trials for p in self.progress),
            trials=self.max_global, latency_s=latency,
            best_s=progress.best if math.isfinite(progress.best) else None,
            error=result.error, elapsed_s=time.perf_counter() - self.started,
            eta_s=self._eta(), flops=self.flops[index],
        )  # fmt: skip
        for listener in listeners:
            listener(event)

    def _eta(self) -> float | None:
        if not self.measured_now:
            return None
        per_trial = (time.perf_counter() - self.started) / self.measured_now
        return per_trial * self.remaining()

    def summaries(self, remeasure: bool) -> list[TaskSummary]:
        rows = []
        for index, task in enumerate(self.tasks):
            progress = self.progress[index]
            best = progress.best if math.isfinite(progress.best) else None
            again = self._remeasure(task) if remeasure and best is not None else None
            rows.append(TaskSummary(task, progress.trials, best, again, self.flops[index]))
        return rows

    def _remeasure(self, task: TuneTask) -> float | None:
        sch = self.database.query_schedule(task.func, task.target)
        if sch is None:
            return None
        from .measure import MeasureInput

        result = self.measurer.remeasure_in_fresh_process(
            MeasureInput.from_schedule(sch, task.target, task.name)
        )
        return result.median_secs if result.ok else None

    def close(self) -> None:
        self.maker.close()
        if self.own_measurer:
            self.measurer.close()


def default_candidate(task: TuneTask) -> Candidate | None:
    """The task's default schedule (the dlight CPU rules), its trace closed with EnterPostproc
    so a replay reproduces it exactly; None for targets without default rules here, or when
    no rule takes a block."""
    from schedlab import dlight

    if task.target.kind != "cpu":
        return None
    sch, fired = dlight.schedule_func(task.func, dlight.cpu.default_rules(), task.target)
    if not fired:
        return None
    sch.enter_postproc()
    return Candidate.of(sch)

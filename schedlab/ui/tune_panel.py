"""The explorer's Tune panel without a front end: a tuning run on a background thread.

    tune = TuneController(on_update=push_state)        # one per explorer session
    tasks, what = tasks_for(model, "all", "cpu")      # the loaded workload's or model's kernels
    tune.start(tasks, what, "cpu", trials=64, per_batch=16)
    tune.state()                                      # JSON for the panel (docs/explorer.md)
    tune.stop(); tune.resume()                        # same tasks, same folder: nothing re-measured
    record = tune.record(candidate)                   # a top-k entry, to open in the explorer
    tune.close()

`tune_tasks` (schedlab.tune) runs on a daemon thread and reports each measured candidate as a
TrialEvent; the controller folds the events into a status line, a best-latency-per-trial
series per task and a progress count, and calls `on_update` at most every `interval` seconds
(a tuning batch can measure many small kernels a second; the view needs a few frames). The
top-k list is read back from the run's database folder, where every record lands before its
event fires, so an "Open" always finds the trace it shows.

Each run has its own work_dir: a fresh folder under a temporary root the controller owns (and
removes on close), or one the user names (kept). Resuming points `tune_tasks` at the same
folder, which counts the stored trials and measures none of them again.

A run of all the kernels of a graph model ends as `schedlab tune model.onnx` does: each kernel's
schedule is chosen among its `select_top_k` fastest by its time inside the compiled model
(`select_in_model`), and the status line then says what changed; Stop ends that step too.
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from schedlab.ir.function import PrimFunc

DEFAULT_TRIALS = 64
DEFAULT_PER_BATCH = 16
SELECT_TOP_K = 4  # the in-model choice after a model's run, as `schedlab tune model.onnx`
TOP_K = 5
UPDATE_INTERVAL_S = 0.5
TOP_REFRESH_S = 1.0  # while a run goes on, re-read its records at most this often
STATUSES = ("idle", "running", "stopping", "stopped", "done", "failed")


class TuneInputError(ValueError):
    """A Tune panel request that cannot be carried out; the panel shows the text."""


def count(value, name: str) -> int:
    """A positive whole number from a panel field: an int, or its decimal text."""
    number = int(value) if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value) else value
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise TuneInputError(f"{name} must be a whole number of at least 1, got {value!r}")
    return number


@dataclass(frozen=True)
class TuneJob:
    """What a run tunes and how; kept so that Resume goes on with the same tasks and folder."""

    tasks: tuple
    what: str
    target: str
    work_dir: Path
    trials: int
    per_batch: int
    graph: object = None  # the graph model whose kernels these are, all of them, or None


# -- what to tune ----------------------------------------------------------------------------------
def scope_choices(model) -> list[dict]:
    """The panel's "what" options for the loaded module: all its kernels, or the open one."""
    prims = [name for name, kind in model.functions() if kind == "PrimFunc"]
    if not prims:
        return []
    if len(prims) == 1 and model.graph_module is None:
        return [{"value": "all", "label": model.source or prims[0]}]
    return [
        {"value": "all", "label": f"all {len(prims)} kernels of {model.source}"},
        {"value": "function", "label": f"the open kernel, {model.func_name}"},
    ]


def tasks_for(model, scope: str, target) -> tuple[list, str]:
    """(TuneTasks, what they are in words) for `scope` "all" or "function". A graph model's
    kernels come from `extract_tasks` (weighted by call count), as `schedlab tune` makes them;
    `graph_for` says whether the run then chooses among them in the model."""
    from schedlab.target import Target
    from schedlab.tune.task import TuneTask

    if scope not in ("all", "function"):
        raise TuneInputError(f"what to tune must be 'all' or 'function', got {scope!r}")
    if model.module is None or model.func_name is None:
        raise TuneInputError("load a workload or a model first: there is nothing to tune")
    target = Target(target)
    if model.graph_module is not None:
        from schedlab.tune.relax_integration import extract_tasks

        tasks = extract_tasks(model.graph_module, target)
    else:
        tasks = [TuneTask(name, func, target) for name, func in model.module.items()
                 if isinstance(func, PrimFunc)]  # fmt: skip
    if scope == "function":
        key = kernel_key(model.module[model.func_name])
        tasks = [t for t in tasks if t.workload in key]
        return tasks, f"{model.func_name} of {model.source}"
    what = model.source if len(tasks) == 1 else f"{len(tasks)} kernels of {model.source}"
    return tasks, what


def graph_for(model, scope: str):
    """The graph model a run of `scope` chooses its kernels in after tuning (all of a graph
    model's kernels), else None."""
    return model.graph_module if scope == "all" else None


def kernel_key(func: PrimFunc) -> tuple[str, str]:
    """The workload keys a tuning record of `func` may carry: as it is, and without its name
    (tasks of a graph model drop "global_symbol", so equal kernels share one record)."""
    from schedlab.tune.relax_integration import workload_func
    from schedlab.tune.task import workload_key

    return workload_key(func), workload_key(workload_func(func))


def open_record(model, record, rank: int) -> tuple[str, str]:
    """Replay a tuning record in the explorer as a new branch of its function (opened first
    when another one is open). Returns (the previous branch, the new branch)."""
    name = next((n for n, f in model.module.items() if isinstance(f, PrimFunc)
                 and record.workload in kernel_key(f)), None) if model.module else None  # fmt: skip
    if name is None:
        raise TuneInputError(
            f"the explorer has no kernel {record.task_name!r} open any more: load what was "
            "tuned again to open its schedules"
        )
    if model.func_name != name:
        model.open_function(name)
    previous = model.branch
    branch = free_name(f"tuned-{rank}", model.branches())
    trace = dict(record.trace)
    if trace.get("workload") != model.schedule.workload_fingerprint:
        trace["workload"] = None  # the same kernel up to its name (checked above by key)
    model.import_trace(trace, branch=branch)
    return previous, branch


def free_name(base: str, taken) -> str:
    taken = set(taken)
    if base not in taken:
        return base
    n = 2
    while f"{base}.{n}" in taken:
        n += 1
    return f"{base}.{n}"


# -- the run ---------------------------------------------------------------------------------------
class TuneController:
    """One session's tuning run (see the module doc). `tune_fn` stands in for `tune_tasks` and
    `options` are extra keywords for it (tests: a cheaper cost model, no re-measure)."""

    def __init__(self, on_update: Callable[[], None] | None = None, *,
                 tune_fn: Callable | None = None, options: dict | None = None,
                 interval: float = UPDATE_INTERVAL_S, top_k: int = TOP_K,
                 select_top_k: int = SELECT_TOP_K):  # fmt: skip
        self.on_update = on_update
        self.options = dict(options or {})
        self.top_k = top_k
        self.select_top_k = select_top_k  # 0: no in-model choice after a model's run
        self._tune_fn = tune_fn
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._notify = _Throttle(self._fire, interval)
        self._root: Path | None = None  # the temporary folder this controller owns
        self._runs = 0
        self._closed = False
        self.job: TuneJob | None = None
        self.status = "idle"
        self.reason = ""  # why it failed
        self.error = ""  # why the last request was refused (bad input)
        self._tasks: dict[str, dict] = {}
        self._last = None  # the last TrialEvent
        self._selecting = False  # choosing the kernels in the model, after the trials
        self.selection = None  # the last run's SelectionResult (schedlab.tune.in_model)
        self._top: tuple = (None, 0.0, None, [])  # (records file size, read at, db, entries)
        self.update_errors: list[Exception] = []

    # -- requests -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, tasks, what: str, target, trials, per_batch, work_dir: str | None = None,
              graph=None):  # fmt: skip
        """Start a new run of `tasks` (a fresh folder unless `work_dir` names one); `graph`,
        the model they are all the kernels of, is where they are chosen in after the trials."""
        trials, per_batch = count(trials, "trials"), count(per_batch, "trials per batch")
        if not tasks:
            raise TuneInputError(f"{what} has no kernel left to tune")
        named = (work_dir or "").strip()
        folder = Path(named).expanduser() if named else self._new_folder()
        self._launch(TuneJob(tuple(tasks), what, str(target), folder, trials, per_batch, graph))

    def resume(self, trials=None, per_batch=None) -> None:
        """Go on with the last run's tasks and folder (to `trials` in all, when given)."""
        job = self.job
        if job is None:
            raise TuneInputError("nothing to resume: start a run first")
        trials = job.trials if trials in (None, "") else count(trials, "trials")
        per_batch = job.per_batch if per_batch in (None, "") else count(
            per_batch, "trials per batch")  # fmt: skip
        stored = sum(t["trials"] for t in self._tasks.values())
        if trials <= stored and not self._choice_left(job):
            raise TuneInputError(
                f"the run already holds {stored} trials: set trials above {stored} to go on"
            )
        self._launch(TuneJob(job.tasks, job.what, job.target, job.work_dir, trials, per_batch,
                             job.graph))  # fmt: skip

    def _choice_left(self, job: TuneJob) -> bool:
        """Whether the run was stopped in its in-model choice (which Resume then redoes)."""
        chooses = job.graph is not None and self.select_top_k >= 2
        return chooses and self.status == "stopped" and self.selection is not None and (
            self.selection.stopped)  # fmt: skip

    def stop(self) -> None:
        """Ask the run to end after the candidate being measured (it can be resumed)."""
        if self.running:
            self._stop.set()
            with self._lock:
                if self.status == "running":  # not when the run has just ended by itself
                    self.status = "stopping"
            self._notify(now=True)

    def _launch(self, job: TuneJob) -> None:
        if self._closed:
            raise TuneInputError("this session is closed")
        if self.running:
            raise TuneInputError("a run is going on: stop it first")
        tasks, db = self._stored(job)
        with self._lock:
            self.job, self._tasks, self._last = job, tasks, None
            self._selecting, self.selection = False, None
            self.status, self.reason, self.error = "running", "", ""
            self._top = (_file_size(job.work_dir), time.monotonic(), db, self._top_entries(db, job))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(job, self._stop), daemon=True,
                                        name="schedlab-tune")  # fmt: skip
        self._thread.start()

    def _new_folder(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="schedlab-tune-"))
        self._runs += 1
        return self._root / f"run-{self._runs}"

    def _stored(self, job: TuneJob) -> tuple[dict, object]:
        """Each task's progress as its folder holds it (a resumed run continues its lines)."""
        from schedlab.tune.database import DatabaseError
        from schedlab.tune.progress import describe_shapes, flop_count

        try:
            db = _open_database(job.work_dir)
        except DatabaseError as err:
            raise TuneInputError(str(err)) from None
        tasks = {}
        for task in job.tasks:
            entry = {"name": task.name, "shapes": describe_shapes(task.func),
                     "weight": task.weight, "flops": flop_count(task.func), "trials": 0,
                     "best_s": None, "remeasured_s": None, "points": []}  # fmt: skip
            for record in db.records(workload=task.workload, target=str(task.target)):
                _add_trial(entry, entry["trials"] + 1, record.median_secs if record.ok else None)
            tasks[task.name] = entry
        return tasks, db

    # -- the tuning thread ----------------------------------------------------------------------
    def _run(self, job: TuneJob, stop: threading.Event) -> None:
        tune = self._tune_fn
        if tune is None:
            from schedlab.tune.tuner import tune_tasks as tune
        options = {"progress": False, "log": None, **self.options}
        try:
            result = tune(list(job.tasks), job.work_dir, job.trials,
                          num_trials_per_iter=job.per_batch, on_event=self._on_event, stop=stop,
                          **options)  # fmt: skip
            stopped = result.stopped or self._select(job, result.database, stop)
        except Exception as err:  # whatever ends the run, the panel says why
            self._finish("failed", reason=_one_line(err))
        else:
            self._finish("stopped" if stopped else "done", result.summaries)

    def _select(self, job: TuneJob, database, stop: threading.Event) -> bool:
        """After a graph model's trials: its kernels chosen in the model. True when stopped."""
        if job.graph is None or self.select_top_k < 2:
            return False
        from schedlab.tune.in_model import select_in_model

        with self._lock:
            self._selecting = True
        self._notify(now=True)
        try:
            selection = select_in_model(job.graph, job.target, database, context=job.what,
                                        top_k=self.select_top_k, stop=stop, progress=False,
                                        log=None)  # fmt: skip
        finally:
            with self._lock:
                self._selecting = False
        self.selection = selection
        return selection.stopped

    def _on_event(self, event) -> None:
        with self._lock:
            entry = self._tasks.get(event.task)
            if entry is not None:
                _add_trial(entry, event.task_trial, event.latency_s)
            self._last = event
        self._notify()

    def _finish(self, status: str, summaries=(), reason: str = "") -> None:
        with self._lock:
            self.status, self.reason = status, reason
            for summary in summaries:
                entry = self._tasks.get(summary.task.name)
                if entry is not None:
                    entry["remeasured_s"] = summary.remeasured_s
            self._top = (None, 0.0, None, self._top[3])  # read the folder again, now
        self._notify(now=True)

    def _fire(self) -> None:
        callback = self.on_update
        if callback is None or self._closed:
            return
        try:
            callback()
        except Exception as err:  # a broken view must not end the tuning run
            self.update_errors.append(err)

    # -- reading --------------------------------------------------------------------------------
    def state(self) -> dict:
        """The panel's JSON (the `tune` field of the view state; see docs/explorer.md)."""
        top = self._top_list()
        with self._lock:
            job, last = self.job, self._last
            tasks = [_task_json(e) for e in self._tasks.values()]
            trial = sum(t["trials"] for t in tasks)
            return {
                "status": self.status, "text": self._status_text(trial), "error": self.error,
                "running": self.status in ("running", "stopping"),
                "can_stop": self.status == "running",
                "can_resume": job is not None and self.status in ("stopped", "failed", "done"),
                "run": None if job is None else {
                    "what": job.what, "target": job.target, "trials": job.trials,
                    "per_batch": job.per_batch, "work_dir": str(job.work_dir)},
                "trials": job.trials if job else DEFAULT_TRIALS,
                "per_batch": job.per_batch if job else DEFAULT_PER_BATCH,
                "progress": {"trial": trial, "trials": job.trials if job else 0,
                             "eta_s": last.eta_s if last is not None else None},
                "tasks": tasks, "top": top,
                "selection": None if self.selection is None else self.selection.table(),
            }  # fmt: skip

    def _status_text(self, trial: int) -> str:
        job, last = self.job, self._last
        if job is None:
            return "not started"
        if self.status == "failed":
            return f"failed: {self.reason}"
        if self.status == "stopping":
            return f"stopping after the current candidate (trial {trial}/{job.trials})…"
        best = self._best_text()
        if self._selecting:
            return (f"{trial} trials{best}; choosing each kernel among its {self.select_top_k} "
                    "fastest by its time in the model…")  # fmt: skip
        if self.status == "done":
            return f"done: {trial} trials{best}{selection_text(self.selection)}"
        if self.status == "stopped":
            return f"stopped at trial {trial}/{job.trials}{best}; Resume goes on"
        if last is None:
            return f"starting: generating and building the first {job.per_batch} candidates…"
        if trial >= job.trials:
            return f"trial {trial}/{job.trials}{best}; re-measuring the best in a fresh process…"
        eta = f" · ETA {duration_text(last.eta_s)}" if last.eta_s is not None else ""
        return f"{last.task}: trial {trial}/{job.trials}{best}{eta}"

    def _best_text(self) -> str:
        """The best latency of the run's tasks: with one task, its GFLOP/s as well."""
        entries = [e for e in self._tasks.values() if e["best_s"] is not None]
        if not entries:
            return ""
        if len(self._tasks) > 1:
            total = sum(e["best_s"] * e["weight"] for e in entries)
            return f" · best {len(entries)}/{len(self._tasks)} kernels {seconds_text(total)}"
        entry = _task_json(entries[0])
        again = entry["remeasured_s"]
        fresh = f", re-measured {seconds_text(again)}" if again is not None else ""
        speed = f" ({entry['gflops']:.1f} GFLOP/s)" if entry["gflops"] else ""
        return f" · best {seconds_text(entry['best_s'])}{speed}{fresh}"

    def _top_list(self) -> list[dict]:
        """The top-k of each task, read from the run's folder when it has new records."""
        job = self.job
        if job is None:
            return []
        size, read_at, db, entries = self._top
        now = time.monotonic()
        current = _file_size(job.work_dir)
        if current == size or (self.running and now - read_at < TOP_REFRESH_S and db):
            return entries
        try:
            db = _open_database(job.work_dir)
        except (OSError, ValueError) as err:  # a damaged folder: keep what the panel shows
            self.error = f"cannot read the run's records: {_one_line(err)}"
            return entries
        entries = self._top_entries(db, job)
        with self._lock:
            if self.job is job:
                self._top = (current, now, db, entries)
        return entries

    def _top_entries(self, db, job: TuneJob) -> list[dict]:
        entries = []
        for task in job.tasks:
            flops = self._tasks.get(task.name, {}).get("flops", 0)
            for rank, record in enumerate(db.get_top_k(task.workload, task.target, self.top_k), 1):
                secs = record.median_secs
                entries.append({"task": task.name, "rank": rank, "candidate": record.candidate,
                                "latency_s": secs, "text": seconds_text(secs),
                                "gflops": flops / secs / 1e9 if flops else None})  # fmt: skip
        return entries

    def record(self, task: str, candidate: str):
        """(the TuningRecord of a top-k entry, its rank) for Open. Candidate keys do not name
        the workload (two kernels may be scheduled alike), so the task says which."""
        entry = next((e for e in self._top_list()
                      if (e["task"], e["candidate"]) == (task, candidate)), None)  # fmt: skip
        db = self._top[2]
        if entry is None or db is None:
            raise TuneInputError("that schedule is not in the top-k list (any more)")
        found = next(t for t in self.job.tasks if t.name == task)
        for record in db.records(workload=found.workload, target=str(found.target)):
            if record.candidate == candidate and record.ok:
                return record, entry["rank"]
        raise TuneInputError("that schedule is not in the run's records")

    # -- the end --------------------------------------------------------------------------------
    def join(self, timeout: float | None = None) -> bool:
        """Wait for the run to end (notebooks, tests); True when it has."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return not self.running

    def close(self) -> None:
        """Stop the run and forget the view; the temporary folders go once the run has ended
        (waited for on a helper thread, so a closing server does not block on a measurement)."""
        self._closed = True
        self._stop.set()
        self._notify.cancel()
        thread, root = self._thread, self._root
        if root is None:
            return
        if thread is None or not thread.is_alive():
            shutil.rmtree(root, ignore_errors=True)
            return

        def clean() -> None:
            thread.join()
            shutil.rmtree(root, ignore_errors=True)

        threading.Thread(target=clean, daemon=True, name="schedlab-tune-cleanup").start()


# -- helpers ---------------------------------------------------------------------------------------
def _add_trial(entry: dict, trial: int, latency: float | None) -> None:
    """One measured trial of a task: its count, and its best-so-far line where it improves."""
    entry["trials"] = max(entry["trials"], trial)
    if latency is not None and (entry["best_s"] is None or latency < entry["best_s"]):
        entry["best_s"] = latency
        entry["points"].append([trial, latency])


def _task_json(entry: dict) -> dict:
    best, flops = entry["best_s"], entry["flops"]
    gflops = flops / best / 1e9 if best and flops else None
    return {**entry, "points": [list(p) for p in entry["points"]], "gflops": gflops,
            "best": seconds_text(best) if best is not None else "–"}  # fmt: skip


def _open_database(work_dir: Path):
    from schedlab.tune.database import Database

    with warnings.catch_warnings():  # a line being written is skipped; the next read has it
        warnings.simplefilter("ignore")
        return Database(work_dir)


def _file_size(work_dir: Path) -> int:
    from schedlab.tune.database import RECORDS_FILE

    try:
        return (work_dir / RECORDS_FILE).stat().st_size
    except OSError:
        return 0


def _one_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def selection_text(selection) -> str:
    """What the in-model choice changed, for the status line ("" when there was none)."""
    if selection is None or selection.stopped:
        return ""
    return f" · in the model: {selection.summary()}"


def seconds_text(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "–"
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def duration_text(seconds: float) -> str:
    """An ETA for people: "40 s", "3 min 20 s", "2 h 5 min"."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


class _Throttle:
    """Calls `fn` at most once per `interval` seconds. A call inside the interval is not lost:
    it runs when the interval ends, from a timer thread (the last state is what counts)."""

    def __init__(self, fn: Callable[[], None], interval: float):
        self.fn, self.interval = fn, interval
        self._lock = threading.Lock()
        self._last = -math.inf
        self._timer: threading.Timer | None = None

    def __call__(self, now: bool = False) -> None:
        with self._lock:
            wait = self._last + self.interval - time.monotonic()
            fire = now or wait <= 0
            if fire:
                self._cancel()
                self._last = time.monotonic()
            elif self._timer is None:
                self._timer = threading.Timer(wait, self._late)
                self._timer.daemon = True
                self._timer.start()
        if fire:
            self.fn()

    def _late(self) -> None:
        with self._lock:
            self._timer = None
            self._last = time.monotonic()
        self.fn()

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def cancel(self) -> None:
        with self._lock:
            self._cancel()

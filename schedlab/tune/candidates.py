"""Candidates, and where they are made: in this process or on worker processes.

    maker = make_candidate_maker(workers=2)       # InProcess() for workers=1
    context = SearchContext.of(task, space)
    found = maker.map(context, [("sample", design_trace, 17), ("replay", stored_trace)])
    maker.close()

A search replays hundreds of traces per batch (fresh samples of the design spaces, mutations
of the population, stored records), and a replay runs the schedule primitives in Python (tens
to hundreds of milliseconds each). Every job is a pure function of the task and its arguments
(a mutation draws from its own `random.Random(seed)`), so jobs run on several processes at
once and come back in order: the same seed gives the same candidates whatever the number of
workers. Workers are the measurement's worker subprocesses (`measure._Pool`); each keeps a
cache of the replays it made, keyed by the trace's decisions (mutations often land on a trace
seen before).

Jobs (tuples):
  ("replay", trace)                  the trace as it is (postprocessed again when unmarked)
  ("sample", design_trace, seed)     the design space with every decision sampled afresh
  ("mutate", trace, seed, tries)     a mutation of `trace` that replays (up to `tries`
                                     mutations are tried), None when none does
"""

from __future__ import annotations

import hashlib
import os
import pickle
import random
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.schedule import Schedule, Trace
from schedlab.schedule.errors import ScheduleError, TraceError

REPLAY_CACHE_SIZE = 1024  # replays kept per task and process
_JOB_TIMEOUT_S = 600.0  # one replay; a primitive that never returns is a bug to report
_MAX_WORKERS = 8


@dataclass(frozen=True, eq=False)
class Candidate:
    """A schedule to measure: its trace, the module it makes, and `key`, the module's
    structural fingerprint (two traces that make the same loop nest are one candidate)."""

    trace: Trace
    mod: IRModule
    key: str

    @property
    def func(self) -> PrimFunc:
        from schedlab.cost.predict import as_func

        return as_func(self.mod)

    @staticmethod
    def of(sch: Schedule) -> Candidate:
        from schedlab.ir.structural import structural_fingerprint

        return Candidate(sch.trace, sch.mod, structural_fingerprint(sch.mod))


@dataclass(frozen=True)
class SearchContext:
    """What a job needs of its task: the function, the target, the design space (its
    postprocessors and mutators). `key` names the task and space in the caches; `travels`
    says whether they pickle (a custom space may hold a lambda: its jobs stay here)."""

    key: str
    func: PrimFunc
    target: object
    space: object
    travels: bool = True

    @staticmethod
    def of(task, space) -> SearchContext:
        try:
            space_key, travels = hashlib.sha256(pickle.dumps(space)).hexdigest()[:16], True
        except Exception:
            space_key, travels = f"local-{id(space)}", False
        key = f"{task.workload}/{task.target}/{space_key}"
        return SearchContext(key, task.func, task.target, space, travels)


# -- the jobs (run in this process or in a worker) ---------------------------------------------
def run_jobs(state: dict, context: SearchContext, jobs: list[tuple]) -> list[Candidate | None]:
    """Each job's candidate (None: the job made none), in order. `state` holds the caches of
    the calling process between calls."""
    tasks = state.setdefault("search_tasks", OrderedDict())
    cache = tasks.get(context.key)
    if cache is None:
        cache = tasks[context.key] = _TaskCache(context)
        while len(tasks) > 4:  # a tuning run moves from task to task and back
            tasks.popitem(last=False)
    tasks.move_to_end(context.key)
    return [_JOB_KINDS[job[0]](cache, *job[1:]) for job in jobs]


class _TaskCache:
    def __init__(self, context: SearchContext):
        from .space.replay import new_schedule

        self.context = context
        mutators = context.space.mutators(context.target)
        self.mutators, self.probs = list(mutators), [float(p) for p in mutators.values()]
        self.replayed: OrderedDict[str, Candidate | None] = OrderedDict()
        # the mutators that read the loop nest recall the function by its fingerprint
        new_schedule(context.func, context.target)

    def replay(self, trace: Trace) -> Candidate | None:
        from .database import candidate_key

        key = candidate_key(trace)
        if key in self.replayed:
            self.replayed.move_to_end(key)
            return self.replayed[key]
        c = self.context
        sch = c.space.apply_trace(c.func, c.target, trace)
        found = self.replayed[key] = None if sch is None else Candidate.of(sch)
        if len(self.replayed) > REPLAY_CACHE_SIZE:
            self.replayed.popitem(last=False)
        return found


def _replay_job(cache: _TaskCache, trace: Trace) -> Candidate | None:
    return cache.replay(trace)


def _sample_job(cache: _TaskCache, design: Trace, seed: int) -> Candidate | None:
    c = cache.context
    sch = c.space.sample_candidate(c.func, c.target, design, seed)
    return None if sch is None else Candidate.of(sch)


def _mutate_job(cache: _TaskCache, trace: Trace, seed: int, tries: int) -> Candidate | None:
    rng = random.Random(seed)
    for _ in range(tries):
        mutator = cache.mutators[rng.choices(range(len(cache.mutators)), cache.probs)[0]]
        try:
            mutated = mutator.apply(trace, rng)
        except (ScheduleError, TraceError):
            mutated = None
        if mutated is not None and (found := cache.replay(mutated)) is not None:
            return found
    return None


_JOB_KINDS = {"replay": _replay_job, "sample": _sample_job, "mutate": _mutate_job}


def _worker_job(state: dict, context: SearchContext, jobs: list[tuple]) -> list:
    return run_jobs(state, context, jobs)


# -- makers ------------------------------------------------------------------------------------
class InProcess:
    """Runs the jobs here, one after another."""

    workers = 1

    def __init__(self) -> None:
        self._state: dict = {}

    def map(self, context: SearchContext, jobs: list[tuple]) -> list[Candidate | None]:
        return run_jobs(self._state, context, jobs)

    def close(self) -> None:
        self._state.clear()


class WorkerPool:
    """Runs the jobs on `workers` worker processes (started on first use)."""

    def __init__(self, workers: int):
        from .measure import _Pool

        if workers < 2:
            raise ValueError(f"WorkerPool: workers must be >= 2 (or use InProcess), got {workers}")
        self.workers = workers
        self._pool = _Pool(workers)
        self._threads = ThreadPoolExecutor(workers, thread_name_prefix="schedlab-search")
        self._local = InProcess()  # for a task whose space does not pickle

    def map(self, context: SearchContext, jobs: list[tuple]) -> list[Candidate | None]:
        if not context.travels:
            return self._local.map(context, jobs)
        # small chunks taken by whichever worker is free: replays differ in cost
        size = max(1, -(-len(jobs) // (4 * self.workers)))
        chunks = [jobs[i : i + size] for i in range(0, len(jobs), size)]
        parts = self._threads.map(lambda chunk: self._call(context, chunk), chunks)
        return [found for part in parts for found in part]

    def _call(self, context: SearchContext, jobs: list[tuple]) -> list:
        from .measure import _Failure

        try:
            return self._pool.call(f"{__name__}:_worker_job", (context, jobs), _JOB_TIMEOUT_S)
        except _Failure as failure:
            raise RuntimeError(f"search worker: {failure}") from None

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        self._pool.close()
        self._local.close()


def default_workers() -> int:
    """The processes a search replays on: the usable CPUs, at most 8."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cpus or 1, _MAX_WORKERS))


def make_candidate_maker(workers: int | None = None):
    """InProcess for one worker, else a WorkerPool; `workers` defaults to `default_workers()`."""
    workers = default_workers() if workers is None else workers
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"search workers must be a positive int, got {workers!r}")
    return InProcess() if workers == 1 else WorkerPool(workers)

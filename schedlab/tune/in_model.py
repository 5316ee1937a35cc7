"""`select_in_model`: each kernel's schedule chosen by its time inside the compiled model.

The tuner times a kernel alone, call after call on the same arguments, so its inputs and its
weight stay in the caches of the cores that read them. Inside a model a layer reads what its
producer left, partly in the other core's cache, and a weight last touched a whole pass ago: the
fastest candidate alone is not always the fastest in place. On light_resnet50 (a 2-core Xeon) a
1x1 conv 512->128 at 28x28 whose threads split the output channels ran 0.25 ms alone and
0.54 ms in the model, where its twin splitting the output rows ran 0.39 ms; a 3x3 512->512 conv
at 7x7 goes the other way (1.27 ms split by channels, 2.31 ms by rows: each core then reads the
whole 9 MB weight).

    result = select_in_model(mod, "cpu", "runs/resnet50", top_k=4)
    print(result.table())
    exe = schedlab.compile(mod, "cpu", database="runs/resnet50")   # takes the choices

How: the `top_k` fastest candidates of every task are compiled into `top_k` variants of the
model, variant v giving the i-th task its candidate (v + i) mod n (n: the task's candidates), so
each candidate runs among changing neighbours. `rounds` passes over the variants (in a shuffled
order each) time every kernel call in place, and each task takes the candidate with the lowest
median in-model time (summed over its call sites). The model with those choices is then timed
against the standalone winners, interleaved; the choices are stored
(`Database.commit_selection`) only when the model is faster with them, and hold until the task
is tuned again. Kernels are built once (`compile(kernel_cache=)`), so the cost is about `top_k`
compiles of the model and a few seconds of runs.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.transform import Sequential
from schedlab.target import Target
from schedlab.timing import time_side_by_side

from .database import Database, TuningRecord, replay
from .relax_integration import callees_by_workload, open_database
from .task import workload_key


@dataclass
class TaskChoice:
    """One task's candidates: seconds alone (the tuner's median) and in the model (median per
    model call, all its call sites together), fastest-alone first; `chosen` indexes both."""

    name: str
    workload: str
    calls: int
    records: list[TuningRecord]
    alone_secs: list[float]
    in_model_secs: list[float]
    chosen: int


@dataclass
class SelectionResult:
    """What `select_in_model` measured and decided. `base_secs` / `selected_secs`: the whole
    model's seconds per call with the standalone winners / with the in-model choices;
    `stored`: whether the choices went into the database."""

    choices: list[TaskChoice] = field(default_factory=list)
    base_secs: tuple[float, ...] = ()
    selected_secs: tuple[float, ...] = ()
    stored: bool = False
    stopped: bool = False
    seconds: float = 0.0

    @property
    def changed(self) -> list[TaskChoice]:
        return [c for c in self.choices if c.chosen != 0]

    def summary(self) -> str:
        """One line: how many tasks changed, the model before and after, whether stored."""
        if not self.base_secs:
            return f"nothing changed ({self.seconds:.0f} s)"
        base = statistics.median(self.base_secs) * 1e3
        chosen = statistics.median(self.selected_secs) * 1e3
        kept = "stored" if self.stored else "not stored: the model was not faster"
        return (f"{len(self.changed)} of {len(self.choices)} tasks changed, {base:.2f} -> "
                f"{chosen:.2f} ms ({kept}; {self.seconds:.0f} s)")  # fmt: skip

    def table(self) -> str:
        """The tasks whose choice changed, and the model before and after."""
        lines = [f"in-model selection: {len(self.choices)} task(s) with several candidates, "
                 f"{len(self.changed)} changed ({self.seconds:.0f} s)"]  # fmt: skip
        if self.stopped:
            return lines[0] + "; stopped, nothing stored"
        width = max([4, *(len(c.name) for c in self.changed)])
        if self.changed:
            lines.append(f"  {'task':<{width}}  alone ms (best -> chosen)  in model ms")
        for c in self.changed:
            alone = f"{c.alone_secs[0] * 1e3:.3f} -> {c.alone_secs[c.chosen] * 1e3:.3f}"
            in_model = f"{c.in_model_secs[0] * 1e3:.3f} -> {c.in_model_secs[c.chosen] * 1e3:.3f}"
            lines.append(f"  {c.name:<{width}}  {alone:<24}  {in_model}")
        if self.base_secs and self.selected_secs:
            base = statistics.median(self.base_secs) * 1e3
            chosen = statistics.median(self.selected_secs) * 1e3
            verdict = "stored" if self.stored else "not stored: not faster than the standalone best"
            lines.append(f"  model: {base:.2f} ms with the standalone winners, {chosen:.2f} ms "
                         f"with the choices (medians); {verdict}")  # fmt: skip
        return "\n".join(lines)


class _Chosen:
    """A database `ApplyDatabase` reads: one fixed record per workload key."""

    def __init__(self, records: dict[str, TuningRecord]):
        self.records = records

    def query_schedule(self, func: PrimFunc, target):
        record = self.records.get(workload_key(func))
        return None if record is None else replay(record, func, target)


def select_in_model(
    mod: IRModule,
    target: str | Target = "cpu",
    database: Database | str = "schedlab_tune",
    *,
    top_k: int = 4,
    rounds: int = 8,
    seed: int = 0,
    func_name: str = "main",
    context: str = "",
    stop: threading.Event | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = print,
) -> SelectionResult:
    """Choose each task's schedule among its `top_k` fastest records by its time inside `mod`
    compiled for `target` (see the module docstring); `database` is a Database or its work
    dir. The model runs on seeded random inputs; `context` (the model's name) is stored with
    the choices. `stop.set()` ends it between steps, storing nothing."""
    from schedlab.relax.pipeline import pre_schedule_passes
    from schedlab.run import random_inputs

    _check_count("top_k", top_k, 2)
    _check_count("rounds", rounds, 1)
    if not isinstance(mod, IRModule):
        raise TypeError(f"select_in_model: mod must be an IRModule, got {type(mod).__name__}")
    db = database if isinstance(database, Database) else open_database(database)
    target, stop, started = Target(target), stop or threading.Event(), time.perf_counter()
    with target:
        callees = callees_by_workload(Sequential(pre_schedule_passes(target))(mod))
    records = {key: db.get_top_k(key, target, top_k) for key in callees}
    records = {key: found for key, found in records.items() if found}
    result = SelectionResult()
    if not any(len(found) > 1 for found in records.values()):
        return _done(result, started, log)
    arrays = random_inputs(mod, seed)
    kernels: dict = {}  # shared by every compile: each kernel is built once

    def compiled(ranks: dict[str, int]):
        from schedlab.relax.vm import VirtualMachine, compile

        chosen = _Chosen({key: records[key][rank] for key, rank in ranks.items()})
        return VirtualMachine(compile(mod, target, database=chosen, kernel_cache=kernels))

    bar = _bar(top_k + rounds + 2, progress)
    try:
        variants = []
        for v in range(top_k):
            if stop.is_set():
                return _stopped(result, started, log)
            ranks = {key: (v + i) % len(found) for i, (key, found) in enumerate(records.items())}
            variants.append((compiled(ranks), ranks))
            bar.update()
        samples = _time_in_place(variants, arrays, func_name, callees, rounds, seed, stop, bar)
        if stop.is_set():
            return _stopped(result, started, log)
        result.choices = _choose(records, callees, samples)
        chosen = {c.workload: c.chosen for c in result.choices}
        if result.changed:
            base = compiled({key: 0 for key in records})
            selected = compiled({key: chosen.get(key, 0) for key in records})
            bar.update()
            timed = time_side_by_side({"base": lambda: base[func_name](*arrays),
                                       "selected": lambda: selected[func_name](*arrays)},
                                      repeat=max(5, rounds), min_repeat_ms=100.0)  # fmt: skip
            result.base_secs = timed["base"].all
            result.selected_secs = timed["selected"].all
            result.stored = timed["selected"].median < timed["base"].median
        bar.update()
    finally:
        bar.close()
    _store(db, target, result, context)
    return _done(result, started, log)


def _time_in_place(variants, arrays, func_name, callees, rounds, seed, stop, bar) -> dict:
    """(workload, rank) -> seconds of its kernel calls per model call, over `rounds` passes."""
    key_of = {name: key for key, names in callees.items() for name in names}
    for vm, _ in variants:  # first calls check arguments and plan storage
        vm[func_name](*arrays)
    samples: dict[tuple[str, int], list[float]] = defaultdict(list)
    order = list(range(len(variants)))
    shuffle = random.Random(seed).shuffle
    for _ in range(rounds):
        if stop.is_set():
            break
        shuffle(order)
        for v in order:
            vm, ranks = variants[v]
            timer: dict = {}
            vm.invoke(func_name, arrays, timer)
            spent: dict[str, float] = defaultdict(float)
            for name, (_, secs) in timer.items():
                if key_of.get(name) in ranks:
                    spent[key_of[name]] += secs
            for key, secs in spent.items():
                samples[(key, ranks[key])].append(secs)
        bar.update()
    return samples


def _choose(records, callees, samples) -> list[TaskChoice]:
    """Each task with several candidates: the one with the lowest median time in place."""
    choices = []
    for key, found in records.items():
        if len(found) < 2 or not any(samples.get((key, r)) for r in range(len(found))):
            continue  # one candidate, or its kernel never ran (a concat written in place)
        in_model = [statistics.median(samples.get((key, rank)) or [float("inf")])
                    for rank in range(len(found))]  # fmt: skip
        choices.append(TaskChoice(callees[key][0], key, len(callees[key]), found,
                                  [r.median_secs for r in found], in_model,
                                  min(range(len(found)), key=in_model.__getitem__)))  # fmt: skip
    return choices


def _store(db: Database, target: Target, result: SelectionResult, context: str) -> None:
    """The changed choices when they made the model faster; earlier choices of these tasks are
    undone otherwise (the standalone winners were measured as fast in place)."""
    for c in result.choices:
        if result.stored and c.chosen != 0:
            db.commit_selection(c.workload, target, c.records[c.chosen].candidate,
                                [c.in_model_secs[c.chosen]], context)  # fmt: skip
        elif db.selected(c.workload, target) is not None:
            db.commit_selection(c.workload, target, None, (), context)


def check_top_k(value, what: str) -> None:
    """A front end's count of candidates to choose among: 0 (no choice) or at least 2."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value == 1:
        raise ValueError(f"{what} must be 0 (off) or a count >= 2, got {value!r}")


def _check_count(name: str, value, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"select_in_model: {name} must be an int >= {least}, got {value!r}")


def _bar(total: int, shown: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="in-model selection", unit="step", disable=not shown,
                dynamic_ncols=True)  # fmt: skip


def _stopped(result: SelectionResult, started: float, log) -> SelectionResult:
    result.stopped = True
    return _done(result, started, log)


def _done(result: SelectionResult, started: float, log) -> SelectionResult:
    result.seconds = time.perf_counter() - started
    if log is not None:
        log(result.table())
    return result


__all__ = ["SelectionResult", "TaskChoice", "check_top_k", "select_in_model"]

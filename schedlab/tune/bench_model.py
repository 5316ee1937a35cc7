"""Held-out rank correlation of the learned cost model, against the analytical one.

    python -m schedlab.tune.bench_model [--count 80] [--seed 0] [--cores N] [--rounds 5]
                                        [--save FILE | --measured FILE]
    python -m schedlab.tune.bench_model --database WORK_DIR [WORK_DIR ...] [--seed 0]

Draws `count` random legal schedules each of gemm 256^3 and conv2d 1x32x28x28 (3x3), the
schedules `schedlab bench-cost` draws, measures them (interleaved rounds), trains an `XGBModel`
on a random half of each workload and prints the Spearman rank correlation between scores and
measured throughput on the other half: of the learned model and of the analytical one, per
workload (within a task: what the search uses) and pooled over both (scores turned back into
seconds with the best measured training time of each task).

`--cores 1` (OMP_NUM_THREADS=1) measures single-threaded kernels, which rank more stably on a
machine shared with other work; the default is the cores free when the run starts.

`--save FILE` writes the measured seconds to a JSON file; `--measured FILE` evaluates on them
again without measuring (the schedules are drawn anew from the file's seed and count, the same
ones): for changing the model or its features and re-ranking the same truth in seconds.

`--database` evaluates on the candidates a tuning run measured instead (the schedules the
model ranks in a search, not random ones): every task of the work dirs with at least 16
successful records is replayed, split in half the same way, and the learned model trained on
all the training halves at once ranks each test half; per task, the median and the worst are
printed, and the pooled figure. Nothing is measured again: the records' run times are the
truth."""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

import numpy as np

from schedlab import workloads
from schedlab.cost.benchmark import SIZES, available_cores, draw_schedules, measure_interleaved
from schedlab.cost.spearman import spearman
from schedlab.target import Target

from .cost_model import AnalyticalModel, XGBModel
from .task import TuneTask


def measure_workload(name: str, count: int, rng: random.Random, target: Target, rounds: int,
                     log=print, secs: list | None = None) -> tuple:  # fmt: skip
    """`count` random schedules of workload `name`: its task, the modules, their seconds
    (measured, or `secs` as an earlier run measured them)."""
    func = workloads.spec(name).make(**SIZES[name])
    drawn = draw_schedules(name, count, rng)
    if secs is None:
        start = time.perf_counter()
        secs = measure_interleaved([sch.func for sch, _ in drawn], rounds=rounds)
        log(f"  {name}: {len(drawn)} schedules measured in {time.perf_counter() - start:.0f} s, "
            f"{min(secs) * 1e3:.3f} to {max(secs) * 1e3:.3f} ms")  # fmt: skip
    elif len(secs) != len(drawn):
        raise ValueError(f"measured seconds of {name}: {len(secs)} for {len(drawn)} schedules")
    return TuneTask(name, func, target), [sch.mod for sch, _ in drawn], list(secs)


def split_half(count: int, rng: random.Random) -> tuple[list[int], list[int]]:
    """A random half of range(count) to train on and the rest to test on."""
    order = list(range(count))
    rng.shuffle(order)
    return sorted(order[: count // 2]), sorted(order[count // 2 :])


def evaluate(measured: dict, seed: int, log=print) -> dict:
    """Train on half of each workload, score the other half; returns per-workload and pooled
    Spearman rho of the learned and the analytical model."""
    model, analytical = XGBModel(seed=seed), AnalyticalModel()
    rng = random.Random(seed)
    splits = {name: split_half(len(mods), rng) for name, (_, mods, _) in measured.items()}
    start = time.perf_counter()
    for name, (task, mods, secs) in measured.items():
        train = splits[name][0]
        model.update(task, [mods[i] for i in train], [secs[i] for i in train])
    log(f"  trained on {sum(len(s[0]) for s in splits.values())} schedules in "
        f"{time.perf_counter() - start:.1f} s (features included)")  # fmt: skip
    result: dict = {"learned": {}, "analytical": {}}
    pooled: dict = {"learned": ([], []), "analytical": ([], [])}
    for name, (task, mods, secs) in measured.items():
        train, test = splits[name]
        held = [mods[i] for i in test]
        truth = [1.0 / secs[i] for i in test]
        best = min(secs[i] for i in train)  # the learned scores are in units of 1 / best
        learned, prior = model.predict(task, held), analytical.predict(task, held)
        ref = analytical.reference_seconds(task)
        for kind, scores, unit in (("learned", learned, 1 / best), ("analytical", prior, 1 / ref)):
            result[kind][name] = spearman(scores, truth)
            pooled[kind][0].extend(np.asarray(scores) * unit)
            pooled[kind][1].extend(truth)
    for kind, (scores, truth) in pooled.items():
        result[kind]["pooled"] = spearman(scores, truth)
    return result


def run_model_bench(count: int = 80, seed: int = 0, cores: int | None = None, rounds: int = 5,
                    log=print, save: str | None = None,
                    measured_file: str | None = None) -> dict:  # fmt: skip
    """Measure (or read `measured_file`), train, report (see the module docstring); returns
    the figures `evaluate` does. `save`: write the measured seconds there."""
    earlier = load_measurements(measured_file) if measured_file else None
    if earlier is not None:
        count, seed, cores = earlier["count"], earlier["seed"], earlier["cores"]
    if count < 8:
        raise ValueError(f"--count must be at least 8, got {count}")
    # spinning OpenMP threads collapse on a shared machine (as in bench-cost)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    free = cores or available_cores()
    os.environ.setdefault("OMP_NUM_THREADS", str(free))
    target = Target("cpu", num_cores=free)
    if earlier is not None:
        log(f"target: {target.describe()}; the seconds {measured_file} holds, measured on "
            f"{earlier['target']} ({free} core(s))")  # fmt: skip
    else:
        log(f"target: {target.describe()}; kernels and models on {free} core(s) "
            f"(OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']})")  # fmt: skip
    rng = random.Random(seed)
    measured = {
        name: measure_workload(name, count, rng, target, rounds, log,
                               secs=earlier["seconds"][name] if earlier else None)
        for name in SIZES
    }  # fmt: skip
    if save:
        save_measurements(save, measured, count=count, seed=seed, cores=free, target=target)
        log(f"  measured seconds written to {save}")
    result = evaluate(measured, seed, log)
    log(f"\nheld-out Spearman rank correlation ({count // 2} train / {count - count // 2} test "
        f"per workload, seed {seed}; goal for the learned model: >= 0.85)")  # fmt: skip
    for name in [*SIZES, "pooled"]:
        log(f"  {name:12s} learned {result['learned'][name]:.3f}   "
            f"analytical {result['analytical'][name]:.3f}")  # fmt: skip
    return result


def save_measurements(path: str, measured: dict, count: int, seed: int, cores: int,
                      target: Target) -> None:  # fmt: skip
    """The seconds of `measured` ({name: (task, modules, seconds)}) and what reproduces its
    schedules (count, seed), as JSON."""
    data = {"count": count, "seed": seed, "cores": cores, "target": target.describe(),
            "seconds": {name: secs for name, (_, _, secs) in measured.items()}}  # fmt: skip
    with open(path, "w") as f:
        json.dump(data, f)


def load_measurements(path: str) -> dict:
    """What `save_measurements` wrote, checked: it must hold every workload of SIZES."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        raise ValueError(f"--measured {path}: cannot read it ({err})") from err
    keys = ("count", "seed", "cores", "target", "seconds")
    if not isinstance(data, dict) or any(k not in data for k in keys):
        raise ValueError(f"--measured {path}: expected a JSON object with {', '.join(keys)} "
                         "(what --save writes)")  # fmt: skip
    missing = [name for name in SIZES if name not in data["seconds"]]
    if missing:
        raise ValueError(f"--measured {path}: no seconds of {', '.join(missing)}")
    return data


MIN_RECORDS = 16  # successful records a task needs to be evaluated on


def measured_from_databases(work_dirs, log=print) -> dict:
    """{task name: (task, modules, seconds)} of the successful records of every task with at
    least MIN_RECORDS of them in the tuning work dirs, replayed on the search's workers."""
    from schedlab.schedule import Trace

    from .candidates import SearchContext, make_candidate_maker
    from .database import Database
    from .space import PostOrderApply

    measured: dict = {}
    space, maker = PostOrderApply(), make_candidate_maker()
    try:
        for work_dir in work_dirs:
            db = Database(work_dir)
            for entry in db.workloads():
                records = [r for r in db.records(workload=entry.key) if r.ok]
                if len(records) < MIN_RECORDS:
                    continue
                task = TuneTask(entry.name, entry.func, Target(records[0].target),
                                workload=entry.key)  # fmt: skip
                jobs = [("replay", Trace.from_json(r.trace)) for r in records]
                kept = [(c.mod, r.median_secs)
                        for c, r in zip(maker.map(SearchContext.of(task, space), jobs), records)
                        if c is not None]  # fmt: skip
                measured[f"{Path(work_dir).name}/{entry.name}"] = (
                    task,
                    [mod for mod, _ in kept],
                    [secs for _, secs in kept],
                )
    finally:
        maker.close()
    log(f"  {len(measured)} tasks with {MIN_RECORDS}+ measured candidates in "
        f"{', '.join(map(str, work_dirs))}")  # fmt: skip
    return measured


def run_database_bench(work_dirs, seed: int = 0, log=print) -> dict:
    """The held-out evaluation on tuning records (see the module docstring); returns
    `evaluate`'s figures plus "median" and "worst" over the tasks, per model."""
    measured = measured_from_databases(work_dirs, log)
    if not measured:
        raise ValueError(f"--database: no task with {MIN_RECORDS}+ successful records in "
                         f"{', '.join(map(str, work_dirs))}")  # fmt: skip
    result = evaluate(measured, seed, log)
    log(f"\nheld-out Spearman rank correlation on tuning candidates (half train / half test per "
        f"task, seed {seed}; goal for the learned model: >= 0.85)")  # fmt: skip
    for kind in ("learned", "analytical"):
        per_task = [result[kind][name] for name in measured]
        result[kind]["median"] = float(np.median(per_task))
        result[kind]["worst"] = float(np.min(per_task))
    for name in measured:
        log(f"  {name[:48]:48s} learned {result['learned'][name]:.3f}   "
            f"analytical {result['analytical'][name]:.3f}")  # fmt: skip
    for name in ("median", "worst", "pooled"):
        log(f"  {name:48s} learned {result['learned'][name]:.3f}   "
            f"analytical {result['analytical'][name]:.3f}")  # fmt: skip
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m schedlab.tune.bench_model",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--count", type=int, default=80, help="schedules per workload")
    parser.add_argument("--seed", type=int, default=0, help="draws, split and model seed")
    parser.add_argument("--cores", type=int, default=None, help="cores to run and predict for")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved measurement rounds")
    parser.add_argument(
        "--database",
        nargs="+",
        default=None,
        metavar="WORK_DIR",
        help="evaluate on the measured candidates of these tuning work dirs",
    )
    parser.add_argument(
        "--save", default=None, metavar="FILE", help="write the measured seconds to FILE (JSON)"
    )
    parser.add_argument(
        "--measured",
        default=None,
        metavar="FILE",
        help="rank the seconds --save wrote instead of measuring",
    )
    args = parser.parse_args(argv)
    if args.save and args.measured:
        parser.error("--save and --measured: give one of them")
    if args.database:
        return run_database_bench(args.database, args.seed)
    return run_model_bench(
        args.count, args.seed, args.cores, args.rounds, save=args.save, measured_file=args.measured
    )


if __name__ == "__main__":
    main()

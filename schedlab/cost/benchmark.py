"""`schedlab bench-cost`: random legal schedules of gemm and conv2d, each predicted by the cost
model and measured (compiled, `Kernel.benchmark`, min of a few repeats); prints the Spearman
rank correlation of predicted and measured latency per workload and overall."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass

from schedlab import workloads
from schedlab.schedule import Schedule, ScheduleError
from schedlab.target import Target

from .predict import predict
from .spearman import spearman

SIZES = {
    "gemm": {"M": 256, "N": 256, "K": 256},
    "conv2d_nchw": {"N": 1, "CI": 32, "H": 28, "W": 28, "CO": 32, "kernel": 3},
}
BLOCKS = {"gemm": "C", "conv2d_nchw": "conv2d_nchw"}


@dataclass(frozen=True)
class Sample:
    workload: str
    description: str
    predicted: float
    measured: float


def random_schedule(func, block_name: str, rng: random.Random) -> tuple[Schedule, str]:
    """A random legal schedule: tile every loop of extent > 1 in two or three, reorder the
    tiles (outer tiles first, spatial before reduce with some probability), maybe parallelize
    the outermost spatial tile, vectorize the innermost spatial one, unroll one inner loop."""
    sch = Schedule(func, seed=rng.randrange(1 << 30), debug=False)
    block = sch.get_block(block_name)
    loops = sch.get_loops(block)
    kinds = [iv.iter_type.value for iv in sch.get(block).iter_vars]
    levels: list[list] = [[], [], []]
    spatial_inner = None
    for loop, kind in zip(loops, kinds, strict=True):
        extent = int(sch.get(loop).extent.value)
        if extent == 1:
            levels[0].append((loop, kind))
            continue
        n = rng.choice([2, 3]) if kind != "reduce" else 2
        parts = sch.split(loop, sch.sample_perfect_tile(loop, n=n, max_innermost_factor=16))
        for depth, part in enumerate(parts):
            levels[depth if n == 3 else (0 if depth == 0 else 2)].append((part, kind))
    order = _shuffle_levels(levels, rng)
    sch.reorder(*[lp for lp, _ in order])
    described = []
    if order[0][1] != "reduce" and rng.random() < 0.6:
        sch.parallel(order[0][0])
        described.append("parallel")
    inner, inner_kind = order[-1]
    if inner_kind != "reduce" and rng.random() < 0.6:
        sch.vectorize(inner)
        described.append("vectorize")
        spatial_inner = inner
    if len(order) > 2 and rng.random() < 0.4 and order[-2][0] is not spatial_inner:
        sch.unroll(order[-2][0])
        described.append("unroll")
    text = " ".join(str(sch.get(lp).loop_var.name) for lp, _ in order)
    return sch, f"{text} [{', '.join(described)}]"


def _shuffle_levels(levels, rng: random.Random) -> list:
    order = []
    for level in levels:
        level = list(level)
        rng.shuffle(level)
        if rng.random() < 0.5:  # commonly: spatial tiles before reduce ones in a level
            level.sort(key=lambda item: item[1] == "reduce")
        order.extend(level)
    return order


def measure(func, repeat: int = 9, min_repeat_ms: float = 3.0) -> float:
    """Minimum seconds per call of the compiled function over `repeat` repeats."""
    from schedlab.backend.build import build

    kernel = build(func, "cpu")
    args = workloads.make_args(func, seed=0)
    return kernel.benchmark(*args, repeat=repeat, min_repeat_ms=min_repeat_ms).min


def available_cores() -> int:
    """Cores not busy with other work now (CPU affinity minus the 1-minute load average): on a
    shared machine the OpenMP threads of a parallel loop only get those."""
    total = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(total or 1, round((total or 1) - os.getloadavg()[0])))


def run_workload(name: str, count: int, rng: random.Random, log=print,
                 target: Target | None = None) -> list[Sample]:  # fmt: skip
    """`count` random schedules of one workload, predicted and measured."""
    func = workloads.spec(name).make(**SIZES[name])
    samples: list[Sample] = []
    attempts = 0
    while len(samples) < count and attempts < count * 5:
        attempts += 1
        try:
            sch, text = random_schedule(func, BLOCKS[name], rng)
        except ScheduleError:
            continue  # an illegal combination: draw another
        predicted = predict(sch.func, target or Target("cpu")).seconds
        measured = measure(sch.func)
        samples.append(Sample(name, text, predicted, measured))
        log(f"  {name} #{len(samples):3d}: predicted {predicted * 1e3:9.3f} ms, "
            f"measured {measured * 1e3:9.3f} ms  {text}")  # fmt: skip
    return samples


def run_cost_bench(count: int = 50, seed: int = 0, workload_names=None, log=print,
                   cores: int | None = None) -> dict:  # fmt: skip
    """Run the benchmark; returns {"gemm": rho, "conv2d_nchw": rho, "overall": rho}. The model
    predicts for `cores` cores (default: the cores free when the run starts)."""
    if count < 2:
        raise ValueError(f"--count must be at least 2, got {count}")
    # OpenMP threads that spin while waiting collapse when the machine is shared (one
    # descheduled thread stalls the rest); passive waiting keeps measurements meaningful
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    rng = random.Random(seed)
    target = Target("cpu")
    free = cores or available_cores()
    log(f"predicting for {free} of {target.num_cores} cores (free now; --cores to override)")
    target = Target(target, num_cores=free)
    start = time.perf_counter()
    all_samples: list[Sample] = []
    result = {}
    for name in workload_names or list(SIZES):
        samples = run_workload(name, count, rng, log, target)
        all_samples += samples
        result[name] = spearman([s.predicted for s in samples], [s.measured for s in samples])
    result["overall"] = spearman([s.predicted for s in all_samples],
                                 [s.measured for s in all_samples])  # fmt: skip
    log(f"\n{len(all_samples)} schedules in {time.perf_counter() - start:.0f} s "
        f"(goal: Spearman >= 0.8)")  # fmt: skip
    for key, rho in result.items():
        log(f"  Spearman rank correlation, {key:12s}: {rho:.3f}")
    return result

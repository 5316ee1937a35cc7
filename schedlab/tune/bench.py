"""`schedlab bench-tune` (`make bench-tune`): tune, then time the tuned kernels next to numpy and
the tuned models next to onnxruntime, side by side in this one process, as ratios.

Cases (the goals of the tuner issue, TVM MetaSchedule's figures in brackets):
  gemm     gemm 1024^3 fp32, 64 trials: >= 0.9x numpy (0.69x), tuning <= 90 s on 2 cores
  dense    dense + bias + ReLU 1024: >= 1.0x numpy (1.0x)
  softmax  softmax over rows, 4096 x 1024: >= 1.3x numpy (1.27x)
  models   the onnx package's light_squeezenet and light_resnet50, 64 trials per task, then
           each kernel chosen among its 4 fastest by its time in the model (as `schedlab tune`
           does; --select-in-model): >= 1.0x onnxruntime
  cost-model  the learned cost model's held-out Spearman rank correlation on measured random
           gemm and conv2d schedules: >= 0.85 (`python -m schedlab.tune.bench_model`, run last);
           with `models` in the same run, also on the candidates their tuning measured (the
           median over their tasks; `bench_model --database`)
Every tuned kernel is checked against the numpy reference before it is timed.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from schedlab.bench_common import (
    CaseResult,
    blas_note,
    model_path,
    print_results,
    randomized_weights,
)
from schedlab.target import Target
from schedlab.timing import time_side_by_side

KERNEL_CASES = {
    # case: (workload, sizes, goal vs numpy)
    "gemm": ("gemm", {"M": 1024, "N": 1024, "K": 1024}, 0.9),
    "dense": ("matmul_bias_relu", {"M": 1024, "N": 1024, "K": 1024}, 1.0),
    "softmax": ("softmax", {"M": 4096, "N": 1024}, 1.3),
}
MODELS = {"light_squeezenet": 1.0, "light_resnet50": 1.0}
GEMM_TUNING_GOAL_S = 90.0


def add_bench_tune_parser(commands) -> None:
    bench = commands.add_parser(
        "bench-tune", help="tune gemm, dense+bias+ReLU, softmax and two CNNs; ratios to "
        "numpy/onnxruntime in one run",
    )  # fmt: skip
    bench.add_argument(
        "--only", default="gemm,dense,softmax,models,cost-model",
        help="comma-separated cases: gemm, dense, softmax, models (both CNNs, or one by name: "
        "light_squeezenet, light_resnet50), cost-model",
    )  # fmt: skip
    bench.add_argument("--trials", type=int, default=64, help="trials per kernel (per task "
                       "for the models)")  # fmt: skip
    bench.add_argument("--work-dir", default=None, help="keep the records here (default: a "
                       "temporary folder, so every run tunes afresh)")  # fmt: skip
    bench.add_argument("--select-in-model", type=int, default=4, metavar="K",
                       help="after a model's tuning, choose each kernel among its K fastest "
                       "schedules by its time in the model (default 4, as `schedlab tune`; "
                       "0: off)")  # fmt: skip
    bench.add_argument("--seed", type=int, default=0)


def run_tune_bench(args) -> int:
    """Run the chosen cases; returns 0 (a benchmark reports, it does not fail on a goal)."""
    cases = [c.strip() for c in args.only.split(",") if c.strip()]
    known = [*KERNEL_CASES, "models", *MODELS, "cost-model"]
    unknown = sorted(set(cases) - set(known))
    if unknown:
        raise ValueError(f"--only: unknown case(s) {', '.join(unknown)}; known: "
                         f"{', '.join(known)}")  # fmt: skip
    from .in_model import check_top_k
    from .progress import stop_on_sigint

    check_top_k(args.select_in_model, "bench-tune: --select-in-model")
    target = Target("cpu")
    print(f"target: {target.describe()}")
    blas_note()
    with tempfile.TemporaryDirectory(prefix="schedlab-bench-tune-") as scratch, \
            stop_on_sigint() as stop:  # fmt: skip
        root = Path(args.work_dir or scratch)
        results, models = [], []
        for case in cases:
            if case == "cost-model":
                continue  # last: it sets OpenMP's environment for its own measurements
            if case in ("models", *MODELS):
                for name in MODELS if case == "models" else [case]:
                    if not stop.is_set():
                        results.append(bench_model(name, target, args.trials, root / name,
                                                   args.seed, args.select_in_model,
                                                   stop))  # fmt: skip
                        models.append(name)
            elif not stop.is_set():
                results.append(bench_kernel(case, target, args.trials, root / case, args.seed,
                                            stop))  # fmt: skip
        if stop.is_set():
            print_results(results)
            kept = f"the records are in {root}" if args.work_dir else "rerun with --work-dir DIR"
            print(f"stopped (Ctrl-C); {kept} to resume")
            return 130
        if "cost-model" in cases and models:
            results.append(bench_cost_model_on_records([root / m for m in models], args.seed))
    if "cost-model" in cases:
        results.append(bench_cost_model(args.seed))
    print_results(results)
    return 0


def bench_cost_model(seed: int, count: int = 80) -> CaseResult:
    """Train the learned model on half of `count` measured random schedules per workload and
    rank the other half (the goal is on each workload; the worst one is reported)."""
    from .bench_model import SIZES, run_model_bench

    print(f"\n== cost-model: {count} random schedules of {', '.join(SIZES)}")
    started = time.perf_counter()
    result = run_model_bench(count=count, seed=seed)
    learned, analytical = result["learned"], result["analytical"]
    worst = min(learned[name] for name in SIZES)
    detail = ", ".join(f"{n} {learned[n]:.2f} (analytical {analytical[n]:.2f})" for n in SIZES)
    return CaseResult("cost-model rho", worst, 0.85, time.perf_counter() - started, detail)


def bench_cost_model_on_records(work_dirs: list[Path], seed: int) -> CaseResult:
    """The learned model trained on half of each model task's tuning records, ranking the
    other half (the median over the tasks is the figure; the worst is in the detail)."""
    from .bench_model import run_database_bench

    print(f"\n== cost-model: the tuning records of {', '.join(d.name for d in work_dirs)}")
    started = time.perf_counter()
    result = run_database_bench(work_dirs, seed)
    learned, analytical = result["learned"], result["analytical"]
    detail = (f"median over tasks; worst task {learned['worst']:.2f}, pooled "
              f"{learned['pooled']:.2f} (analytical: median {analytical['median']:.2f}, worst "
              f"{analytical['worst']:.2f})")  # fmt: skip
    return CaseResult("cost-model rho (tuning)", learned["median"], 0.85,
                      time.perf_counter() - started, detail)  # fmt: skip


def bench_kernel(case: str, target: Target, trials: int, work_dir: Path, seed: int,
                 stop=None) -> CaseResult:  # fmt: skip
    """Tune one workload, then time the best schedule next to numpy's baseline."""
    import schedlab
    from schedlab import workloads

    from .task import TuneTask
    from .tuner import tune_tasks

    name, sizes, goal = KERNEL_CASES[case]
    spec = workloads.spec(name)
    func, reference = workloads.get(name, **sizes)
    print(f"\n== {case}: {name} {sizes}, {trials} trials")
    started = time.perf_counter()
    result = tune_tasks([TuneTask(name, func, target)], work_dir, trials, seed=seed, stop=stop)
    tuning_s = time.perf_counter() - started
    if result.stopped:
        return CaseResult(case, 0.0, goal, tuning_s, "stopped (Ctrl-C) before its trials ran")
    sch = result.database.query_schedule(func, target)
    if sch is None:
        return CaseResult(case, 0.0, goal, tuning_s, "no successful candidate")
    kernel = schedlab.build(sch.mod, target=target)
    args = workloads.make_args(func, seed=1)
    _check(kernel, args, reference, spec.num_outputs)
    baseline = spec.bound_baseline(**sizes)
    inputs = args[: len(args) - spec.num_outputs]
    fns = {"tuned": lambda: kernel(*args), "numpy": lambda: baseline(*inputs)}
    timings = time_side_by_side(fns, repeat=9, min_repeat_ms=100.0)
    flops = spec.flops(**sizes)
    ratio = timings["numpy"].median / timings["tuned"].median
    detail = (f"tuned {flops / timings['tuned'].median / 1e9:.1f} GFLOP/s, numpy "
              f"{flops / timings['numpy'].median / 1e9:.1f} GFLOP/s (medians)")  # fmt: skip
    if case == "gemm":
        verdict = "met" if tuning_s <= GEMM_TUNING_GOAL_S else "missed"
        detail += f"; tuning {tuning_s:.0f} s (goal <= {GEMM_TUNING_GOAL_S:.0f} s: {verdict})"
    return CaseResult(case, ratio, goal, tuning_s, detail)


def _check(kernel, args, reference, num_outputs: int) -> None:
    kernel(*args)
    expected = reference(*args[: len(args) - num_outputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(args[len(args) - num_outputs :], expected):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def bench_model(name: str, target: Target, trials: int, work_dir: Path, seed: int,
                select_top_k: int = 4, stop=None) -> CaseResult:  # fmt: skip
    """Tune every kernel of an onnx-package model, choose among each one's `select_top_k`
    fastest in the model (0: not), compile it with the records, and time it next to
    onnxruntime (outputs compared first)."""
    from schedlab.run import load, run_model

    from .in_model import select_in_model
    from .relax_integration import extract_tasks
    from .tuner import tune_tasks

    path = randomized_weights(model_path(name), work_dir / f"{name}_random_weights.onnx")
    _, mod = load(str(path))
    tasks = extract_tasks(mod, target)
    print(f"\n== {name}: {len(tasks)} tasks, {trials} trials each")
    started = time.perf_counter()
    result = tune_tasks(tasks, work_dir, trials * len(tasks), max_trials_per_task=trials,
                        seed=seed, stop=stop)  # fmt: skip
    tuning_s = time.perf_counter() - started
    if result.stopped:
        return CaseResult(name, 0.0, MODELS[name], tuning_s, "stopped (Ctrl-C) while tuning")
    selected = ""
    if select_top_k:
        selection = select_in_model(mod, target, result.database, top_k=select_top_k, seed=seed,
                                    context=name, stop=stop)  # fmt: skip
        if selection.stopped:
            return CaseResult(name, 0.0, MODELS[name], tuning_s, "stopped (Ctrl-C) in the choice")
        selected = "; in-model selection: " + selection.summary()
    report = run_model(str(path), str(target), database=result.database)
    ratio = report.onnxruntime.median / report.schedlab.median
    detail = (f"schedlab {report.schedlab.median * 1e3:.2f} ms, onnxruntime "
              f"{report.onnxruntime.median * 1e3:.2f} ms (medians), max abs diff "
              f"{report.max_abs_diff:.2g}; tuning {tuning_s:.0f} s{selected}")  # fmt: skip
    return CaseResult(name, ratio, MODELS[name], time.perf_counter() - started, detail)

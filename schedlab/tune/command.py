"""`schedlab tune <workload | model.onnx> --target cpu --trials 64 --work-dir DIR`.

A workload name tunes that one kernel (sizes from --size); an .onnx path imports the model and
tunes its kernels together (--trials is then per task, as TVM's max_trials_per_task, and the
global budget is trials x tasks). The run prints a progress bar and the summary table; Ctrl-C
stops it cleanly (what was measured stays in the work dir, and the same command resumes).

After a model's tuning, each kernel's schedule is chosen among its --select-in-model fastest
records (default 4; 0: off) by its time inside the compiled model (`select_in_model`), and the
choices are stored when the whole model runs faster with them; `schedlab run --database` and
`schedlab.compile(database=...)` then take them.
"""

from __future__ import annotations

from pathlib import Path

from schedlab.target import Target


def add_tune_parser(commands) -> None:
    tune = commands.add_parser(
        "tune", help="tune a workload or the kernels of an ONNX model (resumable, Ctrl-C stops)"
    )
    tune.add_argument("what", help="a workload name (schedlab.workloads.names()) or a .onnx path")
    tune.add_argument("--size", default=None,
                      help="workload sizes: N or KEY=VALUE[,KEY=VALUE]")  # fmt: skip
    tune.add_argument("--target", default="cpu", help="target (default: cpu, the host)")
    tune.add_argument("--trials", type=int, default=64,
                      help="measurements (per task for a model; default 64)")  # fmt: skip
    tune.add_argument(
        "--work-dir",
        default=None,
        help="where records go (default: tune_<name>); an existing one resumes",
    )
    tune.add_argument("--per-iter", type=int, default=16, help="candidates per batch")
    tune.add_argument("--strategy", default="evolutionary",
                      choices=["evolutionary", "replay-trace"])  # fmt: skip
    tune.add_argument("--cost-model", default="xgb", choices=["xgb", "analytical", "random"])
    tune.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="measure on a dask.distributed cluster (tcp://host:8786)",
    )
    tune.add_argument("--seed", type=int, default=0, help="search seed")
    tune.add_argument("--search-workers", type=int, default=None, metavar="N",
                      help="processes the search replays candidates on (default: one per "
                      "usable CPU, at most 8; 1: in this process)")  # fmt: skip
    tune.add_argument("--flush-cache", nargs="?", const="all", default="none",
                      choices=("auto", "all", "none"),
                      help="time each call with its arguments but the first evicted from the "
                      "CPU caches, as a model's layer meets its weights: 'all' kernels (the "
                      "flag alone), 'auto' (the kernels whose constant weights outgrow the "
                      "cores' L2 caches) or 'none' (the default: warm)")  # fmt: skip
    tune.add_argument("--select-in-model", type=int, default=4, metavar="K",
                      help="after a model's tuning, choose each kernel among its K fastest "
                      "schedules by their time in the model (default 4; 0: off)")  # fmt: skip
    tune.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                      help="the shape of a model input with dynamic dimensions")  # fmt: skip


def run_tune_command(args) -> None:
    from .in_model import check_top_k
    from .progress import stop_on_sigint
    from .tuner import check_flush_cache

    check_top_k(args.select_in_model, "tune: --select-in-model")
    target = Target(args.target)
    tasks, name, mod = _tasks(args, target)
    work_dir = Path(args.work_dir or f"tune_{name}")
    flush_cache = _FLUSH_CHOICES[args.flush_cache]
    check_flush_cache(tasks, flush_cache)
    timed = _TIMED[flush_cache]
    print(f"tuning {len(tasks)} task(s) for {target.describe()} in {work_dir} ({timed})")
    budget = args.trials * (len(tasks) if _is_model(args.what) else 1)
    with stop_on_sigint() as stop:
        result = _tune(args, tasks, work_dir, budget, stop, flush_cache)
        if mod is not None and args.select_in_model and not result.stopped:
            from .in_model import select_in_model

            print(f"choosing among each kernel's {args.select_in_model} fastest schedules by "
                  "their time in the model")  # fmt: skip
            selection = select_in_model(mod, target, result.database, context=name,
                                        top_k=args.select_in_model, stop=stop)  # fmt: skip
            result.stopped = selection.stopped
    if result.stopped:
        print(f"stopped; the records are in {work_dir} and the same command resumes")


def _tune(args, tasks, work_dir, budget, stop, flush_cache):
    from .tuner import tune_tasks

    measurer = None
    if args.scheduler:
        from .dask_measure import DaskMeasurer

        measurer = DaskMeasurer(args.scheduler, flush_cache=flush_cache)
    try:
        return tune_tasks(tasks, work_dir, budget, max_trials_per_task=args.trials,
                          num_trials_per_iter=args.per_iter, strategy=args.strategy,
                          cost_model=args.cost_model, measurer=measurer, seed=args.seed,
                          stop=stop, search_workers=args.search_workers,
                          flush_cache=flush_cache)  # fmt: skip
    finally:
        if measurer is not None:
            measurer.close()


_FLUSH_CHOICES = {"all": True, "none": False, "auto": "auto"}  # --flush-cache -> flush_cache
_TIMED = {
    True: "caches flushed before each call",
    False: "warm caches",
    "auto": "caches flushed for weights over the L2 caches, else warm",
}


def _is_model(what: str) -> bool:
    return what.endswith(".onnx")


def _tasks(args, target):
    """(tasks, run name, the model's IRModule or None for a workload)."""
    from .task import TuneTask

    if _is_model(args.what):
        from schedlab.run import load, parse_shapes

        from .relax_integration import extract_tasks

        _, mod = load(args.what, parse_shapes(args.shape))
        return extract_tasks(mod, target), Path(args.what).stem, mod
    from schedlab import workloads
    from schedlab.bench import parse_sizes

    if args.what not in workloads.names():
        known = ", ".join(workloads.names())
        raise ValueError(f"tune: {args.what!r} is neither a workload ({known}) nor an .onnx file")
    sizes = parse_sizes(workloads.spec(args.what), args.size)
    func, _ = workloads.get(args.what, **sizes)
    return [TuneTask(args.what, func, target)], args.what, None

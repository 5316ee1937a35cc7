"""The `schedlab` command line: `--version`, `demo` (the main job), `bench <workload>`,
`bench-schedule` (how responsive scheduling is),
`bench-cost` (cost model vs measurements), `bench-explorer` (the explorer's apply latency and
session isolation in a real browser), `run model.onnx` (import, compile, run, time),
`apply BUNDLE` (rebuild a kernel from a schedule bundle),
`serve` (the explorer web app), `tune <workload|model.onnx>` (the tuner), `bench-tune` (tuned
kernels next to numpy and onnxruntime), `bench-cpu` (untuned code: shipped and default
schedules, conv layers and two CNNs next to numpy and onnxruntime), `bench-gpu` (the Dlight GPU
kernels next to cuBLAS; without a GPU, compiled to PTX only)."""

from __future__ import annotations

import argparse
import sys

import schedlab


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="schedlab", description="A tensor compiler you can watch and steer."
    )
    parser.add_argument("--version", action="version", version=f"schedlab {schedlab.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser("demo", help="walk a matmul from the naive loop nest to compiled C")
    demo.add_argument("--size", type=int, default=512, help="M = N = K (default 512)")

    bench = commands.add_parser(
        "bench", help="GFLOP/s of a compiled workload next to numpy, measured in one run"
    )
    bench.add_argument("workload", help="a name from schedlab.workloads.names()")
    bench.add_argument(
        "--size", default=None,
        help="one integer for the workload's main sizes (gemm: M=N=K) or KEY=VALUE[,KEY=VALUE]",
    )  # fmt: skip
    bench.add_argument("--target", default="cpu", help="target kind (default cpu)")
    bench.add_argument("--repeat", type=int, default=7, help="measurements per candidate")
    bench.add_argument("--min-repeat-ms", type=float, default=100.0, help="length of one repeat")
    bench.add_argument("--no-naive", action="store_true", help="skip the hand-written C loops")
    bench.add_argument(
        "--trace", default=None, metavar="FILE",
        help="schedule the workload with this trace (JSON) before building it; a shipped "
        "example may be named without its folder, e.g. gemm_1024_cpu",
    )  # fmt: skip
    bench.add_argument(
        "--default-schedule", action="store_true",
        help="also time the workload scheduled by the default CPU rules (schedlab.dlight)",
    )  # fmt: skip
    responsive = commands.add_parser(
        "bench-schedule",
        help="how fast primitives apply and traces replay (matmul+bias+relu), against the goals",
    )
    responsive.add_argument("--size", default=None, help="M=N=K, or KEY=VALUE[,KEY=VALUE]")
    responsive.add_argument("--repeat", type=int, default=30, help="runs per figure (median)")
    cost = commands.add_parser(
        "bench-cost",
        help="Spearman correlation of predicted and measured latency over random schedules",
    )
    cost.add_argument("--count", type=int, default=50, help="random schedules per workload")
    cost.add_argument("--seed", "--seeds", dest="seeds", default=None, metavar="N[,N...]",
                      help="seeds of the random schedules, each reported on its own "
                      "(default: the held-out seeds 0,7,8)")  # fmt: skip
    cost.add_argument("--target", default="cpu",
                      help="target to predict and build for: cpu (the host) or a preset the "
                      "host can run, e.g. zen3 for AVX2 code (default cpu)")  # fmt: skip
    cost.add_argument("--cores", type=int, default=None, help="cores to predict for "
                      "(default: the cores free at the start, from the load average)")  # fmt: skip
    explorer = commands.add_parser(
        "bench-explorer",
        help="click-to-render time of apply in the web app (real browser) and session isolation",
    )
    explorer.add_argument(
        "--rounds", type=int, default=5, help="rounds of the 6-step gemm walk (5: 30 applies)"
    )
    explorer.add_argument("--sessions", type=int, default=10, help="concurrent sessions")
    explorer.add_argument("--size", default=None, help="gemm sizes (default 1024)")
    _add_run_parser(commands)
    _add_apply_parser(commands)
    from schedlab.tune.bench import add_bench_tune_parser
    from schedlab.tune.command import add_tune_parser

    add_tune_parser(commands)
    add_bench_tune_parser(commands)
    from schedlab.bench_cpu import add_bench_cpu_parser

    add_bench_cpu_parser(commands)
    from schedlab.bench_gpu import add_bench_gpu_parser

    add_bench_gpu_parser(commands)
    serve = commands.add_parser(
        "serve", help="start the explorer web app (Panel) on a built-in example or your model"
    )
    serve.add_argument("--port", type=int, default=5006, help="port (default 5006)")
    serve.add_argument("--address", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--workload", default="gemm", help="workload opened in each new session")
    serve.add_argument("--size", default=None,
                       help="its sizes: N or KEY=VALUE[,...] (default gemm 1024)")  # fmt: skip
    serve.add_argument("--model", default=None, help="open this ONNX model instead")
    serve.add_argument("--show", action="store_true", help="open a browser tab")
    return parser


def _add_run_parser(commands) -> None:
    run = commands.add_parser(
        "run", help="import an ONNX model, compile it, run it and time it next to onnxruntime"
    )
    run.add_argument("model", help="path to a .onnx file")
    run.add_argument("--target", default="cpu", help="target kind (default cpu)")
    run.add_argument("--profile", action="store_true", help="also print the per-kernel times")
    run.add_argument(
        "--shape", action="append", default=[], metavar="NAME=D0,D1,...",
        help="the shape of an input with dynamic dimensions (repeatable)",
    )  # fmt: skip
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    run.add_argument("--repeat", type=int, default=5, help="interleaved measurements")
    run.add_argument(
        "--database", default=None, metavar="WORK_DIR",
        help="use the tuned schedules recorded in this `schedlab tune` work dir "
        "(or in this schedule bundle file)",
    )  # fmt: skip


def _add_apply_parser(commands) -> None:
    apply = commands.add_parser(
        "apply", help="rebuild a kernel from a schedule bundle alone, checking it matches"
    )
    apply.add_argument("bundle", help="a schedule bundle (.json; see docs/bundle.md)")
    apply.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="write the C source, the library and the scheduled function here",
    )
    apply.add_argument(
        "--check",
        action="store_true",
        help="run the kernel on random inputs against the reference interpreter",
    )
    apply.add_argument("--seed", type=int, default=0, help="seed of the --check inputs")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if args.command == "demo":
            from schedlab.demo import run_demo

            run_demo(size=args.size)
        elif args.command == "bench":
            from schedlab.bench import run_bench

            run_bench(
                args.workload,
                args.size,
                target=args.target,
                repeat=args.repeat,
                min_repeat_ms=args.min_repeat_ms,
                naive=not args.no_naive,
                trace=args.trace,
                default_schedule=args.default_schedule,
            )
        elif args.command == "bench-schedule":
            from schedlab.bench import run_schedule_bench

            run_schedule_bench(args.size, repeat=args.repeat)
        elif args.command == "bench-cost":
            from schedlab.cost.benchmark import HELD_OUT_SEEDS, parse_seeds, run_cost_bench

            seeds = parse_seeds(args.seeds) if args.seeds else HELD_OUT_SEEDS
            run_cost_bench(count=args.count, seeds=seeds, cores=args.cores, target=args.target)
        elif args.command == "bench-explorer":
            from schedlab.ui.bench import run_explorer_bench

            result = run_explorer_bench(rounds=args.rounds, sessions=args.sessions,
                                        size=args.size)  # fmt: skip
            return 0 if result.isolated and not result.external_requests else 1
        elif args.command == "serve":
            _serve(args)
        elif args.command == "tune":
            from schedlab.tune.command import run_tune_command

            run_tune_command(args)
        elif args.command == "bench-tune":
            from schedlab.tune.bench import run_tune_bench

            return run_tune_bench(args)
        elif args.command == "bench-cpu":
            from schedlab.bench_cpu import run_cpu_bench

            return run_cpu_bench(args)
        elif args.command == "bench-gpu":
            from schedlab.bench_gpu import run_gpu_bench

            return run_gpu_bench(args)
        elif args.command == "apply":
            from schedlab.apply import apply_bundle

            apply_bundle(args.bundle, out=args.out, check=args.check, seed=args.seed)
        elif args.command == "run":
            from schedlab.run import run_command

            run_command(args.model, args.target, args.profile, args.shape, seed=args.seed,
                        repeat=args.repeat, database=args.database)  # fmt: skip
    except (schedlab.SchedlabError, ValueError) as err:
        print(f"schedlab {args.command}: error: {err}", file=sys.stderr)
        return 2
    return 0


def _serve(args) -> None:
    from schedlab import workloads
    from schedlab.bench import parse_sizes
    from schedlab.ui.session import DEFAULT_WORKLOAD

    if args.workload == DEFAULT_WORKLOAD[0] and args.size is None:
        workload = DEFAULT_WORKLOAD
    else:
        workload = (args.workload, parse_sizes(workloads.spec(args.workload), args.size))
    from schedlab.ui.app import serve

    serve(port=args.port, address=args.address, workload=workload, onnx_path=args.model,
          show=args.show)  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""`schedlab bench`: a compiled workload next to numpy (and, for gemm, hand-written C loops),
checked for correctness first, then timed interleaved in one process and reported as GFLOP/s
and ratios. `--trace FILE` schedules the workload with a recorded trace before building it (the
package ships examples: `schedlab/examples/*.json`, also found by bare name)."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from schedlab import workloads
from schedlab.schedule.errors import TraceError
from schedlab.timing import Timings, time_side_by_side

# Hand-written baselines compiled with exactly the kernel's flags: the textbook i-j-k loop (the
# loop order of an unscheduled gemm) and the i-k-j loop with OpenMP over rows (what a careful
# person writes without tiling).
NAIVE_GEMM_C = """
#include <stdint.h>
void naive_gemm_ijk(const float* restrict A, const float* restrict B, float* restrict C,
                    int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      C[i * N + j] = 0.0f;
      for (int64_t k = 0; k < K; ++k) C[i * N + j] += A[i * K + k] * B[k * N + j];
    }
}
void naive_gemm_ikj_omp(const float* restrict A, const float* restrict B, float* restrict C,
                        int64_t M, int64_t N, int64_t K) {
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = 0.0f;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) C[i * N + j] += A[i * K + k] * B[k * N + j];
  }
}
"""


EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"


@dataclass(frozen=True)
class BenchRow:
    name: str
    timings: Timings
    flops: int

    @property
    def gflops(self) -> tuple[float, float]:
        return self.timings.gflops(self.flops) if self.flops else (float("nan"),) * 2


def parse_sizes(workload: workloads.Workload, text: str | None) -> dict[str, int]:
    """`--size`: one integer (the workload's main sizes) or KEY=VALUE[,KEY=VALUE]."""
    if text is None:
        return {}
    text = text.strip()
    if text.isdigit():
        return workload.scaled_sizes(int(text))
    sizes = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"--size: expected N or KEY=VALUE[,KEY=VALUE], got {text!r}")
        sizes[key.strip()] = int(value)
    return sizes


def find_trace(text: str, target=None) -> Path:
    """A trace file: a path, or the name of a shipped example (with or without `.json`). A
    shipped example may have a variant for a narrower vector ISA (`gemm_1024_cpu_avx2.json`:
    a 6 x 16 register tile for 16 AVX2 registers instead of 8 x 32 for 32 AVX-512 ones); for
    a `target` of that ISA, the variant is the one found."""
    path = Path(text)
    if path.is_file():
        return path
    stem = path.name.removesuffix(".json")
    suffix = _isa_suffix(target)
    names = [f"{stem}_{suffix}.json"] if suffix else []
    for candidate in (*(EXAMPLES_DIR / n for n in names), EXAMPLES_DIR / f"{stem}.json"):
        if candidate.is_file():
            return candidate
    shipped = ", ".join(sorted(p.name for p in EXAMPLES_DIR.glob("*.json"))) or "none"
    raise TraceError(f"--trace: no file {text!r} (shipped examples: {shipped})")


def _isa_suffix(target) -> str | None:
    """The shipped-variant suffix for `target`'s vector ISA: "avx2" for 256-bit x86 SIMD."""
    if target is None:
        return None
    from schedlab.target import Target

    attrs = Target(target).attrs
    return "avx2" if attrs.get("simd_width") == 256 and attrs.get("arch") == "x86_64" else None


def load_trace(text: str, target=None):
    """Read a trace JSON file (data only: nothing in it is executed); see `find_trace`."""
    from schedlab.schedule import Trace

    path = find_trace(text, target)
    try:
        data = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise TraceError(f"--trace: cannot read {path}: {err}") from None
    return Trace.from_json(data)


def scheduled(func, trace_file: str | None, target: str):
    """`func` with the trace replayed on it (unchanged without a trace)."""
    if trace_file is None:
        return func
    from schedlab.schedule import Schedule

    sch = Schedule(func, debug=False, target=target)
    load_trace(trace_file, target).apply_to_schedule(sch)
    return sch.mod


def default_scheduled(func, target: str):
    """`func` scheduled by the default CPU rules (schedlab.dlight.cpu)."""
    from schedlab import dlight

    return dlight.schedule_func(func, dlight.cpu.default_rules(), target)[0].func


def _naive_gemm_candidates(args, target) -> dict[str, Callable[[], object]]:
    from schedlab.backend.cpu.compiler import compile_source

    library = ctypes.CDLL(str(compile_source(NAIVE_GEMM_C, target, name="naive_gemm")))
    A, B, C = args
    (M, K), N = A.shape, B.shape[1]
    pointers = [a.ctypes.data_as(ctypes.c_void_p) for a in (A, B, C)]
    sizes = [ctypes.c_int64(M), ctypes.c_int64(N), ctypes.c_int64(K)]
    candidates = {}
    for symbol, label in (("naive_gemm_ijk", "naive C i-j-k"),
                          ("naive_gemm_ikj_omp", "naive C i-k-j + OpenMP")):  # fmt: skip
        fn = getattr(library, symbol)
        fn.restype = None
        candidates[label] = lambda f=fn: f(*pointers, *sizes)
    return candidates


def _check(kernel, args, reference, num_outputs: int) -> float:
    """Run the kernel once and compare with the exact reference; return the max abs error."""
    kernel(*args)
    expected = reference(*args[: len(args) - num_outputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    worst = 0.0
    for got, want in zip(args[len(args) - num_outputs :], expected):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want))))
    return worst


def run_bench(
    name: str,
    size: str | None = None,
    target: str = "cpu",
    repeat: int = 7,
    min_repeat_ms: float = 100.0,
    naive: bool = True,
    printer=print,
    trace: str | None = None,
    default_schedule: bool = False,
) -> list[BenchRow]:
    """Build, check and time workload `name` (scheduled by the JSON trace file `trace`, if
    given); print a table; return its rows. `default_schedule` adds the workload scheduled by
    the default CPU rules (schedlab.dlight) as a candidate."""
    import schedlab

    spec = workloads.spec(name)
    sizes = parse_sizes(spec, size)
    func, reference = workloads.get(name, **sizes)
    args = workloads.make_args(func, seed=0)
    num_inputs = len(args) - spec.num_outputs
    kernel = schedlab.build(scheduled(func, trace, target), target=target)
    error = _check(kernel, args, reference, spec.num_outputs)
    baseline = spec.bound_baseline(**sizes)
    label = "schedlab (trace)" if trace else "schedlab (no schedule)"
    candidates = {label: lambda: kernel(*args)}
    if default_schedule:
        default_kernel = schedlab.build(default_scheduled(func, target), target=target)
        error = max(error, _check(default_kernel, args, reference, spec.num_outputs))
        candidates["schedlab (default schedule)"] = lambda: default_kernel(*args)
    if naive and name == "gemm" and func.buffers[0].dtype == "float32":
        candidates.update(_naive_gemm_candidates(args, kernel.target))
    numpy_label = "numpy" if spec.baseline else "numpy reference (float64)"
    candidates[numpy_label] = lambda: baseline(*args[:num_inputs])
    timings = time_side_by_side(candidates, repeat=repeat, min_repeat_ms=min_repeat_ms)
    flops = spec.flops(**sizes)
    rows = [BenchRow(label, t, flops) for label, t in timings.items()]
    printer(f"target: {kernel.target.describe()}")
    _print_table(printer, spec, sizes, rows, numpy_label, error)
    return rows


def _print_table(printer, spec, sizes, rows, numpy_label, error) -> None:
    resolved = spec.resolve(sizes)
    shown = ", ".join(f"{k}={v}" for k, v in resolved.items())
    printer(f"{spec.name} ({shown}); max abs error vs reference {error:.2e}")
    blas = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    if blas:
        printer(f"note: {blas} is set and slows OpenBLAS; unset it for this command to compare")
    numpy_median = next(r.timings.median for r in rows if r.name == numpy_label)
    printer(f"{'candidate':<28}{'min ms':>10}{'median ms':>11}{'GFLOP/s':>10}{'vs numpy':>10}")
    for row in rows:
        best, _ = row.gflops
        ratio = numpy_median / row.timings.median
        printer(
            f"{row.name:<28}{row.timings.min * 1e3:>10.3f}{row.timings.median * 1e3:>11.3f}"
            f"{best:>10.2f}{ratio:>9.2f}x"
        )
    printer("(GFLOP/s from the best run; 'vs numpy' = numpy median / candidate median, >1 faster)")


# -- `schedlab bench-schedule`: how responsive scheduling is ------------------------------------
PRIMITIVE_GOAL_MS = 5.0  # one primitive, as a person applies it in the explorer
REPLAY_GOAL_MS = 50.0  # replaying a 30-instruction trace, as a production build does


def _matmul_handles(sch):
    """The handles the primitive cases start from: matmul block, its loops, the relu block."""
    block = sch.get_block("matmul")
    return block, sch.get_loops(block), sch.get_block("T_relu")


# Each case applies one primitive to a fresh matmul+bias+relu schedule.
PRIMITIVE_CASES: dict[str, Callable] = {
    "split": lambda sch, b, loops, relu: sch.split(loops[0], [None, 16]),
    "fuse": lambda sch, b, loops, relu: sch.fuse(loops[0], loops[1]),
    "reorder": lambda sch, b, loops, relu: sch.reorder(loops[1], loops[0]),
    "parallel": lambda sch, b, loops, relu: sch.parallel(loops[0]),
    "vectorize": lambda sch, b, loops, relu: sch.vectorize(loops[1]),
    "cache_write": lambda sch, b, loops, relu: sch.cache_write(b, 0, "local"),
    "compute_at": lambda sch, b, loops, relu: sch.compute_at(b, sch.get_loops(relu)[0]),
    "decompose_reduction": lambda sch, b, loops, relu: sch.decompose_reduction(b, loops[2]),
}


def schedule_30_steps(sch) -> None:
    """A realistic 30-instruction schedule of matmul+bias+relu (tiling with sampled factors,
    a local accumulator, the epilogue folded into its write-back, parallel, vector, unroll, a
    sampled auto-unroll depth): the trace the replay benchmark times."""
    block, relu = sch.get_block("matmul"), sch.get_block("T_relu")
    i, j, k = sch.get_loops(block)
    m, n, kk = (sch.get(loop).extent.value for loop in (i, j, k))
    tile_i = sch.sample_perfect_tile(i, n=3, max_innermost_factor=4, decision=_tiles(m, 4, 2))
    tile_j = sch.sample_perfect_tile(j, n=3, max_innermost_factor=16, decision=_tiles(n, 16, 2))
    tile_k = sch.sample_perfect_tile(k, n=2, max_innermost_factor=4, decision=_tiles(kk, 4))
    i0, i1, i2 = sch.split(i, tile_i)
    j0, j1, j2 = sch.split(j, tile_j)
    k0, k1 = sch.split(k, tile_k)
    sch.reorder(i0, j0, i1, j1, k0, i2, k1, j2)
    write_back = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(write_back, j1)
    sch.reverse_compute_inline(relu)
    init = sch.decompose_reduction(block, k0)
    sch.parallel(sch.fuse(i0, j0))
    sch.vectorize(j2)
    sch.unroll(k1)
    sch.unroll(i2)
    depth = sch.sample_categorical([0, 16, 64, 512], [0.25] * 4, decision=2)
    sch.annotate(block, "pragma_auto_unroll_max_step", depth)
    sch.annotate(block, "pragma_unroll_explicit", 1)
    *_, wb_rows, wb_cols = sch.get_loops(write_back)
    wb_outer, wb_vec = sch.split(wb_cols, [None, 4])
    sch.vectorize(wb_vec)
    sch.unroll(wb_outer)
    sch.unroll(wb_rows)
    *_, init_rows, init_cols = sch.get_loops(init)
    sch.unroll(init_rows)
    sch.vectorize(init_cols)


def _tiles(extent: int, inner: int, middle: int | None = None) -> list[int]:
    """Perfect tile factors of `extent` (outer first): the innermost at most `inner`, then
    (with `middle`) at most `middle`; the outer factor takes the rest."""
    inner = max(f for f in range(1, inner + 1) if extent % f == 0)
    if middle is None:
        return [extent // inner, inner]
    rest = extent // inner
    middle = max(f for f in range(1, middle + 1) if rest % f == 0)
    return [rest // middle, middle, inner]


def _median_ms(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2] * 1e3


def time_primitive(func, case: Callable, repeat: int, debug: bool) -> float:
    """Median milliseconds of one primitive applied to a fresh schedule (undone in between);
    the time includes the index of the new IR version (what the next action needs)."""
    import time

    from schedlab.schedule import Schedule

    sch = Schedule(func, debug=debug)
    handles = _matmul_handles(sch)
    base = len(sch.history)
    samples = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        case(sch, *handles)
        sch.state.uids()
        samples.append(time.perf_counter() - start)
        while len(sch.history) > base:
            sch.undo()
    return _median_ms(samples[1:])


def time_replay(func, trace, repeat: int, debug: bool, from_json: bool) -> float:
    """Median milliseconds of replaying `trace` onto a fresh schedule (from its JSON text when
    `from_json`: reading included)."""
    import json
    import time

    from schedlab.schedule import Schedule, Trace

    text = json.dumps(trace.as_json())
    samples = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        replayed = trace if not from_json else Trace.from_json(text)
        replayed.apply_to_schedule(Schedule(func, debug=debug))
        samples.append(time.perf_counter() - start)
    return _median_ms(samples[1:])


def run_schedule_bench(size: str | None = None, repeat: int = 30, printer=print) -> dict:
    """Time each primitive case and the 30-instruction replay on matmul+bias+relu; print a
    table against the goals; return {figure: median ms}."""
    from schedlab.schedule import Schedule

    spec = workloads.spec("matmul_bias_relu")
    sizes = parse_sizes(spec, size)
    func, _ = workloads.get("matmul_bias_relu", **sizes)
    shown = ", ".join(f"{k}={v}" for k, v in spec.resolve(sizes).items())
    printer(f"matmul_bias_relu ({shown}); medians of {repeat} runs, in ms")
    printer(f"{'figure':<34}{'debug=True':>12}{'debug=False':>12}{'goal':>8}")
    figures = {}
    for name, case in PRIMITIVE_CASES.items():
        times = [time_primitive(func, case, repeat, debug) for debug in (True, False)]
        figures[name] = times[0]
        _print_figure(printer, f"primitive: {name}", times, PRIMITIVE_GOAL_MS)
    sch = Schedule(func, seed=0)
    schedule_30_steps(sch)
    trace = sch.trace
    for from_json in (False, True):
        label = f"replay {len(trace)} insts" + (" from JSON" if from_json else "")
        times = [time_replay(func, trace, repeat, debug, from_json) for debug in (True, False)]
        figures[label] = times[0]
        _print_figure(printer, label, times, REPLAY_GOAL_MS)
    return figures


def _print_figure(printer, label: str, times: list[float], goal: float) -> None:
    verdict = "ok" if times[0] < goal else "SLOW"
    printer(f"{label:<34}{times[0]:>12.2f}{times[1]:>12.2f}{goal:>7.0f} {verdict}")

"""`schedlab bench`: a compiled workload next to numpy (and, for gemm, hand-written C loops),
checked for correctness first, then timed interleaved in one process and reported as GFLOP/s
and ratios."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from schedlab import workloads
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
) -> list[BenchRow]:
    """Build, check and time workload `name`; print a table; return its rows."""
    import schedlab

    spec = workloads.spec(name)
    sizes = parse_sizes(spec, size)
    func, reference = workloads.get(name, **sizes)
    args = workloads.make_args(func, seed=0)
    num_inputs = len(args) - spec.num_outputs
    kernel = schedlab.build(func, target=target)
    error = _check(kernel, args, reference, spec.num_outputs)
    baseline = spec.bound_baseline(**sizes)
    candidates = {"schedlab (no schedule)": lambda: kernel(*args)}
    if naive and name == "gemm" and func.buffers[0].dtype == "float32":
        candidates.update(_naive_gemm_candidates(args, kernel.target))
    numpy_label = "numpy" if spec.baseline else "numpy reference (float64)"
    candidates[numpy_label] = lambda: baseline(*args[:num_inputs])
    timings = time_side_by_side(candidates, repeat=repeat, min_repeat_ms=min_repeat_ms)
    flops = spec.flops(**sizes)
    rows = [BenchRow(label, t, flops) for label, t in timings.items()]
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

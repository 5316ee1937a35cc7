"""The main job until the explorer app lands: walk a matmul from the tensor expression through
the loop nest, every lowering pass and the generated C, to a checked, measured kernel beside
numpy."""

from __future__ import annotations

import textwrap

import numpy as np

import schedlab
from schedlab import te
from schedlab.ir.transform import PassContext, PassRecorder
from schedlab.timing import time_side_by_side

TE_SOURCE = """\
A = te.placeholder((M, K), "float32", name="A")
B = te.placeholder((K, N), "float32", name="B")
k = te.reduce_axis((0, K), name="k")
C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
func = te.create_prim_func([A, B, C])"""


def _section(printer, title: str) -> None:
    printer("")
    printer(f"== {title} " + "=" * max(0, 76 - len(title)))


def make_gemm(size: int):
    M = N = K = size
    A = te.placeholder((M, K), "float32", name="A")
    B = te.placeholder((K, N), "float32", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C]).with_attr("global_symbol", "gemm")


def run_demo(size: int = 512, printer=print, repeat: int = 5) -> dict:
    """Print each stage; return the measured figures (GFLOP/s of schedlab and numpy)."""
    if size < 1:
        raise ValueError(f"demo: size must be a positive integer, got {size}")
    printer(f"schedlab {schedlab.__version__}: a {size}x{size}x{size} fp32 matmul, step by step")
    _section(printer, "1. the computation, as a tensor expression")
    printer(TE_SOURCE)
    func = make_gemm(size)
    _section(printer, "2. the loop nest it becomes (TensorIR, printed as TVMScript)")
    printer(func.script())

    recorder = PassRecorder()
    with PassContext(instruments=[recorder]):
        kernel = schedlab.build(func, target="cpu")
    _section(printer, "3. lowering, pass by pass")
    for record in recorder.records:
        if record.depth == 0:
            continue  # the enclosing Sequential
        changed = "changed" if record.changed else "no change"
        printer(f"  {record.name:<40} {record.seconds * 1e3:7.2f} ms  {changed}")
    printer("the lowered loop nest:")
    printer(textwrap.indent(kernel.lowered.script(), "  "))

    _section(printer, "4. generated C (gcc -O3 -march=native -fopenmp)")
    printer(kernel.source)

    _section(printer, "5. checked against numpy, then measured side by side")
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (size, size)).astype("float32")
    b = rng.uniform(-1, 1, (size, size)).astype("float32")
    c = np.zeros((size, size), "float32")
    kernel(a, b, c)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    error = float(np.max(np.abs(c - expected)))
    np.testing.assert_allclose(c, expected, rtol=1e-3, atol=1e-3)
    printer(f"max abs error vs float64 numpy: {error:.2e}")
    timings = time_side_by_side(
        {"schedlab": lambda: kernel(a, b, c), "numpy": lambda: np.matmul(a, b)},
        repeat=repeat, min_repeat_ms=100,
    )  # fmt: skip
    flops = 2 * size**3
    figures = {}
    for name, timing in timings.items():
        best, median = timing.gflops(flops)
        figures[name] = best
        printer(f"  {name:<10} {timing.median * 1e3:9.2f} ms median  {best:8.2f} GFLOP/s (best)")
    ratio = figures["schedlab"] / figures["numpy"]
    printer(f"schedlab reaches {ratio:.1%} of numpy/OpenBLAS with no schedule at all.")
    printer("Schedules (split, reorder, cache_write, vectorize, parallel) close that gap: compare")
    printer("`schedlab bench gemm --size 1024 --trace gemm_1024_cpu --default-schedule`.")
    return {"error": error, **figures}

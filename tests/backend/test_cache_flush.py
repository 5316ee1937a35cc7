"""Cache flushing for cold-cache timing: `cache_flush.flush` and `Kernel.benchmark(flush_cache=)`.

Whether a flush makes the next access slower is a timing question and lives in the benchmarks
(`schedlab bench-tune` tunes models' kernels this way); here: the flush keeps every byte (dirty
lines are written back, not dropped), covers strided and reversed views, and the benchmark
flushes every argument but the first before each call."""

import numpy as np
import pytest

import schedlab
from schedlab import te
from schedlab.backend.cpu import cache_flush, runtime


def _scale_kernel(n=1000):
    A = te.placeholder((n,), "float32", "A")
    W = te.placeholder((n,), "float32", "W")
    B = te.compute((n,), lambda i: A[i] * W[i], name="B")
    return schedlab.build(te.create_prim_func([A, W, B]).with_attr("global_symbol", "scale"))


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a,
        lambda a: a[::3, 1::2],
        lambda a: a[::-1, ::-2],
        lambda a: a[5:6, 7:8],
        lambda a: a.T,
    ],
)
def test_flush_keeps_every_byte_of_dirty_and_clean_views(view):
    base = np.arange(300 * 257, dtype="float64").reshape(300, 257)
    expected = base.copy()
    target = view(base)
    target += 1.0  # dirty lines: a flush must write them back
    view(expected)[...] += 1.0
    cache_flush.flush(target)
    cache_flush.flush(base)
    np.testing.assert_array_equal(base, expected)


def test_flush_of_empty_and_non_arrays():
    cache_flush.flush(np.empty((0, 4), "float32"))
    with pytest.raises(TypeError, match="expected a numpy array, got list"):
        cache_flush.flush([1.0, 2.0])


def test_cold_benchmark_flushes_all_but_the_first_argument_before_each_call(monkeypatch):
    kernel = _scale_kernel()
    rng = np.random.default_rng(0)
    a, w = rng.standard_normal(1000, dtype="float32"), rng.standard_normal(1000, dtype="float32")
    b = np.zeros(1000, "float32")
    flushed = []
    monkeypatch.setattr(runtime, "flush", lambda array: (flushed.append(array.ctypes.data),
                                                         cache_flush.flush(array)))  # fmt: skip
    timings = kernel.benchmark(a, w, b, number=3, repeat=2, flush_cache=True)
    assert timings.number == 3 and len(timings.all) == 2 and timings.min > 0
    calls = 1 + 3 * 2  # the warm-up call, then number * repeat
    assert flushed == [w.ctypes.data, b.ctypes.data] * calls
    np.testing.assert_allclose(b, a * w, rtol=1e-6)


def test_cold_benchmark_calibrates_its_number_of_calls():
    kernel = _scale_kernel()
    args = [np.ones(1000, "float32") for _ in range(3)]
    timings = kernel.benchmark(*args, repeat=2, min_repeat_ms=1.0, flush_cache=True)
    assert timings.number > 1 and timings.number * timings.median >= 1e-3 * 0.5


def test_a_gpu_kernel_refuses_the_flush():
    from ..transform.test_gpu_lowering import opencl_ready, reverse

    if not opencl_ready():
        pytest.skip("pyopencl with PoCL is not installed (extra: opencl)")
    kernel = schedlab.build(reverse(), "opencl")
    args = np.arange(40, dtype="float32"), np.zeros(40, "float32")
    assert kernel.benchmark(*args, number=1, repeat=1).min > 0
    with pytest.raises(ValueError, match="flush_cache is for CPU kernels; main runs on opencl"):
        kernel.benchmark(*args, number=1, repeat=1, flush_cache=True)

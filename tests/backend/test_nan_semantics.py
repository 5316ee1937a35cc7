"""Where C leaves a choice, compiled kernels follow the interpreter: NaN propagates through
min/max (as numpy's minimum/maximum), element-wise and in reductions."""

import numpy as np
import pytest

import schedlab
from schedlab import te


def _minmax_func(dtype):
    A = te.placeholder((5, 7), dtype, name="A")
    B = te.placeholder((5, 7), dtype, name="B")
    lo = te.compute((5, 7), lambda i, j: te.min(A[i, j], B[i, j]), name="lo")
    hi = te.compute((5, 7), lambda i, j: te.max(A[i, j], B[i, j]), name="hi")
    k = te.reduce_axis((0, 7), name="k")
    row_max = te.compute((5,), lambda i: te.max(A[i, k], axis=k), name="row_max")
    return te.create_prim_func([A, B, lo, hi, row_max])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_propagates_like_numpy(dtype):
    func = _minmax_func(dtype)
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (5, 7)).astype(dtype)
    b = rng.uniform(-1, 1, (5, 7)).astype(dtype)
    a[0, 0] = b[1, 1] = a[2, 6] = np.nan
    results = {}
    for name, run in (("interpreter", schedlab.interpret), ("compiled", schedlab.build(func))):
        outs = [np.zeros((5, 7), dtype), np.zeros((5, 7), dtype), np.zeros((5,), dtype)]
        run(func, a, b, *outs) if name == "interpreter" else run(a, b, *outs)
        results[name] = outs
    expected = [np.minimum(a, b), np.maximum(a, b), np.max(a, axis=1)]
    for outs in results.values():
        for got, want in zip(outs, expected):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype, lanes", [("float32", 8), ("float32", 16), ("float64", 4),
                                          ("int32", 8)])  # fmt: skip
def test_vectorized_min_max_keep_the_scalar_rules(dtype, lanes):
    """min/max inside a vectorized loop become vector compare-and-blend helpers: NaN still
    propagates from either side (numpy's rule), -0.0/+0.0 and integers are exact."""
    from schedlab.schedule import Schedule

    A = te.placeholder((3, 32), dtype, name="A")
    B = te.placeholder((3, 32), dtype, name="B")
    lo = te.compute((3, 32), lambda i, j: te.min(A[i, j], B[i, j]), name="lo")
    hi = te.compute((3, 32), lambda i, j: te.max(A[i, j], B[i, j]), name="hi")
    sch = Schedule(te.create_prim_func([A, B, lo, hi]))
    for name in ("lo", "hi"):
        _, j = sch.get_loops(sch.get_block(name))
        sch.vectorize(sch.split(j, [None, lanes])[1])
    kernel = schedlab.build(sch.mod)
    assert f"sl_max_{dtype}x{lanes}(" in kernel.source
    assert f"sl_min_{dtype}x{lanes}(" in kernel.source
    rng = np.random.default_rng(2)
    a = rng.uniform(-5, 5, (3, 32)).astype(dtype)
    b = rng.uniform(-5, 5, (3, 32)).astype(dtype)
    if dtype != "int32":
        a[0, 0] = b[1, 1] = a[2, 6] = b[2, 6] = np.nan
        a[1, 3], b[1, 3] = -0.0, 0.0
    outs = [np.zeros((3, 32), dtype), np.zeros((3, 32), dtype)]
    kernel(a, b, *outs)
    np.testing.assert_array_equal(outs[0], np.minimum(a, b))
    np.testing.assert_array_equal(outs[1], np.maximum(a, b))

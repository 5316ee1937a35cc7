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

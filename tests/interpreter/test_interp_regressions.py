"""Regressions found by the schedule property tests: a lazy if_then_else whose condition is
scalar while its branches vary over a vectorized axis must not evaluate the untaken branch (its
loads are out of bounds there); reductions into 0-d buffers."""

import numpy as np

import schedlab
from schedlab.script import from_source

# the fused (y, x) loop stays scalar, the channel loop becomes an array axis
PADDED_COPY = """
@T.prim_func
def pad(data: T.Buffer((3, 7, 5), "float32"), out: T.Buffer((3, 9, 7), "float32")):
    for c, f in T.grid(3, 63):
        with T.block("pad"):
            vc = T.axis.spatial(3, c)
            vy = T.axis.spatial(9, f // 7)
            vx = T.axis.spatial(7, f % 7)
            T.reads(data[vc, vy - 1, vx - 1])
            T.writes(out[vc, vy, vx])
            out[vc, vy, vx] = T.if_then_else(
                vy >= 1 and vy < 8 and vx >= 1 and vx < 6, data[vc, vy - 1, vx - 1], T.float32(0)
            )
"""


def test_scalar_condition_array_branches_is_lazy():
    func = from_source(PADDED_COPY)
    data = np.random.default_rng(0).uniform(-1, 1, (3, 7, 5)).astype("float32")
    out = np.full((3, 9, 7), 7.0, "float32")
    schedlab.interpret(func, data, out)
    np.testing.assert_array_equal(out, np.pad(data, ((0, 0), (1, 1), (1, 1))))


SCALAR_SUM = """
@T.prim_func
def total(A: T.Buffer((7, 9), "float32"), S: T.Buffer((), "float32")):
    for f in range(63):
        with T.block("sum"):
            vi = T.axis.reduce(7, f // 9)
            vj = T.axis.reduce(9, f % 9)
            T.reads(A[vi, vj])
            T.writes(S[()])
            with T.init():
                S[()] = T.float32(0)
            S[()] = S[()] + A[vi, vj]
"""


def test_vectorized_reduction_into_a_0d_buffer():
    """Regression: the masked store of a reduction result into a 0-d buffer."""
    a = np.random.default_rng(1).uniform(-1, 1, (7, 9)).astype("float32")
    s = np.zeros((), "float32")
    schedlab.interpret(from_source(SCALAR_SUM), a, s)
    np.testing.assert_allclose(s, a.sum(), rtol=1e-5)

"""Regression: a lazy if_then_else whose condition is scalar while its branches vary over a
vectorized axis must not evaluate the untaken branch (its loads are out of bounds there)."""

import numpy as np

import schedlab
from schedlab.script import from_source

# the fused (y, x) loop stays scalar, the channel loop becomes an array axis
PADDED_COPY = '''
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
'''


def test_scalar_condition_array_branches_is_lazy():
    func = from_source(PADDED_COPY)
    data = np.random.default_rng(0).uniform(-1, 1, (3, 7, 5)).astype("float32")
    out = np.full((3, 9, 7), 7.0, "float32")
    schedlab.interpret(func, data, out)
    np.testing.assert_array_equal(out, np.pad(data, ((0, 0), (1, 1), (1, 1))))

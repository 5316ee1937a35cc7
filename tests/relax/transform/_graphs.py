"""Graphs shared by the pass tests, and a check that a pass keeps a module's numerics."""

import numpy as np

from schedlab.ir.expr import SizeVar
from schedlab.relax import BlockBuilder, R, TensorStructInfo, Var
from schedlab.relax.interpreter import run


def mlp_module():
    """main(x: (n, 5), w: (5, 7), b: (7,)) -> (relu(x @ w + b) * 2 summed over axis 1, the
    relu output), with an unused binding; `n` is symbolic."""
    n = SizeVar("n")
    x = Var("x", TensorStructInfo((n, 5), "float32"))
    w = Var("w", TensorStructInfo((5, 7), "float32"))
    b = Var("b", TensorStructInfo((7,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            h = bb.emit(R.matmul(x, w))
            h = bb.emit(R.add(h, b))
            h = bb.emit(R.nn.relu(h))
            bb.emit(R.exp(h), "unused")
            s = bb.emit(R.sum(R.multiply(h, h), axis=[1]))
            gv = bb.emit_output(R.tuple(s, h))
        bb.emit_func_output(gv)
    return bb.get()


def mlp_inputs(rows: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    shapes = [(rows, 5), (5, 7), (7,)]
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def assert_same_results(before, after, *arrays, func_name: str = "main"):
    """`before` and `after` compute the same values on `arrays` (graph interpreter)."""
    want = run(before, *arrays, func_name=func_name)
    got = run(after, *arrays, func_name=func_name)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)

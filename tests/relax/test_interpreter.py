"""The graph reference interpreter: registered operators (legalized and interpreted), call_tir
with symbolic output shapes, tuples, If, MatchCast, calls of graph functions, and errors that
name the binding."""

import numpy as np
import pytest

from schedlab import te
from schedlab.ir.expr import SizeVar
from schedlab.relax import (
    BlockBuilder,
    Call,
    Function,
    GlobalVar,
    If,
    R,
    SeqExpr,
    TensorStructInfo,
    Var,
)  # fmt: skip
from schedlab.relax.interpreter import GraphRunError, run, run_op

RNG = np.random.default_rng(3)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def double_te(x):
    return te.compute(x.shape, lambda i, j: x[i, j] * 2.0, name="double")


def build():
    """main(x: (n, 5), w: (5, 3)) = relu(dense(double(x), w)) split into a tuple."""
    n = SizeVar("n")
    x = Var("x", TensorStructInfo((n, 5), "float32"))
    w = Var("w", TensorStructInfo((5, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            d = bb.emit_te(double_te, x)
            h = bb.emit(R.matmul(d, w))
            r = bb.emit(R.nn.relu(h))
            parts = bb.emit(R.split(r, indices_or_sections=[1], axis=1))
            first = bb.emit(parts[0])
            gv = bb.emit_output(R.tuple(first, R.sum(parts[1], axis=[1])))
        bb.emit_func_output(gv)
    return bb.get()


def test_ops_call_tir_tuples_symbolic_batch():
    mod = build()
    for rows in (1, 7):
        x, w = rand(rows, 5), rand(5, 3)
        first, rest = run(mod, x, w)
        ref = np.maximum((2 * x) @ w, 0)
        np.testing.assert_allclose(first, ref[:, :1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rest, ref[:, 1:].sum(axis=1), rtol=1e-5, atol=1e-6)


def test_constants_if_and_graph_function_calls():
    x = Var("x", TensorStructInfo((4,), "float32"))
    bb = BlockBuilder()
    with bb.function("helper", [x]):
        bb.emit_func_output(bb.emit(R.add(x, R.const(np.full(4, 10.0, np.float32)))))
    y = Var("y", TensorStructInfo((4,), "float32"))
    c = Var("c", TensorStructInfo((), "bool"))
    with bb.function("main", [y, c]):
        called = bb.emit(Call(GlobalVar("helper"), (y,)))
        branch = If(c, SeqExpr((), called), SeqExpr((), R.negative(y)))
        bb.emit_func_output(bb.emit(branch))
    mod = bb.get()
    data = rand(4)
    np.testing.assert_allclose(run(mod, data, np.array(True)), data + 10)
    np.testing.assert_allclose(run(mod, data, np.array(False)), -data)


def test_match_cast_binds_and_checks_shapes():
    x = Var("x", TensorStructInfo(None, "float32", ndim=2))
    m = SizeVar("m")
    bb = BlockBuilder()
    with bb.function("main", [x]):
        fixed = bb.match_cast(x, TensorStructInfo((m, 3), "float32"))
        bb.emit_func_output(bb.emit(R.exp(fixed)))
    mod = bb.get()
    data = rand(2, 3)
    np.testing.assert_allclose(run(mod, data), np.exp(data), rtol=1e-6)
    with pytest.raises(GraphRunError, match=r"binding 'lv'.*match_cast.*expected shape \(m, 3\)"):
        run(mod, rand(2, 4))


def test_errors_name_function_and_binding():
    mod = build()
    with pytest.raises(GraphRunError, match="takes 2 argument"):
        run(mod, rand(2, 5))
    with pytest.raises(GraphRunError, match=r"parameter 'w'.*expected shape \(5, 3\)"):
        run(mod, rand(2, 5), rand(4, 3))
    with pytest.raises(GraphRunError, match="expected dtype float32"):
        run(mod, rand(2, 5).astype(np.float64), rand(5, 3))
    with pytest.raises(GraphRunError, match="no function 'nope'"):
        run(mod, func_name="nope")


def test_run_a_function_directly_and_run_op():
    x = Var("x", TensorStructInfo((3,), "float32"))
    func = Function((x,), SeqExpr((), R.sigmoid(x)))
    data = rand(3)
    np.testing.assert_allclose(run(func, data), 1 / (1 + np.exp(-data)), rtol=1e-6)
    scalar = run_op("relax.take", [np.arange(5, dtype=np.int64), np.array(-1)], {"axis": 0})
    assert scalar.shape == () and scalar == 4


def test_missing_prim_func_names_the_binding():
    x = Var("x", TensorStructInfo((3,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(R.call_tir(GlobalVar("absent"), [x], TensorStructInfo((3,), "float32")), "y")
        bb.emit_func_output(y)
    with pytest.raises(GraphRunError, match=r"main, binding 'y': call_tir: .*no PrimFunc 'absent'"):
        run(bb.get(), rand(3))

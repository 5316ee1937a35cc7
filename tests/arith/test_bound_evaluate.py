"""ConstIntBound interval arithmetic and exact evaluation semantics."""

import math
import random

import numpy as np
import pytest

from schedlab.arith import ConstIntBound, EvaluationError, const_int_bound, evaluate
from schedlab.ir import Range, SizeVar, Var, const, decl_buffer, op
from schedlab.ir import expr as E

x, y = Var("x"), Var("y")


def b(lo, hi):
    return ConstIntBound(lo, hi)


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: x + y, b(-3, 12)),
        (lambda: x - y, b(-9, 6)),
        (lambda: x * y, b(-14, 35)),
        (lambda: x * -2, b(-10, 4)),
        (lambda: E.FloorDiv(x, const(2)), b(-1, 2)),
        (lambda: E.FloorDiv(x, const(-2)), b(-3, 1)),
        (lambda: E.FloorMod(x, const(3)), b(0, 2)),
        (lambda: E.FloorMod(y, const(8)), b(0, 7)),
        (lambda: E.Div(x, const(2)), b(-1, 2)),
        (lambda: E.Mod(x, const(4)), b(-2, 3)),
        (lambda: op.min(x, y), b(-2, 5)),
        (lambda: op.max(x, y), b(-1, 7)),
        (lambda: E.Select(x < y, x, y * 2), b(-2, 14)),
        (lambda: E.Cast("int8", x * 100), b(-128, 127)),
        (lambda: E.Cast("int64", x), b(-2, 5)),
        (lambda: x < y, b(0, 1)),
        (lambda: op.abs(x), b(0, 5)),
    ],
)
def test_interval_rules(make, expected):
    bounds = {x: b(-2, 5), y: Range(-1, 9)}
    assert const_int_bound(make(), bounds) == expected


def test_bounds_are_sound_on_random_points():
    rng = random.Random(7)
    exprs = [
        x * y - E.FloorDiv(x, const(3)),
        E.FloorMod(x * 7 + y, const(5)),
        E.Div(x - y, const(3)),
    ]
    for expr in exprs:
        bound = const_int_bound(expr, {x: b(-4, 6), y: b(2, 9)})
        for _ in range(200):
            value = evaluate(expr, {x: rng.randint(-4, 6), y: rng.randint(2, 9)})
            assert bound.min_value <= value <= bound.max_value


def test_unknown_and_size_vars_and_sentinels():
    n = SizeVar("n")
    assert const_int_bound(n) == b(0, 2**31 - 1)
    assert const_int_bound(SizeVar("m", "int64")) == b(0, math.inf)
    assert const_int_bound(x) == b(-(2**31), 2**31 - 1)
    assert const_int_bound(Var("w", "int64")).is_everything
    assert const_int_bound(n * 2 + 1).min_value == 1
    assert ConstIntBound.POS_INF == math.inf and ConstIntBound.NEG_INF == -math.inf
    assert const_int_bound(E.FloorDiv(n, const(4))) == b(0, (2**31 - 1) // 4)


def test_divisor_range_with_zero_is_treated_as_nonzero():
    assert const_int_bound(E.FloorDiv(x, y), {x: b(0, 10), y: b(0, 5)}) == b(0, 10)


def test_bad_var_bound_is_reported():
    with pytest.raises(TypeError, match="ConstIntBound, Range or int"):
        const_int_bound(x, {x: "wide"})


# -- evaluate -----------------------------------------------------------------------------------
def test_integer_semantics():
    env = {x: -7, y: 2}
    assert evaluate(E.Div(x, y), env) == -3
    assert evaluate(E.Mod(x, y), env) == -1
    assert evaluate(E.FloorDiv(x, y), env) == -4
    assert evaluate(E.FloorMod(x, y), env) == 1
    assert evaluate(E.Mul(x, const(2**30)), {x: 4}) == 0  # int32 wrap-around
    u = Var("u", "uint8")
    assert evaluate(E.Add(u, const(1, "uint8")), {u: 255}) == 0
    assert evaluate(x < y, env) is True
    assert evaluate(E.And(x < y, E.Not(x < y)), env) is False
    with pytest.raises(ZeroDivisionError):
        evaluate(E.FloorDiv(x, const(0)), env)


def test_float_semantics_round_to_dtype():
    f = Var("f", "float32")
    value = evaluate(f * 3.0, {f: 0.1})
    assert value == float(np.float32(np.float32(0.1) * np.float32(3.0)))
    assert evaluate(E.Cast("int32", f), {f: -2.7}) == -2
    assert evaluate(E.Cast("float16", const(1.0 / 3.0, "float64")), {}) == float(np.float16(1 / 3))
    assert evaluate(op.sqrt(f), {f: 4.0}) == 2.0
    assert math.isnan(evaluate(op.log(f), {f: -1.0}))
    assert evaluate(op.exp(const(0.0)), {}) == 1.0
    assert evaluate(op.pow(f, const(2.0)), {f: 3.0}) == 9.0


def test_select_let_call_load_and_vectors():
    t = Var("t")
    assert evaluate(E.Select(x < 0, -x, x), {x: -5}) == 5
    assert evaluate(E.Let(t, x * 2, t + 1), {x: 3}) == 7
    assert evaluate(op.if_then_else(x > 0, E.FloorDiv(const(6), x), const(0)), {x: 0}) == 0
    A = decl_buffer((4,), "float32", "A")
    assert evaluate(A[x] * 2.0, {x: 1, A: np.arange(4, dtype="float32")}) == 2.0
    assert evaluate(E.Ramp(x, const(2), 4), {x: 1}) == (1, 3, 5, 7)
    assert evaluate(E.Broadcast(x, 2) + E.Ramp(const(0), const(1), 2), {x: 5}) == (5, 6)


def test_missing_values_are_reported():
    with pytest.raises(EvaluationError, match="variable x"):
        evaluate(x + 1, {})
    with pytest.raises(TypeError, match="PrimExpr"):
        evaluate(3, {})

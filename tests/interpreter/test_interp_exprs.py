"""Every expression node and dtype through the interpreter, vectorized and scalar.

Each case stores an expression of loaded values into an output buffer over an odd-sized loop
and compares with numpy computing the same thing in the same dtype.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from schedlab.ir import BufferStore, Let, Var, const, decl_buffer, op
from schedlab.ir import expr as E

from .interp_builders import func, loops, random_array, root, run_both

N = 37


def elementwise(dtype_in, dtype_out, make, n=N, inputs=2):
    """out[i] = make(in0[i], in1[i], ..., i)."""
    ins = [decl_buffer((n,), dtype_in, f"X{k}") for k in range(inputs)]
    out = decl_buffer((n,), dtype_out, "Y")
    body = loops([n], lambda i: BufferStore(out, make(*[b[i] for b in ins], i), (i,)))
    return func([*ins, out], root(body))


def run(f, *inputs, out_dtype):
    out = np.zeros(inputs[0].shape if inputs else (N,), out_dtype)
    vector = run_both(f, *inputs, out)
    return vector[-1]


# -- integer arithmetic wraps in the IR dtype ---------------------------------------------------
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64"])
@pytest.mark.parametrize("name", ["add", "sub", "mul"])
def test_integer_arithmetic_wraps(dtype, name):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    fn = {"add": op.add, "sub": op.sub, "mul": op.mul}[name]
    got = run(elementwise(dtype, dtype, lambda x, y, i: fn(x, y)), a, b, out_dtype=dtype)
    with np.errstate(over="ignore"):
        expected = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[name](a, b)
    np.testing.assert_array_equal(got, expected)


def test_index_arithmetic_wraps_in_int8():
    """Loop-variable arithmetic in a narrow dtype wraps too (not Python's unbounded ints)."""
    out = decl_buffer((N,), "int8", "Y")
    i8 = Var("i", "int8")
    from schedlab.ir import For

    body = For(
        i8,
        const(0, "int8"),
        const(N, "int8"),
        "serial",
        BufferStore(out, i8 * const(9, "int8") + const(100, "int8"), (op.cast(i8, "int32"),)),
    )
    got = run(func([out], root(body)), out_dtype="int8")
    expected = (np.arange(N, dtype=np.int8) * np.int8(9) + np.int8(100)).astype(np.int8)
    np.testing.assert_array_equal(got, expected)


def _trunc_div(a, b):
    return np.trunc(a / b).astype(a.dtype)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_truncated_and_floor_division_on_negatives(dtype):
    a = np.array([7, -7, 7, -7, 0, 5, -5, 1, -1, 9, -9, 6] * 3 + [-8], dtype)
    b = np.array([2, 2, -2, -2, 3, -3, 3, 7, 7, -4, -4, 3] * 3 + [3], dtype)
    cases = {
        "div": (op.truncdiv, _trunc_div(a, b)),
        "mod": (op.truncmod, np.fmod(a, b)),
        "floordiv": (op.floordiv, np.floor_divide(a, b)),
        "floormod": (op.floormod, np.mod(a, b)),
    }
    for fn, expected in cases.values():
        got = run(elementwise(dtype, dtype, lambda x, y, i, fn=fn: fn(x, y)), a, b, out_dtype=dtype)
        np.testing.assert_array_equal(got, expected)


def test_float_division_kinds():
    rng = np.random.default_rng(2)
    a = rng.standard_normal(N).astype("float32") * 10
    b = rng.standard_normal(N).astype("float32") + np.float32(3)
    div = run(elementwise("float32", "float32", lambda x, y, i: x / y), a, b, out_dtype="float32")
    np.testing.assert_array_equal(div, a / b)
    fdiv = run(
        elementwise("float32", "float32", lambda x, y, i: op.floordiv(x, y)),
        a,
        b,
        out_dtype="float32",
    )
    np.testing.assert_array_equal(fdiv, np.floor(a / b))
    fmod = run(
        elementwise("float32", "float32", lambda x, y, i: op.floormod(x, y)),
        a,
        b,
        out_dtype="float32",
    )
    np.testing.assert_allclose(fmod, a - np.floor(a / b) * b, rtol=1e-6, atol=1e-6)
    mod = run(
        elementwise("float32", "float32", lambda x, y, i: E.Mod(x, y)), a, b, out_dtype="float32"
    )
    np.testing.assert_array_equal(mod, np.fmod(a, b))


@pytest.mark.parametrize("dtype", ["int32", "float32", "uint8"])
def test_min_max(dtype):
    rng = np.random.default_rng(3)
    a, b = random_array(rng, N, dtype), random_array(rng, N, dtype)
    lo = run(elementwise(dtype, dtype, lambda x, y, i: op.min(x, y)), a, b, out_dtype=dtype)
    hi = run(elementwise(dtype, dtype, lambda x, y, i: op.max(x, y)), a, b, out_dtype=dtype)
    np.testing.assert_array_equal(lo, np.minimum(a, b))
    np.testing.assert_array_equal(hi, np.maximum(a, b))


def test_comparisons_and_logic():
    rng = np.random.default_rng(4)
    a, b = rng.integers(-3, 3, N).astype("int32"), rng.integers(-3, 3, N).astype("int32")
    makers = {
        "lt": (op.lt, a < b),
        "le": (op.le, a <= b),
        "gt": (op.gt, a > b),
        "ge": (op.ge, a >= b),
        "eq": (op.eq, a == b),
        "ne": (op.ne, a != b),
    }
    for fn, expected in makers.values():
        got = run(
            elementwise("int32", "bool", lambda x, y, i, fn=fn: fn(x, y)), a, b, out_dtype=bool
        )
        np.testing.assert_array_equal(got, expected)
    p, q = a > 0, b > 0
    logic = {
        "and": (lambda x, y: op.logical_and(x, y), p & q),
        "or": (lambda x, y: op.logical_or(x, y), p | q),
        "not": (lambda x, y: op.logical_not(x), ~p),
    }
    for fn, expected in logic.values():
        got = run(
            elementwise("bool", "bool", lambda x, y, i, fn=fn: fn(x, y)), p, q, out_dtype=bool
        )
        np.testing.assert_array_equal(got, expected)


def test_select_is_eager_if_then_else_is_lazy_at_borders():
    """`if_then_else(i > 0, A[i - 1], 0)` never loads A[-1]; both modes agree with numpy."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal(N).astype("float32")
    shifted = elementwise(
        "float32",
        "float32",
        lambda x, i: op.if_then_else(op.logical_and(i > 0, i < N), _load_prev(x, i), const(0.0)),
        inputs=1,
    )
    got = run(shifted, a, out_dtype="float32")
    np.testing.assert_array_equal(got, np.concatenate([[0], a[:-1]]))
    picked = run(
        elementwise("float32", "float32", lambda x, y, i: op.select(x > y, x, y)),
        a,
        -a,
        out_dtype="float32",
    )
    np.testing.assert_array_equal(picked, np.where(a > -a, a, -a))


def _load_prev(load: E.BufferLoad, i):
    return load.buffer[i - 1]


def test_if_then_else_in_a_scalar_loop_skips_the_untaken_branch():
    """A loop that cannot vectorize (it carries a dependence) still evaluates lazily."""
    a = decl_buffer((N,), "int32", "A")
    body = loops([N], lambda i: BufferStore(a, op.if_then_else(i > 0, a[i - 1] + a[i], a[i]), (i,)))
    x = np.arange(N, dtype="int32")
    got = run_both(func([a], root(body)), x)[0]
    np.testing.assert_array_equal(got, np.cumsum(np.arange(N)).astype("int32"))


@pytest.mark.parametrize(
    "source,target",
    [
        ("float32", "int32"),
        ("float32", "int8"),
        ("int32", "float32"),
        ("int32", "int8"),
        ("int64", "int32"),
        ("uint8", "int8"),
        ("bool", "int32"),
        ("int32", "bool"),
        ("float32", "bool"),
        ("float32", "float16"),
        ("float32", "bfloat16"),
        ("float16", "float64"),
        ("bfloat16", "float32"),
        ("int32", "uint16"),
    ],
)
def test_casts(source, target):
    rng = np.random.default_rng(6)
    if np.dtype(DT(source)).kind == "f" or source == "bfloat16":
        a = (rng.standard_normal(N) * 50).astype(DT(source))
    else:
        a = random_array(rng, N, DT(source))
    got = run(
        elementwise(source, target, lambda x, i: op.cast(x, target), inputs=1),
        a,
        out_dtype=DT(target),
    )
    if target == "bool":
        expected = a != 0
    elif np.dtype(DT(target)).kind in "iu" and np.dtype(DT(source)).kind == "f":
        expected = np.trunc(a).astype(np.int64).astype(DT(target))  # C truncation, then wrap
    else:
        expected = a.astype(DT(target))
    np.testing.assert_array_equal(got, expected)


def DT(name):  # noqa: N802 - a dtype
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def test_let_expression():
    def make(x, y, i):
        t = Var("t", "float32")
        return Let(t, x * y, t + t * x)

    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(N).astype("float32"), rng.standard_normal(N).astype("float32")
    got = run(elementwise("float32", "float32", make), a, b, out_dtype="float32")
    t = a * b
    np.testing.assert_allclose(got, t + t * a, rtol=1e-6)


UNARY = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": lambda x: np.log(np.abs(x) + 1),
    "log2": lambda x: np.log2(np.abs(x) + 1),
    "log10": lambda x: np.log10(np.abs(x) + 1),
    "log1p": lambda x: np.log1p(np.abs(x)),
    "sqrt": lambda x: np.sqrt(np.abs(x)),
    "rsqrt": lambda x: 1 / np.sqrt(np.abs(x) + 1),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "erf": np.vectorize(math.erf),
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.rint,
    "trunc": np.trunc,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": lambda x: np.arcsin(np.tanh(x)),
    "acos": lambda x: np.arccos(np.tanh(x)),
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "abs": np.abs,
    "exp10": lambda x: 10.0**x,
}
ARGUMENT = {
    "log": "abs1",
    "log2": "abs1",
    "log10": "abs1",
    "log1p": "abs",
    "sqrt": "abs",
    "rsqrt": "abs1",
    "asin": "tanh",
    "acos": "tanh",
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_math_intrinsics(name, dtype):
    rng = np.random.default_rng(8)
    a = (rng.standard_normal(N) * 1.5).astype(dtype)
    a[0] = 2.5  # round half to even

    def argument(x):
        kind = ARGUMENT.get(name)
        if kind == "abs":
            return op.abs(x)
        if kind == "abs1":
            return op.abs(x) + const(1.0, dtype)
        if kind == "tanh":
            return op.tanh(x)
        return x

    fn = getattr(op, name)
    got = run(elementwise(dtype, dtype, lambda x, i: fn(argument(x)), inputs=1), a, out_dtype=dtype)
    expected = UNARY[name](a.astype(np.float64))
    tolerance = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-12}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=tolerance, atol=tolerance)


def test_binary_intrinsics_and_predicates():
    rng = np.random.default_rng(9)
    a = np.abs(rng.standard_normal(N)).astype("float32") + 0.5
    b = rng.standard_normal(N).astype("float32")
    cases = [
        (op.pow, np.power(a, b)),
        (op.fmod, np.fmod(a, b)),
        (op.atan2, np.arctan2(a, b)),
    ]
    for fn, expected in cases:
        got = run(
            elementwise("float32", "float32", lambda x, y, i, fn=fn: fn(x, y)),
            a,
            b,
            out_dtype="float32",
        )
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    special = np.array([np.nan, np.inf, -np.inf, 1.0] * 9 + [0.0], "float32")
    for name in ("isnan", "isinf", "isfinite"):
        got = run(
            elementwise("float32", "bool", lambda x, i, n=name: getattr(op, n)(x), inputs=1),
            special,
            out_dtype=bool,
        )
        np.testing.assert_array_equal(got, getattr(np, name)(special))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_arithmetic_rounds_each_operation(dtype):
    """(a * b + a) / b computed step by step in the narrow type, as numpy does."""
    rng = np.random.default_rng(10)
    a = (rng.standard_normal(N) * 3).astype(DT(dtype))
    b = (rng.standard_normal(N) + 4).astype(DT(dtype))
    got = run(elementwise(dtype, dtype, lambda x, y, i: (x * y + x) / y), a, b, out_dtype=DT(dtype))
    np.testing.assert_array_equal(got, (a * b + a) / b)


def test_integer_abs_wraps():
    a = np.array([-128, -5, 0, 7, 127] * 7 + [-1, 1], "int8")
    got = run(elementwise("int8", "int8", lambda x, i: op.abs(x), inputs=1), a, out_dtype="int8")
    np.testing.assert_array_equal(got, np.abs(a))


def test_scalar_parameters_and_float_constants():
    x = decl_buffer((N,), "float32", "X")
    y = decl_buffer((N,), "float32", "Y")
    alpha, shift = Var("alpha", "float32"), Var("shift", "int32")
    body = loops(
        [N],
        lambda i: BufferStore(
            y, x[i] * alpha + op.cast(shift, "float32") + const(0.25, "float32"), (i,)
        ),
    )
    f = func([x, y], root(body), scalars=[alpha, shift])
    a = np.arange(N, dtype="float32")
    out = run_both(f, a, np.zeros(N, "float32"), 1.5, -3)[1]
    np.testing.assert_array_equal(out, a * np.float32(1.5) + np.float32(-3) + np.float32(0.25))


def test_deep_expressions_compile():
    """A 250-term left-nested sum (Python's parser allows 200 nested parentheses)."""

    def make(x, i):
        total = x
        for term in range(250):
            total = total + x * const(term % 7, "int32")
        return total

    a = np.arange(N, dtype="int32")
    got = run(elementwise("int32", "int32", make, inputs=1), a, out_dtype="int32")
    np.testing.assert_array_equal(got, a + a * sum(t % 7 for t in range(250)))

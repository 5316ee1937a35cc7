"""Compiled expressions vs numpy: integer division semantics on negatives, casts and wrap-around,
float16/bfloat16 (bit-exact), math intrinsics, min/max, Let."""

import math

import ml_dtypes
import numpy as np
import pytest

from schedlab.ir import BufferStore, Cast, Div, FloorDiv, FloorMod, Let, Mod, SeqStmt, Var, op
from schedlab.target import Target

from ._lowered import Params, build, f32, loop, rand

N = 37  # odd, so vector remainders and loop tails show up


def _binary_kernel(make, dtype: str, out_dtype: str | None = None, name="binary"):
    p = Params()
    A, B, C = p.buf("A", N, dtype), p.buf("B", N, dtype), p.buf("C", N, out_dtype or dtype)
    i = Var("i")
    return build(p.func(loop(i, N, BufferStore(C, make(A[i], B[i]), (i,))), name))


def _signed_operands(dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-60, 60, N).astype(dtype)
    b = rng.integers(1, 9, N).astype(dtype) * rng.choice([-1, 1], N).astype(dtype)
    return a, b


def _trunc_div(a, b):
    return (np.abs(a) // np.abs(b) * np.sign(a) * np.sign(b)).astype(a.dtype)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
@pytest.mark.parametrize(
    "node,reference",
    [(FloorDiv, np.floor_divide), (FloorMod, np.mod), (Div, _trunc_div),
     (Mod, lambda a, b: (a - _trunc_div(a, b) * b).astype(a.dtype))],
)  # fmt: skip
def test_integer_division_on_negatives(dtype, node, reference):
    kernel = _binary_kernel(lambda a, b: node(a, b), dtype, name=f"div_{dtype}")
    a, b = _signed_operands(dtype)
    c = np.zeros(N, dtype)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, reference(a, b))


@pytest.mark.parametrize("node,reference", [(FloorDiv, np.floor_divide), (FloorMod, np.mod)])
def test_float_floordiv_floormod(node, reference):
    kernel = _binary_kernel(lambda a, b: node(a, b), "float32")
    a, b = rand(N, low=-9, high=9), rand(N, seed=1, low=0.5, high=3)
    b[::2] *= -1
    c = np.zeros(N, "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, reference(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "dtype,make,reference",
    [("uint8", lambda a, b: a + b, lambda a, b: a + b),
     ("int8", lambda a, b: a * b, lambda a, b: a * b),
     ("int16", lambda a, b: (a * b) < a, lambda a, b: (a * b) < a),
     ("uint16", lambda a, b: a * b, lambda a, b: a * b),
     ("int32", lambda a, b: op.min(a, b) - op.max(a, b), np.minimum),
     ("float64", lambda a, b: op.min(a, b) * op.max(a, b), lambda a, b: np.minimum(a, b) *
      np.maximum(a, b))],
)  # fmt: skip
def test_narrow_integer_wraparound_and_min_max(dtype, make, reference):
    p = Params()
    A, B = p.buf("A", N, dtype), p.buf("B", N, dtype)
    probe = make(A[0], B[0])
    C = p.buf("C", N, str(probe.dtype))
    i = Var("i")
    kernel = build(p.func(loop(i, N, BufferStore(C, make(A[i], B[i]), (i,))), f"wrap_{dtype}"))
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype) if dtype != "float64" else np.finfo(dtype)
    low, high = (max(info.min, -(2**15)), min(info.max, 2**15)) if dtype != "float64" else (-9, 9)
    a = rng.integers(low, high, N).astype(dtype) if dtype != "float64" else rand(N, dtype)
    b = rng.integers(low, high, N).astype(dtype) if dtype != "float64" else rand(N, dtype, 1)
    c = np.zeros(N, probe.dtype.numpy)
    kernel(a, b, c)
    with np.errstate(over="ignore"):
        expected = reference(a, b) if dtype != "int32" else np.minimum(a, b) - np.maximum(a, b)
    np.testing.assert_array_equal(c, expected.astype(c.dtype))


@pytest.mark.parametrize(
    "source,target",
    [("float32", "int32"), ("int32", "float32"), ("int32", "int8"), ("float32", "bool"),
     ("bool", "int32"), ("float64", "float32"), ("uint8", "int64"), ("int64", "float64")],
)  # fmt: skip
def test_casts(source, target):
    p = Params()
    A, C = p.buf("A", N, source), p.buf("C", N, target)
    i = Var("i")
    kernel = build(p.func(loop(i, N, BufferStore(C, Cast(target, A[i]), (i,))), "cast"))
    rng = np.random.default_rng(6)
    if source == "bool":
        a = rng.random(N) > 0.5
    elif np.dtype(source).kind == "f":
        a = rng.uniform(-300, 300, N).astype(source)
        a[:4] = [0.0, -0.7, 0.7, 2.5]
    else:
        a = rng.integers(-1000 if source != "uint8" else 0, 255, N).astype(source)
    c = np.zeros(N, target)
    kernel(a, c)
    np.testing.assert_array_equal(c, a.astype(target))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_float_arithmetic_is_bit_exact(dtype):
    """Every operation rounds to the 16-bit type, as numpy/ml_dtypes do."""

    def make(a, b):
        return (a + b) * a - b / op.const(3.0, dtype)

    kernel = _binary_kernel(make, dtype, name=f"arith_{dtype}")
    np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    a, b = rand(N, low=-40, high=40).astype(np_dtype), rand(N, seed=1).astype(np_dtype)
    c = np.zeros(N, np_dtype)
    kernel(a, b, c)
    expected = (a + b) * a - b / np_dtype.type(3.0)
    np.testing.assert_array_equal(c.view("uint16"), expected.view("uint16"))


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_conversions_exhaustive(dtype, soft):
    """Every 16-bit pattern widens exactly; float32 values (ties, subnormals, overflow, NaN)
    narrow with round-to-nearest-even, like numpy/ml_dtypes. `soft` forces the portable
    float16 code instead of _Float16."""
    p = Params()
    H, W = p.buf("H", 65536, dtype), p.buf("W", 65536, "float32")
    X, Y = p.buf("X", 4096, "float32"), p.buf("Y", 4096, dtype)
    i = Var("i")
    body = [
        loop(i, 65536, BufferStore(W, Cast("float32", H[i]), (i,)), "parallel"),
        loop(i, 4096, BufferStore(Y, Cast(dtype, X[i]), (i,))),
    ]
    target = Target("cpu", cflags=["-DSL_SOFT_F16"] if soft else [])
    kernel = build(p.func(SeqStmt(body), f"conv_{dtype}"), target)
    np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    h = np.arange(65536, dtype="uint16").view(np_dtype)
    x = _awkward_floats(np_dtype)
    w, y = np.zeros(65536, "float32"), np.zeros(4096, np_dtype)
    kernel(h, w, x, y)
    expected_w = h.astype("float32")
    same = (w.view("uint32") == expected_w.view("uint32")) | (np.isnan(w) & np.isnan(expected_w))
    assert same.all()
    with np.errstate(over="ignore"):
        expected_y = x.astype(np_dtype)
    nan = np.isnan(expected_y.astype("float32"))
    np.testing.assert_array_equal(y.view("uint16")[~nan], expected_y.view("uint16")[~nan])
    assert np.isnan(y[nan].astype("float32")).all()


def _awkward_floats(np_dtype) -> np.ndarray:
    rng = np.random.default_rng(7)
    exact = np.arange(2048, dtype="uint16").view(np_dtype).astype("float32")
    halfway = exact + np.float32(2.0) ** (np.floor(np.log2(np.abs(exact) + 1e-30)) - 8)
    values = np.concatenate([
        rng.standard_normal(1024).astype("float32") * 1e3,
        np.nan_to_num(halfway[:1024], nan=1.0, posinf=1.0, neginf=1.0),
        np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65520, 65519.9, 1e-8, 6e-8,
                    3e-8, 3.4e38, -1e-45]),
        rng.uniform(-1e-4, 1e-4, 4096).astype("float32"),
    ]).astype("float32")  # fmt: skip
    return values[:4096]


_FLOAT_INTRINSICS = [
    ("exp", np.exp, (-5, 5)), ("exp2", np.exp2, (-5, 5)), ("exp10", lambda x: 10.0**x, (-3, 3)),
    ("log", np.log, (0.1, 9)), ("log2", np.log2, (0.1, 9)), ("log10", np.log10, (0.1, 9)),
    ("log1p", np.log1p, (-0.5, 9)), ("sqrt", np.sqrt, (0, 9)), ("rsqrt", lambda x: 1 / np.sqrt(x),
    (0.1, 9)), ("tanh", np.tanh, (-4, 4)), ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), (-9, 9)),
    ("erf", np.vectorize(math.erf), (-3, 3)), ("floor", np.floor, (-9, 9)), ("ceil", np.ceil,
    (-9, 9)), ("round", np.round, (-9, 9)), ("trunc", np.trunc, (-9, 9)), ("sin", np.sin, (-9, 9)),
    ("cos", np.cos, (-9, 9)), ("tan", np.tan, (-1, 1)), ("asin", np.arcsin, (-1, 1)),
    ("acos", np.arccos, (-1, 1)), ("atan", np.arctan, (-9, 9)), ("sinh", np.sinh, (-3, 3)),
    ("cosh", np.cosh, (-3, 3)), ("abs", np.abs, (-9, 9)),
]  # fmt: skip


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,reference,domain", _FLOAT_INTRINSICS, ids=lambda v: str(v)[:8])
def test_math_intrinsics(name, reference, domain, dtype):
    p = Params()
    A, C = p.buf("A", N, dtype), p.buf("C", N, dtype)
    i = Var("i")
    value = getattr(op, name)(A[i])
    kernel = build(p.func(loop(i, N, BufferStore(C, value, (i,))), f"intrin_{name}"))
    a = rand(N, dtype, low=domain[0], high=domain[1])
    if name == "round":
        a[:6] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]  # half to even, like numpy
    c = np.zeros(N, dtype)
    kernel(a, c)
    np.testing.assert_allclose(c, reference(a), rtol=2e-6 if dtype == "float32" else 1e-12)


def test_binary_and_predicate_intrinsics():
    p = Params()
    A, B = p.buf("A", N), p.buf("B", N)
    P, F, T, Q = p.buf("P", N), p.buf("F", N), p.buf("T", N), p.buf("Q", N, "int8")
    Ix, J = p.buf("I", N, "int32"), p.buf("J", N, "int32")
    i = Var("i")
    stores = [
        BufferStore(P, op.pow(op.abs(A[i]), B[i]), (i,)),
        BufferStore(F, op.fmod(A[i], B[i]), (i,)),
        BufferStore(T, op.atan2(A[i], B[i]), (i,)),
        BufferStore(Q, Cast("int8", op.isnan(A[i])) * op.const(1, "int8") + Cast(
            "int8", op.isinf(A[i])) * op.const(2, "int8") + Cast("int8", op.isfinite(A[i])) *
            op.const(4, "int8"), (i,)),
        BufferStore(J, op.abs(Ix[i]), (i,)),
    ]  # fmt: skip
    kernel = build(p.func(loop(i, N, SeqStmt(stores)), "binary_intrin"))
    a, b = rand(N), rand(N, seed=1, low=0.5, high=2)
    a[:3] = [np.nan, np.inf, -np.inf]
    ints = np.random.default_rng(2).integers(-50, 50, N).astype("int32")
    out = [np.zeros(N, "float32") for _ in range(3)] + [np.zeros(N, "int8"), np.zeros(N, "int32")]
    kernel(a, b, *out[:4], ints, out[4])
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(out[0][3:], np.abs(a[3:]) ** b[3:], rtol=1e-5)
        np.testing.assert_allclose(out[1][3:], np.fmod(a[3:], b[3:]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[2][3:], np.arctan2(a[3:], b[3:]), rtol=1e-5)
    expected_q = np.isnan(a) * 1 + np.isinf(a) * 2 + np.isfinite(a) * 4
    np.testing.assert_array_equal(out[3], expected_q.astype("int8"))
    np.testing.assert_array_equal(out[4], np.abs(ints))


def test_let_expression_and_nested_select():
    p = Params()
    A, C = p.buf("A", N), p.buf("C", N)
    i, x = Var("i"), Var("x", "float32")
    body = Let(
        x,
        A[i] * f32(2.0),
        op.select(x > f32(1.0), x - f32(1.0), op.select(x < f32(-1.0), x + f32(1.0), f32(0.0))),
    )
    kernel = build(p.func(loop(i, N, BufferStore(C, body, (i,))), "let_select"))
    a, c = rand(N), np.zeros(N, "float32")
    kernel(a, c)
    x2 = a * 2
    np.testing.assert_allclose(c, np.where(x2 > 1, x2 - 1, np.where(x2 < -1, x2 + 1, 0)), rtol=1e-6)

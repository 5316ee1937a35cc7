"""Building expressions: constants, type promotion, light constant folding, math intrinsics.

These are what Python operators on expressions call. They fold what is trivially constant
(`2 + 3`, `x + 0`, `x * 1`) so generated IR stays readable; deeper simplification lives in
`schedlab.arith`.
"""

from __future__ import annotations

import math
import operator

from . import expr as E
from .dtype import DataType, bool_, float32, int32, int64
from .intrin import INTRINSICS


# ---------------------------------------------------------------------------------------------
# constants and conversion
# ---------------------------------------------------------------------------------------------
def const(value, dtype=None) -> E.PrimExpr:
    """A constant expression; the dtype defaults to int32/float32/bool from the Python type."""
    if isinstance(value, E.PrimExpr):
        return value if dtype is None else cast(value, dtype)
    if dtype is None:
        if isinstance(value, bool):
            dtype = bool_
        elif isinstance(value, int):
            dtype = int32 if -(2**31) <= value < 2**31 else int64
        elif isinstance(value, float):
            dtype = float32
        else:
            value_type = type(value)
            if hasattr(value, "dtype") and hasattr(value, "item"):  # numpy scalar
                return const(value.item(), DataType(value.dtype))
            raise TypeError(f"const: expected a bool, int or float, got {value_type.__name__}")
    dtype = DataType(dtype)
    if dtype.is_vector:
        return E.Broadcast(const(value, dtype.element_of()), dtype.lanes)
    if dtype.is_float:
        return E.FloatImm(dtype, float(value))
    if dtype.is_bool:
        return E.IntImm(dtype, 1 if value else 0)
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"const: {value} is not an integer, cannot make a {dtype} constant")
    return E.IntImm(dtype, int(value))


def convert(value) -> E.PrimExpr:
    """Turn a Python number into a constant; pass expressions through."""
    return value if isinstance(value, E.PrimExpr) else const(value)


def _as_expr_like(value, like: E.PrimExpr) -> E.PrimExpr:
    """A Python number converted to the dtype of `like` (float if the number is a float)."""
    if isinstance(value, E.PrimExpr):
        return value
    dtype = like.dtype.element_of()
    if isinstance(value, float) and not dtype.is_float:
        return const(value, float32)
    if isinstance(value, bool) and not dtype.is_bool:
        return const(int(value), dtype)
    return const(value, dtype)


def _rank(dtype: DataType) -> tuple[int, int]:
    kinds = {"bool": 0, "uint": 1, "int": 2, "bfloat": 3, "float": 4}
    return (kinds.get(dtype.kind, 0) >= 3, dtype.bits if dtype.kind != "bool" else 0)


def promote(a, b) -> tuple[E.PrimExpr, E.PrimExpr]:
    """Bring two operands to one dtype (wider type wins, float beats int, scalars broadcast)."""
    if not isinstance(a, E.PrimExpr) and not isinstance(b, E.PrimExpr):
        a, b = convert(a), convert(b)
    elif not isinstance(a, E.PrimExpr):
        a = _as_expr_like(a, b)
    elif not isinstance(b, E.PrimExpr):
        b = _as_expr_like(b, a)
    ta, tb = a.dtype, b.dtype
    if ta.element_of() != tb.element_of():
        target = ta if _rank(ta) >= _rank(tb) else tb
        if ta.kind in ("int", "uint") and tb.kind in ("int", "uint") and ta.bits == tb.bits:
            target = ta if ta.is_int else tb  # int32 with uint32: keep the signed type
        a = cast(a, target.element_of().with_lanes(ta.lanes))
        b = cast(b, target.element_of().with_lanes(tb.lanes))
    if a.dtype.lanes != b.dtype.lanes:
        if a.dtype.lanes == 1:
            a = broadcast(a, b.dtype.lanes)
        elif b.dtype.lanes == 1:
            b = broadcast(b, a.dtype.lanes)
        else:
            raise TypeError(f"cannot combine vectors of {a.dtype} and {b.dtype}")
    return a, b


def cast(value, dtype) -> E.PrimExpr:
    """Convert to `dtype` (vector lanes follow the value)."""
    value = convert(value)
    dtype = DataType(dtype)
    if dtype.lanes == 1 and value.dtype.lanes > 1:
        dtype = dtype.with_lanes(value.dtype.lanes)
    if value.dtype == dtype:
        return value
    if isinstance(value, (E.IntImm, E.FloatImm)):
        if dtype.is_float:
            return E.FloatImm(dtype, float(value.value))
        if dtype.is_bool:
            return E.IntImm(dtype, 1 if value.value else 0)
        if dtype.is_integer:
            number = int(value.value)
            if dtype.min_value() <= number <= dtype.max_value():
                return E.IntImm(dtype, number)
    if isinstance(value, E.Broadcast):
        return E.Broadcast(cast(value.value, dtype.element_of()), value.lanes)
    return E.Cast(dtype, value)


def broadcast(value, lanes: int) -> E.PrimExpr:
    value = convert(value)
    return value if lanes == 1 else E.Broadcast(value, lanes)


# ---------------------------------------------------------------------------------------------
# arithmetic with folding
# ---------------------------------------------------------------------------------------------
def _is_const(value, number=None) -> bool:
    if not isinstance(value, (E.IntImm, E.FloatImm)):
        return False
    return number is None or value.value == number


def _both_const(a, b) -> bool:
    return isinstance(a, (E.IntImm, E.FloatImm)) and isinstance(b, (E.IntImm, E.FloatImm))


def _fold(fn, a, b) -> E.PrimExpr:
    return const(fn(a.value, b.value), a.dtype)


def add(a, b) -> E.PrimExpr:
    a, b = promote(a, b)
    if _both_const(a, b):
        return _fold(operator.add, a, b)
    if _is_const(b, 0):
        return a
    if _is_const(a, 0):
        return b
    return E.Add(a, b)


def sub(a, b) -> E.PrimExpr:
    a, b = promote(a, b)
    if _both_const(a, b):
        return _fold(operator.sub, a, b)
    if _is_const(b, 0):
        return a
    return E.Sub(a, b)


def mul(a, b) -> E.PrimExpr:
    a, b = promote(a, b)
    if _both_const(a, b):
        return _fold(operator.mul, a, b)
    if _is_const(b, 1):
        return a
    if _is_const(a, 1):
        return b
    if not a.dtype.is_float and (_is_const(a, 0) or _is_const(b, 0)):
        return const(0, a.dtype)
    return E.Mul(a, b)


def neg(a) -> E.PrimExpr:
    a = convert(a)
    if _is_const(a):
        return const(-a.value, a.dtype)
    return sub(const(0, a.dtype), a)


def _check_divisor(b) -> None:
    if _is_const(b, 0) and not b.dtype.is_float:
        raise ZeroDivisionError("integer division by the constant zero")


def div(a, b) -> E.PrimExpr:
    """`a / b`: true division for floats, truncated division for integers (as in C and TVM)."""
    a, b = promote(a, b)
    _check_divisor(b)
    if _both_const(a, b):
        if a.dtype.is_float:
            return _fold(operator.truediv, a, b) if b.value != 0 else E.Div(a, b)
        return const(_trunc_div(a.value, b.value), a.dtype)
    if _is_const(b, 1):
        return a
    return E.Div(a, b)


def truncdiv(a, b) -> E.PrimExpr:
    a, b = promote(a, b)
    if a.dtype.is_float:
        raise TypeError(f"truncdiv expects integers, got {a.dtype}")
    return div(a, b)


def truncmod(a, b) -> E.PrimExpr:
    a, b = promote(a, b)
    _check_divisor(b)
    if _both_const(a, b):
        return const(a.value - _trunc_div(a.value, b.value) * b.value, a.dtype)
    if _is_const(b, 1):
        return const(0, a.dtype)
    return E.Mod(a, b)


def floordiv(a, b) -> E.PrimExpr:
    a, b = promote(a, b)
    _check_divisor(b)
    if _both_const(a, b):
        if a.dtype.is_float:
            return const(math.floor(a.value / b.value), a.dtype)
        return const(a.value // b.value, a.dtype)
    if _is_const(b, 1) and not a.dtype.is_float:
        return a
    return E.FloorDiv(a, b)


def floormod(a, b) -> E.PrimExpr:
    a, b = promote(a, b)
    _check_divisor(b)
    if _both_const(a, b) and not a.dtype.is_float:
        return const(a.value % b.value, a.dtype)
    if _is_const(b, 1) and not a.dtype.is_float:
        return const(0, a.dtype)
    return E.FloorMod(a, b)


def _trunc_div(x: int, y: int) -> int:
    quotient = abs(x) // abs(y)
    return quotient if (x >= 0) == (y >= 0) else -quotient


def min(a, b) -> E.PrimExpr:  # noqa: A001 - TVM's name
    a, b = promote(a, b)
    if _both_const(a, b):
        return a if a.value <= b.value else b
    return E.Min(a, b)


def max(a, b) -> E.PrimExpr:  # noqa: A001 - TVM's name
    a, b = promote(a, b)
    if _both_const(a, b):
        return a if a.value >= b.value else b
    return E.Max(a, b)


# ---------------------------------------------------------------------------------------------
# comparison and logic
# ---------------------------------------------------------------------------------------------
def _compare(node_type, fn, a, b) -> E.PrimExpr:
    a, b = promote(a, b)
    if _both_const(a, b):
        return const(bool(fn(a.value, b.value)), bool_)
    return node_type(a, b)


def eq(a, b):
    return _compare(E.EQ, operator.eq, a, b)


def ne(a, b):
    return _compare(E.NE, operator.ne, a, b)


def lt(a, b):
    return _compare(E.LT, operator.lt, a, b)


def le(a, b):
    return _compare(E.LE, operator.le, a, b)


def gt(a, b):
    return _compare(E.GT, operator.gt, a, b)


def ge(a, b):
    return _compare(E.GE, operator.ge, a, b)


def _as_bool(value) -> E.PrimExpr:
    value = convert(value)
    if not value.dtype.is_bool:
        raise TypeError(f"expected a bool expression, got {value!r} of dtype {value.dtype}")
    return value


def logical_and(a, b) -> E.PrimExpr:
    a, b = _as_bool(a), _as_bool(b)
    if _is_const(a):
        return b if a.value else a
    if _is_const(b):
        return a if b.value else b
    return E.And(a, b)


def logical_or(a, b) -> E.PrimExpr:
    a, b = _as_bool(a), _as_bool(b)
    if _is_const(a):
        return a if a.value else b
    if _is_const(b):
        return b if b.value else a
    return E.Or(a, b)


def logical_not(a) -> E.PrimExpr:
    a = _as_bool(a)
    if _is_const(a):
        return const(not a.value, bool_)
    return E.Not(a)


def all(*conditions) -> E.PrimExpr:  # noqa: A001 - TVM's name
    """The conjunction of conditions (True when empty)."""
    result: E.PrimExpr = const(True)
    for condition in conditions:
        result = logical_and(result, condition)
    return result


def any(*conditions) -> E.PrimExpr:  # noqa: A001 - TVM's name
    result: E.PrimExpr = const(False)
    for condition in conditions:
        result = logical_or(result, condition)
    return result


def select(condition, true_value, false_value) -> E.PrimExpr:
    """Eager conditional value: both branches may be evaluated."""
    condition = _as_bool(condition)
    true_value, false_value = promote(true_value, false_value)
    if _is_const(condition):
        return true_value if condition.value else false_value
    return E.Select(condition, true_value, false_value)


def if_then_else(condition, true_value, false_value) -> E.PrimExpr:
    """Lazy conditional value: only the taken branch is evaluated (safe for guarded loads)."""
    condition = _as_bool(condition)
    true_value, false_value = promote(true_value, false_value)
    if _is_const(condition):
        return true_value if condition.value else false_value
    return E.Call(true_value.dtype, "if_then_else", (condition, true_value, false_value))


# ---------------------------------------------------------------------------------------------
# math intrinsics
# ---------------------------------------------------------------------------------------------
def call_intrin(name: str, *args, dtype=None) -> E.PrimExpr:
    """Call a registered intrinsic, converting arguments and checking arity and types."""
    spec = INTRINSICS.get(name)
    if spec is None:
        raise ValueError(f"unknown intrinsic {name!r}; known: {', '.join(sorted(INTRINSICS))}")
    if spec.arity is not None and len(args) != spec.arity:
        raise TypeError(f"{name} takes {spec.arity} argument(s), got {len(args)}")
    converted = [convert(arg) for arg in args]
    if len(converted) == 2:
        converted = list(promote(*converted))
    if spec.float_only:
        converted = [arg if arg.dtype.is_float else cast(arg, float32) for arg in converted]
    result_dtype = DataType(dtype) if dtype is not None else spec.result_dtype(converted)
    return E.Call(result_dtype, name, tuple(converted))


def _unary(name):
    def fn(x):
        return call_intrin(name, x)

    fn.__name__ = name
    fn.__doc__ = f"The `{name}` intrinsic, element-wise."
    return fn


exp = _unary("exp")
exp2 = _unary("exp2")
exp10 = _unary("exp10")
log = _unary("log")
log2 = _unary("log2")
log10 = _unary("log10")
log1p = _unary("log1p")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")  # noqa: A001 - TVM's name
trunc = _unary("trunc")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")
sinh = _unary("sinh")
cosh = _unary("cosh")
isnan = _unary("isnan")
isinf = _unary("isinf")
isfinite = _unary("isfinite")


def abs(x) -> E.PrimExpr:  # noqa: A001 - TVM's name
    x = convert(x)
    if x.dtype.is_uint or x.dtype.is_bool:
        return x
    if _is_const(x):
        return const(-x.value if x.value < 0 else x.value, x.dtype)
    return call_intrin("abs", x)


def pow(x, y) -> E.PrimExpr:  # noqa: A001 - TVM's name
    return call_intrin("pow", x, y)


def fmod(x, y) -> E.PrimExpr:
    return call_intrin("fmod", x, y)


def atan2(y, x) -> E.PrimExpr:
    return call_intrin("atan2", y, x)


def likely(condition) -> E.PrimExpr:
    """Marks a condition as usually true (a hint for code generators)."""
    return call_intrin("likely", _as_bool(condition))


def ceildiv(a, b) -> E.PrimExpr:
    """`ceil(a / b)` for non-negative integers."""
    return floordiv(add(a, sub(b, 1)), b)

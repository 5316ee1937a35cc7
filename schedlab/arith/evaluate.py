"""Evaluate an expression on concrete values with exact TIR semantics.

Integers wrap around to their dtype's width, `Div`/`Mod` truncate toward zero (C), `FloorDiv`/
`FloorMod` round toward negative infinity, comparisons give Python bools, floats are rounded to
their dtype's precision after every operation. Used by property tests and constant folding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from schedlab.ir import expr as E
from schedlab.ir.dtype import DataType


class EvaluationError(ValueError):
    """The expression cannot be evaluated (free variable, unknown intrinsic, ...)."""


def wrap_int(value: int, dtype: DataType) -> int:
    """`value` wrapped around to the width of the integer `dtype` (two's complement)."""
    if dtype.is_bool:
        return 1 if value else 0
    bits = dtype.bits
    if dtype.is_uint:
        return value % (1 << bits)
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half


def round_float(value: float, dtype: DataType) -> float:
    """`value` rounded to the precision of the float `dtype`."""
    if dtype.bits == 64:
        return float(value)
    with np.errstate(over="ignore", invalid="ignore"):
        return float(dtype.element_of().numpy.type(value))


def to_dtype(value, dtype: DataType):
    """Coerce a Python number to the value domain of a scalar `dtype`."""
    if dtype.is_bool:
        return bool(value)
    if dtype.is_float:
        return round_float(float(value), dtype)
    if dtype.is_integer:
        if isinstance(value, float):
            if math.isnan(value) or math.isinf(value):
                return wrap_int(0, dtype)  # undefined in C; pick something deterministic
            value = math.trunc(value)
        return wrap_int(int(value), dtype)
    return value


def trunc_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def trunc_mod(a: int, b: int) -> int:
    return a - trunc_div(a, b) * b


def _float_div(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _int_divmod(op: str, a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError(f"integer {op} by zero")
    if op == "Div":
        return trunc_div(a, b)
    if op == "Mod":
        return trunc_mod(a, b)
    if op == "FloorDiv":
        return a // b
    return a % b


def _float_binary(op: str, a: float, b: float) -> float:
    if op == "Add":
        return a + b
    if op == "Sub":
        return a - b
    if op == "Mul":
        return a * b
    if op in ("Div", "FloorDiv"):
        q = _float_div(a, b)
        return q if op == "Div" or math.isinf(q) or math.isnan(q) else float(math.floor(q))
    if op in ("Mod", "FloorMod"):
        if b == 0:
            return math.nan
        return math.fmod(a, b) if op == "Mod" else a - math.floor(a / b) * b
    if op == "Min":
        return b if (b < a or math.isnan(b)) else a
    return b if (b > a or math.isnan(b)) else a


def _int_binary(op: str, a: int, b: int) -> int:
    if op == "Add":
        return a + b
    if op == "Sub":
        return a - b
    if op == "Mul":
        return a * b
    if op == "Min":
        return min(a, b)
    if op == "Max":
        return max(a, b)
    return _int_divmod(op, a, b)


def _unary_math(name: str, x: float) -> float:
    table = {
        "exp": math.exp, "exp2": lambda v: 2.0**v, "exp10": lambda v: 10.0**v,
        "log": math.log, "log2": math.log2, "log10": math.log10, "log1p": math.log1p,
        "sqrt": math.sqrt, "rsqrt": lambda v: 1.0 / math.sqrt(v), "tanh": math.tanh,
        "sigmoid": lambda v: 1.0 / (1.0 + math.exp(-v)), "erf": math.erf,
        "floor": math.floor, "ceil": math.ceil, "round": lambda v: float(np.round(v)),
        "trunc": math.trunc, "sin": math.sin, "cos": math.cos, "tan": math.tan,
        "asin": math.asin, "acos": math.acos, "atan": math.atan, "sinh": math.sinh,
        "cosh": math.cosh,
    }  # fmt: skip
    try:
        return float(table[name](x))
    except OverflowError:
        return math.inf
    except (ValueError, ZeroDivisionError):
        return math.nan


_MATH_BINARY = {
    "pow": lambda a, b: float(np.power(np.float64(a), np.float64(b))),
    "fmod": lambda a, b: math.fmod(a, b) if b != 0 else math.nan,
    "atan2": math.atan2,
}


class _Evaluator:
    def __init__(self, env: Mapping):
        self.values: dict[int, object] = {id(k): v for k, v in env.items()}

    def run(self, node):
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            for klass in type(node).__mro__[1:]:
                method = getattr(self, "eval_" + klass.__name__, None)
                if method is not None:
                    break
        if method is None:
            raise EvaluationError(f"evaluate: cannot evaluate a {type(node).__name__} node")
        return method(node)

    def eval_Var(self, node: E.Var):
        if id(node) not in self.values:
            raise EvaluationError(f"evaluate: variable {node.name} has no value in env")
        return to_dtype(self.values[id(node)], node.dtype)

    def eval_IntImm(self, node: E.IntImm):
        return bool(node.value) if node.dtype.is_bool else node.value

    def eval_FloatImm(self, node: E.FloatImm):
        return node.value

    def eval_BinaryOp(self, node: E.BinaryOp):
        a, b = self.run(node.a), self.run(node.b)
        if node.dtype.lanes > 1 or isinstance(a, tuple) or isinstance(b, tuple):
            return self._lanes(node, a, b, self._scalar_binary)
        return self._scalar_binary(node, a, b)

    def _scalar_binary(self, node, a, b):
        op = type(node).__name__
        dtype = node.dtype.element_of()
        if dtype.is_float:
            return round_float(_float_binary(op, float(a), float(b)), dtype)
        if dtype.is_bool and op in ("Min", "Max"):
            return bool(_int_binary(op, int(a), int(b)))
        return to_dtype(_int_binary(op, int(a), int(b)), dtype)

    def _lanes(self, node, a, b, fn):
        lanes = node.a.dtype.lanes
        a = a if isinstance(a, tuple) else (a,) * lanes
        b = b if isinstance(b, tuple) else (b,) * lanes
        return tuple(fn(node, x, y) for x, y in zip(a, b))

    def eval_CmpOp(self, node: E.CmpOp):
        a, b = self.run(node.a), self.run(node.b)
        if isinstance(a, tuple) or isinstance(b, tuple):
            return self._lanes(node, a, b, self._scalar_cmp)
        return self._scalar_cmp(node, a, b)

    @staticmethod
    def _scalar_cmp(node, a, b) -> bool:
        return {
            "EQ": a == b, "NE": a != b, "LT": a < b, "LE": a <= b, "GT": a > b, "GE": a >= b,
        }[type(node).__name__]  # fmt: skip

    def eval_And(self, node: E.And):
        return bool(self.run(node.a)) and bool(self.run(node.b))

    def eval_Or(self, node: E.Or):
        return bool(self.run(node.a)) or bool(self.run(node.b))

    def eval_Not(self, node: E.Not):
        value = self.run(node.a)
        return tuple(not v for v in value) if isinstance(value, tuple) else not value

    def eval_Select(self, node: E.Select):
        # Both branches may be evaluated in TIR; evaluating only the taken one gives the same
        # value and keeps a guarded division from raising here.
        return self.run(node.true_value if self.run(node.condition) else node.false_value)

    def eval_Cast(self, node: E.Cast):
        value = self.run(node.value)
        if isinstance(value, tuple):
            return tuple(to_dtype(v, node.dtype.element_of()) for v in value)
        return to_dtype(value, node.dtype)

    def eval_Let(self, node: E.Let):
        self.values[id(node.var)] = self.run(node.value)
        return self.run(node.body)

    def eval_Ramp(self, node: E.Ramp):
        base, stride = self.run(node.base), self.run(node.stride)
        dtype = node.dtype.element_of()
        return tuple(to_dtype(base + i * stride, dtype) for i in range(node.lanes))

    def eval_Broadcast(self, node: E.Broadcast):
        return (self.run(node.value),) * node.lanes

    def eval_BufferLoad(self, node: E.BufferLoad):
        array = self.values.get(id(node.buffer))
        if array is None:
            raise EvaluationError(f"evaluate: buffer {node.buffer.name} has no array in env")
        index = tuple(int(self.run(i)) for i in node.indices)
        return to_dtype(np.asarray(array)[index].item(), node.dtype)

    def eval_Call(self, node: E.Call):
        name = node.op
        if name == "if_then_else":
            cond, then, other = node.args
            return self.run(then if self.run(cond) else other)
        args = [self.run(a) for a in node.args]
        if name == "likely":
            return bool(args[0])
        if name == "abs":
            return to_dtype(abs(args[0]), node.dtype)
        if name in ("isnan", "isinf", "isfinite"):
            return getattr(math, name)(float(args[0]))
        if name in _MATH_BINARY:
            a, b = float(args[0]), float(args[1])
            try:
                return round_float(_MATH_BINARY[name](a, b), node.dtype)
            except (ValueError, OverflowError, ZeroDivisionError):
                return math.nan
        if len(args) == 1:
            return round_float(_unary_math(name, float(args[0])), node.dtype)
        raise EvaluationError(f"evaluate: no Python semantics for the intrinsic {name!r}")

    def eval_StringImm(self, node: E.StringImm):
        return node.value


def evaluate(expr: E.PrimExpr, env: Mapping | None = None):
    """The value of `expr` when each variable `v` in `env` has the value `env[v]`.

    `env` may also map Buffers to numpy arrays (for BufferLoad). Scalars give Python bool, int or
    float; vectors (Ramp/Broadcast) give tuples. Raises `EvaluationError` for a free variable and
    `ZeroDivisionError` for an integer division by zero.
    """
    if not isinstance(expr, E.PrimExpr):
        raise TypeError(f"evaluate: expr must be a PrimExpr, got {type(expr).__name__}")
    return _Evaluator(env or {}).run(expr)


__all__ = ["evaluate", "EvaluationError", "wrap_int", "round_float", "to_dtype"]

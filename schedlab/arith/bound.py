"""Constant integer bounds by interval arithmetic (TVM's ConstIntBound).

A `ConstIntBound(min_value, max_value)` holds Python ints, or the sentinels `NEG_INF` / `POS_INF`
for an unknown end. `const_int_bound(expr, var_bounds)` walks the expression tree once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from schedlab.ir import expr as E
from schedlab.ir.dtype import DataType

POS_INF = math.inf
NEG_INF = -math.inf


@dataclass(frozen=True)
class ConstIntBound:
    """The closed interval `[min_value, max_value]` of integers; ends may be +-inf."""

    min_value: int | float
    max_value: int | float

    POS_INF = POS_INF
    NEG_INF = NEG_INF

    @staticmethod
    def everything() -> ConstIntBound:
        return ConstIntBound(NEG_INF, POS_INF)

    @staticmethod
    def point(value: int) -> ConstIntBound:
        return ConstIntBound(value, value)

    @staticmethod
    def of_dtype(dtype: DataType) -> ConstIntBound:
        """All values of an integer/bool dtype (64-bit types use the infinite sentinels)."""
        if dtype.is_bool:
            return ConstIntBound(0, 1)
        if not dtype.is_integer:
            return ConstIntBound.everything()
        if dtype.bits >= 64:
            return ConstIntBound(0 if dtype.is_uint else NEG_INF, POS_INF)
        return ConstIntBound(dtype.min_value(), dtype.max_value())

    @property
    def is_const(self) -> bool:
        return self.min_value == self.max_value and not math.isinf(self.min_value)

    @property
    def is_everything(self) -> bool:
        return self.min_value == NEG_INF and self.max_value == POS_INF

    def intersect(self, other: ConstIntBound) -> ConstIntBound:
        return ConstIntBound(
            max(self.min_value, other.min_value), min(self.max_value, other.max_value)
        )

    def union(self, other: ConstIntBound) -> ConstIntBound:
        return ConstIntBound(
            min(self.min_value, other.min_value), max(self.max_value, other.max_value)
        )

    def contains(self, value: int) -> bool:
        return self.min_value <= value <= self.max_value

    def __add__(self, other: ConstIntBound) -> ConstIntBound:
        return ConstIntBound(
            _add(self.min_value, other.min_value), _add(self.max_value, other.max_value)
        )

    def __neg__(self) -> ConstIntBound:
        return ConstIntBound(-self.max_value, -self.min_value)

    def __sub__(self, other: ConstIntBound) -> ConstIntBound:
        return self + (-other)

    def __mul__(self, other: ConstIntBound) -> ConstIntBound:
        return _corners(self, other, _mul)

    def scale(self, factor: int) -> ConstIntBound:
        return self * ConstIntBound.point(factor)

    def __repr__(self) -> str:
        return f"ConstIntBound(min_value={self.min_value}, max_value={self.max_value})"


def _add(a, b):
    if math.isinf(a) and math.isinf(b) and a != b:
        return NEG_INF if a < 0 else POS_INF  # only meets when ends are unknown anyway
    return a + b


def _mul(a, b):
    if a == 0 or b == 0:
        return 0
    return a * b


def _corners(x: ConstIntBound, y: ConstIntBound, fn) -> ConstIntBound:
    values = [fn(a, b) for a in (x.min_value, x.max_value) for b in (y.min_value, y.max_value)]
    return ConstIntBound(min(values), max(values))


def _floor_div(a, b):
    """floor(a / b) with infinite operands (b != 0)."""
    if math.isinf(b):
        if math.isinf(a):
            return POS_INF if (a > 0) == (b > 0) else NEG_INF
        return 0 if (a >= 0) == (b > 0) or a == 0 else -1
    if math.isinf(a):
        return a if b > 0 else -a
    return a // b


def _trunc_div(a, b):
    if math.isinf(a) or math.isinf(b):
        if math.isinf(a) and not math.isinf(b):
            return a if b > 0 else -a
        if not math.isinf(a):
            return 0
        return POS_INF if (a > 0) == (b > 0) else NEG_INF
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def _nonzero_divisor(b: ConstIntBound) -> ConstIntBound | None:
    """The divisor's bound with zero removed (division by zero is undefined); None when it
    strictly straddles zero."""
    lo, hi = b.min_value, b.max_value
    if lo == 0:
        lo = 1
    if hi == 0:
        hi = -1
    if lo > hi:
        return None
    if lo < 0 < hi:
        return None
    return ConstIntBound(lo, hi)


def bound_floordiv(a: ConstIntBound, b: ConstIntBound) -> ConstIntBound:
    divisor = _nonzero_divisor(b)
    if divisor is None:
        return _straddling_div(a)
    return _corners(a, divisor, _floor_div)


def bound_truncdiv(a: ConstIntBound, b: ConstIntBound) -> ConstIntBound:
    divisor = _nonzero_divisor(b)
    if divisor is None:
        return _straddling_div(a)
    return _corners(a, divisor, _trunc_div)


def _straddling_div(a: ConstIntBound) -> ConstIntBound:
    largest = max(abs(a.min_value), abs(a.max_value))
    return ConstIntBound(-largest, largest)


def bound_floormod(a: ConstIntBound, b: ConstIntBound) -> ConstIntBound:
    divisor = _nonzero_divisor(b)
    if divisor is None:
        largest = max(abs(b.min_value), abs(b.max_value)) - 1
        return ConstIntBound(-largest, largest)
    if divisor.min_value > 0:
        if a.min_value >= 0 and a.max_value < divisor.min_value:
            return a
        upper = divisor.max_value - 1
        if a.min_value >= 0:
            upper = min(upper, a.max_value)
        return ConstIntBound(0, upper)
    return ConstIntBound(divisor.min_value + 1, 0)


def bound_truncmod(a: ConstIntBound, b: ConstIntBound) -> ConstIntBound:
    largest = max(abs(b.min_value), abs(b.max_value)) - 1
    if b.min_value <= 0 <= b.max_value:
        largest = max(largest, 0)
    if a.min_value >= 0:
        return ConstIntBound(0, min(a.max_value, largest))
    if a.max_value <= 0:
        return ConstIntBound(max(a.min_value, -largest), 0)
    return ConstIntBound(max(a.min_value, -largest), min(a.max_value, largest))


VarBounds = Mapping  # Var -> ConstIntBound | Range | int


class _BoundWalker:
    def __init__(self, vars_by_id: dict[int, ConstIntBound], lookup: Callable | None):
        self.vars = vars_by_id
        self.lookup = lookup

    def run(self, node: E.PrimExpr) -> ConstIntBound:
        method = _DISPATCH.get(type(node))
        result = ConstIntBound.of_dtype(node.dtype) if method is None else method(self, node)
        if node.dtype.is_bool:
            result = result.intersect(ConstIntBound(0, 1))
        if self.lookup is not None:
            found = self.lookup(node)
            if found is not None:
                result = result.intersect(found)
        return result

    def var(self, node: E.Var) -> ConstIntBound:
        known = self.vars.get(id(node))
        base = ConstIntBound.of_dtype(node.dtype)
        if isinstance(node, E.SizeVar):
            base = base.intersect(ConstIntBound(0, POS_INF))
        return base if known is None else known.intersect(base)

    def imm(self, node: E.IntImm) -> ConstIntBound:
        return ConstIntBound.point(node.value)

    def binary(self, node) -> ConstIntBound:
        if not (node.dtype.is_integer or node.dtype.is_bool):
            return ConstIntBound.of_dtype(node.dtype)
        a, b = self.run(node.a), self.run(node.b)
        return _BINARY[type(node)](a, b)

    def cmp(self, node) -> ConstIntBound:
        return ConstIntBound(0, 1)

    def select(self, node: E.Select) -> ConstIntBound:
        return self.run(node.true_value).union(self.run(node.false_value))

    def cast(self, node: E.Cast) -> ConstIntBound:
        target = ConstIntBound.of_dtype(node.dtype)
        source = node.value.dtype
        if not (source.is_integer or source.is_bool):
            return target
        value = self.run(node.value)
        if target.min_value <= value.min_value and value.max_value <= target.max_value:
            return value
        return target

    def let(self, node: E.Let) -> ConstIntBound:
        self.vars = {**self.vars, id(node.var): self.run(node.value)}
        return self.run(node.body)

    def call(self, node: E.Call) -> ConstIntBound:
        if node.op == "if_then_else":
            return self.run(node.args[1]).union(self.run(node.args[2]))
        if node.op == "abs" and node.dtype.is_integer:
            inner = self.run(node.args[0])
            high = max(abs(inner.min_value), abs(inner.max_value))
            low = 0 if inner.contains(0) else min(abs(inner.min_value), abs(inner.max_value))
            return ConstIntBound(low, high)
        return ConstIntBound.of_dtype(node.dtype)


_BINARY = {
    E.Add: lambda a, b: a + b,
    E.Sub: lambda a, b: a - b,
    E.Mul: lambda a, b: a * b,
    E.FloorDiv: bound_floordiv,
    E.FloorMod: bound_floormod,
    E.Div: bound_truncdiv,
    E.Mod: bound_truncmod,
    E.Min: lambda a, b: ConstIntBound(min(a.min_value, b.min_value), min(a.max_value, b.max_value)),
    E.Max: lambda a, b: ConstIntBound(max(a.min_value, b.min_value), max(a.max_value, b.max_value)),
    E.And: lambda a, b: ConstIntBound(min(a.min_value, b.min_value), min(a.max_value, b.max_value)),
    E.Or: lambda a, b: ConstIntBound(max(a.min_value, b.min_value), max(a.max_value, b.max_value)),
}

_DISPATCH = {
    E.Var: _BoundWalker.var,
    E.SizeVar: _BoundWalker.var,
    E.IntImm: _BoundWalker.imm,
    E.Select: _BoundWalker.select,
    E.Cast: _BoundWalker.cast,
    E.Let: _BoundWalker.let,
    E.Call: _BoundWalker.call,
    **{op: _BoundWalker.binary for op in _BINARY},
    **{op: _BoundWalker.cmp for op in (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.Not)},
}


def as_const_int_bound(value, var_bounds_by_id: dict | None = None) -> ConstIntBound:
    """A ConstIntBound from a ConstIntBound, an int or a Range (evaluated with the given
    bounds)."""
    if isinstance(value, ConstIntBound):
        return value
    if isinstance(value, int):
        return ConstIntBound.point(value)
    if isinstance(value, E.Range):
        walker = _BoundWalker(var_bounds_by_id or {}, None)
        low, extent = walker.run(value.min), walker.run(value.extent)
        return ConstIntBound(low.min_value, _add(_add(low.max_value, extent.max_value), -1))
    raise TypeError(
        "const_int_bound: a variable's bound must be a ConstIntBound, Range or int, "
        f"got {type(value).__name__}"
    )


def bound_by_id(
    expr: E.PrimExpr, vars_by_id: dict[int, ConstIntBound], lookup: Callable | None = None
) -> ConstIntBound:
    """`const_int_bound` with variable bounds keyed by `id(var)` (the Analyzer's fast path)."""
    return _BoundWalker(vars_by_id, lookup).run(expr)


def const_int_bound(
    expr: E.PrimExpr, var_bounds: VarBounds | None = None, lookup: Callable | None = None
) -> ConstIntBound:
    """Integer bounds of `expr` when each variable lies in `var_bounds[var]` (a ConstIntBound,
    a Range or an int); other variables range over their dtype (SizeVars are >= 0).

    `lookup(node)` may return a known bound of any sub-expression, intersected with the computed
    one (the Analyzer uses it for constraints).
    """
    if not isinstance(expr, E.PrimExpr):
        raise TypeError(f"const_int_bound: expr must be a PrimExpr, got {type(expr).__name__}")
    by_id: dict[int, ConstIntBound] = {}
    for var, value in (var_bounds or {}).items():
        by_id[id(var)] = as_const_int_bound(value, by_id)
    return _BoundWalker(by_id, lookup).run(expr)

"""Symbolic integer intervals and the image of an expression over variable domains
(TVM's IntSet / EvalSet)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from schedlab.ir import expr as E
from schedlab.ir.dtype import bool_
from schedlab.ir.functor import uses_var

from .bound import ConstIntBound
from .linear import Lin, merge_splits, parse_canonical
from .simplify import is_index


@dataclass(frozen=True)
class IntervalSet:
    """The integers in `[min, max]`; the ends are expressions, or None for -inf / +inf."""

    min: E.PrimExpr | None
    max: E.PrimExpr | None

    @staticmethod
    def everything() -> IntervalSet:
        return IntervalSet(None, None)

    @staticmethod
    def point(value: E.PrimExpr) -> IntervalSet:
        return IntervalSet(value, value)

    @staticmethod
    def from_range(rng: E.Range, analyzer=None) -> IntervalSet:
        analyzer = _analyzer(analyzer)
        return IntervalSet(analyzer.simplify(rng.min), analyzer.simplify(rng.min + rng.extent - 1))

    @property
    def is_everything(self) -> bool:
        return self.min is None and self.max is None

    @property
    def is_bounded(self) -> bool:
        return self.min is not None and self.max is not None

    def is_single_point(self) -> bool:
        if not self.is_bounded:
            return False
        from .keys import expr_key

        return expr_key(self.min) == expr_key(self.max)

    def union(self, other: IntervalSet, analyzer=None) -> IntervalSet:
        """The smallest interval holding both."""
        analyzer = _analyzer(analyzer)
        low = None if self.min is None or other.min is None else E.Min(self.min, other.min)
        high = None if self.max is None or other.max is None else E.Max(self.max, other.max)
        return _simplified(low, high, analyzer)

    def intersect(self, other: IntervalSet, analyzer=None) -> IntervalSet:
        analyzer = _analyzer(analyzer)
        low = _pick(self.min, other.min, E.Max)
        high = _pick(self.max, other.max, E.Min)
        return _simplified(low, high, analyzer)

    def to_range(self, analyzer=None) -> E.Range:
        """The Range `[min, max + 1)`; the interval must be bounded."""
        if not self.is_bounded:
            raise ValueError(f"IntervalSet.to_range: the interval {self} is unbounded")
        analyzer = _analyzer(analyzer)
        return E.Range(self.min, analyzer.simplify(self.max - self.min + 1))

    def cover_range(self, limit: E.Range, analyzer=None) -> E.Range:
        """`to_range`, with an unknown end replaced by the end of `limit`."""
        analyzer = _analyzer(analyzer)
        low = self.min if self.min is not None else limit.min
        high = self.max if self.max is not None else limit.min + limit.extent - 1
        return E.Range(analyzer.simplify(low), analyzer.simplify(high - low + 1))

    def __repr__(self) -> str:
        low = "-inf" if self.min is None else repr(self.min)
        high = "+inf" if self.max is None else repr(self.max)
        return f"IntervalSet[{low}, {high}]"


def _pick(a, b, combine):
    if a is None:
        return b
    if b is None:
        return a
    return combine(a, b)


def _simplified(low, high, analyzer) -> IntervalSet:
    return IntervalSet(
        None if low is None else analyzer.simplify(low),
        None if high is None else analyzer.simplify(high),
    )


def _analyzer(analyzer):
    if analyzer is None:
        from .analyzer import Analyzer

        return Analyzer()
    return analyzer


# ---------------------------------------------------------------------------------------------
# evaluation: intervals whose ends are linear forms (None: unbounded)
# ---------------------------------------------------------------------------------------------
class _Interval:
    __slots__ = ("low", "high")

    def __init__(self, low: Lin | None, high: Lin | None):
        self.low, self.high = low, high

    @property
    def is_point(self) -> bool:
        return self.low is self.high and self.low is not None


class _SetEvaluator:
    def __init__(self, dom: dict[int, _Interval], analyzer):
        self.dom = dom
        self.analyzer = analyzer
        self.simp = analyzer._simplifier

    def relaxes(self, expr: E.PrimExpr) -> bool:
        return uses_var(expr, lambda v: id(v) in self.dom)

    def eval(self, expr: E.PrimExpr) -> _Interval:
        if isinstance(expr, E.Ramp):
            base = self.eval(expr.base)
            lanes = E.IntImm(expr.base.dtype, expr.lanes - 1)
            steps = self.eval(E.Mul(expr.stride, lanes))
            return self.add(base, self.hull(steps, _point(Lin(expr.base.dtype))))
        if isinstance(expr, E.Broadcast):
            return self.eval(expr.value)
        if not is_index(expr):
            raise TypeError(f"eval_set: expected an integer expression, got {expr!r}")
        lin = merge_splits(self.simp.lin(expr))
        result = _point(Lin.of_const(lin.const, lin.dtype))
        for atom, coef in lin.terms.values():
            result = self.add(result, self.scale(self.atom(atom), coef))
        return result

    # -- interval arithmetic on linear ends ----------------------------------------------------
    def add(self, a: _Interval, b: _Interval) -> _Interval:
        if a.is_point and b.is_point:
            return _point(a.low.plus(b.low))
        low = None if a.low is None or b.low is None else a.low.plus(b.low)
        high = None if a.high is None or b.high is None else a.high.plus(b.high)
        return _Interval(low, high)

    def scale(self, a: _Interval, coef: int) -> _Interval:
        if a.is_point:
            return _point(a.low.scaled(coef))
        low = None if a.low is None else a.low.scaled(coef)
        high = None if a.high is None else a.high.scaled(coef)
        return _Interval(low, high) if coef >= 0 else _Interval(high, low)

    def hull(self, a: _Interval, b: _Interval) -> _Interval:
        return _Interval(self.lin_min(a.low, b.low), self.lin_max(a.high, b.high))

    def lin_min(self, a: Lin | None, b: Lin | None) -> Lin | None:
        if a is None or b is None:
            return None
        diff = self.simp.bound(merge_splits(a.plus(b, -1)))
        if diff.max_value <= 0:
            return a
        if diff.min_value >= 0:
            return b
        return parse_canonical(self.simp.simplify(E.Min(self.simp.canon(a), self.simp.canon(b))))

    def lin_max(self, a: Lin | None, b: Lin | None) -> Lin | None:
        if a is None or b is None:
            return None
        diff = self.simp.bound(merge_splits(a.plus(b, -1)))
        if diff.min_value >= 0:
            return a
        if diff.max_value <= 0:
            return b
        return parse_canonical(self.simp.simplify(E.Max(self.simp.canon(a), self.simp.canon(b))))

    # -- atoms -------------------------------------------------------------------------------
    def atom(self, atom: E.PrimExpr) -> _Interval:
        if isinstance(atom, E.Var) and id(atom) in self.dom:
            return self.dom[id(atom)]
        if not self.relaxes(atom):
            return _point(Lin.of_atom(atom))
        method = getattr(self, "atom_" + type(atom).__name__, None)
        result = method(atom) if method is not None else None
        return result if result is not None else self.by_bound(atom)

    def by_bound(self, atom: E.PrimExpr) -> _Interval:
        """Constant bounds of the atom with the relaxed variables ranging over their domains."""
        bound = self.analyzer.const_int_bound(atom)
        limits = ConstIntBound.of_dtype(atom.dtype)  # the dtype's own limits say nothing
        lo, hi = bound.min_value, bound.max_value
        low = None if math.isinf(lo) or lo <= limits.min_value else Lin.of_const(lo, atom.dtype)
        high = None if math.isinf(hi) or hi >= limits.max_value else Lin.of_const(hi, atom.dtype)
        return _Interval(low, high)

    def atom_Mul(self, atom: E.Mul) -> _Interval | None:
        a, b = self.eval(atom.a), self.eval(atom.b)
        if b.is_point and not a.is_point:
            a, b = b, a
        if not a.is_point:
            return None
        sign = self.simp.bound(a.low)
        factor = a.low
        low = None if b.low is None else self.simp.multiply(b.low, factor)
        high = None if b.high is None else self.simp.multiply(b.high, factor)
        if sign.min_value >= 0:
            return _Interval(low, high)
        if sign.max_value <= 0:
            return _Interval(high, low)
        return None

    def atom_FloorDiv(self, atom: E.FloorDiv) -> _Interval | None:
        if not isinstance(atom.b, E.IntImm) or atom.b.value == 0:
            return None
        inner = self.eval(atom.a)
        c = Lin.of_const(atom.b.value, atom.dtype)
        low = None if inner.low is None else self.simp.floordiv(inner.low, c)
        high = None if inner.high is None else self.simp.floordiv(inner.high, c)
        return _Interval(low, high) if atom.b.value > 0 else _Interval(high, low)

    def atom_FloorMod(self, atom: E.FloorMod) -> _Interval | None:
        if not isinstance(atom.b, E.IntImm) or atom.b.value <= 0:
            return None
        c = atom.b.value
        inner = self.eval(atom.a)
        full = _Interval(Lin.of_const(0, atom.dtype), Lin.of_const(c - 1, atom.dtype))
        if inner.low is None or inner.high is None:
            return full
        divisor = Lin.of_const(c, atom.dtype)
        same = merge_splits(
            self.simp.floordiv(inner.high, divisor).plus(self.simp.floordiv(inner.low, divisor), -1)
        )
        if same.is_const and same.const == 0:
            return _Interval(
                self.simp.floormod(inner.low, divisor), self.simp.floormod(inner.high, divisor)
            )
        return full

    def atom_Min(self, atom: E.Min) -> _Interval:
        a, b = self.eval(atom.a), self.eval(atom.b)
        low = self.lin_min(a.low, b.low)
        high = _one_side(a.high, b.high, self.lin_min)
        return _Interval(low, high)

    def atom_Max(self, atom: E.Max) -> _Interval:
        a, b = self.eval(atom.a), self.eval(atom.b)
        low = _one_side(a.low, b.low, self.lin_max)
        high = self.lin_max(a.high, b.high)
        return _Interval(low, high)

    def atom_Select(self, atom: E.Select) -> _Interval:
        return self.hull(self.eval(atom.true_value), self.eval(atom.false_value))

    def atom_Call(self, atom: E.Call) -> _Interval | None:
        if atom.op == "if_then_else":
            return self.hull(self.eval(atom.args[1]), self.eval(atom.args[2]))
        return None


def _one_side(a, b, combine):
    """min(a, b) where an unknown end (None = +inf for a max end) is absorbed."""
    if a is None:
        return b
    if b is None:
        return a
    return combine(a, b)


def _point(lin: Lin) -> _Interval:
    return _Interval(lin, lin)


def eval_set(expr: E.PrimExpr, dom_map: Mapping, analyzer=None) -> IntervalSet:
    """The interval of values `expr` takes when each variable `v` of `dom_map` ranges over
    `dom_map[v]` (a Range or an IntervalSet); other variables stay symbolic.

    >>> from schedlab import tir
    >>> i, j = tir.Var("i"), tir.Var("j")
    >>> eval_set(i * 4 + j, {j: tir.Range(0, 4)})
    IntervalSet[i * 4, i * 4 + 3]
    """
    from .analyzer import Analyzer

    analyzer = analyzer if analyzer is not None else Analyzer()
    simp = analyzer._simplifier
    dom: dict[int, _Interval] = {}
    for var, value in dom_map.items():
        if not isinstance(var, E.Var):
            raise TypeError(f"eval_set: dom_map keys must be Vars, got {var!r}")
        dom[id(var)] = _domain_interval(value, simp)
    with analyzer.constraint_scope(E.IntImm(bool_, 1)):
        for var, value in dom_map.items():
            if isinstance(value, E.Range):
                analyzer.bind(var, value, allow_override=True)
        result = _SetEvaluator(dom, analyzer).eval(expr)
        low = None if result.low is None else simp.canon(result.low)
        high = None if result.high is None else simp.canon(result.high)
    return IntervalSet(low, high)


def _domain_interval(value, simp) -> _Interval:
    if isinstance(value, E.Range):
        low = merge_splits(simp.lin(value.min))
        high = merge_splits(low.plus(simp.lin(value.extent)).plus(Lin.of_const(1, low.dtype), -1))
        return _Interval(low, high)
    if isinstance(value, IntervalSet):
        low = None if value.min is None else simp.lin(value.min)
        high = None if value.max is None else simp.lin(value.max)
        return _Interval(low, high)
    raise TypeError(f"eval_set: domains must be Range or IntervalSet, got {type(value).__name__}")


__all__ = ["IntervalSet", "eval_set"]

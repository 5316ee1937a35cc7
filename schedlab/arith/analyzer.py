"""The Analyzer: facts about variables (ranges, bounds, bindings, assumed conditions) and the
analyses that use them (simplify, bounds, integer sets, proofs)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from schedlab.ir import expr as E
from schedlab.ir.op import convert

from .bound import ConstIntBound, as_const_int_bound, bound_by_id
from .keys import expr_key
from .linear import Lin, merge_splits
from .simplify import Simplifier, is_index


class Analyzer:
    """Holds what is known about variables and answers questions under those facts.

    >>> from schedlab import tir
    >>> i, j = tir.Var("i"), tir.Var("j")
    >>> ana = Analyzer()
    >>> ana.bind(j, tir.Range(0, 4))
    >>> ana.simplify((i * 4 + j) // 4)
    i
    """

    def __init__(self):
        self._bounds: dict[int, ConstIntBound] = {}
        self._ranges: dict[int, E.Range] = {}
        self._subst: dict[int, E.PrimExpr] = {}
        self._atom_bounds: dict[tuple, ConstIntBound] = {}
        self._lin_bounds: dict[frozenset, ConstIntBound] = {}
        self._facts: set[tuple] = set()
        self._alive: dict[int, E.Var] = {}  # keeps keyed vars alive, so ids stay unique
        self._simplifier = Simplifier(self)

    # -- facts ---------------------------------------------------------------------------------
    def bind(self, var: E.Var, value, allow_override: bool = False) -> None:
        """Declare `var` ranges over a Range, or equals an expression (then simplification
        substitutes it)."""
        _check_var(var, "bind")
        self._alive[id(var)] = var
        if isinstance(value, E.Range):
            self._ranges[id(var)] = value
            self.update(var, as_const_int_bound(value, self._bounds), allow_override)
            if not (isinstance(value.min, E.IntImm) and isinstance(value.extent, E.IntImm)):
                # symbolic ends: remember `min <= var < min + extent` as relations
                self._assume(E.And(E.GE(var, value.min), E.LT(var, value.min + value.extent)))
            return
        if isinstance(value, (int, E.PrimExpr)):
            value = self.simplify(convert(value))
            self._subst[id(var)] = value
            self.update(var, self.const_int_bound(value), allow_override)
            return
        raise TypeError(f"Analyzer.bind: value must be a Range or PrimExpr, got {value!r}")

    def update(self, var: E.Var, bound: ConstIntBound, allow_override: bool = False) -> None:
        """Record `var`'s integer bound (intersected with what is known unless overriding)."""
        _check_var(var, "update")
        self._alive[id(var)] = var
        bound = as_const_int_bound(bound, self._bounds)
        old = self._bounds.get(id(var))
        self._bounds[id(var)] = bound if old is None or allow_override else old.intersect(bound)

    def var_range(self, var: E.Var) -> E.Range | None:
        """The Range `var` was bound to, if any."""
        return self._ranges.get(id(var))

    def var_bound(self, var: E.Var) -> ConstIntBound | None:
        """The known bound of `var` (None when nothing is known)."""
        return self._bounds.get(id(var))

    def substitution(self, var: E.Var) -> E.PrimExpr | None:
        return self._subst.get(id(var))

    @contextlib.contextmanager
    def constraint_scope(self, condition) -> Iterator[None]:
        """Assume `condition` (e.g. a block predicate) inside the `with` body."""
        saved = self._save()
        try:
            self._assume(convert(condition))
            yield
        finally:
            self._restore(saved)

    @contextlib.contextmanager
    def let_scope(self, var: E.Var, value: E.PrimExpr) -> Iterator[None]:
        """Know `var`'s bound (that of `value`) inside the `with` body."""
        saved = self._save()
        try:
            if is_index(value):
                self.update(var, self.const_int_bound(value), allow_override=True)
            yield
        finally:
            self._restore(saved)

    def _save(self):
        return (
            dict(self._bounds),
            dict(self._ranges),
            dict(self._subst),
            dict(self._atom_bounds),
            dict(self._lin_bounds),
            set(self._facts),
        )

    def _restore(self, saved) -> None:
        (
            self._bounds,
            self._ranges,
            self._subst,
            self._atom_bounds,
            self._lin_bounds,
            self._facts,
        ) = saved

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """Facts added inside the `with` body (bind, update, constraints) are dropped after."""
        saved = self._save()
        try:
            yield
        finally:
            self._restore(saved)

    def _assume(self, condition: E.PrimExpr) -> None:
        condition = self.simplify(condition)
        for part in _conjuncts(condition):
            self._facts.add(expr_key(part))
            if isinstance(part, E.Not):
                self._facts.add(("not", expr_key(part.a)))
            if isinstance(part, E.CmpOp) and is_index(part.a):
                self._assume_compare(part)

    def _assume_compare(self, cmp: E.CmpOp) -> None:
        diff = merge_splits(self._simplifier.lin(cmp.a).plus(self._simplifier.lin(cmp.b), -1))
        c = diff.const
        bound = {
            E.LT: ConstIntBound(-float("inf"), -c - 1),
            E.LE: ConstIntBound(-float("inf"), -c),
            E.GT: ConstIntBound(-c + 1, float("inf")),
            E.GE: ConstIntBound(-c, float("inf")),
            E.EQ: ConstIntBound(-c, -c),
        }.get(type(cmp))
        if bound is None or diff.is_const:
            return
        terms = Lin(diff.dtype, dict(diff.terms), 0)
        g = terms.coef_gcd()
        unit = Lin(diff.dtype, {k: (a, cf // g) for k, (a, cf) in terms.terms.items()}, 0)
        unit_bound = _divide_bound(bound, g)
        self._record(unit, unit_bound)
        self._record(unit.scaled(-1), -unit_bound)

    def _record(self, unit: Lin, bound: ConstIntBound) -> None:
        single = unit.single()
        if single is not None and single[1] == 1:
            atom = single[0]
            key = expr_key(atom)
            old = self._atom_bounds.get(key)
            self._atom_bounds[key] = bound if old is None else old.intersect(bound)
            if isinstance(atom, E.Var):
                self._alive[id(atom)] = atom
                old = self._bounds.get(id(atom))
                self._bounds[id(atom)] = bound if old is None else old.intersect(bound)
            return
        key = unit.terms_key()
        old = self._lin_bounds.get(key)
        self._lin_bounds[key] = bound if old is None else old.intersect(bound)

    # -- queries used by the simplifier ----------------------------------------------------------
    def atom_bound(self, atom: E.PrimExpr) -> ConstIntBound:
        lookup = self._lookup if self._atom_bounds else None
        return bound_by_id(atom, self._bounds, lookup)

    def _lookup(self, node: E.PrimExpr) -> ConstIntBound | None:
        return self._atom_bounds.get(expr_key(node))

    def lin_constraint(self, lin: Lin) -> ConstIntBound | None:
        """A bound on `lin` implied by an assumed constraint on the same terms."""
        if not self._lin_bounds or len(lin.terms) < 2:
            return None
        g = lin.coef_gcd()
        unit = frozenset((key, coef // g) for key, (_, coef) in lin.terms.items())
        found = self._lin_bounds.get(unit)
        if found is None:
            return None
        return found.scale(g) + ConstIntBound.point(lin.const)

    def known_fact(self, expr: E.PrimExpr) -> E.PrimExpr | None:
        """True/False when `expr` (or its negation) is an assumed condition."""
        if not self._facts:
            return None
        key = expr_key(expr)
        if key in self._facts:
            return E.IntImm(expr.dtype, 1)
        if ("not", key) in self._facts:
            return E.IntImm(expr.dtype, 0)
        return None

    # -- public analyses -----------------------------------------------------------------------
    def simplify(self, expr, steps: int = 2) -> E.PrimExpr:
        """The canonical simplified form of `expr` under the known facts."""
        expr = convert(expr)
        for _ in range(max(1, steps)):
            result = self._simplifier.simplify(expr)
            if result is expr or expr_key(result) == expr_key(expr):
                break  # unchanged: keep the original node (callers share untouched subtrees)
            expr = result
        return expr

    def canonical_simplify(self, expr) -> E.PrimExpr:
        return self.simplify(expr)

    def rewrite_simplify(self, expr) -> E.PrimExpr:
        return self.simplify(expr)

    def const_int_bound(self, expr) -> ConstIntBound:
        """Integer bounds of `expr` under the known facts."""
        expr = convert(expr)
        tree = bound_by_id(expr, self._bounds, self._lookup if self._atom_bounds else None)
        if not is_index(expr):
            return tree
        return tree.intersect(self._simplifier.bound(merge_splits(self._simplifier.lin(expr))))

    def int_set(self, expr, dom_map=None):
        """The IntervalSet of `expr` when the variables of `dom_map` range over their Ranges."""
        from .int_set import eval_set

        return eval_set(convert(expr), dom_map or {}, analyzer=self)

    def can_prove(self, condition) -> bool:
        """Whether `condition` holds for every value allowed by the known facts."""
        result = self.simplify(convert(condition))
        return isinstance(result, E.IntImm) and result.value == 1

    def can_prove_equal(self, a, b) -> bool:
        a, b = convert(a), convert(b)
        if is_index(a) and is_index(b):
            diff = self.simplify(a - b)
            return isinstance(diff, E.IntImm) and diff.value == 0
        from schedlab.ir.structural import structural_equal

        return structural_equal(self.simplify(a), self.simplify(b))

    def can_prove_less(self, a, n) -> bool:
        """Whether `a < n` always holds."""
        return self.can_prove(convert(a) < n)

    def can_prove_greater_equal(self, a, n) -> bool:
        return self.can_prove(convert(a) >= n)


def _check_var(var, who: str) -> None:
    if not isinstance(var, E.Var):
        raise TypeError(f"Analyzer.{who}: var must be a Var, got {type(var).__name__} {var!r}")


def _conjuncts(condition: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(condition, E.And):
        return _conjuncts(condition.a) + _conjuncts(condition.b)
    if isinstance(condition, E.Call) and condition.op == "likely":
        return _conjuncts(condition.args[0])
    return [condition]


def _divide_bound(bound: ConstIntBound, g: int) -> ConstIntBound:
    """Bounds of u when g*u lies in `bound` (u integer)."""
    import math

    lo, hi = bound.min_value, bound.max_value
    lo = lo if math.isinf(lo) else -((-lo) // g)
    hi = hi if math.isinf(hi) else hi // g
    return ConstIntBound(lo, hi)

"""Canonical simplification of expressions (TVM's canonical + rewrite simplifiers in one).

Integer scalar expressions go through the linear form (`linear.Lin`): sums of products are
flattened, equal terms merge, constants fold, and floordiv/floormod of affine forms simplify
under known bounds (`divmod_rules`). Everything else is rewritten node by node: constant folding
for every op (floats rounded to their dtype; floats are never reassociated), comparisons and
min/max decided by bounds of the difference, boolean algebra, Select with a provable condition,
Cast of constants. The `Analyzer` supplies variable bounds and assumed constraints.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from schedlab.ir import expr as E
from schedlab.ir.dtype import bool_

from .bound import ConstIntBound
from .divmod_rules import DivModRules
from .evaluate import EvaluationError, evaluate, round_float, to_dtype
from .keys import expr_key
from .linear import Lin, factors, make_int, merge_splits, parse_canonical, product_atom

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer

_METHODS: dict[type, str] = {}
_DISTRIBUTE_LIMIT = 16  # expand (a + b) * (c + d) while the product has at most this many terms
_IMPLICATION_LIMIT = 12  # pairwise implication checks between at most this many operands


def is_index(expr: E.PrimExpr) -> bool:
    """An integer scalar: handled by the linear normal form."""
    dtype = expr.dtype
    return dtype.is_integer and dtype.lanes == 1


def _true() -> E.IntImm:
    return E.IntImm(bool_, 1)


def _false() -> E.IntImm:
    return E.IntImm(bool_, 0)


def _is_true(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.dtype.is_bool and expr.value == 1


def _is_false(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.dtype.is_bool and expr.value == 0


def _const_value(expr):
    return expr.value if isinstance(expr, (E.IntImm, E.FloatImm)) else None


class Simplifier(DivModRules):
    """Rewrites expressions into canonical form under the facts of an `Analyzer`."""

    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer

    # -- entry points -----------------------------------------------------------------------
    def simplify(self, expr: E.PrimExpr) -> E.PrimExpr:
        if is_index(expr):
            return self.canon(self.lin(expr))
        result = self.visit(expr)
        if result.dtype.is_bool and not isinstance(result, E.IntImm):
            known = self.analyzer.known_fact(result)
            if known is not None:
                return known
        return result

    def canon(self, lin: Lin) -> E.PrimExpr:
        return merge_splits(lin).to_expr()

    def visit(self, expr: E.PrimExpr) -> E.PrimExpr:
        name = _METHODS.get(type(expr))
        if name is None:
            name = next(
                (
                    "visit_" + k.__name__
                    for k in type(expr).__mro__
                    if hasattr(Simplifier, "visit_" + k.__name__)
                ),
                "_generic",
            )
            _METHODS[type(expr)] = name
        return getattr(self, name)(expr)

    def _generic(self, expr):
        from schedlab.ir.node import child_fields

        changes = {}
        for name in child_fields(type(expr)):
            value = getattr(expr, name)
            if isinstance(value, E.PrimExpr):
                new = self.simplify(value)
            elif isinstance(value, tuple):
                new = tuple(self.simplify(v) if isinstance(v, E.PrimExpr) else v for v in value)
                new = value if all(a is b for a, b in zip(new, value)) else new
            else:
                continue
            if new is not value:
                changes[name] = new
        return expr.replace(**changes) if changes else expr

    # -- the linear form ----------------------------------------------------------------------
    def lin(self, expr: E.PrimExpr) -> Lin:
        """The linear form of a simplified integer scalar expression."""
        if isinstance(expr, E.IntImm):
            return Lin.of_const(expr.value, expr.dtype)
        if isinstance(expr, E.Var):
            bound = self.analyzer.substitution(expr)
            if bound is not None:
                return parse_canonical(bound)
            known = self.analyzer.var_bound(expr)
            if known is not None and known.is_const:  # a loop of extent 1, an equality
                return Lin.of_const(int(known.min_value), expr.dtype)
            return Lin.of_atom(expr)
        if isinstance(expr, E.Add):
            return self.lin(expr.a).plus(self.lin(expr.b))
        if isinstance(expr, E.Sub):
            return self.lin(expr.a).plus(self.lin(expr.b), -1)
        if isinstance(expr, E.Mul):
            return self.multiply(self.lin(expr.a), self.lin(expr.b))
        if isinstance(expr, E.FloorDiv):
            return self.floordiv(self.lin(expr.a), self.lin(expr.b))
        if isinstance(expr, E.FloorMod):
            return self.floormod(self.lin(expr.a), self.lin(expr.b))
        if isinstance(expr, E.Div):
            return self.truncdiv(self.lin(expr.a), self.lin(expr.b))
        if isinstance(expr, E.Mod):
            return self.truncmod(self.lin(expr.a), self.lin(expr.b))
        if isinstance(expr, (E.Min, E.Max)):
            return parse_canonical(self.min_max(expr))
        return parse_canonical(self.visit(expr))

    def multiply(self, a: Lin, b: Lin) -> Lin:
        if a.is_const:
            return b.scaled(a.const)
        if b.is_const:
            return a.scaled(b.const)
        size = (len(a.terms) + (a.const != 0)) * (len(b.terms) + (b.const != 0))
        if size > _DISTRIBUTE_LIMIT:
            return Lin.of_atom(product_atom([self.canon(a), self.canon(b)]))
        result = a.scaled(b.const).plus(b.scaled(a.const), 1)
        result.const = a.const * b.const
        for atom_a, coef_a in a.terms.values():
            for atom_b, coef_b in b.terms.values():
                result.add_term(product_atom(factors(atom_a) + factors(atom_b)), coef_a * coef_b)
        return result

    def bound(self, lin: Lin) -> ConstIntBound:
        """Bounds of a linear form: per-term interval sums, tightened by assumed constraints on
        the same combination of terms."""
        result = self._term_bound(lin)
        known = self.analyzer.lin_constraint(lin)
        if known is not None:
            result = result.intersect(known)
        expanded = _expand_floordiv(lin)
        if expanded is not None:  # k*c*(x // c) == k*(x - x % c) may cancel against x
            result = result.intersect(self._term_bound(expanded))
        return result

    def _term_bound(self, lin: Lin) -> ConstIntBound:
        result = ConstIntBound.point(lin.const)
        for atom, coef in lin.terms.values():
            result = result + self.analyzer.atom_bound(atom).scale(coef)
        return result

    def prove_nonneg(self, lin: Lin) -> bool:
        return self.bound(lin).min_value >= 0

    def diff_bound(self, a: E.PrimExpr, b: E.PrimExpr) -> ConstIntBound:
        return self.bound(merge_splits(self.lin(a).plus(self.lin(b), -1)))

    # -- min / max --------------------------------------------------------------------------
    def min_max(self, expr: E.Min | E.Max) -> E.PrimExpr:
        a, b = self.simplify(expr.a), self.simplify(expr.b)
        is_min = isinstance(expr, E.Min)
        if not is_index(a):
            return self._float_binary(expr, a, b)
        diff = self.diff_bound(a, b)
        if diff.max_value <= 0:
            return a if is_min else b
        if diff.min_value >= 0:
            return b if is_min else a
        if isinstance(a, E.IntImm):  # constants last: min(x, 4)
            a, b = b, a
        if a is expr.a and b is expr.b:
            return expr
        return (E.Min if is_min else E.Max)(a, b)

    visit_Min = visit_Max = min_max

    # -- floats and vectors --------------------------------------------------------------------
    def _float_binary(self, expr, a, b):
        """Fold constants and trivial identities; never reassociate floating point."""
        ca, cb = _const_value(a), _const_value(b)
        if ca is not None and cb is not None and expr.dtype.lanes == 1:
            try:
                return _fold_constant(type(expr)(a, b))
            except (EvaluationError, ZeroDivisionError):
                return type(expr)(a, b)
        kind = type(expr)
        if kind is E.Mul and cb == 1:
            return a
        if kind is E.Mul and ca == 1:
            return b
        if kind in (E.Add, E.Sub) and cb == 0 and not expr.dtype.is_integer:
            return a
        if kind is E.Div and cb == 1:
            return a
        vector = _vector_rule(kind, a, b)
        if vector is not None:
            return self.simplify(vector)
        if a is expr.a and b is expr.b:
            return expr
        return kind(a, b)

    def _arith(self, expr):
        if is_index(expr):
            return self.canon(self.lin(expr))
        return self._float_binary(expr, self.simplify(expr.a), self.simplify(expr.b))

    visit_Add = visit_Sub = visit_Mul = visit_Div = visit_Mod = _arith
    visit_FloorDiv = visit_FloorMod = _arith

    def visit_Ramp(self, expr: E.Ramp):
        base, stride = self.simplify(expr.base), self.simplify(expr.stride)
        if base is expr.base and stride is expr.stride:
            return expr
        return E.Ramp(base, stride, expr.lanes)

    # -- comparisons and logic -----------------------------------------------------------------
    def visit_CmpOp(self, expr: E.CmpOp):
        a, b = self.simplify(expr.a), self.simplify(expr.b)
        if is_index(a):
            return self._int_compare(type(expr), a, b)
        ca, cb = _const_value(a), _const_value(b)
        if ca is not None and cb is not None:
            return _fold_constant(type(expr)(a, b))
        if a is expr.a and b is expr.b:
            return expr
        return type(expr)(a, b)

    def _int_compare(self, kind, a, b):
        diff = merge_splits(self.lin(a).plus(self.lin(b), -1))
        decided = _decide(kind, self.bound(diff))
        if decided is not None:
            return _true() if decided else _false()
        return self._build_compare(kind, diff)

    def _build_compare(self, kind, diff: Lin) -> E.PrimExpr:
        """`kind(lhs, rhs)` with positive terms on the left, negated negative terms on the
        right, a common factor divided out and the constant on the side that keeps it
        positive."""
        g = math.gcd(diff.coef_gcd(), diff.const)
        if g > 1:
            terms = {k: (a, c // g) for k, (a, c) in diff.terms.items()}
            diff = Lin(diff.dtype, terms, diff.const // g)
        if kind in (E.EQ, E.NE) and diff.const % diff.coef_gcd() != 0:
            return _false() if kind is E.EQ else _true()
        terms = diff.sorted_terms()
        left = Lin(diff.dtype)
        right = Lin(diff.dtype)
        for atom, coef in terms:
            (left if coef > 0 else right).add_term(atom, abs(coef))
        if left.is_const or (diff.const > 0 and not right.is_const):
            left.const = diff.const
        else:
            right.const = -diff.const
        return kind(self.canon(left), self.canon(right))

    def visit_And(self, expr: E.And):
        return self._logic(expr, E.And)

    def visit_Or(self, expr: E.Or):
        return self._logic(expr, E.Or)

    def _logic(self, expr, kind):
        """And/Or chains: simplify each operand once, fold constants, drop duplicates and
        operands implied by (And) or implying (Or) another one: `x < 8 and x < 4` is `x < 4`,
        `x < 4 or x < 8` is `x < 8`, `x < 2 and x > 5` is False."""
        if expr.dtype.lanes > 1:
            return self._generic(expr)
        absorbing = kind is E.Or  # True absorbs an Or, False absorbs an And
        parts: list[E.PrimExpr] = []
        seen: set = set()
        for part in _chain_parts(expr, kind):
            part = self.simplify(part)
            if isinstance(part, E.IntImm):
                if bool(part.value) == absorbing:
                    return part
                continue
            if expr_key(part) not in seen:
                seen.add(expr_key(part))
                parts.append(part)
        if len(parts) <= _IMPLICATION_LIMIT:
            decided = self._prune(parts, kind)
            if decided is not None:
                return decided
        if not parts:
            return _false() if absorbing else _true()
        result = parts[0]
        for part in parts[1:]:
            result = kind(result, part)
        return result

    def _prune(self, parts: list, kind) -> E.PrimExpr | None:
        """Drop redundant operands in place; a constant when the chain is decided."""
        return self._prune_and(parts) if kind is E.And else self._prune_or(parts)

    def _prune_and(self, parts: list) -> E.PrimExpr | None:
        i = 0
        while i < len(parts):
            current = parts[i]
            keep = []
            with self.analyzer.constraint_scope(current):
                for other in parts:
                    if other is current:
                        keep.append(other)
                        continue
                    value = self.simplify(other)
                    if _is_false(value):
                        return _false()  # contradictory conjuncts
                    if not _is_true(value):
                        keep.append(other)  # not implied by `current`
            parts[:] = keep
            i = next(k for k, p in enumerate(parts) if p is current) + 1
        return None

    def _prune_or(self, parts: list) -> E.PrimExpr | None:
        i = 0
        while i < len(parts):
            current = parts[i]
            others = parts[:i] + parts[i + 1 :]
            with self.analyzer.constraint_scope(self.negate(current)):
                if any(_is_true(self.simplify(o)) for o in others):
                    return _true()  # one of the operands always holds
            with self.analyzer.constraint_scope(current):
                implied = any(_is_true(self.simplify(o)) for o in others)
            if implied:
                del parts[i]  # `current` implies a weaker operand that is kept
            else:
                i += 1
        return None

    def visit_Not(self, expr: E.Not):
        a = self.simplify(expr.a)
        if a.dtype.lanes > 1:
            return E.Not(a) if a is not expr.a else expr
        return self.negate(a)

    def negate(self, cond: E.PrimExpr) -> E.PrimExpr:
        """`not cond`, pushed into integer comparisons (floats keep `not`: NaN compares false
        both ways)."""
        if isinstance(cond, E.IntImm):
            return _false() if cond.value else _true()
        if isinstance(cond, E.Not):
            return cond.a
        if isinstance(cond, E.CmpOp) and is_index(cond.a):
            flipped = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT, E.EQ: E.NE, E.NE: E.EQ}
            return self.simplify(flipped[type(cond)](cond.a, cond.b))
        return E.Not(cond)

    def visit_Select(self, expr: E.Select):
        cond = self.simplify(expr.condition)
        if cond.dtype.lanes == 1 and isinstance(cond, E.IntImm):
            return self.simplify(expr.true_value if cond.value else expr.false_value)
        if cond.dtype.lanes > 1:
            return self._generic(expr)
        with self.analyzer.constraint_scope(cond):
            then = self.simplify(expr.true_value)
        with self.analyzer.constraint_scope(self.negate(cond)):
            other = self.simplify(expr.false_value)
        if expr_key(then) == expr_key(other):
            return then
        return E.Select(cond, then, other)

    # -- casts, lets, calls ---------------------------------------------------------------------
    def visit_Cast(self, expr: E.Cast):
        value = self.simplify(expr.value)
        if value.dtype == expr.dtype:
            return value
        if isinstance(value, (E.IntImm, E.FloatImm)):
            return _fold_constant(E.Cast(expr.dtype, value))
        if isinstance(value, E.Broadcast):
            return E.Broadcast(
                self.simplify(E.Cast(expr.dtype.element_of(), value.value)), value.lanes
            )
        return expr if value is expr.value else E.Cast(expr.dtype, value)

    def visit_Let(self, expr: E.Let):
        value = self.simplify(expr.value)
        if isinstance(value, (E.IntImm, E.FloatImm, E.Var)):
            from schedlab.ir.functor import substitute

            return self.simplify(substitute(expr.body, {expr.var: value}))
        with self.analyzer.let_scope(expr.var, value):
            body = self.simplify(expr.body)
        if value is expr.value and body is expr.body:
            return expr
        return E.Let(expr.var, value, body)

    def visit_Call(self, expr: E.Call):
        args = tuple(self.simplify(a) for a in expr.args)
        if expr.op in ("if_then_else",) and isinstance(args[0], E.IntImm):
            return args[1] if args[0].value else args[2]
        if expr.op == "likely" and isinstance(args[0], E.IntImm):
            return args[0]
        if args and all(isinstance(a, (E.IntImm, E.FloatImm)) for a in args):
            folded = _try_fold_call(expr, args)
            if folded is not None:
                return folded
        if all(a is b for a, b in zip(args, expr.args)):
            return expr
        return E.Call(expr.dtype, expr.op, args)

    def visit_Var(self, expr: E.Var):
        bound = self.analyzer.substitution(expr)
        return expr if bound is None else bound


def _expand_floordiv(lin: Lin) -> Lin | None:
    """`lin` with each term `k*c * (x // c)` written as `k*x - k*(x % c)`, when there is one
    and `x` shares a term with the rest (so the rewrite can cancel something)."""
    result = None
    for atom, coef in lin.terms.values():
        if not (isinstance(atom, E.FloorDiv) and isinstance(atom.b, E.IntImm)):
            continue
        c = atom.b.value
        if c <= 0 or coef % c != 0:
            continue
        source = parse_canonical(atom.a)
        if not any(k in lin.terms for k in source.terms):
            continue
        base = result if result is not None else lin
        result = base.copy()
        result.add_term(atom, -coef)
        result = result.plus(source, coef // c)
        result.add_term(E.FloorMod(atom.a, atom.b), -(coef // c))
    return result


def _chain_parts(expr, kind) -> list:
    """The operands of a chain of one logical op (`a and b and c` -> [a, b, c])."""
    if isinstance(expr, kind):
        return _chain_parts(expr.a, kind) + _chain_parts(expr.b, kind)
    return [expr]


def _decide(kind, diff: ConstIntBound) -> bool | None:
    """The truth of `diff <kind> 0` when the bound decides it."""
    lo, hi = diff.min_value, diff.max_value
    if kind is E.LT:
        return True if hi < 0 else False if lo >= 0 else None
    if kind is E.LE:
        return True if hi <= 0 else False if lo > 0 else None
    if kind is E.GT:
        return True if lo > 0 else False if hi <= 0 else None
    if kind is E.GE:
        return True if lo >= 0 else False if hi < 0 else None
    if kind is E.EQ:
        return True if lo == hi == 0 else False if (lo > 0 or hi < 0) else None
    return False if lo == hi == 0 else True if (lo > 0 or hi < 0) else None


def _fold_constant(expr: E.PrimExpr) -> E.PrimExpr:
    """A constant node with the value of a constant-only expression."""
    value = evaluate(expr)
    return _constant(value, expr.dtype)


def _constant(value, dtype) -> E.PrimExpr:
    if dtype.is_bool:
        return _true() if value else _false()
    if dtype.is_float:
        return E.FloatImm(dtype, round_float(float(value), dtype))
    return make_int(to_dtype(value, dtype), dtype)


def _try_fold_call(expr: E.Call, args) -> E.PrimExpr | None:
    from schedlab.ir.intrin import INTRINSICS

    spec = INTRINSICS.get(expr.op)
    if spec is None or not spec.pure or expr.dtype.lanes > 1:
        return None
    try:
        return _constant(evaluate(E.Call(expr.dtype, expr.op, args)), expr.dtype)
    except (EvaluationError, ZeroDivisionError, TypeError, ValueError):
        return None


def _vector_rule(kind, a, b) -> E.PrimExpr | None:
    """Ramp/Broadcast arithmetic: `ramp(b, s) + x` is `ramp(b + x, s)`, and so on."""
    if kind not in (E.Add, E.Sub, E.Mul) or a.dtype.lanes == 1:
        return None
    if isinstance(a, E.Broadcast) and isinstance(b, E.Broadcast):
        return E.Broadcast(kind(a.value, b.value), a.lanes)
    if kind in (E.Add, E.Sub) and isinstance(a, E.Ramp) and isinstance(b, E.Broadcast):
        return E.Ramp(kind(a.base, b.value), a.stride, a.lanes)
    if kind is E.Add and isinstance(a, E.Broadcast) and isinstance(b, E.Ramp):
        return E.Ramp(E.Add(a.value, b.base), b.stride, b.lanes)
    if kind in (E.Add, E.Sub) and isinstance(a, E.Ramp) and isinstance(b, E.Ramp):
        return E.Ramp(kind(a.base, b.base), kind(a.stride, b.stride), a.lanes)
    if kind is E.Mul and isinstance(a, E.Ramp) and isinstance(b, E.Broadcast):
        return E.Ramp(E.Mul(a.base, b.value), E.Mul(a.stride, b.value), a.lanes)
    if kind is E.Mul and isinstance(a, E.Broadcast) and isinstance(b, E.Ramp):
        return E.Ramp(E.Mul(a.value, b.base), E.Mul(a.value, b.stride), b.lanes)
    return None


__all__ = ["Simplifier", "is_index"]

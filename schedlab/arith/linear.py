"""The linear normal form of integer expressions: `sum(coef * atom) + const`.

An atom is a simplified non-linear expression (a variable, a product of variables, a floordiv or
floormod, a min, a load, ...). Terms with equal atoms merge; the printed form sorts terms by
descending coefficient, then by degree, then by first appearance, with the constant last
(`i*16 + j*4 + k + 3`, `vyy + vry`).
Split atoms `x // a % b` that together rebuild a wider split merge back
(`x // 4 * 4 + x % 4` is `x`), which is what undoes a split after a fuse.
"""

from __future__ import annotations

import math

from schedlab.ir import expr as E
from schedlab.ir.dtype import DataType
from schedlab.ir.functor import uses_var

from .evaluate import wrap_int
from .keys import expr_key, order_key


def make_int(value: int, dtype: DataType) -> E.IntImm:
    """An integer constant of `dtype`, wrapped to its width like the hardware would."""
    return E.IntImm(dtype, wrap_int(int(value), dtype))


class Lin:
    """`sum(coef * atom) + const` over one integer dtype; terms keyed by `expr_key(atom)`."""

    __slots__ = ("dtype", "terms", "const")

    def __init__(self, dtype: DataType, terms: dict | None = None, const: int = 0):
        self.dtype = dtype
        self.terms: dict[tuple, tuple[E.PrimExpr, int]] = terms if terms is not None else {}
        self.const = const

    @staticmethod
    def of_atom(atom: E.PrimExpr, coef: int = 1) -> Lin:
        lin = Lin(atom.dtype)
        if coef:
            lin.terms[expr_key(atom)] = (atom, coef)
        return lin

    @staticmethod
    def of_const(value: int, dtype: DataType) -> Lin:
        return Lin(dtype, {}, value)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def copy(self) -> Lin:
        return Lin(self.dtype, dict(self.terms), self.const)

    def add_term(self, atom: E.PrimExpr, coef: int) -> None:
        """Add `coef * atom` in place."""
        key = expr_key(atom)
        old = self.terms.get(key)
        total = coef + (old[1] if old is not None else 0)
        if total:
            self.terms[key] = (old[0] if old is not None else atom, total)
        elif old is not None:
            del self.terms[key]

    def plus(self, other: Lin, scale: int = 1) -> Lin:
        """`self + scale * other` as a new form."""
        result = self.copy()
        for atom, coef in other.terms.values():
            result.add_term(atom, coef * scale)
        result.const += other.const * scale
        return result

    def scaled(self, factor: int) -> Lin:
        if factor == 0:
            return Lin(self.dtype)
        terms = {key: (atom, coef * factor) for key, (atom, coef) in self.terms.items()}
        return Lin(self.dtype, terms, self.const * factor)

    def single(self) -> tuple[E.PrimExpr, int] | None:
        """(atom, coef) when the form is one term and no constant."""
        if len(self.terms) == 1 and self.const == 0:
            return next(iter(self.terms.values()))
        return None

    def coef_gcd(self) -> int:
        """gcd of the term coefficients (0 when constant)."""
        result = 0
        for _, coef in self.terms.values():
            result = math.gcd(result, coef)
        return result

    def terms_key(self) -> frozenset:
        return frozenset((key, coef) for key, (_, coef) in self.terms.items())

    def sorted_terms(self) -> list[tuple[E.PrimExpr, int]]:
        # a stable sort: terms that tie keep their first-appearance order (`vyy + vry` stays)
        return sorted(self.terms.values(), key=_term_order)

    def to_expr(self) -> E.PrimExpr:
        return render(self.sorted_terms(), self.const, self.dtype)

    def __repr__(self) -> str:
        return f"Lin({self.to_expr()!r})"


def _term_order(term) -> tuple:
    atom, coef = term
    return (-abs(coef), -degree(atom))


def factors(atom: E.PrimExpr) -> list[E.PrimExpr]:
    """The factors of a product atom (the atom itself otherwise)."""
    if isinstance(atom, E.Mul) and not isinstance(atom.b, E.IntImm):
        return factors(atom.a) + factors(atom.b)
    return [atom]


def degree(atom: E.PrimExpr) -> int:
    return len(factors(atom))


def product_atom(parts: list[E.PrimExpr]) -> E.PrimExpr:
    """The product atom of several factors, in canonical (name) order."""
    ordered = sorted(parts, key=order_key)
    result = ordered[0]
    for factor in ordered[1:]:
        result = E.Mul(result, factor)
    return result


def _scaled_term(atom: E.PrimExpr, coef: int, dtype: DataType) -> E.PrimExpr:
    return atom if coef == 1 else E.Mul(atom, make_int(coef, dtype))


def render(terms: list[tuple[E.PrimExpr, int]], const: int, dtype: DataType) -> E.PrimExpr:
    """An expression from sorted terms: positive terms first, subtraction for negative ones,
    the constant last (or first when nothing else is positive: `8 - i`)."""
    if not terms:
        return make_int(const, dtype)
    positive = [t for t in terms if t[1] > 0]
    negative = [t for t in terms if t[1] < 0]
    result: E.PrimExpr | None = None
    for atom, coef in positive:
        term = _scaled_term(atom, coef, dtype)
        result = term if result is None else E.Add(result, term)
    if result is None:
        if const > 0:
            result, const = make_int(const, dtype), 0
        else:
            atom, coef = negative.pop(0)
            result = E.Sub(make_int(0, dtype), _scaled_term(atom, -coef, dtype))
    for atom, coef in negative:
        result = E.Sub(result, _scaled_term(atom, -coef, dtype))
    if const > 0:
        result = E.Add(result, make_int(const, dtype))
    elif const < 0:
        result = E.Sub(result, make_int(-const, dtype))
    return result


def parse_canonical(expr: E.PrimExpr) -> Lin:
    """Read an already simplified integer expression back into its linear form."""
    if isinstance(expr, E.IntImm):
        return Lin.of_const(expr.value, expr.dtype)
    if isinstance(expr, E.Add):
        return parse_canonical(expr.a).plus(parse_canonical(expr.b))
    if isinstance(expr, E.Sub):
        return parse_canonical(expr.a).plus(parse_canonical(expr.b), -1)
    if isinstance(expr, E.Mul) and isinstance(expr.b, E.IntImm):
        return parse_canonical(expr.a).scaled(expr.b.value)
    if isinstance(expr, E.Mul) and isinstance(expr.a, E.IntImm):
        return parse_canonical(expr.b).scaled(expr.a.value)
    return Lin.of_atom(expr)


# ---------------------------------------------------------------------------------------------
# splits: x // lower % extent
# ---------------------------------------------------------------------------------------------
def split_parts(atom: E.PrimExpr) -> tuple[E.PrimExpr, int, int | None]:
    """Read an atom as the split `source // lower % extent` (extent None: unbounded)."""
    if isinstance(atom, E.FloorMod) and isinstance(atom.b, E.IntImm) and atom.b.value > 0:
        inner = atom.a
        if isinstance(inner, E.FloorDiv) and isinstance(inner.b, E.IntImm) and inner.b.value > 0:
            return inner.a, inner.b.value, atom.b.value
        return inner, 1, atom.b.value
    if isinstance(atom, E.FloorDiv) and isinstance(atom.b, E.IntImm) and atom.b.value > 0:
        return atom.a, atom.b.value, None
    return atom, 1, None


def make_split(source: E.PrimExpr, lower: int, extent: int | None) -> E.PrimExpr:
    """The atom `source // lower % extent` (parts equal to 1 / None are left out)."""
    dtype = source.dtype
    result = source if lower == 1 else E.FloorDiv(source, make_int(lower, dtype))
    if extent is not None:
        result = E.FloorMod(result, make_int(extent, dtype))
    return result


def merge_splits(lin: Lin) -> Lin:
    """Merge `s * (x//a % b) + s*b * (x//(a*b) % c)` into `s * (x//a % (b*c))` until nothing
    merges; a split back to `x` itself is replaced by the terms of `x`."""
    changed = True
    while changed:
        changed = False
        parts = [(key, atom, coef, split_parts(atom)) for key, (atom, coef) in lin.terms.items()]
        for key1, _, coef1, (x1, a1, b1) in parts:
            if b1 is None or x1 is None:
                continue
            for key2, _, coef2, (x2, a2, c2) in parts:
                if key2 == key1 or a2 != a1 * b1 or coef2 != coef1 * b1:
                    continue
                if expr_key(x1) != expr_key(x2):
                    continue
                lin = _replace_pair(lin, key1, key2, x1, a1, None if c2 is None else b1 * c2, coef1)
                changed = True
                break
            if changed:
                break
    return lin


def _replace_pair(lin: Lin, key1, key2, source, lower, extent, coef) -> Lin:
    result = lin.copy()
    del result.terms[key1]
    del result.terms[key2]
    if lower == 1 and extent is None:
        return result.plus(parse_canonical(source), coef)
    result.add_term(make_split(source, lower, extent), coef)
    return result


def linear_coefficient(expr: E.PrimExpr, var: E.Var) -> int | None:
    """The constant c with expr = c * var + (terms without var), or None when expr is not of
    that form (or the coefficient is not a constant)."""
    if expr is var:
        return 1
    if not uses_var(expr, lambda v: v is var):
        return 0
    if isinstance(expr, (E.Add, E.Sub)):
        a, b = linear_coefficient(expr.a, var), linear_coefficient(expr.b, var)
        if a is None or b is None:
            return None
        return a + b if isinstance(expr, E.Add) else a - b
    if isinstance(expr, E.Mul):
        for factor, other in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(factor, E.IntImm):
                inner = linear_coefficient(other, var)
                return None if inner is None else factor.value * inner
        return None
    if isinstance(expr, E.Cast) and expr.dtype.is_integer and expr.value.dtype.is_integer:
        if expr.dtype.bits >= expr.value.dtype.bits:
            return linear_coefficient(expr.value, var)
    return None

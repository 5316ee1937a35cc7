"""Division and remainder rules of the simplifier, on linear forms.

For a positive constant divisor `c`, terms whose coefficient `c` divides leave the division
exactly (`floordiv(q*c + r, c) == q + floordiv(r, c)` for integers), and what remains is decided
by its bounds: `(i*4 + j) // 4` is `i` and `(i*4 + j) % 4` is `j` when `0 <= j < 4`. A common
factor cancels (`(i*8) // 4` is `i*2`), nested divisions combine (`x // 4 // 8` is `x // 32`),
and `x % 48 // 16` becomes the split `x // 16 % 3`. A remainder below a factor of the
divisor drops out: `(i*16 + j) // 880` is `i // 55` and `(i*16 + j) % 880` is `i % 55 * 16 + j`
when `0 <= j < 16` (a fused loop split by 16 and divided back into its original axes).
"""

from __future__ import annotations

import math

from schedlab.ir import expr as E

from .bound import ConstIntBound
from .evaluate import trunc_div, trunc_mod
from .linear import Lin, factors, make_int, parse_canonical, product_atom


def _bucket(bound: ConstIntBound, c: int) -> int | None:
    """k when every value of `bound` lies in [k*c, k*c + c): the quotient is known."""
    lo, hi = bound.min_value, bound.max_value
    if math.isinf(lo) or math.isinf(hi):
        return None
    return lo // c if lo // c == hi // c else None


def _divide_out(lin: Lin, c: int) -> tuple[Lin, Lin]:
    """(q, r) with lin == q*c + r: q holds the terms whose coefficient c divides."""
    quotient, rest = Lin(lin.dtype), Lin(lin.dtype, {}, lin.const)
    for atom, coef in lin.terms.values():
        if coef % c == 0:
            quotient.add_term(atom, coef // c)
        else:
            rest.add_term(atom, coef)
    return quotient, rest


def _exact_div(lin: Lin, g: int) -> Lin:
    terms = {key: (atom, coef // g) for key, (atom, coef) in lin.terms.items()}
    return Lin(lin.dtype, terms, lin.const // g)


def _below_factor(simplifier, rest: Lin, c: int) -> tuple[Lin, Lin, int] | None:
    """(X, r, s) with rest == s*X + r, s a factor of `c` above 1 and 0 <= r < s: then
    floor(rest / c) == floor(X / (c/s)) and rest mod c == s * (X mod (c/s)) + r."""
    for s in sorted({math.gcd(coef, c) for _, coef in rest.terms.values()}, reverse=True):
        if s <= 1:
            continue
        big, small = _divide_out(rest, s)
        small_bound = simplifier.bound(small)
        if big.terms and small_bound.min_value >= 0 and small_bound.max_value < s:
            return big, small, s
    return None


def _single_split(lin: Lin, kind) -> tuple[E.PrimExpr, int] | None:
    """(x, a) when lin is `x // a + k` / `x % a + k` (coefficient 1, constant divisor)."""
    if len(lin.terms) != 1:
        return None
    atom, coef = next(iter(lin.terms.values()))
    if coef != 1 or not isinstance(atom, kind) or not isinstance(atom.b, E.IntImm):
        return None
    return (atom.a, atom.b.value) if atom.b.value > 0 else None


class DivModRules:
    """Mixed into the Simplifier (which provides `bound`, `canon` and `prove_nonneg`)."""

    # -- floor division --------------------------------------------------------------------
    def floordiv(self, a: Lin, b: Lin) -> Lin:
        if b.is_const:
            c = b.const
            if a.is_const and c != 0:
                return Lin.of_const(a.const // c, a.dtype)
            if c > 0:
                return self._floordiv_const(a, c)
            if c < 0:  # floor(a / -c) == floor(-a / c)
                return self._floordiv_const(a.scaled(-1), -c)
        return self._divide_symbolic(a, b, E.FloorDiv)

    def _floordiv_const(self, a: Lin, c: int) -> Lin:
        if c == 1:
            return a
        quotient, rest = _divide_out(a, c)
        known = _bucket(self.bound(rest), c)
        if known is not None:
            return quotient.plus(Lin.of_const(known, a.dtype))
        g = math.gcd(rest.coef_gcd(), rest.const, c)
        if g > 1:
            return quotient.plus(self._floordiv_const(_exact_div(rest, g), c // g))
        below = _below_factor(self, rest, c)
        if below is not None:
            big, _, s = below
            return quotient.plus(self._floordiv_const(big, c // s))
        nested = _single_split(rest, E.FloorDiv)
        if nested is not None:  # floor((x // a + k) / c) == floor((x + k*a) / (a*c))
            source, inner = nested
            shifted = parse_canonical(source).plus(Lin.of_const(rest.const * inner, a.dtype))
            return quotient.plus(self._floordiv_const(shifted, inner * c))
        modded = _single_split(rest, E.FloorMod)
        if modded is not None and rest.const == 0 and modded[1] % c == 0:
            source, extent = modded  # x % (c*m) // c == x // c % m
            inner = self._floordiv_const(parse_canonical(source), c)
            return quotient.plus(self._floormod_const(inner, extent // c))
        atom = E.FloorDiv(self.canon(rest), make_int(c, a.dtype))
        return quotient.plus(Lin.of_atom(atom))

    # -- floor remainder ---------------------------------------------------------------------
    def floormod(self, a: Lin, b: Lin) -> Lin:
        if b.is_const:
            c = b.const
            if a.is_const and c != 0:
                return Lin.of_const(a.const % c, a.dtype)
            if c > 0:
                return self._floormod_const(a, c)
            if c < 0:  # a mod -c == -((-a) mod c)
                return self._floormod_const(a.scaled(-1), -c).scaled(-1)
        return self._divide_symbolic(a, b, E.FloorMod)

    def _floormod_const(self, a: Lin, c: int) -> Lin:
        if c == 1:
            return Lin(a.dtype)
        _, rest = _divide_out(a, c)
        rest.const %= c
        known = _bucket(self.bound(rest), c)
        if known is not None:
            return rest.plus(Lin.of_const(-known * c, a.dtype))
        g = math.gcd(rest.coef_gcd(), rest.const, c)
        if g > 1:
            return self._floormod_const(_exact_div(rest, g), c // g).scaled(g)
        below = _below_factor(self, rest, c)
        if below is not None:
            big, small, s = below
            return self._floormod_const(big, c // s).scaled(s).plus(small)
        modded = _single_split(rest, E.FloorMod)
        if modded is not None and rest.const == 0 and modded[1] % c == 0:
            return self._floormod_const(parse_canonical(modded[0]), c)  # x % (c*m) % c
        return Lin.of_atom(E.FloorMod(self.canon(rest), make_int(c, a.dtype)))

    # -- truncated division (C semantics) ------------------------------------------------------
    def truncdiv(self, a: Lin, b: Lin) -> Lin:
        if a.is_const and b.is_const and b.const != 0:
            return Lin.of_const(trunc_div(a.const, b.const), a.dtype)
        if b.is_const and b.const > 0:
            if self.prove_nonneg(a):
                return self._floordiv_const(a, b.const)
            if self.prove_nonneg(a.scaled(-1)):  # trunc(a / c) == -floor(-a / c) for a <= 0
                return self._floordiv_const(a.scaled(-1), b.const).scaled(-1)
        return Lin.of_atom(E.Div(self.canon(a), self.canon(b)))

    def truncmod(self, a: Lin, b: Lin) -> Lin:
        if a.is_const and b.is_const and b.const != 0:
            return Lin.of_const(trunc_mod(a.const, b.const), a.dtype)
        if b.is_const and b.const > 0:
            if self.prove_nonneg(a):
                return self._floormod_const(a, b.const)
            if self.prove_nonneg(a.scaled(-1)):
                return self._floormod_const(a.scaled(-1), b.const).scaled(-1)
        return Lin.of_atom(E.Mod(self.canon(a), self.canon(b)))

    # -- symbolic divisors ---------------------------------------------------------------------
    def _divide_symbolic(self, a: Lin, b: Lin, kind) -> Lin:
        """`(q*b + r) // b == q` and `% b == r` when `0 <= r < b`, for a divisor `b` that is a
        single positive atom (a symbolic extent such as `n`)."""
        single = b.single()
        # b >= 0 suffices: dividing by zero is undefined, so b is positive wherever it matters
        if single is not None and single[1] == 1 and self.bound(b).min_value >= 0:
            divisor = single[0]
            quotient, rest = self._factor_out(a, divisor)
            if self.prove_nonneg(rest) and self.prove_nonneg(b.plus(rest, -1).plus(_one(a), -1)):
                return quotient if kind is E.FloorDiv else rest
        if b.is_const and b.const == 0:
            return Lin.of_atom(kind(self.canon(a), make_int(0, a.dtype)))
        return Lin.of_atom(kind(self.canon(a), self.canon(b)))

    def _factor_out(self, a: Lin, divisor: E.PrimExpr) -> tuple[Lin, Lin]:
        from .keys import expr_key

        key = expr_key(divisor)
        quotient, rest = Lin(a.dtype), Lin(a.dtype, {}, a.const)
        for atom, coef in a.terms.values():
            parts = factors(atom)
            index = next((i for i, f in enumerate(parts) if expr_key(f) == key), None)
            if index is None:
                rest.add_term(atom, coef)
                continue
            others = parts[:index] + parts[index + 1 :]
            if others:
                quotient.add_term(product_atom(others), coef)
            else:
                quotient.const += coef
        return quotient, rest


def _one(like: Lin) -> Lin:
    return Lin.of_const(1, like.dtype)

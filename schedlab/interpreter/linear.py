"""Linear forms of index expressions, for the vectorizer's dependence tests.

`linearize(expr, targets)` writes an index as `sum(coefficient * term) + rest`, where the terms
are the target loop variables (and the lanes of `Ramp` nodes) and `rest` does not use any target.
`Determination` then asks whether a tuple of such indices pins every target down (different
iteration points never reach the same element), with the mixed-radix rule: sorted by absolute
coefficient, each coefficient must exceed the span of the smaller terms. Coefficients and extents
that are not constants give conditions that the generated code checks at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schedlab.ir import expr as E
from schedlab.ir import op
from schedlab.ir.functor import uses_var

Coefficient = int | E.PrimExpr


@dataclass
class Linear:
    """`sum(coeffs[key] * term(key)) + rest`; keys are ids of target Vars or of Ramp nodes."""

    coeffs: dict[int, Coefficient] = field(default_factory=dict)
    rest: E.PrimExpr | None = None
    lanes: dict[int, int] = field(default_factory=dict)  # Ramp key -> lane count


def uses_targets(expr: E.PrimExpr, targets: set[int]) -> bool:
    return uses_var(expr, lambda v: id(v) in targets) or _has_ramp(expr)


def _has_ramp(expr) -> bool:
    from schedlab.ir.functor import pre_order_visit

    found = False

    def visit(node):
        nonlocal found
        if isinstance(node, E.Ramp):
            found = True
        return not found

    pre_order_visit(expr, visit)
    return found


def linearize(expr: E.PrimExpr, targets: set[int]) -> Linear | None:
    """The linear form of `expr` in the target variables, or None if it is not linear."""
    if isinstance(expr, E.Var) and id(expr) in targets:
        return Linear({id(expr): 1})
    if isinstance(expr, E.Ramp):
        base = linearize(expr.base, targets)
        if base is None or uses_targets(expr.stride, targets):
            return None
        key = id(expr)
        return Linear({**base.coeffs, key: _coefficient(expr.stride)}, base.rest,
                      {**base.lanes, key: expr.lanes})  # fmt: skip
    if isinstance(expr, E.Broadcast):
        return linearize(expr.value, targets)
    if not uses_targets(expr, targets):
        return Linear({}, expr)
    if isinstance(expr, (E.Add, E.Sub)):
        return _add(expr, targets)
    if isinstance(expr, E.Mul):
        return _mul(expr, targets)
    return None


def _add(expr, targets) -> Linear | None:
    a, b = linearize(expr.a, targets), linearize(expr.b, targets)
    if a is None or b is None:
        return None
    sign = 1 if isinstance(expr, E.Add) else -1
    coeffs = dict(a.coeffs)
    for key, value in b.coeffs.items():
        scaled = _scale(value, sign)
        coeffs[key] = _sum(coeffs[key], scaled) if key in coeffs else scaled
    coeffs = {k: v for k, v in coeffs.items() if not (isinstance(v, int) and v == 0)}
    rest = _combine_rest(a.rest, b.rest, sign)
    return Linear(coeffs, rest, {**a.lanes, **b.lanes})


def _mul(expr, targets) -> Linear | None:
    for factor, other in ((expr.a, expr.b), (expr.b, expr.a)):
        if uses_targets(factor, targets):
            continue
        form = linearize(other, targets)
        if form is None:
            return None
        coefficient = _coefficient(factor)
        coeffs = {k: _product(v, coefficient) for k, v in form.coeffs.items()}
        rest = None if form.rest is None else op.mul(form.rest, factor)
        return Linear(coeffs, rest, form.lanes)
    return None


def _coefficient(expr: E.PrimExpr) -> Coefficient:
    return expr.value if isinstance(expr, E.IntImm) else expr


def _scale(value: Coefficient, sign: int) -> Coefficient:
    if sign == 1:
        return value
    return -value if isinstance(value, int) else op.neg(value)


def _sum(a: Coefficient, b: Coefficient) -> Coefficient:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return op.add(a, b)


def _product(a: Coefficient, b: Coefficient) -> Coefficient:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return op.mul(a, b)


def _combine_rest(a, b, sign: int):
    if b is None:
        return a
    if a is None:
        return b if sign == 1 else op.neg(b)
    return op.add(a, b) if sign == 1 else op.sub(a, b)


# ---------------------------------------------------------------------------------------------
# injectivity
# ---------------------------------------------------------------------------------------------


@dataclass
class Verdict:
    """The answer of a dependence test: `ok` statically, plus run-time conditions (each a
    mixed-radix group of (coefficient, extent) pairs that `runtime.radix_ok` must accept)."""

    ok: bool
    groups: list[tuple[tuple[Coefficient, Coefficient], ...]] = field(default_factory=list)
    reason: str = ""


def static_radix_ok(terms) -> bool:
    reach = 0
    for coefficient, extent in sorted((abs(c), e) for c, e in terms if e > 1):
        if coefficient <= reach:
            return False
        reach += coefficient * (extent - 1)
    return True


def determines(forms: list[Linear], extents: dict[int, Coefficient], needed: set[int]) -> Verdict:
    """Do the index forms (one per dimension) determine every `needed` target?

    `extents` gives each target's extent (Ramp lanes are added from the forms). Greedy: a
    dimension whose undetermined terms pass the mixed-radix rule determines all of them, then
    the others are retried with those known."""
    extents = dict(extents)
    for form in forms:
        extents.update(form.lanes)
    known = {k for k, e in extents.items() if isinstance(e, int) and e <= 1}
    groups: list = []
    pending = list(forms)
    progress = True
    while progress and not needed <= known:
        progress = False
        for form in list(pending):
            terms = [(c, extents[k], k) for k, c in form.coeffs.items() if k not in known]
            if not terms:
                pending.remove(form)
                continue
            if any(k not in extents for _, _, k in terms):
                continue
            pairs = tuple((c, e) for c, e, _ in terms)
            if all(isinstance(c, int) and isinstance(e, int) for c, e in pairs):
                if not static_radix_ok(pairs):
                    continue
            else:
                groups.append(pairs)
            known.update(k for _, _, k in terms)
            pending.remove(form)
            progress = True
    if not needed <= known:
        return Verdict(False, reason="the written indices do not determine every vectorized loop")
    return Verdict(True, groups)

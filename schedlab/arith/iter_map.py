"""Affine iter-map detection (TVM's DetectIterMap).

Given index expressions over loop iterators (`input_iters`, each with a Range), decide whether
every index is an affine combination of *splits* of *marks*: a mark is an input iterator or a
fusion of several (`i0*16 + i1`), a split is `mark // lower % extent * scale`. The splits taken
from one mark must not overlap (surjective), and for a bijective map must also cover it exactly
and use every iterator.

    detect_iter_map([f // 48, f % 48], {f: Range(0, 96)})        -> two splits of f
    detect_iter_map([i0 * 16 + i1], {i0: Range(0, 7), i1: Range(0, 16)},
                    predicate=i0 * 16 + i1 < 100)                 -> one fused iterator of 100
    detect_iter_map([i + j], {i: Range(0, 4), j: Range(0, 4)})    -> errors: overlapping
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from schedlab.ir import expr as E
from schedlab.ir import op
from schedlab.ir import stmt as S
from schedlab.ir.functor import uses_var
from schedlab.ir.op import convert

from .analyzer import Analyzer
from .iter_map_expr import (
    IterMark,
    IterSplitExpr,
    IterSumExpr,
    NotAffine,
    describe,
    normalize_splits,
)
from .keys import expr_key
from .simplify import is_index

CHECK_LEVELS = ("surjective", "bijective", "independent")


@dataclass
class IterMapResult:
    """`indices`: one normalized IterSumExpr per index (at most one split plus a base), or None
    when detection failed; `errors`: why it failed, in plain English."""

    indices: list[IterSumExpr] | None
    errors: list[str] = field(default_factory=list)
    padding_predicate: E.PrimExpr = field(default_factory=lambda: convert(False))

    def __bool__(self) -> bool:
        return self.indices is not None


class _Rewriter:
    """Rewrites index expressions into IterSumExprs over marks of the input iterators."""

    def __init__(self, input_iters: Mapping[E.Var, E.Range], analyzer: Analyzer):
        self.analyzer = analyzer
        self.var_map: dict[int, IterSumExpr] = {}
        self.input_marks: list[IterMark] = []
        self.iter_ids: set[int] = set()
        self.fused: dict[frozenset, tuple[IterMark, E.PrimExpr, E.PrimExpr]] = {}
        self.constraints: dict[frozenset, list] = {}
        for var, rng in input_iters.items():
            self.iter_ids.add(id(var))
            self._define_input(var, rng)

    def _define_input(self, var: E.Var, rng: E.Range, replace: IterMark | None = None) -> None:
        ana = self.analyzer
        if _is_const(rng.extent, 1):  # a trivial iterator is a constant
            self.var_map[id(var)] = IterSumExpr((), ana.simplify(rng.min))
            mark = None
        else:
            source = var if _is_const(rng.min, 0) else ana.simplify(var - rng.min)
            mark = IterMark(source, ana.simplify(rng.extent))
            self.var_map[id(var)] = IterSumExpr((IterSplitExpr.full(mark),), rng.min)
        if replace is not None:
            self.input_marks = [m for m in self.input_marks if m is not replace]
        if mark is not None:
            self.input_marks.append(mark)

    def uses_iters(self, expr: E.PrimExpr) -> bool:
        return uses_var(expr, lambda v: id(v) in self.iter_ids)

    # -- expressions ----------------------------------------------------------------------------
    def visit(self, expr: E.PrimExpr) -> IterSumExpr:
        if not self.uses_iters(expr):
            return IterSumExpr((), expr)
        if isinstance(expr, E.Var):
            return self.var_map[id(expr)]
        if isinstance(expr, E.Add):
            return self.add(self.visit(expr.a), self.visit(expr.b), 1)
        if isinstance(expr, E.Sub):
            return self.add(self.visit(expr.a), self.visit(expr.b), -1)
        if isinstance(expr, E.Mul):
            return self.multiply(expr)
        if isinstance(expr, (E.FloorDiv, E.FloorMod)):
            return self.divide(expr)
        raise NotAffine(f"{describe(expr)} is not an affine function of the iterators")

    def add(self, a: IterSumExpr, b: IterSumExpr, sign: int) -> IterSumExpr:
        args = list(a.args)
        for split in b.args:
            scale = split.scale if sign == 1 else self.analyzer.simplify(split.scale * -1)
            args = _merge_split(args, split.with_scale(scale), self.analyzer)
        base = self.analyzer.simplify(a.base + b.base if sign == 1 else a.base - b.base)
        return IterSumExpr(tuple(args), base)

    def scale(self, value: IterSumExpr, factor: E.PrimExpr) -> IterSumExpr:
        ana = self.analyzer
        if _is_const(factor, 0):
            return IterSumExpr((), ana.simplify(factor))
        args = tuple(s.with_scale(ana.simplify(s.scale * factor)) for s in value.args)
        return IterSumExpr(args, ana.simplify(value.base * factor))

    def multiply(self, expr: E.Mul) -> IterSumExpr:
        a, b = self.visit(expr.a), self.visit(expr.b)
        if a.args and b.args:
            raise NotAffine(f"{describe(expr)} multiplies two iterators: not affine")
        return self.scale(b, a.base) if not a.args else self.scale(a, b.base)

    def divide(self, expr) -> IterSumExpr:
        a, b = self.visit(expr.a), self.visit(expr.b)
        if b.args:
            raise NotAffine(f"in {describe(expr)} the divisor depends on an iterator")
        divisor = b.base
        if not _is_positive_const(divisor):
            if not self.analyzer.can_prove(divisor > 0):
                raise NotAffine(f"in {describe(expr)} the divisor {describe(divisor)} may be <= 0")
        split, base = self.fuse(a)
        return self.split_divide(split, base, divisor, isinstance(expr, E.FloorDiv), expr)

    def split_divide(self, split, base, divisor, is_div: bool, expr) -> IterSumExpr:
        """`(split + base) // divisor` or `% divisor` as a new split of the same mark."""
        ana = self.analyzer
        dtype = base.dtype
        zero = E.IntImm(dtype, 0)
        if not _is_positive_const(split.scale) and not ana.can_prove(split.scale > 0):
            # (x * -1) // 2 runs downwards: not a split of x's mark (the rules below assume a
            # positive scale; with -1 they produced x // -2 % -1, which is wrong for x = 1)
            raise NotAffine(f"in {describe(expr)} the iterator's scale {describe(split.scale)} "
                            "is not positive")  # fmt: skip
        if not _is_const(split.scale, 1):
            if _divides(divisor, split.scale, ana):  # x*s // c == x*(s/c) when c | s
                if not _divides(divisor, base, ana):
                    raise NotAffine(f"in {describe(expr)} the offset is not divisible")
                if not is_div:
                    return IterSumExpr((), zero)
                factor = ana.simplify(E.FloorDiv(split.scale, divisor))
                quotient = ana.simplify(E.FloorDiv(base, divisor))
                return IterSumExpr((split.with_scale(factor),), quotient)
            if _divides(split.scale, divisor, ana) and _divides(split.scale, base, ana):
                inner = split.with_scale(E.IntImm(dtype, 1))
                smaller = ana.simplify(E.FloorDiv(divisor, split.scale))
                rest = ana.simplify(E.FloorDiv(base, split.scale))
                result = self.split_divide(inner, rest, smaller, is_div, expr)
                return result if is_div else self.scale(result, split.scale)
            raise NotAffine(f"in {describe(expr)} the scale and the divisor do not divide")
        if not _is_const(base, 0):
            if not _divides(divisor, base, ana):
                raise NotAffine(
                    f"in {describe(expr)} the offset {describe(base)} is not a multiple of "
                    f"{describe(divisor)}"
                )
            result = self.split_divide(split, zero, divisor, is_div, expr)
            if is_div:
                return IterSumExpr(result.args, ana.simplify(E.FloorDiv(base, divisor)))
            return result
        return self._divide_split(split, divisor, is_div, expr)

    def _divide_split(self, split, divisor, is_div: bool, expr) -> IterSumExpr:
        ana = self.analyzer
        one = E.IntImm(divisor.dtype, 1)
        if _divides(divisor, split.extent, ana):
            if is_div:
                lower = ana.simplify(split.lower_factor * divisor)
                extent = ana.simplify(E.FloorDiv(split.extent, divisor))
                return IterSumExpr((IterSplitExpr(split.source, lower, extent, one),), _zero(one))
            return IterSumExpr(
                (IterSplitExpr(split.source, split.lower_factor, divisor, one),), _zero(one)
            )
        if ana.can_prove(split.extent <= divisor):  # the whole split fits below the divisor
            return IterSumExpr((), _zero(one)) if is_div else IterSumExpr((split,), _zero(one))
        raise NotAffine(
            f"in {describe(expr)} the iterator extent {describe(split.extent)} is not "
            f"divisible by {describe(divisor)}"
        )

    # -- fusion ---------------------------------------------------------------------------------
    def fuse(self, value: IterSumExpr) -> tuple[IterSplitExpr, E.PrimExpr]:
        """One split (of a possibly new fused mark) plus a base, equal to `value`."""
        if not value.args:
            raise NotAffine("expected an iterator, got a constant")
        if len(value.args) == 1:
            return value.args[0], value.base
        key = _sum_key(value.args)
        found = self.fused.get(key)
        if found is None:
            found = self._new_fused_mark(value.args, key)
            self.fused[key] = found
        mark, offset, base_scale = found
        split = IterSplitExpr(mark, E.IntImm(mark.extent.dtype, 1), mark.extent, base_scale)
        return split, self.analyzer.simplify(value.base + offset * base_scale)

    def _new_fused_mark(self, args, key):
        ordered = _chain(args, self.analyzer)
        if ordered is None:
            text = " + ".join(describe(a.to_expr()) for a in args)
            raise NotAffine(
                f"the iterators in {text} overlap or leave gaps: cannot fuse them into one"
            )
        ana = self.analyzer
        base_scale = ordered[-1].scale
        inner = tuple(a.with_scale(ana.simplify(E.FloorDiv(a.scale, base_scale))) for a in ordered)
        extent = ana.simplify(inner[0].scale * inner[0].extent)
        low, high = self._constraint_bounds(key, base_scale)
        offset = E.IntImm(extent.dtype, 0)
        if low is not None:
            offset = low
            extent = ana.simplify(extent - low)
        if high is not None:
            extent = ana.simplify(E.Min(extent, high - offset))
        source = IterSumExpr(inner, ana.simplify(offset * -1))
        return IterMark(source, extent), offset, base_scale

    def _constraint_bounds(self, key, base_scale):
        bounds = self.constraints.get(key)
        if bounds is None:
            return None, None
        low, high = bounds
        ana = self.analyzer
        # sum = base_scale * fused: low <= sum < high  ->  ceil(low / s) <= fused < ceil(high / s)
        if low is not None:
            low = ana.simplify(E.FloorDiv(low + base_scale - 1, base_scale))
        if high is not None:
            high = ana.simplify(E.FloorDiv(high + base_scale - 1, base_scale))
        return low, high

    # -- predicates -------------------------------------------------------------------------------
    def add_predicate(self, predicate: E.PrimExpr) -> None:
        for part in _conjuncts(predicate):
            if isinstance(part, E.IntImm) and part.value:
                continue
            lhs, low, high = self._bound_form(part)
            value = self.visit(lhs)
            if not value.args:
                raise NotAffine(f"the predicate {describe(part)} does not constrain an iterator")
            low = None if low is None else self.analyzer.simplify(low - value.base)
            high = None if high is None else self.analyzer.simplify(high - value.base)
            if len(value.args) == 1:
                self._constrain_input(value.args[0], low, high, part)
            else:
                key = _sum_key(value.args)
                old_low, old_high = self.constraints.get(key, (None, None))
                self.constraints[key] = (
                    _tighter(old_low, low, E.Max, self.analyzer),
                    _tighter(old_high, high, E.Min, self.analyzer),
                )

    def _bound_form(self, part):
        """(expr, low, high) with `low <= expr < high` from a comparison with one iterator side."""
        if not isinstance(part, (E.LT, E.LE, E.GT, E.GE)):
            raise NotAffine(f"the predicate {describe(part)} is not a bound on the iterators")
        a, b = part.a, part.b
        if isinstance(part, (E.GT, E.GE)):
            a, b = b, a  # now a < b or a <= b
        strict = isinstance(part, (E.LT, E.GT))
        if self.uses_iters(a) and not self.uses_iters(b):
            return a, None, (b if strict else b + 1)
        if self.uses_iters(b) and not self.uses_iters(a):
            return b, (a + 1 if strict else a), None
        raise NotAffine(f"the predicate {describe(part)} is not a bound on the iterators")

    def _constrain_input(self, split: IterSplitExpr, low, high, part) -> None:
        mark = split.source
        var = mark.source if isinstance(mark.source, E.Var) else None
        # the predicate must bound the whole input iterator: a bound on one part of it (f % 6
        # of a fused f) says nothing about f itself
        whole = self.analyzer.can_prove_equal(split.extent, mark.extent)
        full = _is_const(split.lower_factor, 1) and _is_const(split.scale, 1) and whole
        if var is None or not full or not any(mark is m for m in self.input_marks):
            raise NotAffine(f"the predicate {describe(part)} is not supported")
        ana = self.analyzer
        zero = E.IntImm(mark.extent.dtype, 0)
        start = zero if low is None else ana.simplify(op.max(low, zero))
        end = mark.extent if high is None else ana.simplify(op.min(high, mark.extent))
        old_min = self.var_map[id(var)].base
        self._define_input(var, E.Range(old_min + start, ana.simplify(end - start)), mark)


def _tighter(old, new, combine, analyzer):
    if old is None:
        return new
    if new is None:
        return old
    return analyzer.simplify(combine(old, new))


def _merge_split(args: list, split: IterSplitExpr, analyzer) -> list:
    """Add a split to a sum; an equal split (same mark, lower factor, extent) adds its scale."""
    for i, other in enumerate(args):
        if other.same_slice(split):
            scale = analyzer.simplify(other.scale + split.scale)
            if _is_const(scale, 0):
                return args[:i] + args[i + 1 :]
            return [*args[:i], other.with_scale(scale), *args[i + 1 :]]
    return [*args, split]


def _chain(args, analyzer) -> list | None:
    """The args ordered outermost first, when each scale is the next inner one's scale times
    its extent (a fused iterator without gaps or overlap); None otherwise."""
    for first in args:
        order = [first]
        used = {id(first)}
        expected = analyzer.simplify(first.scale * first.extent)
        while len(order) < len(args):
            nxt = next(
                (
                    a
                    for a in args
                    if id(a) not in used and analyzer.can_prove_equal(a.scale, expected)
                ),
                None,
            )
            if nxt is None:
                break
            order.append(nxt)
            used.add(id(nxt))
            expected = analyzer.simplify(nxt.scale * nxt.extent)
        if len(order) == len(args):
            return order[::-1]
    return None


def _sum_key(args) -> frozenset:
    return frozenset(
        (id(a.source), expr_key(a.lower_factor), expr_key(a.extent), expr_key(a.scale))
        for a in args
    )


def _is_const(expr, value: int) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == value


def _is_positive_const(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value > 0


def _zero(like: E.PrimExpr) -> E.IntImm:
    return E.IntImm(like.dtype, 0)


def _divides(divisor, value, analyzer) -> bool:
    """Whether `divisor` provably divides `value`."""
    if isinstance(divisor, E.IntImm) and isinstance(value, E.IntImm):
        return divisor.value != 0 and value.value % divisor.value == 0
    return analyzer.can_prove_equal(E.FloorMod(value, divisor), E.IntImm(value.dtype, 0))


def _conjuncts(cond: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(cond, E.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    if isinstance(cond, E.Call) and cond.op == "likely":
        return _conjuncts(cond.args[0])
    return [cond]


def detect_iter_map(
    indices: Sequence,
    input_iters: Mapping[E.Var, E.Range],
    predicate=True,
    check_level: str = "surjective",
    analyzer: Analyzer | None = None,
) -> IterMapResult:
    """Detect whether `indices` are affine, non-overlapping maps of `input_iters` (TVM's
    DetectIterMap). `check_level` is "surjective" (splits of one iterator must not overlap),
    "bijective" (they must also cover it and every iterator must be used) or "independent".
    `predicate` may bound fused iterators (`i0*16 + i1 < 100` for a non-divisible split)."""
    if check_level not in CHECK_LEVELS:
        raise ValueError(
            f"detect_iter_map: check_level must be one of {CHECK_LEVELS}, got {check_level!r}"
        )
    analyzer = analyzer if analyzer is not None else Analyzer()
    with analyzer.constraint_scope(convert(True)):
        for var, rng in input_iters.items():
            analyzer.bind(var, rng, allow_override=True)
        return _detect(list(indices), input_iters, convert(predicate), check_level, analyzer)


def _detect(indices, input_iters, predicate, check_level, analyzer) -> IterMapResult:
    rewriter = _Rewriter(input_iters, analyzer)
    errors: list[str] = []
    try:
        rewriter.add_predicate(analyzer.simplify(predicate))
    except NotAffine as err:
        return IterMapResult(None, [str(err)])
    results = []
    for index in indices:
        index = convert(index)
        if not is_index(index):
            errors.append(f"index {describe(index)} is not an integer expression")
            continue
        try:
            results.append(_rewrite_index(rewriter, index, analyzer))
        except NotAffine as err:
            errors.append(f"index {describe(index)}: {err}")
    if errors:
        return IterMapResult(None, errors)
    if check_level != "independent":
        errors = normalize_splits(results, rewriter.input_marks, check_level, analyzer)
    if errors:
        return IterMapResult(None, errors)
    return IterMapResult(results, [])


def _rewrite_index(rewriter: _Rewriter, index: E.PrimExpr, analyzer: Analyzer) -> IterSumExpr:
    """The index as written (so `f % 48 // 16` stays a split of the fused `f`), or failing
    that its simplified form (which may fold away what blocked the first attempt)."""
    try:
        value = rewriter.visit(index)
    except NotAffine:
        simplified = analyzer.simplify(index)
        if simplified is index:
            raise
        try:
            value = rewriter.visit(simplified)
        except NotAffine:
            pass
        else:
            return _fused(rewriter, value)
        raise
    return _fused(rewriter, value)


def _fused(rewriter: _Rewriter, value: IterSumExpr) -> IterSumExpr:
    if not value.args:
        return value
    split, base = rewriter.fuse(value)
    return IterSumExpr((split,), base)


def iter_map_simplify(
    indices: Sequence,
    input_iters: Mapping[E.Var, E.Range],
    predicate=True,
    check_level: str = "surjective",
    analyzer: Analyzer | None = None,
) -> list[E.PrimExpr]:
    """The indices rewritten through their detected iter map (`(i0*16 + i1) // 16` -> `i0`),
    or just simplified when detection fails."""
    analyzer = analyzer if analyzer is not None else Analyzer()
    result = detect_iter_map(indices, input_iters, predicate, check_level, analyzer)
    with analyzer.constraint_scope(convert(True)):
        for var, rng in input_iters.items():
            analyzer.bind(var, rng, allow_override=True)
        if not result:
            return [analyzer.simplify(convert(i)) for i in indices]
        return [analyzer.simplify(s.to_expr()) for s in result.indices]


def is_affine_binding(
    block_realize: S.BlockRealize,
    loop_ranges: Mapping[E.Var, E.Range],
    analyzer: Analyzer | None = None,
) -> bool:
    """Whether a block's iter values are a surjective affine map of the surrounding loops
    (TVM's IsAffineBinding), taking the block predicate into account."""
    if not block_realize.iter_values:
        return True
    result = detect_iter_map(
        block_realize.iter_values,
        loop_ranges,
        block_realize.predicate,
        "surjective",
        analyzer,
    )
    return bool(result)

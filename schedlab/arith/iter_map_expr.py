"""The iter-map expression forms (TVM's IterMark / IterSplitExpr / IterSumExpr) and the check
that the splits taken from each mark are consistent."""

from __future__ import annotations

from schedlab.ir import expr as E


class NotAffine(Exception):
    """An index is not an affine map of the iterators (the message says why)."""


def describe(expr) -> str:
    """Short text for an expression in an error message (the printer when available)."""
    try:
        return str(expr)
    except Exception:  # pragma: no cover - printing must not hide the real error
        return object.__repr__(expr)


class IterMark:
    """An iterator: `source` (an input var, `var - min`, or an IterSumExpr for a fused one)
    ranging over `[0, extent)`. Marks are compared by identity."""

    __slots__ = ("source", "extent")

    def __init__(self, source, extent: E.PrimExpr):
        self.source = source
        self.extent = extent

    def source_expr(self) -> E.PrimExpr:
        return self.source.to_expr() if isinstance(self.source, IterSumExpr) else self.source

    def __repr__(self) -> str:
        return f"IterMark({describe(self.source_expr())}, extent={describe(self.extent)})"


class IterSplitExpr:
    """`source // lower_factor % extent * scale` for a mark `source`."""

    __slots__ = ("source", "lower_factor", "extent", "scale")

    def __init__(self, source: IterMark, lower_factor, extent, scale):
        self.source = source
        self.lower_factor = lower_factor
        self.extent = extent
        self.scale = scale

    @staticmethod
    def full(mark: IterMark) -> IterSplitExpr:
        one = E.IntImm(mark.extent.dtype, 1)
        return IterSplitExpr(mark, one, mark.extent, one)

    def with_scale(self, scale) -> IterSplitExpr:
        return IterSplitExpr(self.source, self.lower_factor, self.extent, scale)

    def same_slice(self, other: IterSplitExpr) -> bool:
        """Same mark, lower factor and extent (the scale may differ)."""
        from .keys import expr_key

        return (
            self.source is other.source
            and expr_key(self.lower_factor) == expr_key(other.lower_factor)
            and expr_key(self.extent) == expr_key(other.extent)
        )

    def to_expr(self) -> E.PrimExpr:
        """The plain expression (unsimplified parts left out: `// 1`, a `%` that cannot
        wrap, `* 1`)."""
        result = self.source.source_expr()
        if not _is_one(self.lower_factor):
            result = E.FloorDiv(result, self.lower_factor)
        if not _covers_top(self):
            result = E.FloorMod(result, self.extent)
        if not _is_one(self.scale):
            result = E.Mul(result, self.scale)
        return result

    def __repr__(self) -> str:
        return (
            f"IterSplit(({describe(self.source.source_expr())}) // {describe(self.lower_factor)}"
            f" % {describe(self.extent)} * {describe(self.scale)})"
        )


class IterSumExpr:
    """`sum(args) + base`: the normalized form of one index."""

    __slots__ = ("args", "base")

    def __init__(self, args: tuple[IterSplitExpr, ...], base: E.PrimExpr):
        self.args = tuple(args)
        self.base = base

    @property
    def dtype(self):
        return self.base.dtype

    def to_expr(self) -> E.PrimExpr:
        result = None
        for split in self.args:
            term = split.to_expr()
            result = term if result is None else E.Add(result, term)
        if result is None:
            return self.base
        if isinstance(self.base, E.IntImm) and self.base.value == 0:
            return result
        return E.Add(result, self.base)

    def __repr__(self) -> str:
        args = ", ".join(repr(a) for a in self.args)
        return f"IterSum([{args}], base={describe(self.base)})"


def _is_one(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


def _covers_top(split: IterSplitExpr) -> bool:
    """lower * extent == the mark's extent: the `%` never wraps."""
    from .keys import expr_key

    lower, extent, total = split.lower_factor, split.extent, split.source.extent
    if all(isinstance(x, E.IntImm) for x in (lower, extent, total)):
        return lower.value * extent.value == total.value
    return _is_one(lower) and expr_key(extent) == expr_key(total)


# ---------------------------------------------------------------------------------------------
# the consistency check
# ---------------------------------------------------------------------------------------------
def _collect(indices) -> tuple[list[IterMark], dict[int, list[IterSplitExpr]]]:
    """Every mark reached from the indices (through fused marks), with the splits taken of it."""
    marks: list[IterMark] = []
    splits: dict[int, list[IterSplitExpr]] = {}

    def visit_sum(value: IterSumExpr) -> None:
        for split in value.args:
            mark = split.source
            if id(mark) not in splits:
                splits[id(mark)] = []
                marks.append(mark)
                if isinstance(mark.source, IterSumExpr):
                    visit_sum(mark.source)
            splits[id(mark)].append(split)

    for index in indices:
        visit_sum(index)
    return marks, splits


def normalize_splits(indices, input_marks, check_level: str, analyzer) -> list[str]:
    """Errors (empty when fine): each mark's splits must chain from the innermost
    (`lower_factor` 1, then `lower * extent` of the previous) without overlap; bijective maps
    must cover every mark exactly and use every input iterator."""
    marks, splits = _collect(indices)
    errors = []
    for mark in marks:
        problem = _check_mark(mark, splits[id(mark)], check_level, analyzer)
        if problem:
            errors.append(problem)
    if check_level == "bijective":
        for mark in input_marks:
            if id(mark) not in splits:
                errors.append(
                    f"iterator {describe(mark.source_expr())} is not used by any index: "
                    "the map is not bijective"
                )
    return errors


def _check_mark(mark: IterMark, splits, check_level: str, analyzer) -> str | None:
    name = describe(mark.source_expr())
    used = [False] * len(splits)
    expected = E.IntImm(mark.extent.dtype, 1)
    for _ in splits:
        j = next(
            (
                k
                for k, s in enumerate(splits)
                if not used[k] and analyzer.can_prove_equal(s.lower_factor, expected)
            ),
            None,
        )
        if j is None:
            if check_level == "bijective":
                return f"the splits of {name} overlap or leave gaps: the map is not bijective"
            j = _skip_to_next(splits, used, expected, analyzer)
            if j is None:
                return f"the splits of {name} overlap: two indices use the same iterations"
        used[j] = True
        expected = analyzer.simplify(splits[j].lower_factor * splits[j].extent)
    if check_level == "bijective":
        if not analyzer.can_prove_equal(expected, mark.extent):
            return (
                f"the splits of {name} cover {describe(expected)} of its "
                f"{describe(mark.extent)} iterations: the map is not bijective"
            )
    elif not (
        analyzer.can_prove_equal(expected, mark.extent)  # x % x == 0 needs x != 0: check first
        or analyzer.can_prove_equal(E.FloorMod(mark.extent, expected), 0)
    ):
        return (
            f"the splits of {name} span {describe(expected)}, which does not divide its "
            f"extent {describe(mark.extent)}"
        )
    return None


def _skip_to_next(splits, used, expected, analyzer) -> int | None:
    """For surjective maps an inner part may be unused: take the unused split with the smallest
    lower factor, provided every unused lower factor is a multiple of `expected`."""
    best = None
    for k, split in enumerate(splits):
        if used[k]:
            continue
        if not analyzer.can_prove_equal(E.FloorMod(split.lower_factor, expected), 0):
            return None
        if best is None or analyzer.can_prove_equal(
            E.FloorMod(splits[best].lower_factor, split.lower_factor), 0
        ):
            best = k
    return best

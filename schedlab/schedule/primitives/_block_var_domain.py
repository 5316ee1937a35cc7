"""The iteration domain a moved block needs (compute_at / reverse_compute_at, step "calculate
block var domain" in TVM), and the loop nest that realizes it.

Each buffer the block provides (compute_at: writes; reverse_compute_at: reads) has, per
dimension, a "provided" interval in the block's iter vars (usually the point `vi`) and a
"required" interval in loop variables (what the neighbours touch in one iteration of the target
loop). Solving `provided(v) ~ required` per dimension gives an interval `dom` for `v`, plus a
`bound` (the values of `v` that stay inside the buffer and the iter var's domain). The new loops
iterate `dom`; when `dom` pokes out of `bound`, a predicate keeps the block in range.

`cover=True` (compute_at) takes every instance that touches the required region; `cover=False`
(reverse_compute_at) only instances whose whole access lies inside it (they read data that is
ready at that iteration). Instances whose read falls outside the buffer (a guarded read, as in
padding) need no data, but must still run once: reverse_compute_at gives them to the iteration
whose required region reaches that edge of the buffer, or refuses when that is not static.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.arith import Analyzer, IntervalSet
from schedlab.ir import expr as E
from schedlab.ir.functor import Mutator, collect_vars, substitute
from schedlab.ir.op import all as all_of
from schedlab.ir.op import const
from schedlab.ir.stmt import Block, BlockRealize, For, ForKind, IterVar
from schedlab.ir.structural import structural_equal

from ..analysis.region_cover import union
from ._compute_common import UnsolvableDomainError

Region = list[IntervalSet]


@dataclass
class VarDomain:
    """What is known about one iter var: the interval to iterate and the in-range bound (None:
    nothing yet)."""

    dom: IntervalSet | None = None
    bound: IntervalSet | None = None

    def union(self, dom: IntervalSet | None, bound: IntervalSet | None, analyzer) -> None:
        self.dom = _union(self.dom, dom, analyzer)
        self.bound = _union(self.bound, bound, analyzer)


def _union(a, b, analyzer):
    if a is None:
        return b
    if b is None:
        return a
    return a.union(b, analyzer)


def _floordiv(a, b: int, analyzer):
    return a if b == 1 else analyzer.simplify(E.FloorDiv(a, const(b, a.dtype)))


def _ceildiv(a, b: int, analyzer):
    return a if b == 1 else analyzer.simplify(E.FloorDiv(a + (b - 1), const(b, a.dtype)))


# -- solving one dimension --------------------------------------------------------------------
def _linear(expr, var, analyzer) -> tuple[int, E.PrimExpr] | None:
    """(a, b) with expr == a * var + b, a a positive constant and b free of var; else None."""
    step = analyzer.simplify(substitute(expr, {var: var + 1}) - expr)
    if not isinstance(step, E.IntImm) or step.value <= 0:
        return None
    offset = analyzer.simplify(substitute(expr, {var: const(0, var.dtype)}))
    if not analyzer.can_prove_equal(expr, step.value * var + offset):
        return None
    return step.value, offset


def solve_dimension(provided: IntervalSet, required: IntervalSet, dim_max, iter_vars: dict,
                    analyzer: Analyzer, cover: bool):  # fmt: skip
    """(iter var, dom, bound) for one buffer dimension, or None when it constrains no iter var.
    Raises UnsolvableDomainError when the access pattern is not understood."""
    low, high = analyzer.simplify(provided.min), analyzer.simplify(provided.max)
    used = [v for v in collect_vars(low) if id(v) in iter_vars]
    if not used:
        return _constant_dimension(low, high, required, analyzer)
    if len(used) > 1:
        raise UnsolvableDomainError(f"index {low} uses several iter vars ({used[0]}, {used[1]})")
    var = used[0]
    extent = analyzer.simplify(high - low + 1)
    linear = _linear(low, var, analyzer)
    if linear is not None and isinstance(extent, E.IntImm):
        solved = _linear_dimension(var, linear, extent.value, required, dim_max, analyzer, cover)
    elif extent_is_one(extent):
        solved = _divmod_dimension(low, var, required, dim_max, analyzer)
    else:
        raise UnsolvableDomainError(
            f"index range {low}:{high} + 1 is not an affine function of {var}"
        )
    if cover or solved[1] is None:  # compute_at, or `v % f`: every instance stays
        return solved
    return _with_guarded_instances(solved, iter_vars[id(var)], required, dim_max, analyzer)


def extent_is_one(extent) -> bool:
    return isinstance(extent, E.IntImm) and extent.value == 1


def _constant_dimension(low, high, required, analyzer):
    inside = analyzer.can_prove(low <= required.min) and analyzer.can_prove(required.max <= high)
    if not inside:
        raise UnsolvableDomainError(
            f"the block always accesses index {low}:{high} + 1 there, but "
            f"{required.min}:{required.max} + 1 is needed"
        )
    return None


def _linear_dimension(var, linear, extent: int, required, dim_max, analyzer, cover: bool):
    a, b = linear
    if cover and extent < a:
        raise UnsolvableDomainError(f"the block leaves gaps in the index {a} * {var} + {b}")
    if not cover and extent != 1:
        # an instance reading several elements may need data from several iterations
        raise UnsolvableDomainError(
            f"each instance reads {extent} elements along it; moving a consumer needs "
            f"single-element reads"
        )
    if cover:  # every instance that touches [rmin, rmax]
        low = _ceildiv(required.min - b - (extent - 1), a, analyzer)
        high = _floordiv(required.max - b, a, analyzer)
    else:  # only instances that stay inside [rmin, rmax]
        low = _ceildiv(required.min - b, a, analyzer)
        high = _floordiv(required.max - b - (extent - 1), a, analyzer)
    bound = IntervalSet(
        _ceildiv(-b, a, analyzer), _floordiv(dim_max - b - (extent - 1), a, analyzer)
    )
    return var, IntervalSet(low, high), bound


def _with_guarded_instances(solved, iv: IterVar, required, dim_max, analyzer):
    """reverse_compute_at: the instances of `iv` whose read falls outside the buffer (a guarded
    read, as padding's `if_then_else`) read nothing a producer writes, yet they must still run
    once (padding writes its border there). They go with the iteration whose required region
    starts (ends) at the buffer's edge; when that iteration cannot be told apart statically the
    move is refused rather than silently dropping them."""
    var, dom, read_bound = solved
    full = IntervalSet.from_range(iv.dom, analyzer)
    low, high = dom.min, dom.max
    if not analyzer.can_prove(full.min >= read_bound.min):
        low = full.min if analyzer.can_prove(required.min <= 0) else _refuse(iv, "first")
    if not analyzer.can_prove(full.max <= read_bound.max):
        at_end = analyzer.can_prove(required.max >= dim_max)
        high = full.max if at_end else _refuse(iv, "last")
    return var, IntervalSet(low, high), full


def _refuse(iv: IterVar, which: str):
    raise UnsolvableDomainError(
        f"some instances of {iv.var.name} read outside the buffer (a guarded read, such as "
        f"padding) and must run at the iteration that produces the {which} element, which "
        f"cannot be determined statically here; move the block under an outer loop that "
        f"produces the whole dimension"
    )


def _divmod_dimension(low, var, required, dim_max, analyzer):
    if isinstance(low, E.FloorDiv) and low.a is var and isinstance(low.b, E.IntImm):
        f = low.b.value
        dom = IntervalSet(
            analyzer.simplify(required.min * f), analyzer.simplify(required.max * f + f - 1)
        )
        return var, dom, IntervalSet(const(0, var.dtype), analyzer.simplify(dim_max * f + f - 1))
    if isinstance(low, E.FloorMod) and low.a is var:
        return var, None, None  # `v % f` does not narrow v
    raise UnsolvableDomainError(f"index {low} is not an affine function of {var}")


# -- all dimensions ---------------------------------------------------------------------------
def block_var_domains(
    block: Block, provided: dict, required: dict, buffers: dict, analyzer: Analyzer, cover: bool
) -> list[VarDomain]:
    """One VarDomain per iter var of `block` (in order), finalized: `bound` is None when no
    predicate is needed. `provided` maps id(buffer) to the block's region in its iter vars,
    `required` to the list of regions the neighbours touch."""
    iter_vars = {id(iv.var): iv for iv in block.iter_vars}
    infos = {id(iv.var): VarDomain() for iv in block.iter_vars}
    for key, have in provided.items():
        if not required.get(key):
            continue
        need = union(required[key], analyzer)
        buffer = buffers[key]
        for dim, (p, r) in enumerate(zip(have, need)):
            dim_max = analyzer.simplify(buffer.shape[dim] - 1)
            try:
                solved = solve_dimension(p, r, dim_max, iter_vars, analyzer, cover)
            except UnsolvableDomainError as err:
                raise UnsolvableDomainError(
                    f"cannot derive the iteration domain of block {block.name_hint!r} from its "
                    f"access to {buffer.name} (dimension {dim}): {err.reason}",
                    [block],
                ) from None
            if solved is not None:
                var, dom, bound = solved
                infos[id(var)].union(dom, bound, analyzer)
    return [_finalize(infos[id(iv.var)], iv, analyzer) for iv in block.iter_vars]


def _finalize(info: VarDomain, iv: IterVar, analyzer) -> VarDomain:
    """TVM's BlockVarDomainInfo::Simplify: intersect the bound with the iter var's domain and
    drop whichever of dom/bound is redundant."""
    full = IntervalSet.from_range(iv.dom, analyzer)
    bound = full if info.bound is None else info.bound.intersect(full, analyzer)
    if info.dom is None:
        return VarDomain(bound, None)
    dom = IntervalSet(analyzer.simplify(info.dom.min), analyzer.simplify(info.dom.max))
    both = dom.intersect(bound, analyzer)
    if _same(dom, both, analyzer):
        return VarDomain(dom, None)
    if _same(bound, both, analyzer):
        return VarDomain(bound, None)
    if isinstance(both.min, E.IntImm) and isinstance(both.max, E.IntImm):
        return VarDomain(both, None)
    return VarDomain(dom, bound)


def _same(a: IntervalSet, b: IntervalSet, analyzer) -> bool:
    return analyzer.can_prove_equal(a.min, b.min) and analyzer.can_prove_equal(a.max, b.max)


# -- the new loop nest ------------------------------------------------------------------------
@dataclass
class NewNest:
    """The loops and realize that run `block` over its solved domain."""

    stmt: For | BlockRealize
    realize: BlockRealize
    loops: list[For]
    var_ranges: dict  # id(iter var) -> IntervalSet of the values it takes (predicate included)


def make_loop_nest(block: Block, domains: list[VarDomain], analyzer: Analyzer,
                   preserve_unit_loops: bool, own_predicate=None) -> NewNest:  # fmt: skip
    """Loops `ax0, ax1, ...` over the domains (unit ones dropped unless `preserve_unit_loops`)
    around a realize of `block` binding `v = dom.min + ax`, with a predicate where needed: the
    domain bounds, and `own_predicate` (the block's old predicate in its iter vars: a padded
    write-back's `v < 20`), which must stay."""
    loop_vars, extents, values, conditions, ranges = [], [], [], [], {}
    for iv, info in zip(block.iter_vars, domains):
        low = info.dom.min
        extent = analyzer.simplify(info.dom.max - low + 1)
        if preserve_unit_loops or not extent_is_one(extent):
            var = E.Var(f"ax{len(loop_vars)}", iv.var.dtype)
            analyzer.bind(var, E.Range(const(0, var.dtype), extent))
            loop_vars.append(var)
            extents.append(extent)
            value = analyzer.simplify(low + var)
        else:
            value = low
        values.append(value)
        conditions.extend(_bound_conditions(value, info.bound, analyzer))
        ranges[id(iv.var)] = (
            info.dom if info.bound is None else info.dom.intersect(info.bound, analyzer)
        )
    if own_predicate is not None:
        bound = {iv.var: value for iv, value in zip(block.iter_vars, values)}
        conditions.append(substitute(own_predicate, bound))
    predicate = analyzer.simplify(all_of(*conditions)) if conditions else const(True)
    realize = BlockRealize(tuple(values), predicate, block)
    stmt, loops = realize, []
    for var, extent in reversed(list(zip(loop_vars, extents))):
        stmt = For(var, const(0, var.dtype), extent, ForKind.SERIAL, stmt)
        loops.insert(0, stmt)
    return NewNest(stmt, realize, loops, ranges)


def predicate_in_iter_vars(realize: BlockRealize):
    """The realize's predicate written in its block's iter vars (each loop var or iter value
    it uses replaced by the iter var it binds), None when it is true; raises
    UnsolvableDomainError when it depends on loops in another way (moving the block would
    lose it)."""
    predicate = realize.predicate
    if isinstance(predicate, E.IntImm) and predicate.value == 1:
        return None
    block = realize.block
    by_value = [(value, iv.var) for iv, value in zip(block.iter_vars, realize.iter_values)]
    loop_to_var = {value: var for value, var in by_value if isinstance(value, E.Var)}
    rewritten = substitute(predicate, loop_to_var)
    for value, var in by_value:  # a split's `i0 * 16 + i1 < 20` written as `v < 20`
        if not isinstance(value, E.Var):
            rewritten = _replace_expr(rewritten, value, var)
    iter_vars = {iv.var for iv in block.iter_vars}
    stray = [v for v in collect_vars(rewritten) if v not in iter_vars]
    if stray:
        raise UnsolvableDomainError(
            f"block {block.name_hint!r} has the predicate {predicate}, which uses loop "
            f"{stray[0].name} other than through the block's iter values; moving the block "
            f"would drop it",
            [block],
        )
    return rewritten


def _replace_expr(expr, pattern, replacement):
    class _Replace(Mutator):
        def visit(self, node):
            if isinstance(node, E.PrimExpr) and structural_equal(node, pattern):
                return replacement
            return super().visit(node)

    return _Replace().visit(expr)


def _bound_conditions(value, bound: IntervalSet | None, analyzer) -> list:
    if bound is None:
        return []
    found = []
    for condition in (value >= bound.min, value < bound.max + 1):
        if not analyzer.can_prove(condition):
            found.append(condition)
    return found

"""How blockize divides a block predicate between the new outer block and the inner block,
and which part of it guards the reduction init moved to the outer block.

A predicate conjunct over the loops above the blockized loop only (`b_0 < 1` after a split
whose tile is out of range) moves to the outer block's realize: the outer block, and the init
it holds, must not run for a tile whose inner iterations all fail it. The other conjuncts stay
on the inner block, with the outer loops written through the outer iter vars they bind. When
an outer iter value can still leave its domain, the outer realize gets `value < extent` too, so
the outer block never runs with an iter var out of its domain (TVM's outer predicate).
"""

from __future__ import annotations

from schedlab.arith import Analyzer
from schedlab.arith.linear import Lin, parse_canonical
from schedlab.ir import expr as E
from schedlab.ir.functor import collect_vars, substitute, uses_var
from schedlab.ir.op import const
from schedlab.ir.stmt import Block, For, IterType, IterVar

from ..errors import ScheduleError


class BlockizeError(ScheduleError):
    """The subtree cannot become one block: its iter values do not divide into an outer and
    an inner part, or the blocks to wrap are not consecutive siblings."""


def conjuncts(cond: E.PrimExpr) -> list[E.PrimExpr]:
    """The parts of `a && b && ...` (a constant true has none)."""
    if isinstance(cond, E.And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    if _is_true(cond):
        return []
    return [cond]


def conjoin(parts: list[E.PrimExpr]) -> E.PrimExpr:
    """`parts[0] && parts[1] && ...`, or true."""
    result = const(True)
    for part in parts:
        result = part if _is_true(result) else E.And(result, part)
    return result


def split_predicate(predicate: E.PrimExpr, inner_loops: list[For]):
    """(conjuncts over no inner loop, the other conjuncts). A conjunct is read with the inner
    loops of extent 1 at their single value, so `b_0 + b_1 + b_2 < 1` blockized at `b_1`
    (`b_1`, `b_2` of extent 1) is the outer `b_0 < 1`."""
    inner_ids = {id(lp.loop_var) for lp in inner_loops}
    units = {lp.loop_var: lp.min for lp in inner_loops if _is_one(lp.extent)}
    outer, inner = [], []
    for part in conjuncts(predicate):
        if uses_var(part, lambda v: id(v) in inner_ids) and units:
            fixed = Analyzer().simplify(substitute(part, units))
            part = fixed if not uses_var(fixed, lambda v: id(v) in inner_ids) else part
        uses_inner = uses_var(part, lambda v: id(v) in inner_ids)
        (inner if uses_inner else outer).append(part)
    return outer, inner


def outer_predicate(parts, outer_iters, outer_values, ranges: dict) -> E.PrimExpr:
    """The moved conjuncts, and `value < extent` for each outer iter value that the loops
    can drive out of its domain when a partial tile still passes them."""
    analyzer = Analyzer()
    for var, rng in ranges.items():
        analyzer.bind(var, rng)
    guards = []
    with analyzer.constraint_scope(conjoin(parts)):
        for iv, value in zip(outer_iters, outer_values):
            if isinstance(value, E.IntImm):
                continue
            if not analyzer.can_prove(value >= iv.dom.min):
                guards.append(value >= iv.dom.min)
            if not analyzer.can_prove(value < iv.dom.min + iv.dom.extent):
                guards.append(value < iv.dom.min + iv.dom.extent)
    return conjoin(list(parts) + guards)


def inner_predicate(parts, outer_iters, outer_values, outer_ranges: dict, block: Block):
    """The conjuncts left on the inner block, with the outer loops written through the outer
    iter vars (`vb_o * 2 + b_1 < 5` for `b_0 * 2 + b_1 < 5` where `vb_o = b_0`); an outer
    loop of extent 1 is its single value."""
    by_loop = {id(v): r.min for v, r in outer_ranges.items() if _is_one(r.extent)}
    by_loop.update(
        {id(v): iv.var for iv, v in zip(outer_iters, outer_values) if isinstance(v, E.Var)}
    )
    outer_ids = {id(v) for v in outer_ranges}
    forms = [(iv.var, _linear(v)) for iv, v in zip(outer_iters, outer_values)]
    forms = [(var, lin) for var, lin in forms if lin is not None and not lin.is_const]
    result = []
    for part in parts:
        new = substitute(part, lambda v: by_loop.get(id(v)))
        if uses_var(new, lambda v: id(v) in outer_ids):
            new = _through_outer_iters(new, forms, outer_ids)
        if new is None:
            loop = next(v for v in collect_vars(part) if id(v) in outer_ids)
            raise BlockizeError(
                f"the predicate {part} of block {block.name_hint} uses loop {loop.name}, "
                "which is outside the new block and cannot be written through the outer "
                "iter values (multiples of them); blockize another loop", [block],
            )  # fmt: skip
        result.append(new)
    return conjoin(result)


def _through_outer_iters(part: E.PrimExpr, forms, outer_ids: set) -> E.PrimExpr | None:
    """`part` (a comparison) with every combination of outer loops that is a multiple of an
    outer iter value replaced by that multiple of the iter var; None when loops remain."""
    if not isinstance(part, E.CmpOp):
        return None
    sides = []
    for side in (part.a, part.b):
        if uses_var(side, lambda v: id(v) in outer_ids):
            lin = _linear(side)
            side = None if lin is None else _replace_outer(lin, forms, outer_ids)
            if side is None:
                return None
        sides.append(side)
    return Analyzer().simplify(type(part)(*sides))


def _replace_outer(lin: Lin, forms, outer_ids: set) -> E.PrimExpr | None:
    for var, form in forms:
        ratio = _ratio(lin, form)
        if ratio:
            lin = lin.plus(form, -ratio).plus(Lin.of_atom(var, ratio))
    if any(id(atom) in outer_ids for atom, _ in lin.terms.values()):
        return None
    return lin_to_expr(lin)


def _ratio(lin: Lin, form: Lin) -> int:
    """r when `lin` holds `r * form`'s terms (r a nonzero integer), else 0."""
    ratio = 0
    for key, (_, coef) in form.terms.items():
        have = lin.terms.get(key)
        if have is None or have[1] % coef:
            return 0
        if ratio and have[1] // coef != ratio:
            return 0
        ratio = have[1] // coef
    return ratio


def _linear(expr: E.PrimExpr) -> Lin | None:
    """The linear form of `expr` over plain variables, or None."""
    if not expr.dtype.is_integer:
        return None
    lin = parse_canonical(Analyzer().simplify(expr))
    return lin if all(isinstance(atom, E.Var) for atom, _ in lin.terms.values()) else None


def lin_to_expr(lin: Lin) -> E.PrimExpr:
    result = None
    for atom, coef in lin.terms.values():
        term = atom if coef == 1 else atom * coef
        result = term if result is None else result + term
    if result is None:
        return E.IntImm(lin.dtype, lin.const)
    return result + lin.const if lin.const else result


def init_predicate(predicate, inner_loops, loop_map: dict, outer_iters):
    """The predicate of the init moved to the outer block: the inner predicate where the
    original init ran, i.e. with the outer reduction iter vars at their minimum and the inner
    loops that no spatial iter uses (the reduction loops) at theirs; the spatial inner loops
    renamed by `loop_map` to the init's own loops. (The binding is affine, checked before:
    each loop feeds one iter, and an inner part is a sum of inner loops, so the reduction
    iters are at their minimum exactly where the loops no spatial iter uses are.)"""
    others = {lp.loop_var: lp.min for lp in inner_loops if lp.loop_var not in loop_map}
    firsts = dict(others)
    firsts.update({iv.var: iv.dom.min for iv in outer_iters if iv.iter_type == IterType.REDUCE})
    analyzer = _analyzer_for(outer_iters, [lp for lp in inner_loops if lp.loop_var in loop_map])
    kept = []
    for part in conjuncts(predicate):
        part = analyzer.simplify(substitute(part, firsts))
        if not analyzer.can_prove(part):
            kept.append(part)
    return substitute(conjoin(kept), lambda v: loop_map.get(v))


def _analyzer_for(iters: list[IterVar], loops: list[For]) -> Analyzer:
    analyzer = Analyzer()
    for iv in iters:
        analyzer.bind(iv.var, iv.dom)
    for lp in loops:
        analyzer.bind(lp.loop_var, E.Range(lp.min, lp.extent))
    return analyzer


def _is_one(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


def _is_true(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


__all__ = [
    "BlockizeError",
    "conjoin",
    "conjuncts",
    "init_predicate",
    "inner_predicate",
    "lin_to_expr",
    "outer_predicate",
    "split_predicate",
]

"""Affine bindings: are a block's iter values an affine map of the loops above it?

TVM keeps this fact per block (`affine_binding`) and checks it before reorder, parallel,
vectorize, blockize, ... Here it is computed on demand from a ScheduleState with
`schedlab.arith.detect_iter_map`:

- surjective ("affine", TVM's IsAffineBlockBinding): every iter value is an affine combination of
  non-overlapping splits of the loops (`vi = i_0 * 16 + i_1`, `vj = f % 16`);
- bijective: besides, every loop of non-unit extent is used and exactly covered, so each block
  instance runs exactly once (`vi = i // 2` over a loop `i` of 8 is surjective, not bijective).

`top` restricts the loops to those from `top` down to the block (TVM's partial affine binding):
loops above `top` are treated as symbols.

Two things keep these checks cheap when a schedule asks them again and again (every parallel,
vectorize, reorder, decompose_reduction): bindings in the plain mixed-radix form that split,
fuse and reorder leave (`i_0 * 8 + i_1 * 4 + i_2`, `f // 4 * 8 + i_1`) are recognised by a direct
structural test (`mixed_radix_binding`), and the detector's answers are remembered per binding
(iter values, predicate and loops, by identity: IR nodes are immutable), so a block whose
binding did not change is not analysed twice.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from schedlab.arith import IterMapResult, detect_iter_map
from schedlab.ir.expr import Add, And, FloorDiv, FloorMod, IntImm, Mul, Range, Var
from schedlab.ir.functor import uses_var
from schedlab.ir.stmt import Block, BlockRealize, For

from ..errors import NonAffineBindingError
from ..state import ScheduleState

_TRUE = IntImm("bool", 1)


def loops_from(state: ScheduleState, block: Block, top: For | None = None) -> list[For]:
    """The loops between the block's scope (or `top`, included) and the block, outermost
    first."""
    loops = state.loops_above(block)
    if top is not None:
        uids = [loop.uid for loop in loops]
        if top.uid not in uids:
            raise ValueError(f"loop_domains: {top.loop_var.name} is not above {block.name_hint}")
        loops = loops[uids.index(top.uid) :]
    return loops


def loop_domains(state: ScheduleState, block: Block, top: For | None = None) -> dict[Var, Range]:
    """{loop var: range} of the loops between the block's scope (or `top`, included) and the
    block, outermost first."""
    return {loop.loop_var: Range(loop.min, loop.extent) for loop in loops_from(state, block, top)}


def binding_iter_map(state: ScheduleState, block: Block, check_level: str = "surjective",
                     top: For | None = None) -> IterMapResult:  # fmt: skip
    """The iter map detected for the block's iter values over the loops above it (falsy with
    `errors` saying why when they are not affine at `check_level`)."""
    realize = state.realize_of(block)
    if not realize.iter_values:
        return IterMapResult([], [])
    loops = loops_from(state, block, top)
    return _detect(realize, loops, realize.predicate, check_level)


def _holds(state: ScheduleState, block: Block, check_level: str, top: For | None) -> bool:
    """Whether the binding is affine at `check_level` over the loops from `top` (or the scope)
    down: the structural fast path first, then the (remembered) detector."""
    realize = state.realize_of(block)
    if not realize.iter_values:
        return True
    loops = loops_from(state, block, top)
    if mixed_radix_binding(realize, loops, check_level == "bijective"):
        return True
    return bool(_detect(realize, loops, realize.predicate, check_level))


def is_affine_binding(state: ScheduleState, block: Block, top: For | None = None) -> bool:
    """TVM's affine-binding flag: the iter values are a surjective affine map of the loops (with
    `top`: affine in the whole scope, or at least in the loops from `top` down)."""
    if _holds(state, block, "surjective", None):
        return True
    return top is not None and _holds(state, block, "surjective", top)


def is_bijective_binding(state: ScheduleState, block: Block, top: For | None = None) -> bool:
    """The iter values are a one-to-one affine map of the loops (with `top`: of all the loops in
    the scope, or at least of those from `top` down): every block instance runs exactly once."""
    if _holds(state, block, "bijective", None):
        return True
    return top is not None and _holds(state, block, "bijective", top)


def injective_binding_map(state: ScheduleState, block: Block, top: For) -> IterMapResult:
    """Whether each instance of `block` runs at most once per execution of loop `top`: its iter
    values, as a map of the loops from `top` down (the loops above `top` are symbols), are
    one-to-one (a bijective iter map; loops of extent 1 need not be used). A predicate only
    removes iterations, so it is first left out; when that fails, the predicate terms that
    mention those loops are given to the detector (they may bound a fused iterator)."""
    realize = state.realize_of(block)
    loops = loops_from(state, block, top)
    if not realize.iter_values or mixed_radix_binding(realize, loops, True, with_predicate=False):
        return IterMapResult([], [])
    result = _detect(realize, loops, _TRUE, "bijective")
    if result or _is_true(realize.predicate):
        return result
    inner = {id(loop.loop_var) for loop in loops}
    terms = [t for t in _conjuncts(realize.predicate) if uses_var(t, lambda v: id(v) in inner)]
    if not terms:
        return result
    predicate = terms[0]
    for term in terms[1:]:
        predicate = And(predicate, term)
    return _detect(realize, loops, predicate, "bijective") or result


def _is_true(expr) -> bool:
    return isinstance(expr, IntImm) and bool(expr.value)


def _conjuncts(cond) -> list:
    if isinstance(cond, And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def check_affine_binding(state: ScheduleState, block: Block, top: For | None = None,
                         bijective: bool = False, why: str = "") -> None:  # fmt: skip
    """Raise NonAffineBindingError naming the block and what is not affine about its iter
    values. `why` says which primitive needs it and why (added to the message)."""
    holds = is_bijective_binding if bijective else is_affine_binding
    if holds(state, block, top):
        return
    result = binding_iter_map(state, block, "bijective" if bijective else "surjective", top)
    kind = "a one-to-one affine" if bijective else "an affine"
    values = ", ".join(
        f"{iv.var.name} = {value}"
        for iv, value in zip(block.iter_vars, state.realize_of(block).iter_values)
    )
    detail = "; ".join(result.errors) or "no iter map was found"
    raise NonAffineBindingError(
        f"block {block.name_hint!r} must have {kind} binding of the loops above it{why}, but its "
        f"iter values ({values}) are not: {detail}",
        [block],
    )


# -- the structural fast path --------------------------------------------------------------------
def mixed_radix_binding(realize: BlockRealize, loops: list[For], bijective: bool,
                        with_predicate: bool = True) -> bool:  # fmt: skip
    """A sufficient condition for an affine binding, checked structurally: (with
    `with_predicate`, the predicate is True) every iter value is a constant part free of the
    loops plus a mixed-radix number whose digits are whole loops or exact splits of them (`v`,
    `v // c`, `v % c` with c dividing the extent of a loop `v` that starts at 0), coefficients
    1, e1, e1*e2, ...; and over all iter values, the digits taken from each loop tile it
    exactly. Such a map is surjective, and bijective once every loop of extent > 1 is used.
    False means "not recognised" (the detector decides), never "not affine"."""
    if with_predicate and not _is_true(realize.predicate):
        return False
    extents = constant_extents(loops)
    if extents is None:
        return False
    digits: dict[int, list[tuple[int, int]]] = {}
    for value in realize.iter_values:
        form = affine_terms(value, extents)
        if form is None or not is_radix(form[0]):
            return False
        for _, key, lower, extent in form[0]:
            digits.setdefault(key, []).append((lower, extent))
    if not all(tiles(parts, extents[key]) for key, parts in digits.items()):
        return False
    return not bijective or all(e == 1 or key in digits for key, e in extents.items())


def constant_extents(loops: list[For]) -> dict[int, int] | None:
    """{id(loop var): extent} when every loop starts at 0 and has a constant extent."""
    extents = {}
    for loop in loops:
        if not (isinstance(loop.min, IntImm) and loop.min.value == 0):
            return None
        if not (isinstance(loop.extent, IntImm) and loop.extent.value >= 1):
            return None
        extents[id(loop.loop_var)] = loop.extent.value
    return extents


Digit = tuple[int, int, int, int]  # (coefficient, id(loop var), lower factor, extent)


def affine_terms(expr, extents: dict[int, int]) -> tuple[list[Digit], list] | None:
    """`expr` as digits of the loops in `extents` (`v`, `v // c`, `v % c` with c dividing the
    extent, times positive constants; digits of extent 1 are the constant 0) plus the parts
    free of those loops (`f // 4 * 8`, outer loops and constants; a part that is a sum is
    taken term by term). None when some part that uses the loops has another form."""
    digits: list[Digit] = []
    free: list = []
    return (digits, free) if _collect_terms(expr, 1, extents, digits, free) else None


def _collect_terms(expr, scale: int, extents: dict[int, int], digits: list, free: list) -> bool:
    if isinstance(expr, Add):
        return _collect_terms(expr.a, scale, extents, digits, free) and _collect_terms(
            expr.b, scale, extents, digits, free
        )
    if isinstance(expr, Mul):
        for factor, rest in ((expr.b, expr.a), (expr.a, expr.b)):
            if isinstance(factor, IntImm) and factor.value > 0:
                return _collect_terms(rest, scale * factor.value, extents, digits, free)
    digit = _digit(expr, extents)
    if digit is not None:
        if digit[2] > 1:
            digits.append((scale, *digit))
        elif not isinstance(expr, Var):
            # `v // e` or `v % 1` of a longer loop is a constant 0 the detector does not accept;
            # only a unit loop itself (what split leaves with preserve_unit_iters) is dropped
            return False
        return True
    if uses_var(expr, lambda v: id(v) in extents):
        return False
    free.append(expr if scale == 1 else expr * scale)
    return True


def _digit(expr, extents: dict[int, int]) -> tuple[int, int, int] | None:
    """(loop, lower factor, extent) for `v`, `v // c` or `v % c` with c dividing v's extent."""
    if isinstance(expr, Var):
        key = id(expr)
        return (key, 1, extents[key]) if key in extents else None
    if not isinstance(expr, (FloorDiv, FloorMod)):
        return None
    var, divisor = expr.a, expr.b
    if not (isinstance(var, Var) and id(var) in extents and isinstance(divisor, IntImm)):
        return None
    extent, c = extents[id(var)], divisor.value
    if c < 1 or extent % c != 0:
        return None
    return (id(var), c, extent // c) if isinstance(expr, FloorDiv) else (id(var), 1, c)


def is_radix(digits: list[Digit]) -> bool:
    """The coefficients, smallest first, are 1, e1, e1*e2, ...: the digits form one mixed-radix
    number, which takes every value of [0, e1*e2*...) exactly once."""
    expected = 1
    for scale, _, _, extent in sorted(digits, key=lambda t: t[0]):
        if scale != expected:
            return False
        expected *= extent
    return True


def tiles(parts: list[tuple[int, int]], extent: int) -> bool:
    """The digits (lower factor, extent) taken from one loop cover it exactly, without
    overlap (so every combination of their values occurs, once)."""
    expected = 1
    for lower, size in sorted(parts):
        if lower != expected:
            return False
        expected *= size
    return expected == extent


# -- remembered detector answers -----------------------------------------------------------------
_CACHE_SIZE = 512
_cache: OrderedDict[tuple, tuple[tuple, IterMapResult]] = OrderedDict()
_cache_lock = threading.Lock()


def _detect(realize: BlockRealize, loops: list[For], predicate, check_level: str) -> IterMapResult:
    """detect_iter_map of the realize's iter values over `loops`, remembered by the identity of
    what it depends on (the values, the predicate, each loop's var, min and extent). An entry
    keeps those objects alive, so an id in a key cannot be reused by another object while the
    entry exists. A bijective map is also surjective, so a remembered bijective answer serves a
    surjective question."""
    pinned = (realize.iter_values, predicate, *((x.loop_var, x.min, x.extent) for x in loops))
    base = (tuple(map(id, realize.iter_values)), id(predicate),
            tuple((id(a), id(b), id(c)) for a, b, c in pinned[2:]))  # fmt: skip
    with _cache_lock:
        bijective = _cache.get((base, "bijective")) if check_level == "surjective" else None
        known = (
            bijective if bijective is not None and bijective[1] else _cache.get((base, check_level))
        )
    if known is not None:
        return known[1]
    domains = {x.loop_var: Range(x.min, x.extent) for x in loops}
    result = detect_iter_map(realize.iter_values, domains, predicate, check_level)
    with _cache_lock:
        _cache[(base, check_level)] = (pinned, result)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)  # the oldest answer goes first
    return result

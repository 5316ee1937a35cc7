"""Which elements a block really writes, for the primitives that copy a staged buffer back
(cache_write, reindex of a write): the copy back covers a whole region, so every element of
that region must have been written by the block, or the copy would overwrite data with
garbage from the stage buffer.

A block's stores are followed into nested blocks (their iter vars replaced by their bindings)
and loops inside the block; a store under an `if` or a nested block predicate is conditional
and makes the writes unprovable.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.arith import Analyzer, detect_iter_map, region_covers, relax_region
from schedlab.ir import op
from schedlab.ir.buffer import Buffer, BufferRegion
from schedlab.ir.expr import LT, And, IntImm, Range
from schedlab.ir.functor import collect_vars, substitute
from schedlab.ir.node import child_fields
from schedlab.ir.stmt import Block, BlockRealize, BufferStore, For, IfThenElse, Stmt
from schedlab.ir.structural import structural_equal

from ..state import ScheduleState
from .buffers import clamp_region, enclosing_analyzer, free_of, loop_and_iter_vars, loops_between


@dataclass(frozen=True)
class StoreSite:
    """One store of a buffer inside a block: its indices in the block's iter vars and the
    loops inside the block around it (`loops`), and whether it runs conditionally."""

    indices: tuple
    loops: tuple[For, ...]
    guarded: bool


def store_sites(block: Block, buffer: Buffer) -> list[StoreSite]:
    """Every store of `buffer` in the block's init and body, nested blocks included."""
    found: list[StoreSite] = []
    for part in (block.init, block.body):
        _collect(part, buffer, found, False, {}, ())
    return found


def _collect(stmt, buffer: Buffer, found: list, guarded: bool, binding: dict, loops) -> None:
    if not isinstance(stmt, Stmt):
        return
    if isinstance(stmt, BufferStore):
        if stmt.buffer is buffer:
            indices = (
                tuple(substitute(i, binding) for i in stmt.indices) if binding else stmt.indices
            )
            found.append(StoreSite(indices, loops, guarded))
        return
    if isinstance(stmt, IfThenElse):
        guarded = True
    elif isinstance(stmt, For):
        loops = (*loops, stmt)
    elif isinstance(stmt, BlockRealize):
        guarded = guarded or not _is_true(stmt.predicate)
        inner = stmt.block
        values = [substitute(v, binding) if binding else v for v in stmt.iter_values]
        binding = {**binding, **{iv.var: v for iv, v in zip(inner.iter_vars, values)}}
    for field in child_fields(type(stmt)):
        value = getattr(stmt, field)
        for item in value if isinstance(value, tuple) else (value,):
            _collect(item, buffer, found, guarded, binding, loops)


def _is_true(expr) -> bool:
    return isinstance(expr, IntImm) and expr.value != 0


def _single_store(block: Block, buffer: Buffer) -> StoreSite | None:
    """The one (unconditional) store pattern of `buffer` in the block, with just the loops its
    indices use; None when there are several patterns, when a store is conditional, or when
    an index uses a variable defined inside the block other than the loops around it."""
    sites = [_used_loops(site) for site in store_sites(block, buffer)]
    if not sites or any(site.guarded for site in sites):
        return None
    first = sites[0]
    for other in sites[1:]:
        same_loops = len(other.loops) == len(first.loops) and all(
            a is b for a, b in zip(other.loops, first.loops)
        )
        if not same_loops or not all(map(structural_equal, first.indices, other.indices)):
            return None
    inner = set()
    for part in (block.init, block.body):
        if part is not None:
            inner |= loop_and_iter_vars(part)
    inner -= {id(loop.loop_var) for loop in first.loops}
    if not all(free_of(index, inner) for index in first.indices):
        return None
    return first


def _used_loops(site: StoreSite) -> StoreSite:
    """The site with only the loops its indices use (the others just repeat the store)."""
    used = {id(v) for index in site.indices for v in collect_vars(index)}
    loops = tuple(loop for loop in site.loops if id(loop.loop_var) in used)
    return StoreSite(site.indices, loops, site.guarded)


def writes_densely(state: ScheduleState, block: Block, buffer: Buffer, loc: Stmt,
                   region: BufferRegion) -> bool:  # fmt: skip
    """Whether, as the loops between `loc` and `block` run, the block writes every element
    of `region` (its write region of `buffer` relaxed over those loops): its stores are an
    affine, non-overlapping, stride-1 image of the loops (a dense box), and that box covers
    the region. A copy of the region back to the buffer then never overwrites data with
    unwritten cache elements."""
    site = _single_store(block, buffer)
    if site is None:
        return False
    realize = state.realize_of(block)
    binding = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    bound = [substitute(index, binding) for index in site.indices]
    below, above = loops_between(state, block, loc)
    loops = [*below, *site.loops]
    dom = {loop.loop_var: _loop_range(loop) for loop in loops}
    analyzer = enclosing_analyzer(state, block, above)
    box = _written_box(bound, dom, realize.predicate, buffer, analyzer)
    return box is not None and region_covers(box, region, analyzer)


def _written_box(indices, dom, predicate, buffer: Buffer, analyzer: Analyzer):
    """The box of `buffer` the stores at `indices` fill completely as the loops in `dom` run
    under `predicate`; None when they may leave holes in it."""
    inner = {id(v) for v in dom}
    local = all(id(v) in inner for v in collect_vars(predicate))  # else it may skip the block
    result = local and detect_iter_map(indices, dom, predicate, "surjective", Analyzer())
    if result:
        if not all(_is_dense(expr) for expr in result.indices):
            return None
        ranges = tuple(_image(expr) for expr in result.indices)
        return clamp_region(BufferRegion(buffer, ranges), analyzer)
    # a predicate over outer loops (a split tail under compute_at) defeats the detection; a
    # box that is dense without it stays dense when each condition only cuts an index at the
    # buffer's end (`index < extent`, which the clamp to the buffer applies too) or leaves
    # some iteration of the other loops for every written element
    if not _dense_without_predicate(indices, dom, inner):
        return None
    if not all(_clips_at_end(c, indices, dom, buffer) for c in _conjuncts(predicate)):
        return None
    point = BufferRegion(buffer, tuple(Range(i, op.const(1, i.dtype)) for i in indices))
    return clamp_region(relax_region(point, dom, analyzer), analyzer)


def _dense_without_predicate(indices, dom, inner: set[int]) -> bool:
    result = detect_iter_map(indices, dom, True, "surjective", Analyzer())
    if result:
        return all(_is_dense(expr) for expr in result.indices)
    # the detection cannot divide symbolic extents; the plain case needs no detection: each
    # index is one loop variable (each loop in one index) plus a loop-free offset
    analyzer, seen = Analyzer(), set()
    for index in indices:
        used = [v for v in collect_vars(index) if id(v) in inner]
        if not used:
            continue
        if len(used) != 1 or id(used[0]) in seen:
            return False
        seen.add(id(used[0]))
        if not free_of(analyzer.simplify(index - used[0]), inner):
            return False
    return True


def _conjuncts(condition) -> list:
    if isinstance(condition, And):
        return _conjuncts(condition.a) + _conjuncts(condition.b)
    return [condition]


def _clips_at_end(condition, indices, dom, buffer: Buffer) -> bool:
    """`index < bound` for one of the indices, with a loop-free bound at or past the buffer's
    extent in that dimension; or a condition on the loops in `dom` the indices do not use
    that holds when they start (a reduction tail), so each element still gets written."""
    inner = {id(v) for v in dom}
    index_vars = {id(v) for i in indices for v in collect_vars(i) if id(v) in inner}
    used = collect_vars(condition)
    analyzer = Analyzer()
    if not any(id(v) in index_vars for v in used):
        if not all(id(v) in inner for v in used):
            return False  # a condition on outer loops may skip the whole block
        at_start = substitute(condition, {var: rng.min for var, rng in dom.items()})
        return analyzer.can_prove(at_start)
    if not isinstance(condition, LT) or not free_of(condition.b, inner):
        return False
    return any(
        analyzer.can_prove_equal(condition.a, index) and analyzer.can_prove(condition.b >= extent)
        for index, extent in zip(indices, buffer.shape)
    )


def covers_domain(state: ScheduleState, block: Block, iter_vars) -> bool:
    """Whether the loops around `block` (with its predicate) run the given iter vars over
    every point of their domains: each binding a dense, non-overlapping affine image of the
    loops reaching from the domain's min to its end."""
    realize = state.realize_of(block)
    wanted = {id(iv.var) for iv in iter_vars}
    pairs = [(iv, v) for iv, v in zip(block.iter_vars, realize.iter_values) if id(iv.var) in wanted]
    loops = state.loops_above(block)
    dom = {loop.loop_var: _loop_range(loop) for loop in loops}
    analyzer = enclosing_analyzer(state, block, loops)
    values = [v for _, v in pairs]
    result = detect_iter_map(values, dom, realize.predicate, "surjective", analyzer)
    if result:
        images = [_image(expr) for expr in result.indices]
    elif _is_true(realize.predicate) and _dense_without_predicate(values, dom, set(map(id, dom))):
        images = [_plain_image(value, dom, analyzer) for value in values]  # symbolic extents
    else:
        return False
    return all(_reaches(analyzer, iv.dom, image) for (iv, _), image in zip(pairs, images))


def _image(expr) -> Range | None:
    """The interval a dense iter-map index runs over (None when it is not dense)."""
    if not _is_dense(expr):
        return None
    return Range(expr.base, expr.args[0].extent if expr.args else op.const(1, expr.base.dtype))


def _plain_image(value, dom, analyzer: Analyzer) -> Range:
    """The interval `loop + offset` runs over (or the constant `value`)."""
    for var, rng in dom.items():
        if any(v is var for v in collect_vars(value)):
            offset = analyzer.simplify(value - var)
            return Range(analyzer.simplify(offset + rng.min), rng.extent)
    return Range(value, op.const(1, value.dtype))


def _reaches(analyzer: Analyzer, dom: Range, image: Range | None) -> bool:
    if image is None:
        return False
    starts = analyzer.can_prove(image.min <= dom.min)
    return starts and analyzer.can_prove(image.min + image.extent >= dom.min + dom.extent)


def _loop_range(loop: For) -> Range:
    return Range(loop.min, loop.extent)


def _is_dense(expr) -> bool:
    """An iter-map index covers a dense interval: a base alone, or one split of scale 1."""
    if not expr.args:
        return True
    if len(expr.args) != 1:
        return False
    scale = expr.args[0].scale
    return isinstance(scale, IntImm) and scale.value == 1


__all__ = ["StoreSite", "store_sites", "writes_densely", "covers_domain"]

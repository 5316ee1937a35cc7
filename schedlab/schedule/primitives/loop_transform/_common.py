"""Checks and rewrites shared by the loop transformations."""

from __future__ import annotations

from schedlab.arith import Analyzer, iter_map_simplify
from schedlab.errors import short_int, short_repr
from schedlab.ir import expr as E
from schedlab.ir.functor import uses_var
from schedlab.ir.node import child_fields
from schedlab.ir.op import convert
from schedlab.ir.stmt import Block, BlockRealize, BufferStore, Evaluate, For, ForKind, SeqStmt, Stmt

from ...errors import ScheduleError
from .errors import FactorError, LoopAnnotationError, LoopStartError, RepeatedLoopError


def expect_loop(value, primitive: str, what: str = "loop") -> For:
    if not isinstance(value, For):
        raise ScheduleError(
            f"{primitive}: {what} must be a loop handle (LoopRV), got {type(value).__name__}"
        )
    return value


def loop_list(values: tuple, primitive: str) -> list[For]:
    """The loops of a `*loops` parameter (a single list or tuple is accepted too)."""
    if len(values) == 1 and isinstance(values[0], (list, tuple)):
        values = tuple(values[0])
    return [expect_loop(v, primitive, f"loops[{i}]") for i, v in enumerate(values)]


def check_no_annotation(loop: For, primitive: str) -> None:
    if loop.kind == ForKind.THREAD_BINDING or loop.annotations:
        what = (
            f"is bound to {loop.thread_tag}" if loop.kind == ForKind.THREAD_BINDING
            else f"has annotations {sorted(loop.annotations)}"
        )  # fmt: skip
        raise LoopAnnotationError(
            f"loop {loop.loop_var.name} {what}; {primitive} cannot keep them on the new loops. "
            f"Apply {primitive} before binding/annotating the loop (or unannotate it first)",
            [loop],
        )


def check_starts_at_zero(loop: For, analyzer: Analyzer, primitive: str) -> None:
    if not analyzer.can_prove_equal(loop.min, convert(0)):
        raise LoopStartError(
            f"loop {loop.loop_var.name} starts at {loop.min}, but {primitive} needs a loop that "
            "starts at 0",
            [loop],
        )


def check_distinct(loops: list[For], primitive: str) -> None:
    seen: set[int] = set()
    for loop in loops:
        if loop.uid in seen:
            raise RepeatedLoopError(
                f"loop {loop.loop_var.name} is passed to {primitive} more than once; pass each "
                "loop once",
                [loop],
            )
        seen.add(loop.uid)


def factor_values(loop: For, factors, primitive: str) -> tuple[list, int | None]:
    """The factors as positive ints (None kept) and the index of the None, if any."""
    if not isinstance(factors, (list, tuple)) or not factors:
        raise FactorError(
            f"{primitive}: factors must be a non-empty list of positive ints (one may be None), "
            f"got {short_repr(factors)}",
            [loop],
        )
    values: list = []
    infer = None
    largest = loop.loop_var.dtype.max_value()
    for index, factor in enumerate(factors):
        if factor is None:
            if infer is not None:
                raise FactorError(
                    f"{primitive}: only one factor can be None (inferred), got "
                    f"{short_repr(list(factors))}",
                    [loop],
                )
            infer = index
            values.append(None)
            continue
        if isinstance(factor, E.IntImm):
            factor = factor.value
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
            raise FactorError(
                f"{primitive}: factors[{index}] must be a positive int, got {short_repr(factor)}",
                [loop],
            )
        # a loop extent is a constant of the loop variable's dtype: say so here rather than
        # fail later, deep in building the new loops
        if factor > largest:
            raise FactorError(
                f"{primitive}: factors[{index}] must fit the loop variable's dtype "
                f"{loop.loop_var.dtype} (at most {largest}), got {short_int(factor)}",
                [loop],
            )
        values.append(factor)
    return values, infer


def loop_domains_above(state, node) -> dict[E.Var, E.Range]:
    """{var: range} of the loops between `node` and its scope block."""
    return {loop.loop_var: E.Range(loop.min, loop.extent) for loop in state.loops_above(node)}


def is_one(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


def serial(var: E.Var, start, extent, body: Stmt) -> For:
    """A serial loop; int bounds take the loop variable's dtype."""
    start = E.IntImm(var.dtype, start) if isinstance(start, int) else start
    extent = E.IntImm(var.dtype, extent) if isinstance(extent, int) else extent
    return For(var, start, extent, ForKind.SERIAL, body)


def nest_of(loop: For, depth: int) -> list[For]:
    """`loop` and the `depth - 1` loops nested directly inside it."""
    loops = [loop]
    while len(loops) < depth:
        loops.append(loops[-1].body)
    return loops


# -- rewriting the blocks under a loop --------------------------------------------------------
def map_realizes(stmt: Stmt, fn, dom: dict | None = None) -> Stmt:
    """Rewrite every BlockRealize directly under `stmt` (not those inside blocks) with
    `fn(realize, dom)`, where `dom` maps the loop vars around it (from `dom` down) to ranges."""
    dom = dict(dom or {})
    if isinstance(stmt, BlockRealize):
        return fn(stmt, dom)
    if isinstance(stmt, For):
        inner = {**dom, stmt.loop_var: E.Range(stmt.min, stmt.extent)}
        body = map_realizes(stmt.body, fn, inner)
        return stmt if body is stmt.body else stmt.replace(body=body)
    changes = {}
    for field in child_fields(type(stmt)):
        value = getattr(stmt, field)
        if isinstance(value, Stmt):
            new = map_realizes(value, fn, dom)
        elif isinstance(value, tuple) and any(isinstance(v, Stmt) for v in value):
            new = tuple(map_realizes(v, fn, dom) if isinstance(v, Stmt) else v for v in value)
            new = value if all(a is b for a, b in zip(new, value)) else new
        else:
            continue
        if new is not value:
            changes[field] = new
    if not changes:
        return stmt
    return (
        SeqStmt.flatten(*changes["seq"]) if isinstance(stmt, SeqStmt) else stmt.replace(**changes)
    )


def append_predicate(stmt: Stmt, predicate: E.PrimExpr, loop: For, primitive: str) -> Stmt:
    """Guard every block directly under `stmt` with `predicate` (TVM's BlockPredicateAppender).
    A store outside any block could not be guarded: refuse."""
    _refuse_bare_stores(stmt, loop, primitive)
    return map_realizes(stmt, lambda r, _: r.replace(predicate=r.predicate & predicate))


def _refuse_bare_stores(stmt: Stmt, loop: For, primitive: str) -> None:
    if isinstance(stmt, (BufferStore, Evaluate)) and not _is_no_op(stmt):
        raise ScheduleError(
            f"{primitive}: loop {loop.loop_var.name} holds a statement outside any block, which "
            "a predicate could not guard; the extent must be divisible by the factors here",
            [loop],
        )
    if isinstance(stmt, (BlockRealize, Block)):
        return
    for field in child_fields(type(stmt)):
        value = getattr(stmt, field)
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, Stmt):
                _refuse_bare_stores(item, loop, primitive)


def _is_no_op(stmt: Stmt) -> bool:
    return isinstance(stmt, Evaluate) and isinstance(stmt.value, E.IntImm)


def simplify_bindings(stmt: Stmt, outer: dict, preserve_unit_iters: bool,
                      changed: tuple[E.Var, ...]) -> Stmt:  # fmt: skip
    """Simplify the iter values and predicates of the blocks under `stmt` that use one of the
    `changed` loop variables, as affine maps of the loops around them (TVM's
    IterMapSimplifyBlockBinding): `(i_0 * 4 + i_1) // 4` -> `i_0`. Blocks that use none of
    them were left as they were by the rewrite. With `preserve_unit_iters`, loops of extent 1
    stay in the bindings; otherwise they become their start value."""
    analyzer = Analyzer()
    changed_ids = {id(var) for var in changed}

    def uses_changed(realize: BlockRealize) -> bool:
        return any(uses_var(value, lambda v: id(v) in changed_ids)
                   for value in (*realize.iter_values, realize.predicate))  # fmt: skip

    def simplify(realize: BlockRealize, dom: dict) -> BlockRealize:
        if not uses_changed(realize):
            return realize
        iters = {v: r for v, r in dom.items() if not (preserve_unit_iters and is_one(r.extent))}
        values = _simplified_values(realize, iters, analyzer)
        predicate = _simplify_predicate(realize.predicate, iters, analyzer)
        same = predicate is realize.predicate and all(
            a is b for a, b in zip(values, realize.iter_values)
        )
        return realize if same else realize.replace(iter_values=values, predicate=predicate)

    return map_realizes(stmt, simplify, outer)


def _simplified_values(realize: BlockRealize, iters: dict, analyzer: Analyzer) -> tuple:
    """The iter values through the iter-map simplifier, each kept only when it provably equals
    the value it replaces (given the loop ranges and the block predicate); otherwise the plain
    simplification. The check guards against a wrong iter map silently changing a binding."""
    values = tuple(realize.iter_values)
    if not values:
        return values
    mapped = iter_map_simplify(values, iters, realize.predicate, analyzer=analyzer)
    with analyzer.constraint_scope(convert(True)):
        for var, rng in iters.items():
            analyzer.bind(var, rng, allow_override=True)
        with analyzer.constraint_scope(realize.predicate):
            return tuple(
                new if new is old or analyzer.can_prove_equal(new, old) else analyzer.simplify(old)
                for new, old in zip(mapped, values)
            )


def _simplify_predicate(predicate: E.PrimExpr, iters: dict, analyzer: Analyzer) -> E.PrimExpr:
    if isinstance(predicate, E.IntImm):
        return predicate
    with analyzer.constraint_scope(convert(True)):
        for var, rng in iters.items():
            analyzer.bind(var, rng, allow_override=True)
        return analyzer.simplify(predicate)

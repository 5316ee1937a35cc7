"""When may loops run as array operations? The interpreter's dependence tests.

Parallel loops: a set of loops V may run "all points at once, statement by statement" when no
two points of V touch a common element of any buffer the body writes. The sufficient test used
here: for each written storage, all accesses go through one Buffer, and the dimensions whose
index is the same expression in every access (and depends only on V and values fixed outside
the body) determine the point of V (mixed-radix injectivity, see `linear.py`).

Reductions: a loop nest whose body is `C[w] = C[w] op f` (op one of + - * min max and or), with
an optional init store `C[w] = v0` before it, where `w` and `v0` do not depend on the reduction
loops and nothing else reads or writes C, runs as a numpy reduction (floating-point sums are
re-associated; integers stay exact).

All expressions are examined after substituting block iter vars by their bindings and let
variables by their values, so they are written in loop variables only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from schedlab.ir import expr as E
from schedlab.ir import op
from schedlab.ir.buffer import Buffer
from schedlab.ir.functor import post_order_visit, substitute, uses_var
from schedlab.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IterType,
    LetStmt,
    SeqStmt,
    Stmt,
)  # fmt: skip
from schedlab.ir.structural import structural_equal

from .linear import Verdict, determines, linearize, uses_targets

StorageKey = Callable[[Buffer], int]


@dataclass
class Access:
    buffer: Buffer
    indices: tuple[E.PrimExpr, ...]
    store: bool


@dataclass
class Facts:
    """What a statement does, in loop variables: its buffer accesses, the variables it binds
    (inner loops, let expressions) and the bounds of its inner loops."""

    accesses: list[Access] = field(default_factory=list)
    inner: set[int] = field(default_factory=set)
    bounds: list[E.PrimExpr] = field(default_factory=list)
    loops: dict[int, E.PrimExpr] = field(default_factory=dict)  # inner loop var -> extent
    problem: str | None = None


def _substituter(mapping: dict[int, E.PrimExpr]):
    if not mapping:
        return lambda node: node
    return lambda node: substitute(node, lambda v: mapping.get(id(v)))


class _Collector:
    def __init__(self):
        self.facts = Facts()
        self.defined: set[int] = set()  # let vars bound inside (they are substituted away)

    def stmt(self, node: Stmt, mapping: dict[int, E.PrimExpr]) -> None:
        sub = _substituter(mapping)
        if isinstance(node, BufferStore):
            self.expr(node.value, sub)
            self.access(node.buffer, node.indices, sub, store=True)
        elif isinstance(node, SeqStmt):
            for item in node.seq:
                self.stmt(item, mapping)
        elif isinstance(node, For):
            self.expr(node.min, sub)
            self.expr(node.extent, sub)
            self.facts.bounds += [sub(node.min), sub(node.extent)]
            self.facts.inner.add(id(node.loop_var))
            start, extent = sub(node.min), sub(node.extent)
            if is_clean(start, self.facts.inner) and is_clean(extent, self.facts.inner):
                self.facts.loops[id(node.loop_var)] = extent
            self.stmt(node.body, mapping)
        elif isinstance(node, IfThenElse):
            self.expr(node.condition, sub)
            self.stmt(node.then_case, mapping)
            if node.else_case is not None:
                self.stmt(node.else_case, mapping)
        elif isinstance(node, LetStmt):
            self.expr(node.value, sub)
            self.defined.add(id(node.var))
            self.stmt(node.body, {**mapping, id(node.var): sub(node.value)})
        elif isinstance(node, BlockRealize):
            self.block(node, mapping, sub)
        elif isinstance(node, Evaluate):
            self.expr(node.value, sub)
        elif isinstance(node, Allocate):
            self.facts.problem = "an allocation inside the loop body"
        else:
            self.facts.problem = f"a {type(node).__name__} inside the loop body"

    def block(self, node: BlockRealize, mapping, sub) -> None:
        block = node.block
        if block.alloc_buffers or block.match_buffers:
            self.facts.problem = f"block {block.name_hint} allocates or matches buffers"
            return
        for value in node.iter_values:
            self.expr(value, sub)
        inner = dict(mapping)
        for iter_var, value in zip(block.iter_vars, node.iter_values):
            inner[id(iter_var.var)] = sub(value)
            self.defined.add(id(iter_var.var))
        self.expr(node.predicate, _substituter(inner))
        if block.init is not None:
            self.stmt(block.init, inner)
        self.stmt(block.body, inner)

    def access(self, buffer: Buffer, indices, sub, store: bool) -> None:
        for index in indices:
            self.expr(index, sub)
        self.facts.accesses.append(Access(buffer, tuple(sub(i) for i in indices), store))

    def expr(self, node: E.PrimExpr, sub) -> None:
        def visit(item):
            if isinstance(item, E.BufferLoad):
                self.facts.accesses.append(
                    Access(item.buffer, tuple(sub(i) for i in item.indices), False)
                )
            elif isinstance(item, E.Let):
                self.facts.inner.add(id(item.var))
                self.defined.add(id(item.var))
            elif isinstance(item, E.Var) and item.dtype.lanes > 1:
                if id(item) not in self.defined:
                    self.facts.problem = f"the vector variable {item.name} comes from outside"

        post_order_visit(node, visit)


def collect(body: Stmt) -> Facts:
    collector = _Collector()
    collector.stmt(body, {})
    return collector.facts


def is_clean(expr: E.PrimExpr, inner: set[int]) -> bool:
    """No loads and no variables bound inside the body: a value fixed by the loop point."""
    found = False

    def visit(item):
        nonlocal found
        if isinstance(item, (E.BufferLoad, E.Let)) or (
            isinstance(item, E.Var) and id(item) in inner
        ):
            found = True

    post_order_visit(expr, visit)
    return not found


def loop_extents(loops: list[For]) -> dict[int, int | E.PrimExpr]:
    return {id(loop.loop_var): _const(loop.extent) for loop in loops}


def _const(expr: E.PrimExpr):
    return expr.value if isinstance(expr, E.IntImm) else expr


# ---------------------------------------------------------------------------------------------
# parallel loops
# ---------------------------------------------------------------------------------------------


def parallel_verdict(loops: list[For], body: Stmt, storage: StorageKey) -> Verdict:
    """May `loops` (a perfect nest around `body`) run all at once?"""
    targets = {id(loop.loop_var) for loop in loops}
    facts = collect(body)
    if facts.problem:
        return Verdict(False, reason=facts.problem)
    if any(uses_targets(bound, targets) for bound in facts.bounds):
        return Verdict(False, reason="an inner loop's bounds depend on a vectorized loop")
    # inner loops with fixed bounds are terms of the indices too (a tile `io * 8 + ii`): the
    # elements one point reaches over all their iterations must still be its own
    ranged = {key: _const(extent) for key, extent in facts.loops.items()}
    unusable = facts.inner - set(ranged)
    extents = {**loop_extents(loops), **ranged}
    groups: list = []
    for key in {storage(a.buffer) for a in facts.accesses if a.store}:
        accesses = [a for a in facts.accesses if storage(a.buffer) == key]
        if any(a.buffer is not accesses[0].buffer for a in accesses):
            return Verdict(False, reason=f"{accesses[0].buffer.name} is accessed through aliases")
        forms = []
        for dim, first in enumerate(accesses[0].indices):
            if not is_clean(first, unusable):
                continue
            if all(structural_equal(a.indices[dim], first) for a in accesses[1:]):
                form = linearize(first, targets | set(ranged))
                if form is not None:
                    forms.append(form)
        verdict = determines(forms, extents, targets)
        if not verdict.ok:
            return Verdict(False, reason=f"{accesses[0].buffer.name}: {verdict.reason}")
        groups += verdict.groups
    return Verdict(True, groups)


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------

_KINDS = {E.Add: "add", E.Sub: "sub", E.Mul: "mul", E.Min: "min", E.Max: "max"}


@dataclass
class Reduction:
    """A reduction loop nest, in loop variables (see the module docstring)."""

    buffer: Buffer
    indices: tuple[E.PrimExpr, ...]
    kind: str
    value: E.PrimExpr
    start: E.PrimExpr | None  # the init value, or None without init
    update_guard: E.PrimExpr | None  # None: the update always runs
    init_guard: E.PrimExpr | None  # None: no init (an init that always runs has True)
    simple_init: bool  # the init runs exactly at the first reduction point, no guards
    groups: list = field(default_factory=list)  # run-time injectivity conditions
    # with simple_init: the part of the init condition fixed outside the nest (None: none)
    init_outer: E.PrimExpr | None = None


@dataclass
class _Guarded:
    guards: list[E.PrimExpr]
    store: BufferStore


class _NotStraight(Exception):
    pass


def _straight(node: Stmt, mapping, guards: list, out: list) -> None:
    """Straight-line code as guarded stores (in loop variables), or _NotStraight."""
    sub = _substituter(mapping)
    if isinstance(node, BufferStore):
        store = BufferStore(node.buffer, sub(node.value), tuple(sub(i) for i in node.indices))
        out.append(_Guarded(list(guards), store))
    elif isinstance(node, SeqStmt):
        for item in node.seq:
            _straight(item, mapping, guards, out)
    elif isinstance(node, IfThenElse):
        condition = sub(node.condition)
        _straight(node.then_case, mapping, guards + [condition], out)
        if node.else_case is not None:
            _straight(node.else_case, mapping, guards + [op.logical_not(condition)], out)
    elif isinstance(node, LetStmt):
        _straight(node.body, {**mapping, id(node.var): sub(node.value)}, guards, out)
    elif isinstance(node, BlockRealize):
        _straight_block(node, mapping, guards, out)
    elif not (isinstance(node, Evaluate) and isinstance(node.value, E.IntImm)):
        raise _NotStraight


def _straight_block(node: BlockRealize, mapping, guards, out) -> None:
    block: Block = node.block
    if block.alloc_buffers or block.match_buffers:
        raise _NotStraight
    sub = _substituter(mapping)
    inner = dict(mapping)
    for iter_var, value in zip(block.iter_vars, node.iter_values):
        inner[id(iter_var.var)] = sub(value)
    predicate = _substituter(inner)(node.predicate)  # (iter vars are bound first, as in codegen)
    guards = guards if _is_true(predicate) else guards + [predicate]
    if block.init is not None:
        reduce_vars = [iv for iv in block.iter_vars if iv.iter_type == IterType.REDUCE]
        condition = op.all(*[op.eq(iv.var, iv.dom.min) for iv in reduce_vars])
        _straight(block.init, inner, guards + [_substituter(inner)(condition)], out)
    _straight(block.body, inner, guards, out)


def _is_true(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


def _conjunction(guards: list[E.PrimExpr]) -> E.PrimExpr | None:
    result = op.all(*guards)
    return None if _is_true(result) else result


def _loads_of(expr: E.PrimExpr, storage: StorageKey, key: int) -> int:
    count = 0

    def visit(item):
        nonlocal count
        if isinstance(item, E.BufferLoad) and storage(item.buffer) == key:
            count += 1

    post_order_visit(expr, visit)
    return count


def _split_update(update: BufferStore, storage: StorageKey) -> tuple[str, E.PrimExpr] | None:
    """(kind, f) when the update is `C[w] = C[w] op f` (or `f op C[w]` for commutative ops)."""
    value = update.value
    kind = _KINDS.get(type(value))
    if isinstance(value, (E.And, E.Or)):
        kind = "and" if isinstance(value, E.And) else "or"
    if kind is None or value.dtype.lanes > 1:
        return None
    if kind in ("add", "sub", "mul", "min", "max") and not (
        value.dtype.is_float or value.dtype.is_integer
    ):
        return None
    sides = [(value.a, value.b)] if kind == "sub" else [(value.a, value.b), (value.b, value.a)]
    for mine, other in sides:
        if (
            isinstance(mine, E.BufferLoad)
            and mine.buffer is update.buffer
            and len(mine.indices) == len(update.indices)
            and all(structural_equal(a, b) for a, b in zip(mine.indices, update.indices))
        ):
            return kind, other
    return None


def match_reduction(
    reduce_loops: list[For], parallel_loops: list[For], body: Stmt, storage: StorageKey
) -> Reduction | None:
    """The reduction `reduce_loops` (outer) x `parallel_loops` (inner) perform, or None."""
    out: list[_Guarded] = []
    try:
        _straight(body, {}, [], out)
    except _NotStraight:
        return None
    if len(out) not in (1, 2):
        return None
    update, init = out[-1], (out[0] if len(out) == 2 else None)
    split = _split_update(update.store, storage)
    if split is None:
        return None
    kind, value = split
    buffer, indices = update.store.buffer, update.store.indices
    if init is not None and not _same_target(init.store, buffer, indices):
        return None
    reduce_ids = {id(loop.loop_var) for loop in reduce_loops}
    parallel_ids = {id(loop.loop_var) for loop in parallel_loops}
    update_guard = _conjunction(update.guards)
    # an init without guards runs at every point (init_guard True), unlike no init at all (None)
    init_guard = op.all(*init.guards) if init is not None else None
    start = init.store.value if init is not None else None
    key = storage(buffer)
    checked = [value, *indices] + [e for e in (update_guard, init_guard, start) if e is not None]
    if sum(_loads_of(e, storage, key) for e in checked) or any(
        uses_targets(e, reduce_ids) for e in (*indices, *([start] if start is not None else []))
    ):
        return None
    if any(not is_clean(i, set()) for i in indices):
        return None
    forms = [linearize(i, parallel_ids) for i in indices]
    verdict = determines([f for f in forms if f is not None], loop_extents(parallel_loops),
                         parallel_ids)  # fmt: skip
    if not verdict.ok:
        return None
    simple, outer = False, None
    if init is not None and not update.guards:
        simple, outer = _split_init(init.guards, reduce_loops, reduce_ids | parallel_ids)
    return Reduction(
        buffer, indices, kind, value, start, update_guard, init_guard, simple, verdict.groups,
        outer,
    )  # fmt: skip


def _split_init(guards, reduce_loops: list[For], loop_ids: set[int]):
    """(simple, outer): the init condition's conjuncts that use the nest's loops hold exactly at
    the first reduction point; `outer` is the conjunction of the others (fixed outside)."""
    inner, outer = [], []
    for guard in guards:
        for conjunct in _conjuncts(guard):
            (inner if uses_targets(conjunct, loop_ids) else outer).append(conjunct)
    if not inner or not _origin_only(op.all(*inner), reduce_loops):
        return False, None
    return True, _conjunction(outer)


def _same_target(store: BufferStore, buffer: Buffer, indices) -> bool:
    return store.buffer is buffer and all(
        structural_equal(a, b) for a, b in zip(store.indices, indices)
    )


def _origin_only(condition: E.PrimExpr, loops: list[For]) -> bool:
    """Does `condition` (a conjunction of equalities) hold exactly when every reduction loop is
    at its first iteration? True when each equality is `sum(c * (r - min_r)) == 0` with
    coefficients of one sign and every loop that iterates more than once appears."""
    targets = {id(loop.loop_var): loop for loop in loops}
    covered: set[int] = set()
    for equality in _conjuncts(condition):
        if not isinstance(equality, E.EQ):
            return False
        form = linearize(op.sub(equality.a, equality.b), set(targets))
        if form is None or form.lanes or not all(isinstance(c, int) for c in form.coeffs.values()):
            return False
        signs = {c > 0 for c in form.coeffs.values()}
        if len(signs) > 1:
            return False
        at_origin = form.rest if form.rest is not None else op.const(0)
        for key, coefficient in form.coeffs.items():
            at_origin = op.add(at_origin, op.mul(targets[key].min, coefficient))
        if not (isinstance(at_origin, E.IntImm) and at_origin.value == 0):
            return False
        covered |= set(form.coeffs)
    return all(id(loop.loop_var) in covered or _at_most_once(loop) for loop in loops)


def _at_most_once(loop: For) -> bool:
    return isinstance(loop.extent, E.IntImm) and loop.extent.value <= 1


def _conjuncts(condition: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(condition, E.And):
        return _conjuncts(condition.a) + _conjuncts(condition.b)
    return [condition]


def uses_any(expr: E.PrimExpr, ids: set[int]) -> bool:
    return uses_var(expr, lambda v: id(v) in ids)

"""Reduction primitives: `decompose_reduction` and `rfactor` (TVM's DecomposeReduction and
RFactor).

A reduction block carries its initialisation in `T.init()`, which runs when every reduce iter
var is at its minimum. `decompose_reduction` makes that initialisation a block of its own, placed
before a chosen loop; `rfactor` splits a reduction into partial reductions along one reduction
loop (written to a new "rf" buffer with an extra dimension) and a write-back block that reduces
the partials -- which turns part of the reduction into a spatial loop that can be parallelized
or vectorized.
"""

from __future__ import annotations

from schedlab.arith import Analyzer, block_access_regions
from schedlab.ir import expr as E
from schedlab.ir.buffer import BufferRegion, decl_buffer
from schedlab.ir.functor import collect_vars, substitute, uses_var
from schedlab.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IterType,
    IterVar,
    SeqStmt,
)

from ..analysis.reduction import (
    ReductionUpdate,
    RepeatedReductionError,
    check_reduction_block,
    check_runs_once_under,
    match_reduction,
)
from ..errors import (
    DependencyError,
    LocationError,
    LoopKindError,
    NotReductionBlockError,
    NotSingleChildError,
    ScheduleError,
)
from ..instruction import PrimitiveContext, primitive

__all__ = [
    "decompose_reduction", "rfactor", "LoopPositionError", "LoopHeightError", "RFactorLoopError",
    "FactorAxisError", "NotReductionBlockError", "RepeatedReductionError",
]  # fmt: skip


class LoopPositionError(LocationError):
    """The loop is not one of the loops above the block (in the block's scope)."""


class LoopHeightError(LocationError):
    """The loop is inside a loop of the block's reduction, where the init cannot go."""


class RFactorLoopError(ScheduleError):
    """The loops of the reduction do not have the shape rfactor needs."""


class FactorAxisError(ScheduleError):
    """factor_axis is outside the range of the rf buffer's dimensions."""


# ---------------------------------------------------------------------------------------------
# decompose_reduction
# ---------------------------------------------------------------------------------------------
@primitive("DecomposeReduction", inputs=("block", "loop"), outputs="block")
def decompose_reduction(ctx: PrimitiveContext, block: Block, loop: For):
    """Move the init of reduction `block` into a new block `<name>_init` placed right before
    `loop`, under copies of the loops between `loop` and the block that its spatial iter vars
    use. The reduction block loses its init and becomes `<name>_update` (TVM's naming; the
    block handle keeps pointing at it). Returns the init block.

    Preconditions: `block` is a reduction block (an init, affine bindings, only spatial and
    reduce iter vars, the only writer of its output, outputs indexed by spatial iter vars);
    `loop` is one of the loops above it; `loop` is not inside a loop that a reduce iter var of
    the block uses (the init must run before the whole reduction); under `loop` the block runs
    each instance at most once (its iter values are a one-to-one map of the loops from `loop`
    down): a loop there that the block does not use repeats the whole reduction, each time from
    its init, which a single hoisted init could not do.

    Parameters: `block` -- the reduction block; `loop` -- the loop to place the init before.

    >>> sch = Schedule(workloads.get("gemm", M=4, N=4, K=4)[0])
    >>> block = sch.get_block("C")
    >>> i, j, k = sch.get_loops(block)
    >>> print(sch.func.script(show_header=False))  # before  # doctest: +ELLIPSIS
    @T.prim_func
    def gemm(...):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i, j, k in T.grid(4, 4, 4):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    >>> init = sch.decompose_reduction(block, i)
    >>> print(sch.func.script(show_header=False))  # after  # doctest: +ELLIPSIS
    @T.prim_func
    def gemm(...):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i_init, j_init in T.grid(4, 4):
            with T.block("C_init"):
                vi_init, vj_init = T.axis.remap("SS", [i_init, j_init])
                T.reads()
                T.writes(C[vi_init, vj_init])
                C[vi_init, vj_init] = T.float32(0)
        for i, j, k in T.grid(4, 4, 4):
            with T.block("C_update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(C[vi, vj], A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    """
    _expect(block, Block, "block", "decompose_reduction")
    _expect(loop, For, "loop", "decompose_reduction")
    state = ctx.state
    loops = state.loops_above(block)
    position = _position(loops, loop)
    if position is None:
        raise LoopPositionError(
            f"decompose_reduction: loop {loop.loop_var.name} is not above block "
            f"{block.name_hint!r} (its loops: {', '.join(x.loop_var.name for x in loops)})",
            [loop, block],
        )  # fmt: skip
    check_reduction_block(state, block)
    realize = state.realize_of(block)
    _check_loop_height(block, realize, loops, position)
    check_runs_once_under(state, block, loops[position], "decompose_reduction")
    init_nest, init_block = _init_nest(block, realize, loops[position:])
    update = block.replace(name_hint=f"{block.name_hint}_update", init=None,
                           reads=_update_reads(block))  # fmt: skip
    state = state.replace(block, update)
    current = state.node(loop.uid)
    state = state.replace(current, SeqStmt.flatten(init_nest, current))
    return state, state.node(init_block.uid)


def _expect(value, types, name: str, primitive_name: str) -> None:
    if not isinstance(value, types):
        expected = "loop" if types is For else "block"
        raise ScheduleError(
            f"{primitive_name}: {name} must be a {expected} handle, got {type(value).__name__}"
        )


def _position(loops: list[For], loop: For) -> int | None:
    return next((i for i, x in enumerate(loops) if x is loop), None)


def _check_loop_height(block: Block, realize: BlockRealize, loops: list[For], position: int):
    index_of = {id(x.loop_var): i for i, x in enumerate(loops)}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type != IterType.REDUCE:
            continue
        for var in collect_vars(value):
            index = index_of.get(id(var))
            if index is not None and index < position:
                raise LoopHeightError(
                    f"decompose_reduction: loop {loops[position].loop_var.name} is inside loop "
                    f"{var.name}, which reduce iter var {iv.var.name} of block "
                    f"{block.name_hint!r} uses; the init must go before every loop of the "
                    f"reduction (choose {var.name} or a loop above it)",
                    [loops[position], loops[index]],
                )  # fmt: skip


def _init_nest(block: Block, realize: BlockRealize, below: list[For]):
    """The init block (spatial iter vars renamed `*_init`) under copies of the loops of `below`
    that its bindings use; the other loops of `below` are dropped, with the predicate terms
    that mention them."""
    var_map, iter_vars, values = {}, [], []
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == IterType.SPATIAL:
            new = IterVar(E.Var(f"{iv.var.name}_init", iv.var.dtype), iv.dom, IterType.SPATIAL)
            var_map[iv.var] = new.var
            iter_vars.append(new)
            values.append(value)
    chosen = [x for x in below if any(_uses(v, x.loop_var) for v in values)]
    dropped = {id(x.loop_var) for x in below if x not in chosen}
    terms = [t for t in _conjuncts(realize.predicate)
             if not uses_var(t, lambda v: id(v) in dropped)]  # fmt: skip
    loop_map = {x.loop_var: E.Var(f"{x.loop_var.name}_init", x.loop_var.dtype) for x in chosen}
    init = Block(iter_vars, (), (), f"{block.name_hint}_init", substitute(block.init, var_map),
                 annotations=block.annotations)  # fmt: skip
    reads, writes = block_access_regions(init)
    init = init.replace(reads=tuple(reads), writes=tuple(writes))
    stmt = BlockRealize([substitute(v, loop_map) for v in values],
                        substitute(_conjunction(terms), loop_map), init)  # fmt: skip
    for x in reversed(chosen):
        if uses_var(E.Range(x.min, x.extent), lambda v: id(v) in dropped):
            raise LoopHeightError(
                f"decompose_reduction: the range of loop {x.loop_var.name} depends on a loop "
                "the init block would not have", [x, block]
            )  # fmt: skip
        stmt = For(loop_map[x.loop_var], substitute(x.min, loop_map),
                   substitute(x.extent, loop_map), x.kind, stmt, x.thread_tag)  # fmt: skip
    return stmt, init


def _update_reads(block: Block) -> tuple[BufferRegion, ...]:
    """The update block reads what it accumulates into (TVM adds the written regions first)."""
    read = {id(r.buffer) for r in block.reads}
    return tuple(w for w in block.writes if id(w.buffer) not in read) + block.reads


def _uses(expr, var: E.Var) -> bool:
    return uses_var(expr, lambda v: v is var)


def _conjuncts(cond: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(cond, E.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    if isinstance(cond, E.IntImm) and cond.value:
        return []
    return [cond]


def _conjunction(terms: list[E.PrimExpr]) -> E.PrimExpr:
    result = None
    for term in terms:
        result = term if result is None else E.And(result, term)
    return E.IntImm("bool", 1) if result is None else result


# ---------------------------------------------------------------------------------------------
# rfactor
# ---------------------------------------------------------------------------------------------
@primitive("RFactor", inputs=("loop",), outputs="block")
def rfactor(ctx: PrimitiveContext, loop: For, factor_axis: int):
    """Factor the reduction over `loop` (TVM's rfactor): a new block `<name>_rf` computes one
    partial reduction per iteration of `loop` into a new buffer `<buffer>_rf` -- the output's
    shape with `loop`'s extent inserted at `factor_axis` -- under copies of all the block's
    loops, where `loop` is now a spatial loop; the original block becomes the write-back: it
    reduces the partials over `loop` into the output, under the block's spatial loops and
    `loop`. Returns the rf block (the block handle keeps pointing at the write-back block).

    Preconditions: `loop` is serial, starts at 0, and has exactly one block under it, a
    reduction block whose update is `C = C op f(...)` for a known reducer (sum, product, max,
    min) with init the identity of op; `loop` is used by reduce iter vars only, and no loop
    is used by both spatial and reduce iter vars; the block is the first block under its
    outermost loop and the only one under its outermost reduction loop; no later block under
    those loops overwrites what the block reads; the block predicate keeps at least one
    iteration for every value of `loop`; `-(ndim + 1) <= factor_axis <= ndim`.

    Parameters: `loop` -- a reduction loop of the block; `factor_axis` -- where the new
    dimension goes in the rf buffer (negative counts from the end).

    >>> sch = Schedule(workloads.get("reduce_sum", M=4, N=8)[0])
    >>> i, k = sch.get_loops(sch.get_block("A_red"))
    >>> print(sch.func.script(show_header=False))  # before
    @T.prim_func
    def reduce_sum(A: T.Buffer((4, 8), "float32"), A_red: T.Buffer((4,), "float32")):
        T.func_attr({"global_symbol": "reduce_sum", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i, k in T.grid(4, 8):
            with T.block("A_red"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.reads(A[vi, vk])
                T.writes(A_red[vi])
                with T.init():
                    A_red[vi] = T.float32(0)
                A_red[vi] = A_red[vi] + A[vi, vk]
    >>> rf = sch.rfactor(k, 0)
    >>> print(sch.func.script(show_header=False))  # after
    @T.prim_func
    def reduce_sum(A: T.Buffer((4, 8), "float32"), A_red: T.Buffer((4,), "float32")):
        T.func_attr({"global_symbol": "reduce_sum", "tir.noalias": True, "schedlab.num_outputs": 1})
        A_red_rf = T.alloc_buffer((8, 4), "float32")
        for i, k in T.grid(4, 8):
            with T.block("A_red_rf"):
                vk, vi = T.axis.remap("SS", [k, i])
                T.reads(A[vi, vk])
                T.writes(A_red_rf[vk, vi])
                A_red_rf[vk, vi] = A[vi, vk]
        for i_1, k_1 in T.grid(4, 8):
            with T.block("A_red"):
                vk_1, vi_1 = T.axis.remap("RS", [k_1, i_1])
                T.reads(A_red_rf[vk_1, vi_1])
                T.writes(A_red[vi_1])
                with T.init():
                    A_red[vi_1] = T.float32(0)
                A_red[vi_1] = A_red[vi_1] + A_red_rf[vk_1, vi_1]
    """
    _expect(loop, For, "loop", "rfactor")
    state = ctx.state
    block = _single_block(state, loop)
    check_reduction_block(state, block)
    update = match_reduction(block)
    realize = state.realize_of(block)
    loops = state.loops_above(block)
    spatial, reduce = _touched_loops(realize, loops)
    _check_rf_loop(loop, block, spatial, reduce, loops)
    _check_loop_shape(state, block, loops, spatial, reduce)
    _check_no_overwrite(state, block, loops[0])
    axis = _factor_axis(factor_axis, update, loop)
    kept_terms = _split_predicate(realize.predicate, block, loop, loops, reduce)
    rf_buffer = decl_buffer(_rf_shape(update, loop, axis), update.buffer.dtype,
                            f"{update.buffer.name}_rf", update.buffer.scope)  # fmt: skip
    plan = _RFactor(block, realize, loop, loops, update, rf_buffer, axis)
    rf_nest, rf_block = plan.rf_nest()
    wb_realize = plan.write_back(_conjunction(kept_terms))
    state = _replace_reduction(state, plan, rf_nest, wb_realize, reduce)
    return state, state.node(rf_block.uid)


def _single_block(state, loop: For) -> Block:
    blocks = state.child_blocks(loop)
    if len(blocks) != 1:
        names = ", ".join(repr(b.name_hint) for b in blocks) or "none"
        raise NotSingleChildError(
            f"rfactor: loop {loop.loop_var.name} must have exactly one block under it (the "
            f"reduction), it has {len(blocks)}: {names}", [loop, *blocks]
        )  # fmt: skip
    return blocks[0]


def _touched_loops(realize: BlockRealize, loops: list[For]) -> tuple[set[int], set[int]]:
    """ids of the loop vars used by spatial iter values and by reduce iter values."""
    loop_ids = {id(x.loop_var) for x in loops}
    spatial: set[int] = set()
    reduce: set[int] = set()
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        used = {id(v) for v in collect_vars(value)} & loop_ids
        (spatial if iv.iter_type == IterType.SPATIAL else reduce).update(used)
    return spatial, reduce


def _check_rf_loop(loop: For, block: Block, spatial, reduce, loops) -> None:
    name = loop.loop_var.name
    if loop.kind != ForKind.SERIAL:
        raise LoopKindError(f"rfactor: loop {name} is {loop.kind}; it must be serial", [loop])
    if id(loop.loop_var) not in reduce or id(loop.loop_var) in spatial:
        what = "a spatial" if id(loop.loop_var) in spatial else "no reduce"
        raise RFactorLoopError(
            f"rfactor: loop {name} must be a loop of the reduction (used only by reduce iter "
            f"vars of block {block.name_hint!r}), but {what} iter var uses it", [loop, block]
        )  # fmt: skip
    if not (isinstance(loop.min, E.IntImm) and loop.min.value == 0):
        raise RFactorLoopError(f"rfactor: loop {name} must start at 0, it starts at {loop.min}",
                               [loop])  # fmt: skip
    loop_ids = {id(x.loop_var) for x in loops}
    if uses_var(loop.extent, lambda v: id(v) in loop_ids):
        raise RFactorLoopError(
            f"rfactor: the extent {loop.extent} of loop {name} depends on other loops; the rf "
            "buffer needs a fixed size", [loop]
        )  # fmt: skip


def _check_loop_shape(state, block: Block, loops: list[For], spatial, reduce) -> None:
    for x in loops:
        if id(x.loop_var) in spatial and id(x.loop_var) in reduce:
            raise RFactorLoopError(
                f"rfactor: loop {x.loop_var.name} is used by both spatial and reduce iter vars "
                f"of block {block.name_hint!r}", [x, block]
            )  # fmt: skip
    first = state.child_blocks(loops[0])
    if first[0] is not block:
        raise RFactorLoopError(
            f"rfactor: block {block.name_hint!r} must be the first block under its outermost "
            f"loop {loops[0].loop_var.name}, but {first[0].name_hint!r} comes before it",
            [loops[0], block],
        )  # fmt: skip
    outer_reduce = next(x for x in loops if id(x.loop_var) in reduce)
    others = [b for b in state.child_blocks(outer_reduce) if b is not block]
    if others:
        raise RFactorLoopError(
            f"rfactor: the reduction loop {outer_reduce.loop_var.name} must contain only block "
            f"{block.name_hint!r}, it also contains {others[0].name_hint!r}",
            [outer_reduce, others[0]],
        )  # fmt: skip
    for node in state.ancestors(block)[len(state.ancestors(loops[0])) :]:
        if not isinstance(node, (For, SeqStmt, BlockRealize)):
            raise RFactorLoopError(
                f"rfactor: a {type(node).__name__} sits between the loops of block "
                f"{block.name_hint!r}; only loops may", [block]
            )  # fmt: skip


def _check_no_overwrite(state, block: Block, outer: For) -> None:
    """The partial reductions run before the whole loop nest: no later block under it may
    overwrite what the reduction reads."""
    read = {id(r.buffer) for r in block.reads}
    for other in state.child_blocks(outer):
        clash = [w.buffer.name for w in other.writes if id(w.buffer) in read]
        if other is not block and clash:
            raise DependencyError(
                f"rfactor: block {other.name_hint!r} under loop {outer.loop_var.name} writes "
                f"{clash[0]}, which block {block.name_hint!r} reads; the partial reductions "
                "would run before that write", [other, block]
            )  # fmt: skip


def _factor_axis(factor_axis, update: ReductionUpdate, loop: For) -> int:
    ndim = len(update.buffer.shape)
    if isinstance(factor_axis, bool) or not isinstance(factor_axis, int):
        raise FactorAxisError(f"rfactor: factor_axis must be an int, got {factor_axis!r}", [loop])
    if not -(ndim + 1) <= factor_axis <= ndim:
        raise FactorAxisError(
            f"rfactor: factor_axis {factor_axis} is out of range for the {ndim + 1}-d rf buffer "
            f"of {update.buffer.name}: expected {-(ndim + 1)} <= factor_axis <= {ndim}", [loop]
        )  # fmt: skip
    return factor_axis + ndim + 1 if factor_axis < 0 else factor_axis


def _rf_shape(update: ReductionUpdate, loop: For, axis: int) -> list[E.PrimExpr]:
    shape = list(update.buffer.shape)
    return shape[:axis] + [loop.extent] + shape[axis:]


def _split_predicate(predicate, block: Block, loop: For, loops: list[For], reduce) -> list:
    """The predicate terms the write-back keeps (those without reduction loops). The others
    must hold when the reduction loops other than `loop` are at their minimum, where the rf
    block's init runs: otherwise some partial result would never be initialised."""
    kept, checked = [], []
    for term in _conjuncts(predicate):
        (checked if uses_var(term, lambda v: id(v) in reduce) else kept).append(term)
    if not checked:
        return kept
    analyzer = Analyzer()
    for x in loops:
        analyzer.bind(x.loop_var, E.Range(x.min, x.extent), allow_override=True)
    at_min = {x.loop_var: x.min for x in loops if id(x.loop_var) in reduce and x is not loop}
    for term in checked:
        if not analyzer.can_prove(substitute(term, at_min)):
            raise RFactorLoopError(
                f"rfactor: the predicate term {term} of block {block.name_hint!r} may skip "
                f"every iteration for some values of loop {loop.loop_var.name}, which would "
                "leave partial results uninitialised", [block, loop]
            )  # fmt: skip
    return kept


class _RFactor:
    """Builds the rf block (with its loop nest) and the write-back block of one rfactor."""

    def __init__(self, block, realize, loop, loops, update, rf_buffer, axis):
        self.block, self.realize, self.loop, self.loops = block, realize, loop, loops
        self.update, self.rf_buffer, self.axis = update, rf_buffer, axis

    def rf_index(self, indices, extra: E.Var) -> list[E.PrimExpr]:
        indices = list(indices)
        return indices[: self.axis] + [extra] + indices[self.axis :]

    def rf_nest(self) -> tuple[For, Block]:
        iter_vars, values, var_map = self._rf_iters()
        extra = iter_vars[0].var
        index = self.rf_index([substitute(i, var_map) for i in self.update.indices], extra)
        rhs = substitute(self.update.rhs, var_map)
        reducer = self.update.reducer
        has_reduce = any(iv.iter_type == IterType.REDUCE for iv in iter_vars)
        value = reducer.combine(E.BufferLoad(self.rf_buffer, tuple(index)), rhs) if has_reduce \
            else rhs  # fmt: skip
        init = BufferStore(self.rf_buffer, self.update.init_value, index) if has_reduce else None
        rf_block = Block(
            iter_vars, self._rf_regions(self.block.reads, var_map, extra),
            self._rf_regions(self.block.writes, var_map, extra), f"{self.block.name_hint}_rf",
            BufferStore(self.rf_buffer, value, index), init, annotations=self.block.annotations,
        )  # fmt: skip
        loop_map = {x.loop_var: E.Var(x.loop_var.name, x.loop_var.dtype) for x in self.loops}
        stmt = BlockRealize([substitute(v, loop_map) for v in values],
                            substitute(self.realize.predicate, loop_map), rf_block)  # fmt: skip
        for x in reversed(self.loops):
            stmt = For(loop_map[x.loop_var], substitute(x.min, loop_map),
                       substitute(x.extent, loop_map), x.kind, stmt, x.thread_tag,
                       x.annotations)  # fmt: skip
        return stmt, rf_block

    def _rf_iters(self):
        """The rf block's iter vars: a spatial one for the rfactor loop first, then the
        block's own, where a reduce iter var using the rfactor loop is replaced by new reduce
        iter vars, one per other loop its binding uses."""
        loop_of = {id(x.loop_var): x for x in self.loops}
        extra = IterVar(E.Var(f"v{self.loop.loop_var.name}", self.loop.loop_var.dtype),
                        E.Range(self.loop.min, self.loop.extent), IterType.SPATIAL)  # fmt: skip
        by_loop = {self.loop.loop_var: extra.var}
        iter_vars, values, var_map = [extra], [self.loop.loop_var], {}
        for iv, value in zip(self.block.iter_vars, self.realize.iter_values):
            if iv.iter_type == IterType.SPATIAL or not _uses(value, self.loop.loop_var):
                iter_vars.append(iv)
                values.append(value)
                continue
            for var in collect_vars(value):
                source = loop_of.get(id(var))
                if source is None or any(var is known for known in by_loop):
                    continue
                new = IterVar(E.Var(f"v{var.name}", var.dtype),
                              E.Range(source.min, source.extent), IterType.REDUCE)  # fmt: skip
                by_loop[var] = new.var
                iter_vars.append(new)
                values.append(var)
            var_map[iv.var] = substitute(value, by_loop)
        return iter_vars, values, var_map

    def _rf_regions(self, regions, var_map, extra) -> tuple[BufferRegion, ...]:
        result = []
        for region in regions:
            region = substitute(region, var_map)
            if region.buffer is self.update.buffer:
                ranges = self.rf_index(region.region, E.Range(extra, E.IntImm(extra.dtype, 1)))
                region = BufferRegion(self.rf_buffer, tuple(ranges))
            result.append(region)
        return tuple(result)

    def write_back(self, predicate: E.PrimExpr) -> BlockRealize:
        """The original block (same uid) reducing the partials over the rfactor loop."""
        loop_var = self.loop.loop_var
        extra = IterVar(E.Var(f"v{loop_var.name}", loop_var.dtype),
                        E.Range(self.loop.min, self.loop.extent), IterType.REDUCE)  # fmt: skip
        iter_vars, values, var_map = [extra], [loop_var], {}
        for iv, value in zip(self.block.iter_vars, self.realize.iter_values):
            if iv.iter_type == IterType.SPATIAL:
                new = IterVar(E.Var(iv.var.name, iv.var.dtype), iv.dom, IterType.SPATIAL)
                var_map[iv.var] = new.var
                iter_vars.append(new)
                values.append(value)
        buffer = self.update.buffer
        index = [substitute(i, var_map) for i in self.update.indices]
        rf_index = self.rf_index(index, extra.var)
        partial = E.BufferLoad(self.rf_buffer, tuple(rf_index))
        value = self.update.reducer.combine(E.BufferLoad(buffer, tuple(index)), partial)
        block = self.block.replace(
            iter_vars=tuple(iter_vars), reads=(_point(self.rf_buffer, rf_index),),
            writes=(_point(buffer, index),), body=BufferStore(buffer, value, index),
            init=BufferStore(buffer, self.update.init_value, index),
        )  # fmt: skip
        return BlockRealize(values, predicate, block)


def _point(buffer, indices) -> BufferRegion:
    return BufferRegion(buffer, tuple(E.Range(i, E.IntImm(i.dtype, 1)) for i in indices))


def _replace_reduction(state, plan: _RFactor, rf_nest: For, wb_realize: BlockRealize, reduce):
    """Put the rf nest before the block's outermost loop, the write-back in place of the block
    (dropping the reduction loops other than the rfactor loop), and allocate the rf buffer in
    the block's scope."""
    scope_uid = state.scope_block(plan.block).uid
    outer = plan.loops[0]
    state = state.replace(outer, SeqStmt.flatten(rf_nest, outer))
    state = state.replace(plan.realize, wb_realize)
    for x in reversed(plan.loops):
        if id(x.loop_var) in reduce and x is not plan.loop:
            current = state.node(x.uid)
            state = state.replace(current, current.body)
    scope = state.node(scope_uid)
    return state.replace(scope, scope.replace(alloc_buffers=(*scope.alloc_buffers,
                                                             plan.rf_buffer)))  # fmt: skip

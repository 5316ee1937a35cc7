"""Blockize and tensorize: wrap a loop subtree (or several blocks) in an outer block, and
replace such a block's computation by a tensor intrinsic's implementation.

Blockizing a loop divides each iter value of the block below it into an outer part (over the
loops above the loop) and an inner part (over the loops from it down): `vi = i_0 * 16 + i_1`
blockized at `i_1` gives an outer block `<name>_o` with `vi_o = i_0`, and the original block
keeps `vi_i = i_1`, reading `vi_o * 16 + vi_i` where it read `vi`.
"""

from __future__ import annotations

from schedlab.arith import Analyzer, block_access_regions
from schedlab.arith.linear import parse_canonical
from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer, MatchBufferRegion
from schedlab.ir.dtype import handle
from schedlab.ir.functor import Mutator, collect_vars, substitute, uses_var
from schedlab.ir.node import fresh_uid
from schedlab.ir.op import const
from schedlab.ir.stmt import (
    Block,
    BlockRealize,
    For,
    ForKind,
    IterType,
    IterVar,
    SeqStmt,
    Stmt,
)

from ..analysis.affine import check_affine_binding
from ..errors import NotSingleChildError, TensorizeError
from ..instruction import PrimitiveContext, primitive
from ..state import ScheduleState
from ..tensor_intrin import MatchError, TensorIntrin, match_intrin, root_allocs, root_body
from ._blockize_predicate import (
    BlockizeError,
    init_predicate,
    inner_predicate,
    outer_predicate,
    split_predicate,
)
from .layout import simplify_indices


# ---------------------------------------------------------------------------------------------
# blockize
# ---------------------------------------------------------------------------------------------
@primitive("Blockize", inputs=("target",), outputs="block")
def blockize(ctx: PrimitiveContext, target, preserve_unit_iters: bool = True):
    """Wrap a loop's subtree (or a list of sibling blocks) in a new outer block, and return it.

    For a loop: the subtree must be a chain of loops around one block; each iter value of
    that block is divided into an outer part, over the loops above `target`, which becomes an
    iter var `<v>_o` of the outer block `<name>_o`, and an inner part, over `target` and the
    loops below it, which stays an iter var `<v>_i` of the original block. A reduction's init
    moves to the outer block (a new block `<name>_init` over the inner spatial iters) when the
    outer block has reduction iter vars.

    A block predicate is divided (TVM's outer and inner predicate): its conjuncts over the
    loops above `target` only (inner loops of extent 1 count as their value) guard the outer
    block, so a tile out of range runs neither the outer block nor its init; the others stay
    on the inner block, the outer loops written through the outer iter vars; an outer iter
    value that a partial tile can drive out of its domain gets `value < extent` on the outer
    block too. The moved init runs under the inner predicate as it was where the original
    init ran (reduction loops at their start).

    For a list of blocks: they must be consecutive siblings under one parent in one scope, and
    their bindings must not use loops outside them; they are wrapped in a block
    `outer_<names>_` without iter vars.

    Preconditions:
    - (loop) the loop contains nested loops around exactly one block, whose binding is affine;
      each iter value is `outer * c + inner` with `inner` a dense range `[0, c)` of the loops
      under `target` (`i_0 * 16 + i_1` at `i_1`), or uses only one of the two sides; a
      predicate conjunct over both outer and inner loops uses the outer loops only through
      (multiples of) outer iter values (`i_0 * 4 + i_1 * 2 + i_2 < 13` at `i_2`, where
      `vi_o = i_0 * 2 + i_1`);
    - (blocks) the blocks share one scope and form consecutive statements of one parent.

    Parameters:
    - target: a loop, or a list of blocks;
    - preserve_unit_iters: keep outer iter vars of extent 1 (TVM's default).

    >>> sch = Schedule(workloads.get("gemm", M=4, N=4, K=4)[0])
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> outer = sch.blockize(j)
    >>> print(sch.func.body.block.body.script(show_header=False))
    A = T.Buffer((4, 4), "float32")
    B = T.Buffer((4, 4), "float32")
    C = T.Buffer((4, 4), "float32")
    for i in range(4):
        with T.block("C_o"):
            vi_o = T.axis.spatial(4, i)
            vj_o = T.axis.spatial(1, 0)
            vk_o = T.axis.reduce(1, 0)
            T.reads(A[vi_o, 0:4], B[0:4, 0:4])
            T.writes(C[vi_o, 0:4])
            with T.init():
                for j in range(4):
                    with T.block("C_init"):
                        vj_init = T.axis.spatial(4, j)
                        T.reads()
                        T.writes(C[vi_o, vj_init])
                        C[vi_o, vj_init] = T.float32(0)
            for j_1, k in T.grid(4, 4):
                with T.block("C"):
                    vj_i, vk_i = T.axis.remap("SR", [j_1, k])
                    T.reads(A[vi_o, vk_i], B[vk_i, vj_i])
                    T.writes(C[vi_o, vj_i])
                    C[vi_o, vj_i] = C[vi_o, vj_i] + A[vi_o, vk_i] * B[vk_i, vj_i]
    """
    state = ctx.state
    if isinstance(target, For):
        new_state, block = blockize_loop(state, target, preserve_unit_iters)
        return new_state, block
    if isinstance(target, (list, tuple)) and target and all(isinstance(b, Block) for b in target):
        return blockize_blocks(state, list(target))
    raise BlockizeError(f"target must be a loop or a non-empty list of blocks, got {target!r}")


def blockize_loop(state: ScheduleState, loop: For, preserve: bool) -> tuple[ScheduleState, Block]:
    """Blockize the subtree of `loop`; returns the new state and the outer block in it."""
    inner_loops, realize = _loop_chain(loop)
    block = realize.block
    check_affine_binding(state, block, why=" (blockize divides it into outer and inner parts)")
    inner_ids = {id(lp.loop_var) for lp in inner_loops}
    ranges = {lp.loop_var: E.Range(lp.min, lp.extent) for lp in state.loops_above(block)}
    parts = [_divide(value, iv, inner_ids, ranges, block)
             for value, iv in zip(realize.iter_values, block.iter_vars)]  # fmt: skip
    outer_iters, outer_values, inner_iters, inner_values, vmap = _new_iters(block, parts, preserve,
                                                                           ranges)  # fmt: skip
    move_init = block.init is not None and any(
        iv.iter_type == IterType.REDUCE for iv in outer_iters
    )
    outer_pred, predicate = _divide_predicate(realize, inner_loops, ranges, outer_iters,
                                              outer_values)  # fmt: skip
    analyzer = _analyzer_for(outer_iters + inner_iters)
    inner_block = block.replace(
        iter_vars=tuple(inner_iters),
        reads=tuple(_rewrite(r, vmap, analyzer) for r in block.reads),
        writes=tuple(_rewrite(w, vmap, analyzer) for w in block.writes),
        body=_rewrite(block.body, vmap, analyzer),
        init=None if move_init or block.init is None else _rewrite(block.init, vmap, analyzer),
    )
    inner = BlockRealize(tuple(inner_values), predicate, inner_block)
    body = _rebuild_chain(inner_loops, inner)
    init = _outer_init(block, outer_iters, inner, inner_loops, vmap) if move_init else None
    outer = Block(tuple(outer_iters), (), (), f"{block.name_hint}_o", body, init=init)
    reads, writes = block_access_regions(outer)
    outer = outer.replace(reads=tuple(reads), writes=tuple(writes))
    new_state = state.replace(loop, BlockRealize(tuple(outer_values), outer_pred, outer))
    return new_state, new_state.node(outer.uid)


def _loop_chain(loop: For) -> tuple[list[For], BlockRealize]:
    loops = [loop]
    node = loop.body
    while isinstance(node, For):
        loops.append(node)
        node = node.body
    if not isinstance(node, BlockRealize):
        raise NotSingleChildError(
            f"loop {loops[-1].loop_var.name} must contain nested loops around exactly "
            f"one block, but it holds a {type(node).__name__}; to wrap several blocks pass "
            "them as a list", [loop],
        )  # fmt: skip
    return loops, node


class _Part:
    """An iter value divided as `outer * extent + inner` (`inner` in [0, extent))."""

    __slots__ = ("outer", "inner", "extent", "outer_extent")

    def __init__(self, outer, inner, extent, outer_extent):
        self.outer, self.inner, self.extent, self.outer_extent = outer, inner, extent, outer_extent


def _divide(value: E.PrimExpr, iv: IterVar, inner_ids: set, ranges, block: Block) -> _Part:
    dtype = value.dtype
    zero, one = E.IntImm(dtype, 0), E.IntImm(dtype, 1)
    uses_inner = uses_var(value, lambda v: id(v) in inner_ids)
    uses_outer = uses_var(value, lambda v: id(v) not in inner_ids)
    if not uses_inner:
        return _Part(value, zero, one, iv.dom.extent)
    if not _is_zero(iv.dom.min):
        raise BlockizeError(
            f"iter var {iv.var.name} of block {block.name_hint} starts at "
            f"{iv.dom.min}; blockize needs domains starting at 0", [block],
        )  # fmt: skip
    if not uses_outer:
        return _Part(zero, value, iv.dom.extent, one)
    lin = parse_canonical(Analyzer().simplify(value))
    inner_terms, outer_terms = [], []
    for atom, coef in lin.terms.values():
        if not isinstance(atom, E.Var):
            raise _not_divisible(value, iv, block, f"{atom} is not a loop variable")
        (inner_terms if id(atom) in inner_ids else outer_terms).append((atom, coef))
    extent = _dense_extent(inner_terms, ranges, value, iv, block)
    if lin.const % extent or any(coef % extent for _, coef in outer_terms):
        raise _not_divisible(value, iv, block, f"the outer part is not a multiple of {extent}")
    inner = _sum(inner_terms, 0, dtype)
    outer = _sum([(a, c // extent) for a, c in outer_terms], lin.const // extent, dtype)
    outer_extent = _ceildiv(iv.dom.extent, extent)
    return _Part(outer, inner, E.IntImm(dtype, extent), outer_extent)


def _dense_extent(terms, ranges, value, iv, block) -> int:
    """`c` such that the inner terms cover `[0, c)` exactly once (a loop of extent 1 adds
    nothing, whatever its coefficient: `b_1 + b_2` with `b_2` in [0, 1) covers [0, 2))."""
    by_var = {id(v): r for v, r in ranges.items()}
    expected = 1
    for atom, coef in sorted(terms, key=lambda t: t[1]):
        rng = by_var.get(id(atom))
        if rng is None or not isinstance(rng.extent, E.IntImm) or not _is_zero(rng.min):
            raise _not_divisible(value, iv, block, f"loop {atom.name} needs a constant extent")
        if _is_one(rng.extent):
            continue
        if coef != expected:
            raise _not_divisible(value, iv, block, "the inner loops do not form a dense range")
        expected = coef * rng.extent.value
    return expected


def _not_divisible(value, iv, block, why: str) -> BlockizeError:
    return BlockizeError(
        f"the iter value {iv.var.name} = {value} of block {block.name_hint} cannot be "
        f"divided into an outer part and an inner part: {why}", [block],
    )  # fmt: skip


def _sum(terms, constant: int, dtype) -> E.PrimExpr:
    result = None
    for atom, coef in terms:
        term = atom if coef == 1 else atom * coef
        result = term if result is None else result + term
    if result is None:
        return E.IntImm(dtype, constant)
    return result + constant if constant else result


def _ceildiv(extent: E.PrimExpr, factor: int) -> E.PrimExpr:
    if isinstance(extent, E.IntImm):
        return E.IntImm(extent.dtype, -(-extent.value // factor))
    return Analyzer().simplify((extent + (factor - 1)) // factor)


def _new_iters(block: Block, parts, preserve: bool, ranges):
    """Outer and inner iter vars with their values, and the old iter var -> new expression."""
    outer_iters, outer_values, inner_iters, inner_values, vmap = [], [], [], [], {}
    analyzer = _analyzer_for_loops(ranges)
    for iv, part in zip(block.iter_vars, parts):
        name, dtype = iv.var.name, iv.var.dtype
        outer_value = analyzer.simplify(part.outer)
        unit_outer = _is_one(part.outer_extent)
        if unit_outer and not preserve and not collect_vars(outer_value):
            outer_expr = outer_value  # a constant: no outer iter var
        else:
            var = E.Var(f"{name}_o", dtype)
            outer_iters.append(IterVar(var, E.Range(E.IntImm(dtype, 0), part.outer_extent),
                                       iv.iter_type))  # fmt: skip
            outer_values.append(outer_value)
            outer_expr = var
        if _is_one(part.extent):
            vmap[iv.var] = outer_expr
            continue
        inner = E.Var(f"{name}_i", dtype)
        inner_iters.append(IterVar(inner, E.Range(E.IntImm(dtype, 0), part.extent), iv.iter_type))
        inner_values.append(part.inner)
        vmap[iv.var] = inner if _is_zero(outer_expr) else outer_expr * part.extent + inner
    return outer_iters, outer_values, inner_iters, inner_values, vmap


def _divide_predicate(realize, inner_loops, ranges, outer_iters, outer_values):
    """(the outer block's predicate, the inner block's): conjuncts over outer loops only move
    out, so that an out-of-range tile runs neither the outer block nor its init."""
    if _is_true(realize.predicate):
        return const(True), realize.predicate
    outer_parts, inner_parts = split_predicate(realize.predicate, inner_loops)
    inner_ids = {id(lp.loop_var) for lp in inner_loops}
    outer_ranges = {v: r for v, r in ranges.items() if id(v) not in inner_ids}
    inner = inner_predicate(inner_parts, outer_iters, outer_values, outer_ranges, realize.block)
    return outer_predicate(outer_parts, outer_iters, outer_values, outer_ranges), inner


def _outer_init(block: Block, outer_iters, inner: BlockRealize, inner_loops, vmap) -> Stmt:
    """The reduction init for the outer block (TVM's GenerateOuterInit): copies of the inner
    loops that the inner spatial iters use, around a block `<name>_init` over those iters,
    under the inner predicate where the original init ran (or the bare init when there are
    no such iters and no predicate)."""
    spatial = [(iv, value) for iv, value in zip(inner.block.iter_vars, inner.iter_values)
               if iv.iter_type == IterType.SPATIAL]  # fmt: skip
    used = {id(v) for _, value in spatial for v in collect_vars(value)}
    loops = [lp for lp in inner_loops if id(lp.loop_var) in used]
    loop_map = {lp.loop_var: E.Var(lp.loop_var.name, lp.loop_var.dtype) for lp in loops}
    predicate = init_predicate(inner.predicate, inner_loops, loop_map, outer_iters)
    if not spatial and _is_true(predicate):
        return _rewrite(block.init, vmap, _analyzer_for(outer_iters))
    init_block = _init_block(block, outer_iters, [iv for iv, _ in spatial], vmap)
    values = tuple(substitute(v, loop_map) for _, v in spatial)
    body = BlockRealize(values, predicate, init_block)
    for lp in reversed(loops):
        body = For(loop_map[lp.loop_var], lp.min, lp.extent, ForKind.SERIAL, body)
    return body


def _init_block(block: Block, outer_iters, spatial: list[IterVar], vmap) -> Block:
    """The block `<name>_init` over (copies of) the inner spatial iters."""
    init_iters, renames = [], {}
    for iv in spatial:
        base = iv.var.name[: -len("_i")] if iv.var.name.endswith("_i") else iv.var.name
        var = E.Var(f"{base}_init", iv.var.dtype)
        init_iters.append(IterVar(var, iv.dom, IterType.SPATIAL))
        renames[iv.var] = var
    body = substitute(substitute(block.init, vmap), renames)
    body = simplify_indices(body, _analyzer_for(outer_iters + init_iters))
    init_block = Block(tuple(init_iters), (), (), f"{block.name_hint}_init", body)
    reads, writes = block_access_regions(init_block)
    return init_block.replace(reads=tuple(reads), writes=tuple(writes))


def _rewrite(node, vmap: dict, analyzer: Analyzer):
    return simplify_indices(substitute(node, vmap), analyzer)


def _analyzer_for(iters) -> Analyzer:
    analyzer = Analyzer()
    for iv in iters:
        analyzer.bind(iv.var, iv.dom)
    return analyzer


def _analyzer_for_loops(ranges) -> Analyzer:
    analyzer = Analyzer()
    for var, rng in ranges.items():
        analyzer.bind(var, rng)
    return analyzer


def _rebuild_chain(loops: list[For], body: Stmt) -> Stmt:
    for loop in reversed(loops):
        body = loop.replace(body=body)
    return body


# ---------------------------------------------------------------------------------------------
# blockize a list of blocks
# ---------------------------------------------------------------------------------------------
def blockize_blocks(state: ScheduleState, blocks: list[Block]) -> tuple[ScheduleState, Block]:
    """Wrap consecutive sibling statements holding exactly `blocks` in one outer block."""
    if len({b.uid for b in blocks}) != len(blocks):
        raise BlockizeError("a block is listed twice", blocks)
    scopes = {id(state.scope_block(b)) for b in blocks}
    if len(scopes) != 1:
        raise BlockizeError("the blocks are in different scopes", blocks)
    parent, lo, hi = _sibling_range(state, blocks)
    wrapped = parent.seq[lo : hi + 1] if isinstance(parent, SeqStmt) else (parent,)
    _check_wrapped(state, wrapped, blocks)
    body = SeqStmt.flatten(*wrapped)
    name = "outer_" + "".join(f"{b.name_hint}_" for b in blocks)
    outer = Block((), (), (), name, body)
    reads, writes = block_access_regions(outer)
    outer = outer.replace(reads=tuple(reads), writes=tuple(writes))
    realize = BlockRealize((), const(True), outer)
    if isinstance(parent, SeqStmt):
        new = SeqStmt.flatten(*parent.seq[:lo], realize, *parent.seq[hi + 1 :])
    else:
        new = realize
    new_state = state.replace(parent, new)
    return new_state, new_state.node(outer.uid)


def _sibling_range(state: ScheduleState, blocks: list[Block]):
    """(the SeqStmt holding the blocks' statements, first index, last index), or
    (the realize, 0, 0) for a single block."""
    if len(blocks) == 1:
        return state.realize_of(blocks[0]), 0, 0
    chains = [[*state.ancestors(b), b] for b in blocks]
    depth = 0
    while all(len(c) > depth + 1 for c in chains) and all(
        c[depth] is chains[0][depth] for c in chains
    ):
        depth += 1
    parent = chains[0][depth - 1]
    if not isinstance(parent, SeqStmt):
        raise BlockizeError(
            "the blocks must be consecutive statements under one parent; their "
            f"nearest common ancestor is a {type(parent).__name__}", blocks,
        )  # fmt: skip
    indices = sorted({_index_in(parent, c[depth]) for c in chains})
    if indices != list(range(indices[0], indices[-1] + 1)):
        raise BlockizeError(
            "the blocks are not consecutive statements: other statements sit "
            "between them", blocks,
        )  # fmt: skip
    return parent, indices[0], indices[-1]


def _index_in(parent: SeqStmt, child) -> int:
    for k, item in enumerate(parent.seq):
        if item is child:
            return k
    raise AssertionError("unreachable: a child of a sequence")  # pragma: no cover


def _check_wrapped(state: ScheduleState, wrapped, blocks: list[Block]) -> None:
    listed = {b.uid for b in blocks}
    for stmt in wrapped:
        found = state.child_blocks(stmt) if not isinstance(stmt, BlockRealize) else [stmt.block]
        extra = [b for b in found if b.uid not in listed]
        if extra:
            raise BlockizeError(
                f"block {extra[0].name_hint} sits among the listed blocks; list it "
                "too or move it", [extra[0], *blocks],
            )  # fmt: skip
    outer_loops = {id(lp.loop_var): lp for lp in state.loops_above(blocks[0])
                   if not any(state.is_ancestor(s, lp) or s is lp for s in wrapped)}  # fmt: skip
    for stmt in wrapped:
        if uses_var(stmt, lambda v: id(v) in outer_loops):
            used = [lp for key, lp in outer_loops.items()
                    if uses_var(stmt, lambda v, key=key: id(v) == key)]  # fmt: skip
            raise BlockizeError(
                f"the blocks use loop {used[0].loop_var.name}, which stays outside "
                "the new block; blockize that loop instead", [used[0], *blocks],
            )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# tensorize
# ---------------------------------------------------------------------------------------------
@primitive("Tensorize", inputs=("block_or_loop",))
def tensorize(ctx: PrimitiveContext, block_or_loop, tensor_intrin: str,
              preserve_unit_iters: bool = True):  # fmt: skip
    """Replace a block's computation by a tensor intrinsic's implementation.

    A loop is blockized first (see `blockize`). The block's body must then match the
    intrinsic's description structurally: the same loops (extents), blocks (iter var kinds
    and extents), and computation, each description buffer standing for one buffer of the
    block at a fixed offset. The body becomes the implementation, its buffers bound to the
    matched regions with `match_buffer`; the block's init (if any) stays.

    Preconditions:
    - `tensor_intrin` is a registered intrinsic (`TensorIntrin.register`);
    - the block's body matches the intrinsic's description (no block predicate: a partial
      tile does not match).

    Parameters:
    - block_or_loop: the (outer) block whose body to replace, or a loop to blockize first;
    - tensor_intrin: the intrinsic's name, e.g. "cpu_f32_gemm_4x4x4";
    - preserve_unit_iters: passed to `blockize` when a loop is given.

    >>> sch = Schedule(workloads.get("gemv", M=3, K=8)[0])
    >>> i, k = sch.get_loops(sch.get_block("y"))
    >>> k0, k1 = sch.split(k, [None, 4])
    >>> sch.tensorize(k1, "cpu_f32_dot_4")
    >>> print(sch.get(sch.get_block("y_o")).script(show_header=False))
    A = T.Buffer((3, 8), "float32")
    x = T.Buffer((8,), "float32")
    y = T.Buffer((3,), "float32")
    with T.block("y_o"):
        vi_o = T.axis.spatial(3)
        vk_o = T.axis.reduce(2)
        T.reads(A[vi_o, vk_o * 4:vk_o * 4 + 4], x[vk_o * 4:vk_o * 4 + 4])
        T.writes(y[vi_o])
        A_1 = T.match_buffer(A[vi_o, vk_o * 4:vk_o * 4 + 4], (4,), "float32")
        B = T.match_buffer(x[vk_o * 4:vk_o * 4 + 4], (4,), "float32")
        C = T.match_buffer(y[vi_o], (1,), "float32")
        with T.init():
            y[vi_o] = T.float32(0)
        C[0] = C[0] + (A_1[0] * B[0] + A_1[1] * B[1] + (A_1[2] * B[2] + A_1[3] * B[3]))
    """
    try:
        intrin = TensorIntrin.get(tensor_intrin)
    except ValueError as err:
        raise TensorizeError(f"{err}") from None
    state = ctx.state
    if isinstance(block_or_loop, For):
        state, block = blockize_loop(state, block_or_loop, preserve_unit_iters)
    elif isinstance(block_or_loop, Block):
        block = block_or_loop
    else:
        raise TensorizeError(f"expected a block or loop, got {type(block_or_loop).__name__}")
    try:
        match = match_intrin(block, intrin)
    except MatchError as err:
        raise TensorizeError(
            f"block {block.name_hint} does not match the description of {tensor_intrin}: {err}",
            [block_or_loop],
        ) from None
    body, views, allocs = _fresh_impl(intrin)
    matches = tuple(MatchBufferRegion(view, region) for view, region in zip(views, match.regions))
    new_block = block.replace(
        body=body,
        match_buffers=block.match_buffers + matches,
        alloc_buffers=block.alloc_buffers + allocs,
    )
    return state.replace(block, new_block), None


def _fresh_impl(intrin: TensorIntrin):
    """The implementation's body with fresh variables, buffers and loop/block ids (so it can
    appear many times in one function), its parameter buffers and its allocations."""
    impl = intrin.impl
    buffers = {id(b): _copy_buffer(b) for b in (*impl.buffers, *root_allocs(impl))}
    body = _Freshen(buffers).visit(root_body(impl))
    views = [buffers[id(b)] for b in impl.buffers]
    allocs = tuple(buffers[id(b)] for b in root_allocs(impl))
    return body, views, allocs


def _copy_buffer(buffer: Buffer) -> Buffer:
    return buffer.replace(data=E.Var(buffer.data.name, handle))


class _Freshen(Mutator):
    """Copies a statement with new loop/iter/let variables, the given buffers, fresh uids."""

    def __init__(self, buffers: dict[int, Buffer]):
        self.buffers = buffers
        self.vars: dict[int, E.Var] = {}

    def define(self, var: E.Var) -> E.Var:
        new = E.Var(var.name, var.dtype)
        self.vars[id(var)] = new
        return new

    def visit_Var(self, var: E.Var):
        return self.vars.get(id(var), var)

    def visit_For(self, node: For):
        loop_var = self.define(node.loop_var)
        node = self.generic_visit(node)
        return node.replace(loop_var=loop_var, uid=fresh_uid())

    def visit_Block(self, node: Block):
        iters = tuple(iv.replace(var=self.define(iv.var)) for iv in node.iter_vars)
        for buffer in node.alloc_buffers:
            self.buffers.setdefault(id(buffer), _copy_buffer(buffer))
        node = self.generic_visit(node.replace(iter_vars=()))
        allocs = tuple(self.buffers[id(b)] for b in node.alloc_buffers)
        return node.replace(iter_vars=iters, alloc_buffers=allocs, uid=fresh_uid())

    def visit_LetStmt(self, node):
        var = self.define(node.var)
        node = self.generic_visit(node)
        return node.replace(var=var)

    def visit_BufferLoad(self, node: E.BufferLoad):
        node = self.generic_visit(node)
        new = self.buffers.get(id(node.buffer))
        return node if new is None else E.BufferLoad(new, node.indices)

    def visit_BufferStore(self, node):
        node = self.generic_visit(node)
        new = self.buffers.get(id(node.buffer))
        return node if new is None else node.replace(buffer=new)

    def visit_BufferRegion(self, node):
        node = self.generic_visit(node)
        new = self.buffers.get(id(node.buffer))
        return node if new is None else node.replace(buffer=new)


def _is_zero(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 0


def _is_one(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


def _is_true(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


__all__ = ["blockize", "tensorize", "BlockizeError", "blockize_loop", "blockize_blocks"]

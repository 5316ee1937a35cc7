"""`reindex`: stage a buffer through a copy laid out in the block's own iteration space (TVM's
ReIndex; dlight uses it to bring every GEMM to one canonical form before transform_layout)."""

from __future__ import annotations

from schedlab.arith import Analyzer
from schedlab.ir import op
from schedlab.ir.buffer import Buffer, BufferRegion
from schedlab.ir.dtype import handle
from schedlab.ir.expr import BufferLoad, PrimExpr, Range, Var
from schedlab.ir.functor import collect_vars, post_order_visit, substitute
from schedlab.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    IterType,
    IterVar,
    SeqStmt,
    Stmt,
)  # fmt: skip
from schedlab.ir.structural import structural_equal

from ..analysis.buffer_writes import covers_domain, store_sites
from ..analysis.buffers import (
    check_not_in_init,
    enclosing_analyzer,
    free_of,
    loop_and_iter_vars,
    reads_old_contents,
    resolve_buffer,
)
from ..errors import ScheduleError
from ..instruction import PrimitiveContext, primitive
from ..state import ScheduleState
from .buffer import BufferRewriter


class ReindexError(ScheduleError):
    """The block does not access the buffer in a way reindex can restate."""


@primitive("ReIndex", inputs=("block",), outputs="block")
def reindex(ctx: PrimitiveContext, block: Block, buffer_index, buffer_index_type=None):
    """Stage one buffer of the block through a new buffer `<name>_reindex` indexed by the
    block's iter vars: the block accesses `X_reindex[v...]` (the iter vars used in its indices,
    in block order), and a new block `<name>_reindex` (returned) copies `X` into it just before
    the block's loop nest (a read) or back out just after it (a write).

    Preconditions: `buffer_index` is `("read", i)`, `("write", i)` or a buffer name; the block
    is a leaf (no nested blocks), not inside another block's init, and the only statement
    under its loops, with no loop of its scope around them (an `if` around them is fine: the
    stage goes under it too); every access to the buffer in it uses the same indices, in the
    block's iter vars, which stay inside the buffer for the whole iteration domain; a
    read-reindexed buffer is not also written by the block; a write-reindexed one is not read
    for its previous contents (a reduction with an init is fine), is stored unconditionally,
    and the loops run the iter vars it uses over their whole domains (the copy back covers
    them).

    Parameters: block -- the block; buffer_index -- which of its buffers; buffer_index_type --
    "read" or "write" (or TVM's 0 / 1) when buffer_index is a plain int, as TVM's ReIndex
    instruction records it (so TVM traces replay).

    >>> A = te.placeholder((3, 4), name="A")
    >>> B = te.compute((4, 3), lambda i, j: A[j, i] + 1.0, name="B")
    >>> sch = Schedule(te.create_prim_func([A, B]))
    >>> print(sch.func.script(show_header=False))  # before  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j in T.grid(4, 3):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vj, vi])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vj, vi] + T.float32(1)
    >>> copy = sch.reindex(sch.get_block("B"), ("read", 0))
    >>> print(sch.func.script(show_header=False))  # after  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        A_reindex = T.alloc_buffer((4, 3), "float32")
        for ax0, ax1 in T.grid(4, 3):
            with T.block("A_reindex"):
                v0, v1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(A[v1, v0])
                T.writes(A_reindex[v0, v1])
                A_reindex[v0, v1] = A[v1, v0]
        for i, j in T.grid(4, 3):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A_reindex[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A_reindex[vi, vj] + T.float32(1)
    """
    if not isinstance(block, Block):
        raise ScheduleError(f"block must be a block handle, got {type(block).__name__}")
    state = ctx.state
    index = _with_type(block, buffer_index, buffer_index_type)
    buffer, kind, _ = resolve_buffer(block, index, None, "reindex", "buffer_index")
    scope = state.scope_block(block)
    if scope is None:
        raise ReindexError("the root block cannot be reindexed", [block])
    check_not_in_init(state, block, "reindex")
    _check_leaf(block)
    indices = _unique_indices(block, buffer)
    _check_direction(block, buffer, kind)
    _check_in_bounds(state, block, buffer, indices)
    covered = [iv for iv in block.iter_vars if _uses(indices, iv.var)]
    top = _top_of_nest(state, scope, block)
    if kind == "write":
        _check_writes_everything(state, block, buffer, covered)
    new = _reindex_buffer(buffer, covered)
    stage, stage_block = _make_stage(buffer, new, kind, covered, indices)
    point = tuple(iv.var for iv in covered)
    new_block = _AccessRewriter(buffer, new, point).visit(block)
    return _insert(state, scope, block, new_block, top, stage, kind, new), stage_block


def _insert(state, scope, block, new_block, top, stage, kind, new) -> ScheduleState:
    """The block rewritten, the stage right before (read) or after (write) the top of its
    nest, in the same statement sequence (so under the same conditions), and the new buffer
    allocated by the scope."""
    state = state.replace(block, new_block)
    if isinstance(top, For):
        top = state.node(top.uid)
    else:  # the block has no loops: its realize is the top
        top = state.realize_of(state.node(block.uid))
    items = [stage, top] if kind == "read" else [top, stage]
    state = state.replace(top, SeqStmt.flatten(*items))
    scope = state.node(scope.uid)
    return state.replace(scope, scope.replace(alloc_buffers=scope.alloc_buffers + (new,)))


_INDEX_TYPES = {"read": "read", "write": "write", 0: "read", 1: "write"}


def _with_type(block: Block, buffer_index, buffer_index_type):
    """`(kind, index)` from TVM's separate (index, type) form; the index alone otherwise."""
    if buffer_index_type is None:
        return buffer_index
    kind = _INDEX_TYPES.get(buffer_index_type)
    if kind is None or not isinstance(buffer_index, int) or isinstance(buffer_index, bool):
        raise ReindexError(
            f"buffer_index_type {buffer_index_type!r} needs an int buffer_index and must be "
            f"'read', 'write', 0 or 1 (got buffer_index={buffer_index!r})",
            [block],
        )
    return (kind, buffer_index)


def _check_leaf(block: Block) -> None:
    nested = []

    def visit(node):
        if isinstance(node, BlockRealize):
            nested.append(node)

    for part in (block.init, block.body):
        if part is not None:
            post_order_visit(part, visit)
    if nested:
        raise ReindexError(
            f"block {block.name_hint!r} has nested blocks; reindex needs a leaf block",
            [block],
        )


def _unique_indices(block: Block, buffer: Buffer) -> tuple[PrimExpr, ...]:
    found: list[tuple[PrimExpr, ...]] = []

    def visit(node):
        if isinstance(node, (BufferLoad, BufferStore)) and node.buffer is buffer:
            found.append(node.indices)

    for part in (block.init, block.body):
        if part is not None:
            post_order_visit(part, visit)
    if not found:
        raise ReindexError(
            f"block {block.name_hint!r} never loads or stores {buffer.name}", [block]
        )
    first = found[0]
    for other in found[1:]:
        if not all(structural_equal(a, b) for a, b in zip(first, other)):
            raise ReindexError(
                f"block {block.name_hint!r} accesses {buffer.name} at different "
                f"indices ({list(first)} and {list(other)}); reindex needs one access pattern",
                [block],
            )
    inner = set()
    for part in (block.init, block.body):
        if part is not None:
            inner |= loop_and_iter_vars(part)
    if not all(free_of(index, inner) for index in first):
        raise ReindexError(
            f"block {block.name_hint!r} indexes {buffer.name} with a loop variable defined "
            f"inside the block ({list(first)}); reindex needs indices in the block's iter vars",
            [block],
        )
    analyzer = Analyzer()
    for iv in block.iter_vars:
        analyzer.bind(iv.var, iv.dom, allow_override=True)
    return tuple(analyzer.simplify(i) for i in first)


def _check_writes_everything(state, block: Block, buffer: Buffer, covered) -> None:
    """The copy back runs over the whole domain of the covered iter vars: the block must
    store at every point of it, unconditionally."""
    if any(site.guarded for site in store_sites(block, buffer)):
        raise ReindexError(
            f"block {block.name_hint!r} stores {buffer.name} under a condition; the copy "
            "back would overwrite the elements it skips with garbage",
            [block],
        )
    if not covers_domain(state, block, covered):
        names = ", ".join(iv.var.name for iv in covered)
        raise ReindexError(
            f"the loops around block {block.name_hint!r} do not run its iter vars ({names}) "
            f"over their whole domains (strided, partial or predicated bindings); the copy "
            f"back of {buffer.name} would overwrite the elements it skips with garbage",
            [block],
        )


def _check_direction(block: Block, buffer: Buffer, kind: str) -> None:
    writes = any(r.buffer is buffer for r in block.writes)
    if kind == "read" and writes:
        raise ReindexError(
            f"block {block.name_hint!r} also writes {buffer.name}; reindex it as "
            "('write', i) instead",
            [block],
        )
    if kind == "write" and reads_old_contents(block, buffer):
        raise ReindexError(
            f"block {block.name_hint!r} reads the previous contents of {buffer.name} "
            "(it loads it and has no init); the new buffer would start empty",
            [block],
        )


def _check_in_bounds(state: ScheduleState, block: Block, buffer: Buffer, indices) -> None:
    """The copy runs over the whole iteration domain without the block's conditions, so every
    index must stay in the buffer there (a padding block reading `A[i - 1]` under a guard
    would not). Iter vars of enclosing blocks stay in their domains."""
    analyzer = enclosing_analyzer(state, block, [])
    for iv in block.iter_vars:
        analyzer.bind(iv.var, iv.dom, allow_override=True)
    for dim, (index, extent) in enumerate(zip(indices, buffer.shape)):
        if not (analyzer.can_prove(index >= 0) and analyzer.can_prove(index < extent)):
            raise ReindexError(
                f"index {index} of {buffer.name} (dimension {dim}) may leave [0, "
                f"{extent}) over the iteration domain of block {block.name_hint!r} (a guarded "
                "access); the copy would read or write out of bounds",
                [block],
            )


def _uses(indices, var: Var) -> bool:
    return any(v is var for index in indices for v in collect_vars(index))


def _reindex_buffer(buffer: Buffer, covered: list[IterVar]) -> Buffer:
    name = f"{buffer.name}_reindex"
    shape = tuple(op.add(iv.dom.min, iv.dom.extent) for iv in covered)
    return Buffer(
        data=Var(name, handle), dtype=buffer.dtype, shape=shape, name=name, scope=buffer.scope
    )


def _make_stage(buffer, new, kind, covered, indices) -> tuple[Stmt, Block]:
    loop_vars = [Var(f"ax{k}", iv.var.dtype) for k, iv in enumerate(covered)]
    iter_vars = [IterVar(Var(f"v{k}", iv.var.dtype), iv.dom, IterType.SPATIAL)
                 for k, iv in enumerate(covered)]  # fmt: skip
    mapping = {iv.var: new_iv.var for iv, new_iv in zip(covered, iter_vars)}
    target = tuple(substitute(i, mapping) for i in indices)
    point = tuple(iv.var for iv in iter_vars)
    src, src_idx, dst, dst_idx = (
        (buffer, target, new, point) if kind == "read" else (new, point, buffer, target)
    )
    block = Block(
        iter_vars=tuple(iter_vars),
        reads=(_point(src, src_idx),),
        writes=(_point(dst, dst_idx),),
        name_hint=f"{buffer.name}_reindex",
        body=BufferStore(dst, BufferLoad(src, src_idx), dst_idx),
    )
    stmt: Stmt = BlockRealize(tuple(loop_vars), True, block)
    for loop_var, iv in reversed(list(zip(loop_vars, covered))):
        stmt = For(loop_var, iv.dom.min, iv.dom.extent, "serial", stmt)
    return stmt, block


def _point(buffer: Buffer, indices) -> BufferRegion:
    return BufferRegion(buffer, tuple(Range(i, op.const(1, i.dtype)) for i in indices))


def _top_of_nest(state: ScheduleState, scope: Block, block: Block) -> Stmt:
    """The outermost statement of the block's nest, which must be a chain of single-child
    loops with no loop of the scope around it (the stage goes next to it)."""
    node: Stmt = state.realize_of(block)
    for loop in reversed(state.loops_above(block)):
        if loop.body is not node:
            raise ReindexError(
                f"loop {loop.loop_var.name} holds more than block "
                f"{block.name_hint!r}; reindex needs the block alone under its loops",
                [loop],
            )
        node = loop
    return node


class _AccessRewriter(BufferRewriter):
    """Accesses and regions of `old` become `new[point]` (the covered iter vars)."""

    def __init__(self, old: Buffer, new: Buffer, point: tuple[Var, ...]):
        super().__init__(old, new)
        self.point = point

    def visit_BufferLoad(self, node: BufferLoad) -> PrimExpr:
        node = self.generic_visit(node)
        return BufferLoad(self.new, self.point) if node.buffer is self.old else node

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        node = self.generic_visit(node)
        if node.buffer is not self.old:
            return node
        return BufferStore(self.new, node.value, self.point)

    def visit_BufferRegion(self, node: BufferRegion) -> BufferRegion:
        return _point(self.new, self.point) if node.buffer is self.old else node


__all__ = ["reindex", "ReindexError"]

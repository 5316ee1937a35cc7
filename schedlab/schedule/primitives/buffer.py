"""Buffer primitives: change where an intermediate buffer lives (`set_scope`), pad its strides
(`storage_align`) and group its axes into physical dimensions (`set_axis_separator`).

`BufferRewriter` (replace one buffer by another in accesses, regions and allocations, optionally
shifting indices) is shared with the cache primitives.
"""

from __future__ import annotations

from schedlab.arith import Analyzer
from schedlab.ir.buffer import Buffer, BufferRegion
from schedlab.ir.dtype import handle
from schedlab.ir.expr import BufferLoad, PrimExpr, Range, Var
from schedlab.ir.functor import Mutator
from schedlab.ir.stmt import Allocate, Block, BufferStore, Stmt

from ..analysis.buffers import (
    NotAllocatedBufferError,
    allocation_site,
    check_storage_scope,
    require_allocated,
    resolve_buffer,
)
from ..errors import ScheduleError
from ..instruction import PrimitiveContext, primitive
from ..state import ScheduleState

DIM_ALIGN_ATTR = "buffer_dim_align"  # TVM's tir::attr::buffer_dim_align


class StorageAlignError(ScheduleError):
    """storage_align got an axis or factor it cannot use."""


class AxisSeparatorError(ScheduleError):
    """set_axis_separator got separators that do not split the buffer's axes."""


# -- shared rewriting -----------------------------------------------------------------------
def scoped_buffer(buffer: Buffer, scope: str) -> Buffer:
    """A new buffer like `buffer` in `scope`, named `<name>_<scope>` (TVM's WithScope)."""
    name = f"{buffer.name}_{scope}"
    return buffer.replace(data=Var(name, handle), name=name, scope=scope)


class BufferRewriter(Mutator):
    """Replaces `old` by `new` in loads, stores, regions, match_buffers and allocations. With
    `offset`, indices and region mins become `index - offset[d]` (a cache holding a region)."""

    def __init__(self, old: Buffer, new: Buffer, offset: tuple[PrimExpr, ...] | None = None):
        self.old, self.new, self.offset = old, new, offset
        self.analyzer = Analyzer()

    def active(self) -> bool:
        """Whether accesses at the current position are rewritten (subclasses narrow it)."""
        return True

    def shift(self, indices) -> tuple[PrimExpr, ...]:
        if self.offset is None:
            return tuple(indices)
        return tuple(self.analyzer.simplify(i - m) for i, m in zip(indices, self.offset))

    def visit_BufferLoad(self, node: BufferLoad) -> PrimExpr:
        node = self.generic_visit(node)
        if node.buffer is not self.old or not self.active():
            return node
        return BufferLoad(self.new, self.shift(node.indices))

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        node = self.generic_visit(node)
        if node.buffer is not self.old or not self.active():
            return node
        return BufferStore(self.new, node.value, self.shift(node.indices))

    def visit_BufferRegion(self, node: BufferRegion) -> BufferRegion:
        node = self.generic_visit(node)
        if node.buffer is not self.old or not self.active():
            return node
        mins = self.shift(r.min for r in node.region)
        return BufferRegion(self.new, tuple(Range(m, r.extent) for m, r in zip(mins, node.region)))

    def visit_Var(self, node: Var) -> PrimExpr:
        return self.new.data if node is self.old.data and self.active() else node

    def visit_Block(self, node: Block) -> Stmt:
        new = self.generic_visit(node)
        if any(b is self.old for b in node.alloc_buffers):
            allocs = tuple(self.new if b is self.old else b for b in node.alloc_buffers)
            new = new.replace(alloc_buffers=allocs)
        return new

    def visit_Allocate(self, node: Allocate) -> Stmt:
        new = self.generic_visit(node)
        return new.replace(buffer=self.new) if node.buffer is self.old else new


def replace_buffer_everywhere(state: ScheduleState, block: Block, old: Buffer, new: Buffer):
    """The state with `old` replaced by `new` wherever it is defined and used: inside the block
    that allocates it, or in the whole function (and its buffer_map) for a parameter."""
    site = allocation_site(state, block, old)
    rewriter = BufferRewriter(old, new)
    if site is not None:
        return state.replace(site, rewriter.visit(site))
    name = state.location(block).func_name
    func = state.mod[name]
    buffer_map = {p: (new if b is old else b) for p, b in func.buffer_map.items()}
    func = func.replace(body=rewriter.visit(func.body), buffer_map=buffer_map)
    return state.with_func(name, func)


def _expect_block(block, primitive_name: str) -> None:
    if not isinstance(block, Block):
        raise ScheduleError(
            f"block must be a block handle, got {type(block).__name__}", primitive=primitive_name
        )


# -- set_scope ------------------------------------------------------------------------------
@primitive("SetScope", inputs=("block",))
def set_scope(ctx: PrimitiveContext, block: Block, buffer_index, storage_scope: str):
    """Move an intermediate buffer the block writes to another storage scope.

    The buffer is replaced everywhere by a copy in `storage_scope` named `<name>_<scope>` (as
    TVM does). Setting the scope it already has changes nothing.

    Preconditions: `buffer_index` picks one of the block's writes (an int index into
    `block.writes` or a buffer name); the buffer is allocated by a block (an intermediate), not
    a function parameter; `storage_scope` is a known scope ("global", "shared", "local", ...).

    Parameters: block -- the block writing the buffer; buffer_index -- int or name;
    storage_scope -- the new scope.

    >>> A = te.placeholder((2, 3), name="A")
    >>> B = te.compute((2, 3), lambda i, j: A[i, j] * 2.0, name="B")
    >>> C = te.compute((2, 3), lambda i, j: B[i, j] + 1.0, name="C")
    >>> sch = Schedule(te.create_prim_func([A, C]))
    >>> print(sch.func.script(show_header=False))  # before  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        B = T.alloc_buffer((2, 3), "float32")
        for i, j in T.grid(2, 3):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for i_1, j_1 in T.grid(2, 3):
            with T.block("C"):
                vi_1, vj_1 = T.axis.remap("SS", [i_1, j_1])
                T.reads(B[vi_1, vj_1])
                T.writes(C[vi_1, vj_1])
                C[vi_1, vj_1] = B[vi_1, vj_1] + T.float32(1)
    >>> sch.set_scope(sch.get_block("B"), 0, "local")
    >>> print(sch.func.script(show_header=False))  # after  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        B_local = T.alloc_buffer((2, 3), "float32", scope="local")
        for i, j in T.grid(2, 3):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B_local[vi, vj])
                B_local[vi, vj] = A[vi, vj] * T.float32(2)
        for i_1, j_1 in T.grid(2, 3):
            with T.block("C"):
                vi_1, vj_1 = T.axis.remap("SS", [i_1, j_1])
                T.reads(B_local[vi_1, vj_1])
                T.writes(C[vi_1, vj_1])
                C[vi_1, vj_1] = B_local[vi_1, vj_1] + T.float32(1)
    """
    _expect_block(block, "set_scope")
    buffer, _, _ = resolve_buffer(block, buffer_index, "write", "set_scope", "buffer_index")
    check_storage_scope(storage_scope, "set_scope")
    require_allocated(ctx.state, block, buffer, "set_scope")
    if buffer.scope == storage_scope:
        return ctx.state, None
    new = scoped_buffer(buffer, storage_scope)
    return replace_buffer_everywhere(ctx.state, block, buffer, new), None


# -- storage_align --------------------------------------------------------------------------
@primitive("StorageAlign", inputs=("block",))
def storage_align(ctx: PrimitiveContext, block: Block, buffer_index, axis: int, factor: int,
                  offset: int):  # fmt: skip
    """Pad the stride of one axis of an intermediate buffer to `k * factor + offset` elements
    (e.g. to avoid shared-memory bank conflicts).

    The request is recorded on the block as the annotation "buffer_dim_align" (a list of
    `[buffer_index, axis, factor, offset]`, as TVM does); the lowering honours it: the
    allocation (after compaction) gets strides where `stride[axis] % factor == offset`, each
    stride the smallest such value that still holds the axes inside it. A later request for
    the same buffer and axis replaces the earlier one.

    Preconditions: `buffer_index` picks one of the block's writes (int index or name); the
    buffer is allocated by a block, not a function parameter; `-ndim <= axis < ndim`;
    `factor > 0` (`offset` is taken modulo `factor`).

    Parameters: block -- the block writing the buffer; buffer_index -- int or name;
    axis -- the dimension whose stride is padded; factor, offset -- the stride's alignment.

    >>> A = te.placeholder((2, 3), name="A")
    >>> B = te.compute((2, 3), lambda i, j: A[i, j] * 2.0, name="B")
    >>> C = te.compute((2, 3), lambda i, j: B[i, j] + 1.0, name="C")
    >>> sch = Schedule(te.create_prim_func([A, C]))
    >>> lower = schedlab.transform.lower
    >>> print(lower(sch.func)["main"].script(show_header=False))  # before  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr(...)
        B = T.allocate((6,), "float32")
        for i, j in T.grid(2, 3):
            B[i * 3 + j] = A[i * 3 + j] * T.float32(2)
        for i_1, j_1 in T.grid(2, 3):
            C[i_1 * 3 + j_1] = B[i_1 * 3 + j_1] + T.float32(1)
    >>> sch.storage_align(sch.get_block("B"), 0, axis=0, factor=8, offset=1)
    >>> sch.get(sch.get_block("B")).annotations
    {'buffer_dim_align': [[0, 0, 8, 1]]}
    >>> print(lower(sch.func)["main"].script(show_header=False))  # after  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr(...)
        B = T.allocate((12,), "float32")
        for i, j in T.grid(2, 3):
            B[i * 9 + j] = A[i * 3 + j] * T.float32(2)
        for i_1, j_1 in T.grid(2, 3):
            C[i_1 * 3 + j_1] = B[i_1 * 9 + j_1] + T.float32(1)
    """
    _expect_block(block, "storage_align")
    buffer, _, position = resolve_buffer(
        block, buffer_index, "write", "storage_align", "buffer_index"
    )
    axis = _check_align_args(block, buffer, axis, factor, offset)
    require_allocated(ctx.state, block, buffer, "storage_align")
    entries = [list(e) for e in block.annotations.get(DIM_ALIGN_ATTR, [])]
    entries = [e for e in entries if not (e[0] == position and e[1] == axis)]
    entries.append([position, axis, factor, offset])
    annotations = {**block.annotations, DIM_ALIGN_ATTR: entries}
    new_block = block.replace(annotations=annotations)
    return ctx.state.replace(block, new_block), None


def _check_align_args(block: Block, buffer: Buffer, axis, factor, offset) -> int:
    for name, value in (("axis", axis), ("factor", factor), ("offset", offset)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise StorageAlignError(f"{name} must be an int, got {value!r}", [block])
    ndim = buffer.ndim
    if not -ndim <= axis < ndim:
        raise StorageAlignError(
            f"axis {axis} is out of range for buffer {buffer.name}, which has "
            f"{ndim} dimension(s); use an axis in [{-ndim}, {ndim})",
            [block],
        )
    if factor <= 0:
        raise StorageAlignError(f"factor must be positive, got {factor}", [block])
    return axis + ndim if axis < 0 else axis


# -- set_axis_separator ---------------------------------------------------------------------
@primitive("SetAxisSeparator", inputs=("block",))
def set_axis_separator(ctx: PrimitiveContext, block: Block, buffer_index, axis_separators):
    """Group a buffer's logical axes into physical axes: `axis_separators=[2]` makes a 4-d
    buffer two-dimensional in memory (axes 0-1 and 2-3 flattened separately), as texture
    memory needs.

    The buffer keeps its name and shape; it is replaced by a copy with the separators wherever
    it is defined and used (for a parameter, the function's buffer_map too). The CPU back end
    addresses flat 1-d memory only and rejects such buffers with a clear error; the
    interpreter runs them.

    Preconditions: `buffer_index` is `("read", i)`, `("write", i)` or a buffer name; the
    buffer is not a match_buffer view; the separators increase strictly and lie in
    `(0, ndim)`.

    Parameters: block -- a block accessing the buffer; buffer_index -- which buffer;
    axis_separators -- list of ints.

    >>> A = te.placeholder((2, 3), name="A")
    >>> B = te.compute((2, 3), lambda i, j: A[i, j] * 2.0, name="B")
    >>> C = te.compute((2, 3), lambda i, j: B[i, j] + 1.0, name="C")
    >>> sch = Schedule(te.create_prim_func([A, C]))
    >>> print(sch.func.script(show_header=False))  # before  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        B = T.alloc_buffer((2, 3), "float32")
        for i, j in T.grid(2, 3):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for i_1, j_1 in T.grid(2, 3):
            with T.block("C"):
                vi_1, vj_1 = T.axis.remap("SS", [i_1, j_1])
                T.reads(B[vi_1, vj_1])
                T.writes(C[vi_1, vj_1])
                C[vi_1, vj_1] = B[vi_1, vj_1] + T.float32(1)
    >>> sch.set_axis_separator(sch.get_block("B"), ("write", 0), [1])
    >>> print(sch.func.script(show_header=False))  # after  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        B = T.alloc_buffer((2, 3), "float32", axis_separators=[1])
        for i, j in T.grid(2, 3):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for i_1, j_1 in T.grid(2, 3):
            with T.block("C"):
                vi_1, vj_1 = T.axis.remap("SS", [i_1, j_1])
                T.reads(B[vi_1, vj_1])
                T.writes(C[vi_1, vj_1])
                C[vi_1, vj_1] = B[vi_1, vj_1] + T.float32(1)
    """
    _expect_block(block, "set_axis_separator")
    buffer, _, _ = resolve_buffer(block, buffer_index, None, "set_axis_separator", "buffer_index")
    separators = _check_separators(block, buffer, axis_separators)
    allocation_site(ctx.state, block, buffer)  # raises for a match_buffer view
    if tuple(buffer.axis_separators) == separators:
        return ctx.state, None
    new = buffer.replace(axis_separators=separators)
    return replace_buffer_everywhere(ctx.state, block, buffer, new), None


def _check_separators(block: Block, buffer: Buffer, separators) -> tuple[int, ...]:
    if not isinstance(separators, (list, tuple)) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in separators
    ):
        raise AxisSeparatorError(
            f"axis_separators must be a list of ints, got {separators!r}",
            [block],
        )
    values = tuple(separators)
    ordered = all(a < b for a, b in zip(values, values[1:]))
    if not ordered or any(not 0 < s < buffer.ndim for s in values):
        raise AxisSeparatorError(
            f"axis_separators {list(values)} must increase strictly and lie "
            f"between 0 and {buffer.ndim} (exclusive) for buffer {buffer.name} with "
            f"{buffer.ndim} dimensions",
            [block],
        )
    return values


__all__ = [
    "set_scope", "storage_align", "set_axis_separator", "BufferRewriter", "scoped_buffer",
    "replace_buffer_everywhere", "StorageAlignError", "AxisSeparatorError",
    "NotAllocatedBufferError", "DIM_ALIGN_ATTR",
]  # fmt: skip

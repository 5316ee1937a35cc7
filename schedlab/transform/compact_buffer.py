"""CompactBufferAllocation (TVM: same name): shrink each allocation to the region it uses.

After PlanAndUpdateBufferAllocationLocation an intermediate is allocated at the deepest loop
that encloses all of its uses, but still with its full logical shape. One execution of the
`Allocate` body only touches part of it: the image of the access indices when the loops
*inside* the allocation run over their ranges (loops outside stay symbolic). That region's
bounding box becomes the new shape, and every index `i` becomes `i - region_min`. This is what
turns `cache_write(..., "local")` under a tile loop into a small fixed-size array that the C
compiler keeps in registers.

A dimension is shrunk only when its new extent is a constant (a symbolic extent is replaced by
its constant upper bound) smaller than the old one; otherwise it keeps its full extent at
offset 0. Buffers with explicit strides, an element offset, axis separators, or vector
(Ramp) accesses are left alone, as is any region whose bounds would need a variable defined
inside the allocation. Runs on the lowered form (after LowerOpaqueBlock).

An allocation annotated "buffer_dim_align" (a storage_align request that LowerOpaqueBlock
moved from the writing block) gets padded strides computed for its compacted shape, as TVM's
CompactBufferAllocation does; FlattenBuffer then addresses it through those strides.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.arith import eval_set
from schedlab.ir import op
from schedlab.ir.buffer import Buffer
from schedlab.ir.expr import BufferLoad, IntImm, Let, PrimExpr, Range
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator, Visitor, collect_vars
from schedlab.ir.stmt import Allocate, BufferStore, For, LetStmt, Stmt
from schedlab.ir.transform import Pass, prim_func_pass

from ._util import analyzer, as_int, with_doc

DIM_ALIGN_ATTR = "buffer_dim_align"  # [[axis, factor, offset], ...] put on Allocate by lowering


def compact_buffer_allocation(func: PrimFunc) -> PrimFunc:
    """`func` with each allocated buffer shrunk to the region its allocation body accesses."""
    body = _Compactor().visit(func.body)
    return func if body is func.body else func.with_body(body)


def CompactBufferAllocation() -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `compact_buffer_allocation`."""
    return with_doc(
        prim_func_pass(compact_buffer_allocation, name="CompactBufferAllocation"), __doc__
    )


class _Compactor(Mutator):
    def __init__(self):
        self.loops: list[For] = []  # loops around the current statement

    def visit_For(self, node: For) -> Stmt:
        self.loops.append(node)
        try:
            return self.generic_visit(node)
        finally:
            self.loops.pop()

    def visit_Allocate(self, node: Allocate) -> Stmt:
        body = self.visit(node.body)  # inner allocations first
        region = accessed_region(node.buffer, body, self.loops)
        annotations = dict(node.annotations)
        align = annotations.pop(DIM_ALIGN_ATTR, None)
        if region is None and not align:
            return node if body is node.body else node.replace(body=body)
        shape = node.buffer.shape if region is None else tuple(r.extent for r in region)
        compact = node.buffer.replace(shape=shape, strides=aligned_strides(shape, align or ()))
        mins = (
            tuple(op.const(0, s.dtype) for s in shape)
            if region is None
            else tuple(r.min for r in region)
        )
        body = _Reindex(node.buffer, compact, mins).visit(body)
        return Allocate(compact, body, annotations)


def aligned_strides(shape, align) -> tuple[PrimExpr, ...]:
    """Row-major strides where each axis named in `align` ([axis, factor, offset] entries, from
    storage_align) gets the smallest stride >= the compact one with `stride % factor == offset`
    (TVM's rule); () when nothing is aligned."""
    wanted = {int(axis): (int(factor), int(offset)) for axis, factor, offset in align}
    if not wanted or not shape:
        return ()
    ana = analyzer()
    strides: list[PrimExpr] = []
    stride: PrimExpr = op.const(1, shape[-1].dtype)
    for dim in reversed(range(len(shape))):
        if dim in wanted:
            factor, offset = (op.const(v, stride.dtype) for v in wanted[dim])
            pad = op.floormod(factor + offset - op.floormod(stride, factor), factor)
            stride = ana.simplify(stride + pad)
        strides.append(stride)
        stride = ana.simplify(stride * shape[dim])
    return tuple(reversed(strides))


@dataclass
class _Access:
    indices: tuple[PrimExpr, ...]
    loops: tuple[For, ...]  # loops inside the allocation around the access, outermost first


class _AccessCollector(Visitor):
    def __init__(self, buffer: Buffer):
        self.buffer = buffer
        self.loops: list[For] = []
        self.accesses: list[_Access] = []
        self.inner_vars: set[int] = set()  # variables defined inside the allocation

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        if node.buffer is self.buffer:
            self.accesses.append(_Access(node.indices, tuple(self.loops)))
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        if node.buffer is self.buffer:
            self.accesses.append(_Access(node.indices, tuple(self.loops)))
        self.generic_visit(node)

    def visit_For(self, node: For) -> None:
        self.inner_vars.add(id(node.loop_var))
        self.visit(node.min)
        self.visit(node.extent)
        self.loops.append(node)
        self.visit(node.body)
        self.loops.pop()

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.inner_vars.add(id(node.var))
        self.generic_visit(node)

    def visit_Let(self, node: Let) -> None:
        self.inner_vars.add(id(node.var))
        self.generic_visit(node)


def accessed_region(buffer: Buffer, body: Stmt, outer_loops=()) -> list[Range] | None:
    """The compacted region (per dimension: min, constant extent) of `buffer` in `body`, or
    None when compaction does not apply or gains nothing. The ranges of `outer_loops` (the
    loops around the allocation) help bound symbolic extents."""
    if buffer.strides or buffer.axis_separators or not _is_zero(buffer.elem_offset):
        return None
    collector = _AccessCollector(buffer)
    collector.visit(body)
    if not collector.accesses:
        return None
    if any(i.dtype.lanes > 1 for a in collector.accesses for i in a.indices):
        return None
    ana = analyzer()
    for loop in outer_loops:
        ana.bind(loop.loop_var, Range(loop.min, loop.extent), allow_override=True)
    region = []
    for dim, extent in enumerate(buffer.shape):
        bounds = [_relaxed_bounds(a.indices[dim], a.loops, ana) for a in collector.accesses]
        region.append(_dimension(bounds, extent, collector.inner_vars, ana))
    if all(r is None for r in region):
        return None
    return [
        r if r is not None else Range(op.const(0, e.dtype), e) for r, e in zip(region, buffer.shape)
    ]


def _relaxed_bounds(index: PrimExpr, loops, ana) -> tuple[PrimExpr, PrimExpr] | None:
    """[lower, upper] of `index` over the loops, innermost first (an inner loop's range may use
    outer loop vars, relaxed in turn)."""
    lower, upper = index, index
    for loop in reversed(loops):
        dom = {loop.loop_var: Range(loop.min, loop.extent)}
        lower = _end(eval_set(lower, dom), "min")
        upper = _end(eval_set(upper, dom), "max")
        if lower is None or upper is None:
            return None
    return ana.simplify(lower), ana.simplify(upper)


def _end(interval, which: str) -> PrimExpr | None:
    """The finite `min`/`max` end of an IntervalSet, None when it is unbounded."""
    value = getattr(interval, which, None)
    if value is None or not isinstance(value, PrimExpr):
        return None
    return value


def _dimension(bounds, extent: PrimExpr, inner_vars: set[int], ana) -> Range | None:
    """The shrunk range of one dimension, or None to keep the full extent."""
    if any(b is None for b in bounds):
        return None
    lower = bounds[0][0]
    upper = bounds[0][1]
    for low, high in bounds[1:]:
        lower, upper = op.min(lower, low), op.max(upper, high)
    lower = ana.simplify(lower)
    new_extent = ana.simplify(op.add(op.sub(upper, lower), 1))
    if any(id(v) in inner_vars for v in (*collect_vars(lower), *collect_vars(new_extent))):
        return None
    size, old = as_int(new_extent), as_int(extent)
    if size is None and old is not None:
        # a symbolic extent (a tile at a ragged edge) is bounded by a constant; against a
        # symbolic old extent such a bound (often just the dtype's range) is no gain
        bound = ana.const_int_bound(new_extent).max_value
        size = bound if isinstance(bound, int) else None
    if size is None or size <= 0 or (old is not None and size >= old):
        return None
    return Range(lower, op.const(size, extent.dtype))


def _is_zero(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 0


class _Reindex(Mutator):
    """Accesses to `old` become accesses to `new` at `index - region_min`."""

    def __init__(self, old: Buffer, new: Buffer, mins: tuple[PrimExpr, ...]):
        self.old, self.new, self.mins = old, new, mins

    def shift(self, indices) -> tuple[PrimExpr, ...]:
        return tuple(op.sub(i, m) for i, m in zip(indices, self.mins))

    def visit_BufferLoad(self, node: BufferLoad) -> PrimExpr:
        node = self.generic_visit(node)
        if node.buffer is not self.old:
            return node
        return BufferLoad(self.new, self.shift(node.indices))

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        node = self.generic_visit(node)
        if node.buffer is not self.old:
            return node
        return BufferStore(self.new, node.value, self.shift(node.indices))


__all__ = [
    "compact_buffer_allocation", "CompactBufferAllocation", "accessed_region", "aligned_strides",
]  # fmt: skip

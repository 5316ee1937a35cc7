"""FlattenBuffer (TVM: same name): make every buffer one-dimensional.

Code generators address memory with a single offset, so each multi-dimensional access
`A[i, j]` becomes `A_flat[i * stride_i + j * stride_j + elem_offset]` with the buffer's strides
(row-major when it has none) and element offset. A buffer with `axis_separators` (texture
memory) keeps one physical axis per group of logical axes instead of one axis in all; the flat
buffer then records the groups as `axis_separators = (1, 2, ...)`.

Parameter buffers in `buffer_map` are replaced too, so the lowered function is uniformly flat;
their logical shapes are kept in the function attribute `"param_shapes"` (parameter name ->
shape), which argument binding uses to check arrays and bind symbolic sizes. A buffer already
flat (1-D, compact, offset 0) is kept as it is. Runs on the lowered form (no blocks left).
"""

from __future__ import annotations

from schedlab.errors import LoweringError
from schedlab.ir import op
from schedlab.ir.buffer import Buffer
from schedlab.ir.dtype import int64
from schedlab.ir.expr import BufferLoad, IntImm, PrimExpr
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator
from schedlab.ir.stmt import Allocate, Block, BlockRealize, BufferStore, Stmt
from schedlab.ir.transform import Pass, prim_func_pass

from ._util import with_doc

PARAM_SHAPES_ATTR = "param_shapes"
_INT32_LIMIT = 2**31 - 1


def flatten_buffer(func: PrimFunc) -> PrimFunc:
    """`func` with all buffers (parameters, allocations, accesses) flattened."""
    flattener = _Flattener()
    buffer_map = {param: flattener.flat(buf) for param, buf in func.buffer_map.items()}
    body = flattener.visit(func.body)
    changed = [param for param, buf in func.buffer_map.items() if buffer_map[param] is not buf]
    if body is func.body and not changed:
        return func
    attrs = dict(func.attrs)
    if changed:
        shapes = {p.name: _shape_attr(b.shape) for p, b in func.buffer_map.items()}
        attrs[PARAM_SHAPES_ATTR] = {**attrs.get(PARAM_SHAPES_ATTR, {}), **shapes}
    return func.replace(body=body, buffer_map=buffer_map, attrs=attrs)


def FlattenBuffer() -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `flatten_buffer`."""
    return with_doc(prim_func_pass(flatten_buffer, name="FlattenBuffer"), __doc__)


def _shape_attr(shape) -> tuple:
    """A shape for the attribute: constants as ints (readable), symbolic extents as exprs."""
    return tuple(s.value if isinstance(s, IntImm) else s for s in shape)


def is_flat(buffer: Buffer) -> bool:
    """Whether `buffer` is in the lowered form: one axis per physical dimension, compact."""
    physical = len(buffer.axis_separators) + 1
    offset = buffer.elem_offset
    return (
        buffer.ndim == physical
        and not buffer.strides
        and isinstance(offset, IntImm)
        and offset.value == 0
    )


class _Flattener(Mutator):
    def __init__(self):
        self.flat_of: dict[int, Buffer] = {}
        self.groups: dict[int, list[tuple[int, int]]] = {}

    def flat(self, buffer: Buffer) -> Buffer:
        known = self.flat_of.get(id(buffer))
        if known is not None:
            return known
        flat = buffer if _already_flat(buffer) else _flattened(buffer, _groups(buffer))
        self.flat_of[id(buffer)] = flat
        return flat

    def indices(self, buffer: Buffer, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        return _flat_indices(buffer, indices, _index_is_wide(self.flat(buffer)))

    def visit_BufferLoad(self, node: BufferLoad) -> PrimExpr:
        new = self.generic_visit(node)
        flat = self.flat(node.buffer)
        if flat is node.buffer:
            return new
        return BufferLoad(flat, self.indices(node.buffer, new.indices))

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        new = self.generic_visit(node)
        flat = self.flat(node.buffer)
        if flat is node.buffer:
            return new
        return BufferStore(flat, new.value, self.indices(node.buffer, new.indices))

    def visit_Allocate(self, node: Allocate) -> Stmt:
        new = self.generic_visit(node)
        flat = self.flat(node.buffer)
        return new if flat is node.buffer else new.replace(buffer=flat)

    def visit_Block(self, node: Block) -> Stmt:
        raise LoweringError(
            f"FlattenBuffer runs on lowered IR, but block {node.name_hint!r} remains; "
            "run LowerOpaqueBlock first"
        )

    def visit_BlockRealize(self, node: BlockRealize) -> Stmt:
        return self.visit_Block(node.block)


def _already_flat(buffer: Buffer) -> bool:
    return buffer.ndim == 1 and not buffer.axis_separators and is_flat(buffer)


def _groups(buffer: Buffer) -> list[tuple[int, int]]:
    """The [start, stop) ranges of logical axes forming each physical axis."""
    separators = sorted(buffer.axis_separators)
    if any(not 0 < s < buffer.ndim for s in separators):
        raise LoweringError(
            f"buffer {buffer.name}: axis_separators {tuple(separators)} must lie strictly "
            f"between 0 and its {buffer.ndim} dimensions"
        )
    if separators and (buffer.strides or not _is_zero(buffer.elem_offset)):
        raise LoweringError(
            f"buffer {buffer.name}: axis_separators together with strides or an elem_offset "
            "cannot be flattened"
        )
    bounds = [0, *separators, buffer.ndim]
    return list(zip(bounds[:-1], bounds[1:]))


def _is_zero(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 0


def _flattened(buffer: Buffer, groups: list[tuple[int, int]]) -> Buffer:
    if buffer.ndim == 0:
        shape: list[PrimExpr] = [op.const(1)]
    elif buffer.strides or not _is_zero(buffer.elem_offset):
        # the furthest element from the data pointer decides the size of the flat view
        last = buffer.elem_offset
        for extent, stride in zip(buffer.shape, buffer.strides or buffer.elem_strides()):
            last = op.add(last, _mul(op.sub(extent, 1), stride))
        shape = [op.add(last, 1)]
    else:
        shape = [_product(buffer.shape[start:stop]) for start, stop in groups]
    return Buffer(
        data=buffer.data,
        dtype=buffer.dtype,
        shape=tuple(shape),
        name=buffer.name,
        scope=buffer.scope,
        axis_separators=tuple(range(1, len(shape))),
        data_alignment=buffer.data_alignment,
        offset_factor=buffer.offset_factor,
    )


def _product(extents) -> PrimExpr:
    result: PrimExpr = op.const(1, extents[0].dtype if extents else "int32")
    for extent in extents:
        result = _mul(result, extent)
    return result


def _mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """`a * b`, widening a constant product that does not fit in int32 to int64."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        value = a.value * b.value
        return op.const(value, int64 if value > _INT32_LIMIT else a.dtype)
    return op.mul(a, b)


def _index_is_wide(flat: Buffer) -> bool:
    """Whether offsets into `flat` need 64-bit arithmetic (a constant size past int32)."""
    return any(isinstance(s, IntImm) and s.value > _INT32_LIMIT for s in flat.shape)


def _flat_indices(buffer: Buffer, indices, wide: bool) -> tuple[PrimExpr, ...]:
    if buffer.ndim == 0:
        return (op.const(0),)
    if wide:
        indices = tuple(op.cast(i, int64.with_lanes(i.dtype.lanes)) for i in indices)
    if buffer.strides or not _is_zero(buffer.elem_offset):
        return (_offset(indices, buffer.elem_strides(), buffer.elem_offset),)
    result = []
    for start, stop in _groups(buffer):
        strides = _row_major_strides(buffer.shape[start:stop])
        result.append(_offset(indices[start:stop], strides, op.const(0)))
    return tuple(result)


def _row_major_strides(shape) -> list[PrimExpr]:
    strides: list[PrimExpr] = []
    running: PrimExpr = op.const(1, shape[-1].dtype)
    for extent in reversed(shape):
        strides.append(running)
        running = _mul(running, extent)
    return strides[::-1]


def _offset(indices, strides, base: PrimExpr) -> PrimExpr:
    total: PrimExpr | None = None
    for index, stride in zip(indices, strides):
        term = op.mul(index, stride)
        total = term if total is None else op.add(total, term)
    assert total is not None
    return op.add(total, base) if not _is_zero(base) else total

"""Vector expressions in C: which ones map to GCC vector operations, and the scalar form of one
lane for the rest.

Ramp/Broadcast code from the vectorizer renders as GCC vector-extension values when every
operation has a native vector form (+ - * /, min/max through a compare-and-blend helper,
conversions, contiguous loads). Anything else
(comparisons, select, math calls, float16, strided or gathered loads, lazy `if_then_else`) is
rendered lane by lane: `lane_of(expr, l)` is the scalar expression of lane `l`, and the renderer
wraps it in a small loop that gcc unrolls and usually re-vectorizes.
"""

from __future__ import annotations

from schedlab.errors import LoweringError
from schedlab.ir import expr as E
from schedlab.ir import op
from schedlab.ir.dtype import DataType

# A codegen-private call: `Call(elem, LANE_OP, (vector_var, lane))` renders as `vector_var[lane]`.
LANE_OP = "sl.lane"


def is_plain_numeric(dtype: DataType) -> bool:
    """Numbers C computes natively in this element type (not bool, not the 16-bit floats carried
    as float)."""
    return dtype.is_integer or (dtype.kind == "float" and dtype.bits != 16)


def is_pow2(lanes: int) -> bool:
    return lanes & (lanes - 1) == 0


def contiguous_base(index: E.PrimExpr) -> E.PrimExpr | None:
    """The base of a stride-1 Ramp index (a contiguous vector access), else None."""
    if isinstance(index, E.Ramp) and isinstance(index.stride, E.IntImm) and index.stride.value == 1:
        return index.base
    return None


def native_vector(node: E.PrimExpr) -> bool:
    """Can this vector node (its own operation, not its children) be a GCC vector operation?"""
    dtype = node.dtype
    if isinstance(node, (E.Ramp, E.Broadcast)):
        return is_plain_numeric(dtype)
    if isinstance(node, (E.Add, E.Sub, E.Mul, E.Min, E.Max)):
        return is_plain_numeric(dtype)
    if isinstance(node, (E.Div, E.Mod)):
        if dtype.is_integer:  # padded lanes could divide by zero: only exact power-of-2 widths
            return is_pow2(dtype.lanes)
        return isinstance(node, E.Div) and is_plain_numeric(dtype)
    if isinstance(node, E.Cast):
        return is_plain_numeric(dtype) and is_plain_numeric(node.value.dtype)
    if isinstance(node, E.BufferLoad):
        element = node.buffer.dtype
        return (
            element.lanes == 1
            and is_plain_numeric(element)
            and len(node.indices) == 1
            and contiguous_base(node.indices[0]) is not None
        )
    if isinstance(node, E.Var):
        return True
    if isinstance(node, E.Let):
        return True
    return False


class _LaneExtractor:
    def __init__(self, lane: E.Var):
        self.lane = lane
        self.let_vars: dict[int, E.Var] = {}

    def __call__(self, node: E.PrimExpr) -> E.PrimExpr:
        if node.dtype.lanes == 1:
            return node
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            if isinstance(node, E.BinaryOp):
                return type(node)(self(node.a), self(node.b))
            raise LoweringError(
                f"the C backend cannot split the vector expression {node!r} "
                f"({type(node).__name__}) into lanes"
            )
        return method(node)

    def _lane_as(self, dtype: DataType) -> E.PrimExpr:
        return op.cast(self.lane, dtype.element_of())

    def _Ramp(self, node: E.Ramp) -> E.PrimExpr:
        return op.add(node.base, op.mul(node.stride, self._lane_as(node.base.dtype)))

    def _Broadcast(self, node: E.Broadcast) -> E.PrimExpr:
        return node.value

    def _Not(self, node: E.Not) -> E.PrimExpr:
        return E.Not(self(node.a))

    def _Select(self, node: E.Select) -> E.PrimExpr:
        return E.Select(self(node.condition), self(node.true_value), self(node.false_value))

    def _Cast(self, node: E.Cast) -> E.PrimExpr:
        return E.Cast(node.dtype.element_of(), self(node.value))

    def _Let(self, node: E.Let) -> E.PrimExpr:
        scalar = E.Var(node.var.name, node.var.dtype.element_of())
        value = self(node.value)
        self.let_vars[id(node.var)] = scalar
        try:
            return E.Let(scalar, value, self(node.body))
        finally:
            del self.let_vars[id(node.var)]

    def _Var(self, node: E.Var) -> E.PrimExpr:
        scalar = self.let_vars.get(id(node))
        if scalar is not None:
            return scalar
        return E.Call(node.dtype.element_of(), LANE_OP, (node, self.lane))

    def _BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        if node.buffer.dtype.lanes != 1:
            raise LoweringError(
                f"the C backend cannot split a load of the vector-typed buffer "
                f"{node.buffer.name} ({node.buffer.dtype}) into lanes"
            )
        return E.BufferLoad(node.buffer, tuple(self(index) for index in node.indices))

    def _Call(self, node: E.Call) -> E.PrimExpr:
        return E.Call(node.dtype.element_of(), node.op, tuple(self(arg) for arg in node.args))


def lane_of(node: E.PrimExpr, lane: E.Var) -> E.PrimExpr:
    """The scalar expression computing lane `lane` (an int32 variable) of vector `node`."""
    return _LaneExtractor(lane)(node)


class _NoSlice(Exception):
    pass


def _slice(node: E.PrimExpr, start: int, count: int) -> E.PrimExpr:
    if node.dtype.lanes == 1:
        return node
    if isinstance(node, E.Ramp):
        return E.Ramp(op.add(node.base, op.mul(node.stride, start)), node.stride, count)
    if isinstance(node, E.Broadcast):
        return E.Broadcast(node.value, count)
    if isinstance(node, E.BinaryOp):
        return type(node)(_slice(node.a, start, count), _slice(node.b, start, count))
    if isinstance(node, E.Not):
        return E.Not(_slice(node.a, start, count))
    if isinstance(node, E.Select):
        parts = (node.condition, node.true_value, node.false_value)
        return E.Select(*(_slice(part, start, count) for part in parts))
    if isinstance(node, E.Cast):
        return E.Cast(node.dtype.with_lanes(count), _slice(node.value, start, count))
    if isinstance(node, E.Call):
        args = tuple(_slice(arg, start, count) for arg in node.args)
        return E.Call(node.dtype.with_lanes(count), node.op, args)
    if isinstance(node, E.BufferLoad) and node.buffer.dtype.lanes == 1:
        return E.BufferLoad(node.buffer, tuple(_slice(i, start, count) for i in node.indices))
    raise _NoSlice  # vector variables, lets, vector-typed buffers: kept whole


def _widest_bits(node: E.PrimExpr) -> int:
    widest = 0

    def visit(n):
        nonlocal widest
        if isinstance(n, E.PrimExpr) and n.dtype.lanes > 1:
            widest = max(widest, n.dtype.bits)

    from schedlab.ir.functor import post_order_visit

    post_order_visit(node, visit)
    return widest


def _reads_other_lanes(value: E.PrimExpr, data: E.Var, index: E.PrimExpr) -> bool:
    """Does `value` load the stored buffer at an index other than the stored one?"""
    from schedlab.ir.functor import post_order_visit
    from schedlab.ir.structural import structural_equal

    found = False

    def visit(n):
        nonlocal found
        if isinstance(n, E.BufferLoad) and n.buffer.data is data:
            if len(n.indices) != 1 or not structural_equal(n.indices[0], index):
                found = True

    post_order_visit(value, visit)
    return found


def split_store(buffer, value: E.PrimExpr, index: E.PrimExpr, native_bits: int):
    """A vector store wider than the machine's vectors as a list of (value, index) chunks of
    native width, or None to keep it whole. GCC spills over-wide vector values to the stack;
    chunks stay in registers. Only done when each chunk reads nothing another chunk writes."""
    lanes = index.dtype.lanes
    bits = max(_widest_bits(value), _widest_bits(index))
    if not bits or lanes * bits <= native_bits or native_bits % bits:
        return None
    chunk = native_bits // bits
    if chunk < 2 or lanes % chunk or _reads_other_lanes(value, buffer.data, index):
        return None
    try:
        return [
            (_slice(value, start, chunk), _slice(index, start, chunk))
            for start in range(0, lanes, chunk)
        ]
    except _NoSlice:
        return None


def register_vector_lanes(body, data: E.Var, count: int, native_bits: int) -> int | None:
    """L when every access of the scratch buffer `data` in `body` is one whole, aligned vector
    of L lanes (a stride-1 Ramp at a constant multiple of L, L x element bits at most
    `native_bits`) and nothing else refers to it: the buffer can then be an array of L-lane
    vectors, indexed by constants, which gcc keeps in registers. As a plain array read and
    written through memcpy, gcc 12 copied every accumulator of a register tile twice per
    iteration of the reduction loop (a 11 x 16 conv tile: 38 instructions for 11 FMAs; 20
    accumulators spilled to the stack)."""
    from schedlab.ir.functor import Visitor

    lanes: set[int] = set()
    ok = True

    class _Scan(Visitor):
        def _access(self, node):
            nonlocal ok
            if node.buffer.data is not data:
                return
            offset = node.buffer.elem_offset
            index = node.indices[0] if len(node.indices) == 1 else None
            base = contiguous_base(index) if index is not None else None
            if (not (isinstance(offset, E.IntImm) and offset.value == 0)
                    or not isinstance(base, E.IntImm)):  # fmt: skip
                ok = False
                return
            width = index.dtype.lanes
            bits = width * node.buffer.dtype.bits
            if width < 2 or base.value % width or (native_bits and bits > native_bits):
                ok = False
            lanes.add(width)

        def visit_BufferLoad(self, node):
            self._access(node)
            for index in node.indices:
                self.visit(index)

        def visit_BufferStore(self, node):
            self._access(node)
            self.visit(node.value)
            for index in node.indices:
                self.visit(index)

        def visit_Var(self, node):
            nonlocal ok
            if node is data:  # its address taken (a call argument, a pointer expression)
                ok = False

    _Scan().visit(body)
    if not ok or len(lanes) != 1:
        return None
    (width,) = lanes
    return width if count % width == 0 else None

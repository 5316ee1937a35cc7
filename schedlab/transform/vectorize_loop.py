"""VectorizeLoop (TVM: same name): turn vectorized loops into vector expressions.

A `For` of kind VECTORIZED with a constant extent `n` whose body is a straight line of
`BufferStore`s becomes that line of stores executed once on `n`-lane vectors: the loop var
becomes `Ramp(min, 1, n)`, affine indices become Ramps (contiguous or constant-stride vector
loads and stores), values that do not depend on the loop var are `Broadcast`.

The rewrite is done only when it provably keeps the loop's numerics:
- lanes are a power of two in [2, 64] (the C renderer's GCC vector types need that), element
  types are plain ints/floats (no bool, float16, bfloat16 vectors);
- every index is affine in the loop var with a constant, non-zero stride;
- the vector part of each value uses only `+ - * /`, min/max, casts and loads (operators
  every vector back end renders directly); parts not depending on the loop var may be anything;
- no lane can see another lane's store: every store into a buffer, and every load of a buffer
  stored in the loop, uses the same index.
Anything else stays a VECTORIZED `For` (the C renderer emits `#pragma omp simd`, and gcc then
vectorizes or not, but never changes results). A loop of extent 1 is replaced by its body.
"""

from __future__ import annotations

from schedlab.ir import op
from schedlab.ir.expr import (
    Add,
    BufferLoad,
    Call,
    Cast,
    Div,
    Max,
    Min,
    Mul,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)  # fmt: skip
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator, post_order_visit, substitute, uses_var
from schedlab.ir.stmt import BufferStore, For, ForKind, IfThenElse, SeqStmt, Stmt
from schedlab.ir.structural import structural_equal
from schedlab.ir.transform import Pass, prim_func_pass

from ._util import as_int, simplify_stmt, with_doc

_VECTOR_ELEMENTS = frozenset(
    ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
     "float64"]
)  # fmt: skip
_MAX_LANES = 64


def vectorize_loop(func: PrimFunc, float16: bool = False) -> PrimFunc:
    """`func` with eligible vectorized loops rewritten into Ramp/Broadcast vector code;
    `float16=True` (the GPU renderers, which have half vectors) admits float16 vectors."""
    body = _Vectorizer(float16).visit(func.body)
    return func if body is func.body else func.with_body(body)


def VectorizeLoop(float16: bool = False) -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `vectorize_loop`."""

    def run(func: PrimFunc) -> PrimFunc:
        return vectorize_loop(func, float16)

    return with_doc(prim_func_pass(run, name="VectorizeLoop"), __doc__)


class _Vectorizer(Mutator):
    def __init__(self, float16: bool = False):
        self.float16 = float16

    def visit_For(self, node: For) -> Stmt:
        node = self.generic_visit(node)
        if node.kind != ForKind.VECTORIZED:
            return node
        lanes = as_int(node.extent)
        if lanes == 1:
            return simplify_stmt(substitute(node.body, {node.loop_var: node.min}))
        if lanes is None or lanes < 2 or lanes > _MAX_LANES or lanes & (lanes - 1):
            return node
        unswitched = _unswitch(node)
        if unswitched is not None:
            return self.visit(unswitched)
        vectorized = vectorize_stores(node, lanes, self.float16)
        return node if vectorized is None else vectorized


def _unswitch(loop: For) -> Stmt | None:
    """`for i: B[..] = if_then_else(c, x, y)` (or a Select) with `c` not depending on `i`, as
    `if c: for i: B[..] = x  else: for i: B[..] = y` (each branch then vectorizes; a concat's
    channel test or a pad's row test is decided once per vector, not per lane). Likewise a
    body guarded by such a test, `for i: if c: S` as `if c: for i: S` (a predicated row of a
    register tile). None when the body is neither."""
    store = loop.body
    if isinstance(store, IfThenElse) and store.else_case is None:
        if uses_var(store.condition, lambda v: v is loop.loop_var):
            return None
        return IfThenElse(store.condition, loop.replace(body=store.then_case))
    if not isinstance(store, BufferStore):
        return None
    value = store.value
    if isinstance(value, Call) and value.op == "if_then_else":
        condition, then_value, else_value = value.args
    elif isinstance(value, Select):
        condition, then_value, else_value = value.condition, value.true_value, value.false_value
    else:
        return None
    if uses_var(condition, lambda v: v is loop.loop_var) or condition.dtype.lanes != 1:
        return None
    branches = [loop.replace(body=store.replace(value=v)) for v in (then_value, else_value)]
    return IfThenElse(condition, *branches)


class _Unsupported(Exception):
    """The loop body is outside what the Ramp form handles; keep the loop."""


def vectorize_stores(loop: For, lanes: int, float16: bool = False) -> Stmt | None:
    """The straight-line body of `loop` as `lanes`-wide vector stores, or None."""
    stores = _straight_line(loop.body)
    if stores is None or _has_vectors(loop.body):
        return None
    ramp = Ramp(loop.min, op.const(1, loop.loop_var.dtype), lanes)
    rewriter = _VectorExpr(loop.loop_var, ramp, lanes, float16)
    try:
        new = [rewriter.store(store) for store in stores]
        rewriter.check_lanes_independent()
    except _Unsupported:
        return None
    return SeqStmt.flatten(*new)


def _straight_line(body: Stmt) -> list[BufferStore] | None:
    items = body.seq if isinstance(body, SeqStmt) else (body,)
    if not all(isinstance(item, BufferStore) for item in items):
        return None
    return list(items)


def _has_vectors(stmt: Stmt) -> bool:
    found = False

    def visit(node):
        nonlocal found
        if isinstance(node, PrimExpr) and node.dtype.lanes > 1:
            found = True

    post_order_visit(stmt, visit)
    return found


class _VectorExpr:
    """Rewrites expressions of the loop body into `lanes`-wide vector expressions."""

    def __init__(self, var: Var, ramp: Ramp, lanes: int, float16: bool = False):
        self.var, self.ramp, self.lanes = var, ramp, lanes
        self.elements = _VECTOR_ELEMENTS | ({"float16"} if float16 else set())
        self.stored: dict[int, PrimExpr] = {}  # buffer id -> its (single) store index
        self.loaded: list[tuple[int, PrimExpr | None]] = []  # buffer id, vector index or None

    def depends(self, expr: PrimExpr) -> bool:
        return uses_var(expr, lambda v: v is self.var)

    def store(self, node: BufferStore) -> BufferStore:
        index = self.index(node.indices)
        if index is None:
            raise _Unsupported("a store that every lane makes to the same place")
        known = self.stored.setdefault(id(node.buffer), index)
        if known is not index and not structural_equal(known, index):
            raise _Unsupported("two stores into one buffer at different places")
        value = self.broadcast(self.vec(node.value))
        return BufferStore(node.buffer, value, (index,))

    def index(self, indices) -> Ramp | None:
        """The vector index of a 1-D access, None when it does not depend on the loop var."""
        if len(indices) != 1:
            raise _Unsupported("a multi-dimensional access (flatten buffers first)")
        if not self.depends(indices[0]):
            return None
        index = self.vec(indices[0])
        stride = as_int(index.stride) if isinstance(index, Ramp) else None
        if not stride:
            raise _Unsupported("an index that is not affine in the loop var")
        return index

    def check_lanes_independent(self) -> None:
        for buffer_id, index in self.loaded:
            known = self.stored.get(buffer_id)
            if known is None:
                continue
            if index is None or not structural_equal(known, index):
                raise _Unsupported("a lane may read what another lane stores")

    def broadcast(self, expr: PrimExpr) -> PrimExpr:
        return expr if expr.dtype.lanes > 1 else op.broadcast(expr, self.lanes)

    def vec(self, expr: PrimExpr) -> PrimExpr:
        if isinstance(expr, BufferLoad):
            return self.load(expr)
        if not self.depends(expr):
            self.record_loads(expr)
            return expr
        if expr is self.var:
            return self.ramp
        if str(expr.dtype.element_of()) not in self.elements:
            raise _Unsupported(f"vectors of {expr.dtype}")
        if isinstance(expr, (Add, Sub, Mul)):
            return self.affine(expr, self.vec(expr.a), self.vec(expr.b))
        if isinstance(expr, (Div, Min, Max)):
            a, b = self.broadcast(self.vec(expr.a)), self.broadcast(self.vec(expr.b))
            return type(expr)(a, b)
        if isinstance(expr, Cast):
            value = self.vec(expr.value)
            return Cast(expr.dtype.with_lanes(value.dtype.lanes), value)
        raise _Unsupported(f"{type(expr).__name__} on vectors")

    def affine(self, expr: PrimExpr, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        """`a op b` keeping Ramps for affine integer arithmetic (so indices stay Ramps)."""
        kind = type(expr)
        if expr.dtype.is_integer and _is_ramp_or_scalar(a) and _is_ramp_or_scalar(b):
            if kind is Add and (isinstance(a, Ramp) or isinstance(b, Ramp)):
                return _ramp_add(a, b, self.lanes)
            if kind is Sub:
                return _ramp_add(a, _ramp_neg(b), self.lanes)
            if kind is Mul and not (isinstance(a, Ramp) and isinstance(b, Ramp)):
                ramp, scale = (a, b) if isinstance(a, Ramp) else (b, a)
                return Ramp(op.mul(ramp.base, scale), op.mul(ramp.stride, scale), self.lanes)
        return kind(self.broadcast(a), self.broadcast(b))

    def load(self, node: BufferLoad) -> PrimExpr:
        if not self.depends(node):
            self.record_loads(node)
            return node
        index = self.index(node.indices)
        if str(node.buffer.dtype.element_of()) not in self.elements:
            raise _Unsupported(f"vector loads of {node.buffer.dtype}")
        self.loaded.append((id(node.buffer), index))
        return BufferLoad(node.buffer, (index,))

    def record_loads(self, expr: PrimExpr) -> None:
        """Note the loads of a part every lane computes alike (scalar loads)."""

        def visit(node):
            if isinstance(node, BufferLoad):
                self.loaded.append((id(node.buffer), None))

        post_order_visit(expr, visit)


def _is_ramp_or_scalar(expr: PrimExpr) -> bool:
    return isinstance(expr, Ramp) or expr.dtype.lanes == 1


def _ramp_add(a: PrimExpr, b: PrimExpr, lanes: int) -> PrimExpr:
    if isinstance(a, Ramp) and isinstance(b, Ramp):
        return Ramp(op.add(a.base, b.base), op.add(a.stride, b.stride), lanes)
    ramp, scalar = (a, b) if isinstance(a, Ramp) else (b, a)
    return Ramp(op.add(ramp.base, scalar), ramp.stride, lanes)


def _ramp_neg(expr: PrimExpr) -> PrimExpr:
    if isinstance(expr, Ramp):
        return Ramp(op.neg(expr.base), op.neg(expr.stride), expr.lanes)
    return op.neg(expr)


__all__ = ["vectorize_loop", "VectorizeLoop", "vectorize_stores"]

"""Reductions: `comm_reducer` and the standard reducers `sum`, `max`, `min`.

A reducer called with reduce axes builds a `Reduce` expression, which may only be the whole body
of a `compute` (as in TVM). `create_prim_func` turns it into a block whose `init` stores the
identity (or the given `init`) and whose body combines the output with the next value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from schedlab.ir import op
from schedlab.ir.dtype import DataType
from schedlab.ir.expr import PrimExpr
from schedlab.ir.functor import post_order_visit
from schedlab.ir.node import ir_node, meta
from schedlab.ir.stmt import IterType

from .tensor import AxisVar


def min_value(dtype) -> PrimExpr:
    """The smallest finite value of `dtype`, as a constant (the identity of `max`)."""
    dtype = DataType(dtype)
    if dtype.is_float:
        return op.const(float(np.finfo(dtype.numpy).min), dtype)
    return op.const(dtype.min_value(), dtype)


def max_value(dtype) -> PrimExpr:
    """The largest finite value of `dtype`, as a constant (the identity of `min`)."""
    dtype = DataType(dtype)
    if dtype.is_float:
        return op.const(float(np.finfo(dtype.numpy).max), dtype)
    return op.const(dtype.max_value(), dtype)


class CommReducer:
    """A commutative, associative reduction: `fcombine(x, y)` merges two values and
    `fidentity(dtype)` is its neutral element. Call it as `reducer(expr, axis, where=None)`
    to reduce over axes, or `reducer(a, b, ...)` to combine values directly."""

    def __init__(self, fcombine: Callable, fidentity: Callable, name: str = "reduce"):
        self.fcombine, self.fidentity, self.name = fcombine, fidentity, name

    def combine(self, lhs: PrimExpr, rhs: PrimExpr) -> PrimExpr:
        """`fcombine(lhs, rhs)` as an expression of the operands' dtype."""
        result = op.convert(self.fcombine(lhs, rhs))
        if result.dtype != lhs.dtype:
            raise TypeError(
                f"reducer {self.name}: combining {lhs.dtype} values gave a {result.dtype} value"
            )
        return result

    def identity(self, dtype) -> PrimExpr:
        """The neutral element for `dtype`."""
        return op.const(self.fidentity(str(DataType(dtype))), dtype)

    def __call__(self, expr, axis=None, where=None, init=None, *more):
        if isinstance(axis, (AxisVar, list, tuple)):
            if more:
                raise TypeError(f"{self.name}: unexpected extra arguments {more!r}")
            return _make_reduce(self, expr, axis, where, init)
        if axis is None:
            raise TypeError(f"{self.name}: pass reduce axes (axis=...) or values to combine")
        values = [v for v in (expr, axis, where, init, *more) if v is not None]
        result = op.convert(values[0])
        for value in values[1:]:
            left, right = op.promote(result, value)
            result = self.combine(left, right)
        return result

    def __repr__(self) -> str:
        return f"CommReducer({self.name})"


@ir_node
class Reduce(PrimExpr):
    """`combiner` over `axis` of `source` where `condition` holds, starting from `init` (the
    combiner's identity when None). Only valid as the whole body of a compute."""

    combiner: CommReducer = meta(child=False)
    source: PrimExpr
    axis: tuple[AxisVar, ...] = meta(child=False)
    condition: PrimExpr
    init: PrimExpr | None = None

    @property
    def dtype(self) -> DataType:
        return self.source.dtype

    def initial_value(self) -> PrimExpr:
        """The value the output holds before the first combination."""
        if self.init is None:
            return self.combiner.identity(self.dtype)
        return op.cast(self.init, self.dtype)


def _make_reduce(reducer: CommReducer, expr, axis, where, init) -> Reduce:
    axes = (axis,) if isinstance(axis, AxisVar) else tuple(axis)
    _check_axes(reducer.name, axes)
    source = op.convert(expr)
    condition = op.const(True) if where is None else op.convert(where)
    if not condition.dtype.is_bool:
        raise TypeError(f"{reducer.name}: `where` must be a bool expression, got {condition!r}")
    initial = None if init is None else op.convert(init)
    return Reduce(reducer, source, axes, condition, initial)


def _check_axes(name: str, axes: Sequence) -> None:
    if not axes:
        raise ValueError(f"{name}: needs at least one reduce axis")
    seen: set[int] = set()
    for axis in axes:
        if not isinstance(axis, AxisVar) or axis.iter_type != IterType.REDUCE:
            raise TypeError(f"{name}: axis must be made by te.reduce_axis, got {axis!r}")
        if id(axis) in seen:
            raise ValueError(f"{name}: reduce axis {axis.name!r} is listed twice")
        seen.add(id(axis))


def check_top_level_reduce(body: PrimExpr, stage: str) -> None:
    """Reductions may only be the whole body of a compute, not part of a larger expression."""
    roots = (body.source, body.condition) if isinstance(body, Reduce) else (body,)

    def reject(node):
        if isinstance(node, Reduce):
            raise ValueError(
                f"compute {stage!r}: a reduction ({node.combiner.name}) may only be the whole "
                "body of a compute; compute it in its own stage and use that tensor"
            )

    for root in roots:
        post_order_visit(root, reject)


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "reduce") -> CommReducer:
    """A reducer from a combining function `fcombine(x, y)` and `fidentity(dtype)`, e.g.
    `prod = comm_reducer(lambda x, y: x * y, lambda t: const(1, t), name="prod")`."""
    return CommReducer(fcombine, fidentity, name)


sum = comm_reducer(lambda x, y: x + y, lambda t: op.const(0, t), name="sum")  # noqa: A001
min = comm_reducer(op.min, max_value, name="min")  # noqa: A001
max = comm_reducer(op.max, min_value, name="max")  # noqa: A001

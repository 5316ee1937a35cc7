"""Helpers shared by the operator families: the numpy broadcasting rule on (possibly symbolic)
shapes, dtype and rank checks, axis normalization and broadcast indexing of TE tensors.

Every check raises `OpTypeError` naming the operator, its inputs (`describe`) and what is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

from schedlab.ir.dtype import DataType
from schedlab.ir.expr import IntImm, PrimExpr
from schedlab.ir.op import const, floordiv, floormod
from schedlab.ir.structural import structural_equal

from .registry import OpTypeError, TensorInfo, describe, register_op


def fail(op: str, inputs: Sequence[TensorInfo], message: str) -> OpTypeError:
    """An OpTypeError saying `op`, its inputs and `message` (raise the result)."""
    return OpTypeError(f"{op}: {message}; inputs {describe(list(inputs))}")


def static_value(dim: PrimExpr) -> int | None:
    """The dimension as an int, or None when it is symbolic."""
    return dim.value if isinstance(dim, IntImm) else None


def same_dim(a: PrimExpr, b: PrimExpr) -> bool:
    """Whether two dimensions are provably equal (equal ints or structurally equal exprs)."""
    va, vb = static_value(a), static_value(b)
    if va is not None and vb is not None:
        return va == vb
    return structural_equal(a, b)


def known_shape(op: str, inputs: Sequence[TensorInfo]) -> None:
    """Every input must have a known rank (our operators need it)."""
    for info in inputs:
        if info.shape is None:
            raise fail(op, inputs, "an input of unknown rank is not supported")


def broadcast_dim(op: str, inputs, a: PrimExpr, b: PrimExpr, axis: int) -> PrimExpr:
    """One output dimension of numpy broadcasting; `axis` counts from the right (for errors)."""
    va, vb = static_value(a), static_value(b)
    if va == 1:
        return b
    if vb == 1 or same_dim(a, b):
        return a
    if va is not None and vb is not None:
        raise fail(op, inputs, f"cannot broadcast dimension {va} with {vb} (axis -{axis})")
    # One side symbolic: numpy semantics need the other to match at run time; trust the static
    # side like TVM does when it can assume equality.
    if va is not None:
        return a
    if vb is not None:
        return b
    raise fail(op, inputs, f"cannot prove dimensions {a} and {b} broadcast (axis -{axis})")


def broadcast_shapes(op: str, inputs: Sequence[TensorInfo]) -> tuple[PrimExpr, ...]:
    """The numpy-broadcast shape of all inputs' shapes."""
    known_shape(op, inputs)
    out: tuple[PrimExpr, ...] = ()
    for info in inputs:
        out = _broadcast_pair(op, inputs, out, info.shape)
    return out


def _broadcast_pair(op, inputs, a: tuple, b: tuple) -> tuple:
    rank = max(len(a), len(b))
    one = const(1, "int32")
    a = (one,) * (rank - len(a)) + tuple(a)
    b = (one,) * (rank - len(b)) + tuple(b)
    return tuple(broadcast_dim(op, inputs, x, y, rank - i) for i, (x, y) in enumerate(zip(a, b)))


def same_dtype(op: str, inputs: Sequence[TensorInfo]) -> DataType:
    """All inputs must share one dtype (TVM's Relax arithmetic does not promote)."""
    dtypes = {info.dtype for info in inputs}
    if len(dtypes) != 1:
        text = ", ".join(sorted(str(d) for d in dtypes))
        raise fail(op, inputs, f"inputs must have the same dtype, got {text}")
    return inputs[0].dtype


def float_dtype(op: str, inputs: Sequence[TensorInfo]) -> DataType:
    """The first input's dtype, which must be a float."""
    dtype = inputs[0].dtype
    if not dtype.is_float:
        raise fail(op, inputs, f"needs a float input, got {dtype}")
    return dtype


def normalize_axis(op: str, inputs, axis, ndim: int, what: str = "axis") -> int:
    """`axis` in [-ndim, ndim) made non-negative."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise fail(op, inputs, f"{what} must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise fail(op, inputs, f"{what} {axis} is out of range for rank {ndim}")
    return axis + ndim if axis < 0 else axis


def normalize_axes(op: str, inputs, axes, ndim: int, what: str = "axis") -> list[int]:
    """A list of distinct non-negative axes (None: every axis; an int: one axis)."""
    if axes is None:
        return list(range(ndim))
    if not isinstance(axes, (list, tuple)):
        axes = [axes]  # one axis; normalize_axis rejects non-ints
    result = [normalize_axis(op, inputs, a, ndim, what) for a in axes]
    if len(set(result)) != len(result):
        raise fail(op, inputs, f"{what} has repeated axes: {list(axes)}")
    return result


def broadcast_index(tensor, out_shape: Sequence[PrimExpr], indices: Sequence) -> tuple:
    """Indices into `tensor` for output position `indices` under numpy broadcasting: leading
    output axes are dropped, size-1 axes read index 0."""
    offset = len(out_shape) - len(tensor.shape)
    result = []
    for dim, out_dim, index in zip(tensor.shape, out_shape[offset:], indices[offset:]):
        is_one = static_value(dim) == 1 and static_value(out_dim) != 1
        result.append(const(0, index.dtype) if is_one else index)
    return tuple(result)


def int_list(op: str, inputs, value, what: str) -> list[int]:
    """An attribute that must be a list of ints."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    items = list(value) if isinstance(value, (list, tuple)) else None
    if items is None or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise fail(op, inputs, f"{what} must be a list of ints, got {value!r}")
    return items


def product(dims: Sequence[PrimExpr]) -> PrimExpr:
    """The product of dimensions (1 for none)."""
    result: PrimExpr = const(1, "int32")
    for dim in dims:
        result = result * dim
    return result


def register_injective(name: str, infer, legalize, attrs=None, num_inputs=1, doc=""):
    """Register `relax.<name>` with the injective pattern."""
    register_op(f"relax.{name}", num_inputs=num_inputs, pattern="injective", infer=infer,
                legalize=legalize, attrs=attrs or {}, doc=doc)  # fmt: skip


def unravel(linear: PrimExpr, shape) -> list[PrimExpr]:
    """Row-major indices of position `linear` in `shape`."""
    index = []
    for dim in reversed(shape):
        index.append(floormod(linear, dim))
        linear = floordiv(linear, dim)
    return index[::-1]

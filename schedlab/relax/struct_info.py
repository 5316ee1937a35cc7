"""Structural information of graph values (TVM's StructInfo): what is known about a value's
kind, shape and dtype. Symbolic dimensions are loop-IR variables (usually `SizeVar`).

    n = SizeVar("n")
    TensorStructInfo((n, 4), "float32")      # a float32 tensor of shape (n, 4)
    TensorStructInfo(None, "float32", ndim=2) # rank 2, shape unknown
    TupleStructInfo([sinfo_a, sinfo_b])
"""

from __future__ import annotations

from schedlab.ir.dtype import DataType
from schedlab.ir.expr import IntImm, PrimExpr
from schedlab.ir.node import Node, ir_node
from schedlab.ir.op import convert


class StructInfo(Node):
    """Base class of struct info nodes."""

    __slots__ = ()


def _dims(values, what: str) -> tuple[PrimExpr, ...]:
    out = []
    for k, value in enumerate(values):
        if isinstance(value, PrimExpr):
            out.append(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            out.append(convert(int(value)))
        elif type(value).__module__ == "numpy" and hasattr(value, "item"):
            out.append(convert(int(value.item())))
        else:
            raise TypeError(f"{what}[{k}]: expected an int or a PrimExpr, got {value!r}")
    return tuple(out)


@ir_node
class ObjectStructInfo(StructInfo):
    """Any value (nothing known)."""


@ir_node
class PrimStructInfo(StructInfo):
    """A scalar of the loop IR (an int64 count, a float parameter)."""

    dtype: DataType

    def __post_init__(self):
        object.__setattr__(self, "dtype", DataType(self.dtype))


@ir_node
class ShapeStructInfo(StructInfo):
    """A shape value: its dimensions when known (`values`), else only its rank (`ndim`, -1 when
    unknown)."""

    values: tuple[PrimExpr, ...] | None = None
    ndim: int = -1

    def __post_init__(self):
        if self.values is not None:
            values = _dims(self.values, "ShapeStructInfo.values")
            if self.ndim not in (-1, len(values)):
                raise ValueError(f"ShapeStructInfo: ndim={self.ndim} but {len(values)} values")
            object.__setattr__(self, "values", values)
            object.__setattr__(self, "ndim", len(values))


@ir_node
class TensorStructInfo(StructInfo):
    """A tensor: `shape` (ints or PrimExprs; None when unknown), `dtype` and rank `ndim` (taken
    from the shape when it is given; -1 when unknown)."""

    shape: tuple[PrimExpr, ...] | None = None
    dtype: DataType = DataType("float32")
    ndim: int = -1

    def __post_init__(self):
        object.__setattr__(self, "dtype", DataType(self.dtype))
        if self.shape is not None:
            shape = _dims(self.shape, "TensorStructInfo.shape")
            if self.ndim not in (-1, len(shape)):
                raise ValueError(
                    f"TensorStructInfo: ndim={self.ndim} but the shape {shape} has {len(shape)}"
                )
            object.__setattr__(self, "shape", shape)
            object.__setattr__(self, "ndim", len(shape))

    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as Python ints, or None when unknown or symbolic."""
        if self.shape is None or not all(isinstance(d, IntImm) for d in self.shape):
            return None
        return tuple(d.value for d in self.shape)

    def __str__(self) -> str:
        if self.shape is None:
            return f"Tensor(ndim={self.ndim}, {self.dtype})"
        return f"Tensor(({', '.join(str(d) for d in self.shape)}), {self.dtype})"


@ir_node
class TupleStructInfo(StructInfo):
    """A tuple of values, one struct info per field."""

    fields: tuple[StructInfo, ...]

    def __post_init__(self):
        fields = tuple(self.fields)
        for k, item in enumerate(fields):
            if not isinstance(item, StructInfo):
                raise TypeError(f"TupleStructInfo.fields[{k}]: expected StructInfo, got {item!r}")
        object.__setattr__(self, "fields", fields)


@ir_node
class FuncStructInfo(StructInfo):
    """A function: its parameters' struct info and its result's."""

    params: tuple[StructInfo, ...]
    ret: StructInfo

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))


def tensor_sinfo(shape, dtype="float32") -> TensorStructInfo:
    """Shorthand for `TensorStructInfo(shape, dtype)`."""
    return TensorStructInfo(tuple(shape), dtype)

"""The `R` namespace: constructors for graph expressions and struct info, named as in the
text form (`R.add(x, y)`, `R.call_tir(...)`, `R.Tensor((n, 4), "float32")`).

Operator constructors come from the registry: `R.<name>` builds `Call("relax.<name>", ...)`
for every registered "relax.<name>", keyword arguments becoming attributes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from schedlab.ir.dtype import DataType

from . import expr as X
from .block_builder import call_tir
from .struct_info import (
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)  # fmt: skip


def call(op_name: str, *args: X.Expr, **attrs) -> X.Call:
    """A call of the registered operator `op_name` (checked against the registry)."""
    from schedlab.relax.op import get_op

    get_op(op_name)  # unknown names fail here, listing where to look
    return X.Call(op_name, tuple(_as_expr(a) for a in args), attrs)


def const(value, dtype: str | None = None) -> X.Constant:
    """A constant tensor from a number, nested lists or a numpy array."""
    array = np.asarray(value, dtype=DataType(dtype).numpy if dtype else None)
    if dtype is None and array.dtype == np.float64:
        array = array.astype(np.float32)  # Python floats mean float32 in the graph, like TVM
    if dtype is None and array.dtype == np.int64 and not isinstance(value, np.ndarray):
        array = array.astype(np.int32)
    return X.Constant(array)


def _as_expr(value) -> X.Expr:
    if isinstance(value, X.Expr):
        return value
    if isinstance(value, (list, tuple)):
        return X.Tuple(tuple(_as_expr(v) for v in value))
    raise TypeError(f"expected a graph expression, got {value!r}")


class _RNamespace:
    """`R`: see the module docstring."""

    call_tir = staticmethod(call_tir)
    call = staticmethod(call)
    const = staticmethod(const)

    @staticmethod
    def Tensor(shape=None, dtype="float32", ndim: int = -1) -> TensorStructInfo:  # noqa: N802
        return TensorStructInfo(None if shape is None else tuple(shape), dtype, ndim)

    @staticmethod
    def Tuple(*fields: StructInfo) -> TupleStructInfo:  # noqa: N802
        return TupleStructInfo(fields)

    @staticmethod
    def Shape(values: Sequence | None = None, ndim: int = -1) -> ShapeStructInfo:  # noqa: N802
        return ShapeStructInfo(None if values is None else tuple(values), ndim)

    @staticmethod
    def Prim(dtype) -> PrimStructInfo:  # noqa: N802
        return PrimStructInfo(dtype)

    Object = ObjectStructInfo()

    @staticmethod
    def tuple(*fields: X.Expr) -> X.Tuple:
        return X.Tuple(tuple(_as_expr(f) for f in fields))

    @staticmethod
    def shape(values: Sequence) -> X.ShapeExpr:
        return X.ShapeExpr(tuple(values))

    @staticmethod
    def prim_value(value) -> X.PrimValue:
        from schedlab.ir.op import convert

        return X.PrimValue(convert(value))

    @staticmethod
    def str(value: str) -> X.StringImm:
        return X.StringImm(value)

    def __getattr__(self, name: str):
        return _op_attr("relax.", name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(_op_names("relax.")))


class _OpGroup:
    """`R.nn`: constructors of the operators named "relax.nn.<name>"."""

    def __init__(self, prefix: str):
        self._prefix = prefix

    def __getattr__(self, name: str):
        return _op_attr(self._prefix, name)

    def __dir__(self):
        return _op_names(self._prefix)


def _op_names(prefix: str) -> list[str]:
    from schedlab.relax.op import list_ops

    return sorted({n[len(prefix) :].split(".")[0] for n in list_ops() if n.startswith(prefix)})


def _op_attr(prefix: str, name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    from schedlab.relax.op import list_ops

    op_name = f"{prefix}{name}"
    ops = list_ops()
    if op_name not in ops:
        if any(n.startswith(op_name + ".") for n in ops):
            return _OpGroup(op_name + ".")
        raise AttributeError(f"{prefix[:-1]}: no operator {op_name!r} is registered")

    def make(*args, **attrs) -> X.Call:
        return call(op_name, *args, **attrs)

    make.__name__ = make.__qualname__ = name
    return make


R = _RNamespace()

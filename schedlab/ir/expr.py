"""Expressions of the loop IR.

Every expression has a `dtype`. Python operators build expressions through `schedlab.ir.op`, which
promotes operand types and folds constants (`i + 0` is `i`), as TVM's operators do; the node
constructors themselves never fold, so the parser can rebuild exactly what was printed.
`a == b` builds an `EQ` node whose truth value is identity, so nodes still work as dict keys.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from schedlab.errors import short_int

from .dtype import DataType, bool_, handle, int32
from .node import Node, default_repr, ir_node, meta, printer

if TYPE_CHECKING:  # pragma: no cover
    from .buffer import Buffer


class PrimExpr(Node):
    """Base class of scalar/vector expressions."""

    __slots__ = ()
    dtype: DataType

    def __repr__(self) -> str:
        try:
            return printer("expr")(self)
        except Exception:
            return default_repr(self)

    __str__ = __repr__

    def __bool__(self) -> bool:
        raise TypeError(
            f"cannot use the symbolic expression {self!r} as a Python bool; "
            "use schedlab.ir.op.select / if_then_else for a conditional value"
        )

    __hash__ = Node.__hash__

    # arithmetic -----------------------------------------------------------------------------
    def __add__(self, other):
        return _op().add(self, other)

    def __radd__(self, other):
        return _op().add(other, self)

    def __sub__(self, other):
        return _op().sub(self, other)

    def __rsub__(self, other):
        return _op().sub(other, self)

    def __mul__(self, other):
        return _op().mul(self, other)

    def __rmul__(self, other):
        return _op().mul(other, self)

    def __truediv__(self, other):
        return _op().div(self, other)

    def __rtruediv__(self, other):
        return _op().div(other, self)

    def __floordiv__(self, other):
        return _op().floordiv(self, other)

    def __rfloordiv__(self, other):
        return _op().floordiv(other, self)

    def __mod__(self, other):
        return _op().floormod(self, other)

    def __rmod__(self, other):
        return _op().floormod(other, self)

    def __neg__(self):
        return _op().neg(self)

    def __abs__(self):
        return _op().abs(self)

    # comparison and logic ---------------------------------------------------------------------
    def __lt__(self, other):
        return _op().lt(self, other)

    def __le__(self, other):
        return _op().le(self, other)

    def __gt__(self, other):
        return _op().gt(self, other)

    def __ge__(self, other):
        return _op().ge(self, other)

    def __eq__(self, other):  # type: ignore[override]
        if not _is_operand(other):
            return False
        return _op().eq(self, other)

    def __ne__(self, other):  # type: ignore[override]
        if not _is_operand(other):
            return True
        return _op().ne(self, other)

    def __and__(self, other):
        return _op().logical_and(self, other)

    def __rand__(self, other):
        return _op().logical_and(other, self)

    def __or__(self, other):
        return _op().logical_or(self, other)

    def __ror__(self, other):
        return _op().logical_or(other, self)

    def __invert__(self):
        return _op().logical_not(self)

    def astype(self, dtype) -> PrimExpr:
        return _op().cast(self, dtype)


def _op():
    from . import op

    return op


def _is_operand(value) -> bool:
    """Can `value` take part in an expression (an expression or a Python/numpy number)?"""
    if isinstance(value, PrimExpr):
        return True
    return isinstance(value, (int, float)) or (hasattr(value, "dtype") and hasattr(value, "item"))


# ---------------------------------------------------------------------------------------------
# leaves
# ---------------------------------------------------------------------------------------------
@ir_node
class Var(PrimExpr):
    """A variable: loop variable, block iter var, let-bound value, parameter or buffer pointer."""

    name: str
    dtype: DataType = meta(default=int32)

    def __post_init__(self):
        object.__setattr__(self, "dtype", DataType(self.dtype))
        if not isinstance(self.name, str):
            raise TypeError(f"Var: name must be a str, got {type(self.name).__name__}")


@ir_node
class SizeVar(Var):
    """A variable known to be non-negative (a symbolic shape)."""


@ir_node
class IntImm(PrimExpr):
    """An integer (or bool) constant."""

    dtype: DataType
    value: int

    def __post_init__(self):
        dtype = DataType(self.dtype)
        object.__setattr__(self, "dtype", dtype)
        if not (dtype.is_integer or dtype.is_bool) or dtype.is_vector:
            raise TypeError(f"IntImm: dtype must be a scalar int/uint/bool type, got {dtype}")
        value = int(self.value)
        if not dtype.min_value() <= value <= dtype.max_value():
            raise ValueError(f"IntImm: value {short_int(value)} does not fit in {dtype}")
        object.__setattr__(self, "value", value)

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value


@ir_node
class FloatImm(PrimExpr):
    """A floating-point constant."""

    dtype: DataType
    value: float

    def __post_init__(self):
        dtype = DataType(self.dtype)
        object.__setattr__(self, "dtype", dtype)
        if not dtype.is_float or dtype.is_vector:
            raise TypeError(f"FloatImm: dtype must be a scalar float type, got {dtype}")
        object.__setattr__(self, "value", float(self.value))

    def __float__(self) -> float:
        return self.value


@ir_node
class StringImm(PrimExpr):
    """A string constant (used as an argument of some intrinsic calls)."""

    value: str

    @property
    def dtype(self) -> DataType:
        return handle


# ---------------------------------------------------------------------------------------------
# operators
# ---------------------------------------------------------------------------------------------
class BinaryOp(PrimExpr):
    """Two operands of the same dtype; the result has that dtype."""

    __slots__ = ()
    a: PrimExpr
    b: PrimExpr
    symbol = "?"

    def __post_init__(self):
        _check_expr(self, "a", self.a)
        _check_expr(self, "b", self.b)
        if self.a.dtype != self.b.dtype:
            raise TypeError(
                f"{type(self).__name__}: operands must have the same dtype, "
                f"got {self.a.dtype} and {self.b.dtype}"
            )

    @property
    def dtype(self) -> DataType:
        return self.a.dtype


def _check_expr(node, field: str, value) -> None:
    if not isinstance(value, PrimExpr):
        raise TypeError(
            f"{type(node).__name__}.{field}: expected a PrimExpr, got {type(value).__name__} "
            f"({value!r}); build expressions with schedlab.ir.op or Python operators"
        )


@ir_node
class Add(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "+"


@ir_node
class Sub(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "-"


@ir_node
class Mul(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "*"


@ir_node
class Div(BinaryOp):
    """Division: true division for floats, truncated (C) division for integers."""

    a: PrimExpr
    b: PrimExpr
    symbol = "/"


@ir_node
class Mod(BinaryOp):
    """Truncated (C) remainder: the sign follows the dividend."""

    a: PrimExpr
    b: PrimExpr
    symbol = "%"


@ir_node
class FloorDiv(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "//"


@ir_node
class FloorMod(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "%"


@ir_node
class Min(BinaryOp):
    a: PrimExpr
    b: PrimExpr


@ir_node
class Max(BinaryOp):
    a: PrimExpr
    b: PrimExpr


class CmpOp(BinaryOp):
    """A comparison: operands of one dtype, a bool result (with the operands' lanes)."""

    __slots__ = ()

    @property
    def dtype(self) -> DataType:
        return bool_.with_lanes(self.a.dtype.lanes)


@ir_node
class EQ(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "=="

    def __bool__(self) -> bool:  # lets nodes be dict keys, as TVM's EqualOp does
        return self.a is self.b


@ir_node
class NE(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "!="

    def __bool__(self) -> bool:
        return self.a is not self.b


@ir_node
class LT(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "<"


@ir_node
class LE(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "<="


@ir_node
class GT(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = ">"


@ir_node
class GE(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = ">="


class LogicalOp(BinaryOp):
    __slots__ = ()

    def __post_init__(self):
        super().__post_init__()
        if not self.a.dtype.is_bool:
            raise TypeError(f"{type(self).__name__}: operands must be bool, got {self.a.dtype}")


@ir_node
class And(LogicalOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "and"


@ir_node
class Or(LogicalOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "or"


@ir_node
class Not(PrimExpr):
    a: PrimExpr

    def __post_init__(self):
        _check_expr(self, "a", self.a)
        if not self.a.dtype.is_bool:
            raise TypeError(f"Not: operand must be bool, got {self.a.dtype}")

    @property
    def dtype(self) -> DataType:
        return self.a.dtype


@ir_node
class Select(PrimExpr):
    """`true_value if condition else false_value`; both branches may be evaluated."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr

    def __post_init__(self):
        for name in ("condition", "true_value", "false_value"):
            _check_expr(self, name, getattr(self, name))
        if not self.condition.dtype.is_bool:
            raise TypeError(f"Select: condition must be bool, got {self.condition.dtype}")
        if self.true_value.dtype != self.false_value.dtype:
            raise TypeError(
                "Select: branches must have the same dtype, got "
                f"{self.true_value.dtype} and {self.false_value.dtype}"
            )

    @property
    def dtype(self) -> DataType:
        return self.true_value.dtype


@ir_node
class Cast(PrimExpr):
    dtype: DataType
    value: PrimExpr

    def __post_init__(self):
        object.__setattr__(self, "dtype", DataType(self.dtype))
        _check_expr(self, "value", self.value)
        if self.dtype.lanes != self.value.dtype.lanes:
            raise TypeError(
                f"Cast: lanes must match, cannot cast {self.value.dtype} to {self.dtype}"
            )


@ir_node
class Let(PrimExpr):
    """`body` with `var` bound to `value`."""

    var: Var
    value: PrimExpr
    body: PrimExpr

    def __post_init__(self):
        _check_expr(self, "value", self.value)
        _check_expr(self, "body", self.body)
        if self.var.dtype != self.value.dtype:
            raise TypeError(
                f"Let: variable {self.var.name} has dtype {self.var.dtype}, "
                f"value has {self.value.dtype}"
            )

    @property
    def dtype(self) -> DataType:
        return self.body.dtype


@ir_node
class BufferLoad(PrimExpr):
    """`buffer[indices]`; a Ramp index makes it a vector load."""

    buffer: Buffer = meta(child=False)
    indices: tuple[PrimExpr, ...]

    def __post_init__(self):
        object.__setattr__(self, "indices", tuple(self.indices))
        for index in self.indices:
            _check_expr(self, "indices", index)
        _check_rank(self, self.buffer, self.indices)

    @cached_property
    def dtype(self) -> DataType:
        lanes = max((index.dtype.lanes for index in self.indices), default=1)
        return self.buffer.dtype.with_lanes(self.buffer.dtype.lanes * lanes)


def _check_rank(node, buffer, indices) -> None:
    from .buffer import Buffer

    if not isinstance(buffer, Buffer):
        raise TypeError(f"{type(node).__name__}.buffer: expected a Buffer, got {buffer!r}")
    if len(indices) != len(buffer.shape):
        raise ValueError(
            f"{type(node).__name__}: buffer {buffer.name} has {len(buffer.shape)} dimensions, "
            f"got {len(indices)} indices"
        )


@ir_node
class Ramp(PrimExpr):
    """The vector `[base, base + stride, ..., base + (lanes-1)*stride]`."""

    base: PrimExpr
    stride: PrimExpr
    lanes: int

    def __post_init__(self):
        _check_expr(self, "base", self.base)
        _check_expr(self, "stride", self.stride)
        if int(self.lanes) < 2:
            raise ValueError(f"Ramp: lanes must be >= 2, got {self.lanes}")
        object.__setattr__(self, "lanes", int(self.lanes))

    @property
    def dtype(self) -> DataType:
        return self.base.dtype.with_lanes(self.lanes)


@ir_node
class Broadcast(PrimExpr):
    """A scalar repeated over `lanes`."""

    value: PrimExpr
    lanes: int

    def __post_init__(self):
        _check_expr(self, "value", self.value)
        if int(self.lanes) < 2:
            raise ValueError(f"Broadcast: lanes must be >= 2, got {self.lanes}")
        object.__setattr__(self, "lanes", int(self.lanes))

    @property
    def dtype(self) -> DataType:
        return self.value.dtype.with_lanes(self.lanes)


@ir_node
class Call(PrimExpr):
    """A call of an intrinsic by name (`exp`, `sqrt`, `if_then_else`, ...); see `intrin.py`."""

    dtype: DataType
    op: str
    args: tuple[Any, ...]

    def __post_init__(self):
        object.__setattr__(self, "dtype", DataType(self.dtype))
        object.__setattr__(self, "args", tuple(self.args))
        for arg in self.args:
            _check_expr(self, "args", arg)


# ---------------------------------------------------------------------------------------------
# ranges
# ---------------------------------------------------------------------------------------------
@ir_node
class Range(Node):
    """The half-open interval `[min, min + extent)`."""

    min: PrimExpr
    extent: PrimExpr

    def __post_init__(self):
        from .op import const

        object.__setattr__(
            self, "min", const(self.min) if not isinstance(self.min, PrimExpr) else self.min
        )
        if not isinstance(self.extent, PrimExpr):
            object.__setattr__(self, "extent", const(self.extent, self.min.dtype))

    @staticmethod
    def from_min_extent(min_value, extent) -> Range:
        return Range(min_value, extent)

    def __repr__(self) -> str:
        return f"Range(min={self.min!r}, extent={self.extent!r})"


BINARY_OPS = (Add, Sub, Mul, Div, Mod, FloorDiv, FloorMod, Min, Max)
COMPARE_OPS = (EQ, NE, LT, LE, GT, GE)

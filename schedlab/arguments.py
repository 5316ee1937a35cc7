"""Binding call arguments to a PrimFunc's parameters (shared by the interpreter and the kernels).

`bind_arguments(func, arrays)` checks what a caller passed against the function's signature and
returns a `BoundArguments`: one value per parameter (the numpy array of a buffer parameter, the
number of a scalar one) and the value of every symbolic size (shape, stride and offset variables),
read from the arrays' shapes and strides and required to agree wherever a variable appears twice.

Every problem is a `ValueError` that names the parameter, what was expected and what was given.

A lowered function takes the same arrays as the function it was lowered from: a flattened (1-D)
parameter buffer checks an N-D array against the logical shape recorded in the function's
`"param_shapes"` attribute (binding the sizes found there) and views it as 1-D.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from schedlab.ir.buffer import Buffer
from schedlab.ir.dtype import DataType, int32
from schedlab.ir.expr import IntImm, PrimExpr, Var
from schedlab.ir.function import PrimFunc

# the lowered form's record of the logical shapes of flattened parameters (FlattenBuffer)
PARAM_SHAPES_ATTR = "param_shapes"


class ArgumentError(ValueError):
    """An argument does not match the function's signature."""


@dataclass(frozen=True)
class BoundArguments:
    """Arguments checked against a PrimFunc.

    `values[i]` belongs to `func.params[i]`: a numpy array for a buffer parameter (a 1-D view
    for a flattened parameter given its logical N-D array), a Python int/bool or numpy float
    scalar for a scalar parameter. `var_values` maps each symbolic size variable (by identity)
    to its int value."""

    func: PrimFunc
    values: tuple
    var_values: dict[Var, int] = field(default_factory=dict)

    def value_of(self, var: Var) -> int:
        """The value bound to a symbolic variable (KeyError if it is not bound)."""
        for known, value in self.var_values.items():
            if known is var:
                return value
        raise KeyError(f"variable {var.name} is not bound")

    def values_by_id(self) -> dict[int, object]:
        """Parameter and size-variable values keyed by `id(var)` (for generated code)."""
        table: dict[int, object] = {id(v): value for v, value in self.var_values.items()}
        for param, value in zip(self.func.params, self.values):
            table.setdefault(id(param), value)
        return table

    @property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """The arrays of the buffer parameters, in parameter order."""
        return tuple(v for v in self.values if isinstance(v, np.ndarray))


def bind_arguments(func: PrimFunc, arrays: Sequence) -> BoundArguments:
    """Check `arrays` against `func`'s parameters and bind its symbolic sizes.

    Raises ValueError (`ArgumentError`) naming the parameter, the expected and the actual value
    for: a wrong number of arguments, a non-array for a buffer, a wrong dtype, rank or shape, a
    non-contiguous array for a compact buffer, strides or offsets that do not fit the buffer,
    inconsistent symbolic sizes, a scalar of the wrong kind or out of its dtype's range."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"bind_arguments: expected a PrimFunc, got {type(func).__name__}")
    arrays = tuple(arrays)
    params = func.params
    if len(arrays) != len(params):
        names = ", ".join(p.name for p in params)
        raise ArgumentError(
            f"{func.name}: expected {len(params)} argument(s) ({names}), got {len(arrays)}"
        )
    binder = _Binder(func.name)
    logical = func.attrs.get(PARAM_SHAPES_ATTR) or {}
    values = []
    for param, value in zip(params, arrays):
        buffer = func.buffer_map.get(param)
        if buffer is not None:
            value = binder.bind_logical(param, buffer, value, logical.get(param.name))
            values.append(binder.bind_buffer(param, buffer, value))
        else:
            values.append(binder.bind_scalar(param, value))
    binder.check_deferred()
    return BoundArguments(func, tuple(values), binder.bound_vars())


class _Binder:
    """Binds variables in order, checking every later occurrence against the first."""

    def __init__(self, func_name: str):
        self.func_name = func_name
        self.values: dict[int, int] = {}
        self.vars: dict[int, Var] = {}
        self.first_seen: dict[int, str] = {}
        self.deferred: list[tuple[PrimExpr, int, str]] = []

    def bound_vars(self) -> dict[Var, int]:
        return {self.vars[key]: value for key, value in self.values.items()}

    def fail(self, what: str, expected: str, actual: str) -> ArgumentError:
        return ArgumentError(f"{self.func_name}: {what}: expected {expected}, got {actual}")

    # -- scalars -----------------------------------------------------------------------------
    def bind_scalar(self, param: Var, value):
        converted = _scalar_value(param.dtype, value)
        if converted is None:
            raise self.fail(f"argument {param.name}", f"a {param.dtype} scalar", _describe(value))
        if param.dtype.is_integer:
            self.bind_var(param, int(converted), f"argument {param.name}")
        return converted

    # -- buffers -----------------------------------------------------------------------------
    def bind_logical(self, param: Var, buffer: Buffer, value, shape):
        """A lowered (flattened) parameter: check the array against its logical shape, bind the
        sizes found there, and pass on a 1-D view."""
        if shape is None or not isinstance(value, np.ndarray) or len(buffer.shape) != 1:
            return value
        shape = tuple(shape)
        if value.ndim != len(shape) or len(shape) == 1:
            return value
        what = f"argument {param.name}"
        for dim, (extent, actual) in enumerate(zip(shape, value.shape)):
            extent = extent if isinstance(extent, PrimExpr) else IntImm(int32, int(extent))
            self.bind_expr(extent, int(actual), f"{what} shape[{dim}] (shape {value.shape})")
        if not value.flags.c_contiguous:
            raise self.fail(
                f"{what} layout", "a C-contiguous array (the buffer is compact)",
                f"strides {value.strides} (bytes); pass np.ascontiguousarray(...)",
            )  # fmt: skip
        return value.reshape(-1)

    def bind_buffer(self, param: Var, buffer: Buffer, value) -> np.ndarray:
        what = f"argument {param.name}"
        expected_dtype = _numpy_dtype(buffer.dtype)
        if not isinstance(value, np.ndarray):
            raise self.fail(
                what, f"a numpy array of {buffer.dtype} with shape {_shape_text(buffer)}",
                _describe(value),
            )  # fmt: skip
        if expected_dtype is None:
            raise self.fail(what, "a buffer of a scalar element type", f"{buffer.dtype}")
        if value.dtype != expected_dtype:
            expected, actual = str(buffer.dtype), _dtype_name(value.dtype)
            if value.dtype.newbyteorder("=") == expected_dtype:  # same type, other byte order
                expected += f" in this machine's byte order ({sys.byteorder}-endian)"
                actual += f"; convert it with .astype({expected_dtype.name!r})"
            raise self.fail(f"{what} dtype", expected, actual)
        value = self._match_rank(what, buffer, value)
        for dim, (extent, actual) in enumerate(zip(buffer.shape, value.shape)):
            self.bind_expr(extent, int(actual), f"{what} shape[{dim}] (shape {value.shape})")
        self._bind_layout(what, buffer, value)
        return value

    def _match_rank(self, what: str, buffer: Buffer, value: np.ndarray) -> np.ndarray:
        if value.ndim == len(buffer.shape):
            return value
        raise self.fail(
            f"{what} rank", f"{len(buffer.shape)} dimension(s), shape {_shape_text(buffer)}",
            f"{value.ndim} dimension(s), shape {value.shape}",
        )  # fmt: skip

    def _bind_layout(self, what: str, buffer: Buffer, value: np.ndarray) -> None:
        itemsize = value.dtype.itemsize
        if not buffer.strides:
            if not value.flags.c_contiguous:
                raise self.fail(
                    f"{what} layout", "a C-contiguous array (the buffer is compact)",
                    f"strides {value.strides} (bytes); pass np.ascontiguousarray(...)",
                )  # fmt: skip
        else:
            for dim, (stride, actual) in enumerate(zip(buffer.strides, value.strides)):
                if actual % itemsize:
                    raise self.fail(
                        f"{what} strides", "strides that are whole elements", str(value.strides)
                    )
                if value.shape[dim] == 1 and isinstance(stride, IntImm):
                    continue  # the stride of a unit dimension is never used
                self.bind_expr(stride, actual // itemsize, f"{what} strides[{dim}] (in elements)")
        self.bind_expr(buffer.elem_offset, 0, f"{what} elem_offset")

    # -- variables and expressions ---------------------------------------------------------------
    def bind_expr(self, expr: PrimExpr, actual: int, what: str) -> None:
        if isinstance(expr, Var):
            self.bind_var(expr, actual, what)
        elif isinstance(expr, IntImm):
            if expr.value != actual:
                raise self.fail(what, str(expr.value), str(actual))
        else:
            self.deferred.append((expr, actual, what))

    def bind_var(self, var: Var, actual: int, what: str) -> None:
        key = id(var)
        if key in self.values:
            if self.values[key] != actual:
                raise self.fail(
                    what,
                    f"{var.name} = {self.values[key]} (bound by {self.first_seen[key]})",
                    str(actual),
                )
            return
        if var.dtype.is_integer and not var.dtype.min_value() <= actual <= var.dtype.max_value():
            raise self.fail(what, f"a value that fits {var.name}'s dtype {var.dtype}", str(actual))
        self.values[key] = actual
        self.vars[key] = var
        self.first_seen[key] = what

    def check_deferred(self) -> None:
        """Sizes given by expressions (`n * 2`) are checked once every variable is bound."""
        for expr, actual, what in self.deferred:
            expected = _evaluate(expr, self.values)
            if expected is None:
                raise self.fail(
                    what, f"a size computable from the bound variables ({expr})",
                    f"{actual}, with {expr} not determined by any argument",
                )  # fmt: skip
            if expected != actual:
                raise self.fail(what, f"{expr} = {expected}", str(actual))


def _evaluate(expr: PrimExpr, values: dict[int, int]) -> int | None:
    """The integer value of a size expression over bound variables, or None when some variable
    is unbound or the expression is not integer arithmetic."""
    from schedlab.ir import expr as E

    if isinstance(expr, IntImm):
        return expr.value
    if isinstance(expr, Var):
        return values.get(id(expr))
    if isinstance(expr, E.Cast) and expr.dtype.is_integer:
        return _evaluate(expr.value, values)
    operator = _INT_OPS.get(type(expr).__name__)
    if operator is None:
        return None
    a, b = _evaluate(expr.a, values), _evaluate(expr.b, values)
    if a is None or b is None or (b == 0 and type(expr).__name__ in _DIVISIONS):
        return None
    return operator(a, b)


def _trunc_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


_DIVISIONS = ("Div", "Mod", "FloorDiv", "FloorMod")
_INT_OPS = {
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b,
    "FloorDiv": lambda a, b: a // b,
    "FloorMod": lambda a, b: a % b,
    "Div": _trunc_div,
    "Mod": lambda a, b: a - _trunc_div(a, b) * b,
    "Min": min,
    "Max": max,
}


def _scalar_value(dtype: DataType, value):
    """`value` converted for a scalar parameter of `dtype`, or None if it does not fit."""
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            return None
        value = value[()]
    if dtype.is_bool:
        return bool(value) if isinstance(value, (bool, np.bool_)) else None
    if dtype.is_integer:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            return None
        number = int(value)
        return number if dtype.min_value() <= number <= dtype.max_value() else None
    if dtype.is_float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)
        ):
            return None
        return dtype.numpy.type(value)
    return None


def _numpy_dtype(dtype: DataType):
    if dtype.is_vector or dtype.is_handle or dtype.is_void:
        return None
    return dtype.numpy


def _dtype_name(dtype: np.dtype) -> str:
    if not dtype.isnative:  # ">f4" and "<f4" are both "float32": name the byte order that differs
        order = "big" if dtype.byteorder == ">" else "little"
        return f"{_dtype_name(dtype.newbyteorder('='))} ({order}-endian, {dtype.str!r})"
    return str(DataType(dtype)) if dtype.kind in "biuf" or dtype.name == "bfloat16" else str(dtype)


def _shape_text(buffer: Buffer) -> str:
    items = [str(extent) for extent in buffer.shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of {_dtype_name(value.dtype)} with shape {value.shape}"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{type(value).__name__} {text}"


__all__ = ["ArgumentError", "BoundArguments", "bind_arguments"]

"""Printing expressions and literal values in the TVMScript-style text form.

A `Namer` gives each variable and buffer (identity objects) one name per printed function:
distinct objects that share a name hint print as `i`, `i_1`, ... so the parser can tell them
apart. `ExprPrinter` prints expressions with the fewest parentheses Python's precedence allows.
"""

from __future__ import annotations

import json
import math
from typing import Any

from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer
from schedlab.ir.dtype import DataType, bool_, int32
from schedlab.ir.intrin import INTRINSICS

from . import names as N

T = N.TIR_ALIAS


class Namer:
    """Unique, valid Python names for variables and buffers, assigned at first definition."""

    def __init__(self):
        self._names: dict[int, str] = {}
        self._used: set[str] = set(N.RESERVED_NAMES)
        self._alive: list[Any] = []  # keeps named objects alive so their ids stay unique
        self.data_owner: dict[int, Buffer] = {}  # data var id -> the buffer printed first with it

    def define(self, obj, hint: str) -> str:
        """The name of `obj`, choosing one from `hint` if it has none yet."""
        known = self._names.get(id(obj))
        if known is not None:
            return known
        base = N.sanitize_name(hint)
        name, suffix = base, 0
        while name in self._used:
            suffix += 1
            name = f"{base}_{suffix}"
        self._used.add(name)
        self._names[id(obj)] = name
        self._alive.append(obj)
        return name

    def lookup(self, obj) -> str | None:
        return self._names.get(id(obj))

    def buffer(self, buffer: Buffer) -> str:
        """The name of a buffer; its data var becomes reachable as `<name>.data`."""
        name = self.define(buffer, buffer.name)
        self.data_owner.setdefault(id(buffer.data), buffer)
        return name


def is_zero(value: E.PrimExpr, dtype: DataType | None = None) -> bool:
    """An integer constant 0 (of `dtype` when given)."""
    return (
        isinstance(value, E.IntImm)
        and value.value == 0
        and not value.dtype.is_bool
        and (dtype is None or value.dtype == dtype)
    )


def is_one(value: E.PrimExpr, dtype: DataType) -> bool:
    return isinstance(value, E.IntImm) and value.value == 1 and value.dtype == dtype


def is_true(value: E.PrimExpr) -> bool:
    return isinstance(value, E.IntImm) and value.dtype == bool_ and value.value == 1


def float_text(value: float) -> str:
    """A Python literal (or string for inf/nan) that reads back as exactly `value`."""
    if math.isnan(value):
        return '"nan"'
    if math.isinf(value):
        return '"inf"' if value > 0 else '"-inf"'
    if value.is_integer() and abs(value) < 1e16 and math.copysign(1.0, value) > 0:
        return str(int(value))
    return repr(value)


def string_text(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


class ExprPrinter:
    """Prints expressions; variables and buffers are named through a shared `Namer`."""

    def __init__(self, namer: Namer):
        self.namer = namer

    def __call__(self, expr: E.PrimExpr, prec: int = 0) -> str:
        return self.expr(expr, prec)

    def expr(self, expr: E.PrimExpr, prec: int = 0) -> str:
        """`expr` as text, parenthesized if it binds looser than `prec`."""
        text, own = self._print(expr)
        return f"({text})" if own < prec else text

    def _print(self, expr) -> tuple[str, int]:
        infix = N.INFIX.get(type(expr))
        if infix is not None and not (isinstance(expr, E.Div) and not expr.dtype.is_float):
            return self._infix(expr, *infix)
        method = getattr(self, f"_{type(expr).__name__}", None)
        if method is None:
            for klass in type(expr).__mro__[1:]:
                method = getattr(self, f"_{klass.__name__}", None)
                if method is not None:
                    break
        if method is None:
            raise TypeError(f"cannot print {type(expr).__name__} as an expression")
        return method(expr)

    def _infix(self, expr, symbol: str, prec: int) -> tuple[str, int]:
        # left-associative operators; comparisons do not chain, so both sides bind tighter
        left_prec = prec + 1 if prec == N.PREC_CMP else prec
        return f"{self.expr(expr.a, left_prec)} {symbol} {self.expr(expr.b, prec + 1)}", prec

    def call(self, name: str, *args: str) -> tuple[str, int]:
        return f"{T}.{name}({', '.join(args)})", N.PREC_ATOM

    # -- leaves ---------------------------------------------------------------------------------
    def _Var(self, var: E.Var) -> tuple[str, int]:
        name = self.namer.lookup(var)
        if name is None:
            owner = self.namer.data_owner.get(id(var))
            if owner is not None:
                return f"{self.namer.lookup(owner)}.data", N.PREC_ATOM
            name = self.namer.define(var, var.name)
        return name, N.PREC_ATOM

    def _IntImm(self, imm: E.IntImm) -> tuple[str, int]:
        if imm.dtype == bool_:
            return ("True" if imm.value else "False"), N.PREC_ATOM
        if imm.dtype == int32:
            return str(imm.value), (N.PREC_UNARY if imm.value < 0 else N.PREC_ATOM)
        return self.call(N.dtype_name(imm.dtype), str(imm.value))

    def _FloatImm(self, imm: E.FloatImm) -> tuple[str, int]:
        return self.call(N.dtype_name(imm.dtype), float_text(imm.value))

    def _StringImm(self, imm: E.StringImm) -> tuple[str, int]:
        return string_text(imm.value), N.PREC_ATOM

    # -- operators written as calls ---------------------------------------------------------------
    def _BinaryOp(self, expr: E.BinaryOp) -> tuple[str, int]:
        name = N.TRUNCDIV if isinstance(expr, E.Div) else N.FUNCTION_OF_BINARY[type(expr)]
        return self.call(name, self.expr(expr.a), self.expr(expr.b))

    def _Not(self, expr: E.Not) -> tuple[str, int]:
        return f"not {self.expr(expr.a, N.PREC_NOT)}", N.PREC_NOT

    def _Select(self, expr: E.Select) -> tuple[str, int]:
        parts = (expr.condition, expr.true_value, expr.false_value)
        return self.call(N.SELECT, *(self.expr(p) for p in parts))

    def _Cast(self, expr: E.Cast) -> tuple[str, int]:
        return self.call(N.CAST, string_text(str(expr.dtype)), self.expr(expr.value))

    def _Let(self, expr: E.Let) -> tuple[str, int]:
        value = self.expr(expr.value)
        name = self.namer.define(expr.var, expr.var.name)
        return self.call(N.LET, self.expr(expr.body), f"where={{{name}: {value}}}")

    def _Ramp(self, expr: E.Ramp) -> tuple[str, int]:
        return self.call(N.RAMP, self.expr(expr.base), self.expr(expr.stride), str(expr.lanes))

    def _Broadcast(self, expr: E.Broadcast) -> tuple[str, int]:
        return self.call(N.BROADCAST, self.expr(expr.value), str(expr.lanes))

    def _BufferLoad(self, load: E.BufferLoad) -> tuple[str, int]:
        return self.subscript(load.buffer, load.indices), N.PREC_ATOM

    def subscript(self, buffer: Buffer, indices) -> str:
        name = self.namer.lookup(buffer) or self.namer.buffer(buffer)
        if not indices:
            return f"{name}[()]"
        return f"{name}[{', '.join(self.expr(i) for i in indices)}]"

    def _Call(self, call: E.Call) -> tuple[str, int]:
        args = [self.expr(a) for a in call.args]
        if _inferred_dtype(call) == call.dtype:
            return self.call(call.op, *args)
        return self.call(N.CALL_INTRIN, string_text(str(call.dtype)), string_text(call.op), *args)

    # -- literal values (annotations and attributes) ----------------------------------------------
    def literal(self, value) -> str:
        """A Python literal for an annotation value; PrimExpr constants keep their dtype."""
        if value is None or isinstance(value, bool):
            return repr(value)
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            text = float_text(value)
            return f"float({text})" if text.startswith('"') else repr(value)
        if isinstance(value, str):
            return string_text(value)
        if isinstance(value, (E.IntImm, E.FloatImm)):
            text = float_text(value.value) if isinstance(value, E.FloatImm) else str(value.value)
            return f"{T}.{N.dtype_name(value.dtype)}({text})"
        if isinstance(value, E.PrimExpr):
            return self.expr(value)
        if isinstance(value, Buffer):
            return self.namer.lookup(value) or self.namer.buffer(value)
        if isinstance(value, list):
            return "[" + ", ".join(self.literal(v) for v in value) + "]"
        if isinstance(value, tuple):
            items = [self.literal(v) for v in value]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if isinstance(value, dict):
            items = (f"{self.literal(k)}: {self.literal(v)}" for k, v in value.items())
            return "{" + ", ".join(items) + "}"
        return string_text(repr(value))  # not a literal: shown, but reads back as a string


def _inferred_dtype(call: E.Call) -> DataType | None:
    """The dtype the parser gives `T.<op>(args)`; None when the op needs T.call_intrin."""
    spec = INTRINSICS.get(call.op)
    if spec is None or (spec.arity is not None and spec.arity != len(call.args)):
        return None
    if not call.args:
        return None
    try:
        return spec.result_dtype(call.args)
    except (IndexError, AttributeError):
        return None


def inferred_call_dtype(op: str, args) -> DataType | None:
    """Shared with the parser: the result dtype of the intrinsic `op` applied to `args`."""
    return _inferred_dtype(E.Call(int32, op, tuple(args))) if args else None


def expr_text(expr) -> str:
    """One expression as text, naming variables on first sight. Never raises."""
    try:
        return ExprPrinter(Namer()).expr(expr)
    except Exception:  # repr must never fail; show the raw node instead
        from schedlab.ir.node import default_repr

        try:
            return default_repr(expr)
        except Exception:
            return object.__repr__(expr)

"""Expressions of the loop IR as Python/numpy source text.

Each expression becomes a `Code`: its text, IR dtype, whether it is an array over the vectorized
loops (`varying`) and, for integers, a known value interval. Scalars follow the IR's dtype
exactly: integers are Python ints wrapped into range after any operation that might leave it
(intervals let index arithmetic skip the wrap), floats are numpy scalars of their dtype. Arrays
carry their dtype through numpy, which wraps integers by itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from schedlab.errors import SchedlabError
from schedlab.ir import expr as E
from schedlab.ir.dtype import DataType

Interval = tuple[int, int] | None


class TranslateError(SchedlabError):
    """The interpreter cannot run this IR (an undefined variable, an unknown intrinsic, ...)."""


@dataclass(frozen=True)
class Code:
    text: str
    dtype: DataType
    varying: bool = False
    interval: Interval = None


@dataclass
class VarInfo:
    name: str
    dtype: DataType
    varying: bool = False
    interval: Interval = None


@dataclass
class BufInfo:
    """A buffer visible to generated code: its array's local name and its extents."""

    name: str
    label: str  # the buffer's IR name, for messages
    extents: tuple[Code, ...]


@dataclass(frozen=True)
class ExprCtx:
    ndim: int = 0  # vectorized loop axes in effect
    guarded: bool = False  # some lanes may be masked off: loads must not fault
    lazy: bool = False  # evaluated only sometimes, or under a let: cannot be hoisted


MAX_DEPTH = 40  # deeper expression text is split into temporaries (Python allows 200 parens)


def dtype_range(dtype: DataType) -> tuple[int, int]:
    return int(dtype.min_value()), int(dtype.max_value())


def fits(interval: Interval, dtype: DataType) -> bool:
    """Is an integer interval known and inside `dtype`'s range (never for floats)?"""
    if interval is None or not (dtype.is_integer or dtype.is_bool):
        return False
    lo, hi = dtype_range(dtype)
    return lo <= interval[0] and interval[1] <= hi


def wrap_text(text: str, dtype: DataType) -> str:
    """Python text bringing an unbounded int back into `dtype`'s range (two's complement)."""
    if dtype.is_bool:
        return f"bool({text} & 1)"
    mask = (1 << dtype.bits) - 1
    if dtype.is_uint:
        return f"({text} & {mask})"
    half = 1 << (dtype.bits - 1)
    return f"((({text} + {half}) & {mask}) - {half})"


def _span(values) -> Interval:
    values = list(values)
    return (min(values), max(values))


def _both(a: Code, b: Code) -> bool:
    return a.interval is not None and b.interval is not None


_ARITH = {E.Add: "+", E.Sub: "-", E.Mul: "*"}
_COMPARE = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}


class ExprGen:
    """Translates expressions; `owner` provides names, constants, variables and buffers."""

    def __init__(self, owner):
        self.owner = owner
        self.depth = 0  # nesting depth of the deepest child translated so far (see `expr`)

    # -- entry -------------------------------------------------------------------------------
    def expr(self, node: E.PrimExpr, ctx: ExprCtx) -> Code:
        method = _DISPATCH.get(type(node))
        if method is None:
            for klass in type(node).__mro__:
                method = _DISPATCH.get(klass)
                if method is not None:
                    break
        if method is None:
            raise TranslateError(f"interpret: unsupported expression {type(node).__name__}")
        outer, self.depth = self.depth, 0
        code = method(self, node, ctx)
        depth = self.depth + 1
        if depth > MAX_DEPTH and not ctx.lazy:
            code, depth = replace(code, text=self.owner.hoist(code.text)), 1
        self.depth = max(outer, depth)
        return code

    def scalar_int(self, text: str, dtype: DataType, interval: Interval) -> Code:
        """A scalar integer result: wrapped unless its interval proves it is in range."""
        if dtype.is_integer and not fits(interval, dtype):
            return Code(wrap_text(text, dtype), dtype, False, None)
        return Code(text, dtype, False, interval)

    # -- leaves ------------------------------------------------------------------------------
    def e_var(self, node: E.Var, ctx) -> Code:
        info = self.owner.var_info(node)
        return Code(info.name, info.dtype, info.varying, info.interval)

    def e_int(self, node: E.IntImm, ctx) -> Code:
        if node.dtype.is_bool:
            return Code("True" if node.value else "False", node.dtype, False, (node.value,) * 2)
        return Code(str(node.value), node.dtype, False, (node.value, node.value))

    def e_float(self, node: E.FloatImm, ctx) -> Code:
        return Code(self.owner.float_const(node.dtype, node.value), node.dtype)

    def e_string(self, node, ctx) -> Code:
        raise TranslateError(f"interpret: a string ({node.value!r}) cannot be evaluated as a value")

    # -- arithmetic --------------------------------------------------------------------------
    def e_arith(self, node, ctx) -> Code:
        a, b = self.expr(node.a, ctx), self.expr(node.b, ctx)
        symbol = _ARITH[type(node)]
        text = f"({a.text} {symbol} {b.text})"
        dtype = node.dtype
        if dtype.is_float:
            return Code(text, dtype, a.varying or b.varying)
        if dtype.is_bool:
            raise TranslateError(f"interpret: arithmetic '{symbol}' on bool values")
        interval = None
        if _both(a, b):
            (al, ah), (bl, bh) = a.interval, b.interval
            if symbol == "+":
                interval = (al + bl, ah + bh)
            elif symbol == "-":
                interval = (al - bh, ah - bl)
            else:
                interval = _span((al * bl, al * bh, ah * bl, ah * bh))
        if a.varying or b.varying:
            return Code(text, dtype, True, interval if fits(interval, dtype) else None)
        return self.scalar_int(text, dtype, interval)

    def e_div(self, node, ctx) -> Code:
        a, b = self.expr(node.a, ctx), self.expr(node.b, ctx)
        varying = a.varying or b.varying
        dtype = node.dtype
        kind = type(node)
        if dtype.is_float:
            text = {
                E.Div: f"({a.text} / {b.text})",
                E.Mod: f"np.fmod({a.text}, {b.text})",
                E.FloorDiv: f"_rt.ffloordiv({a.text}, {b.text})",
                E.FloorMod: f"_rt.ffloormod({a.text}, {b.text})",
            }[kind]
            return Code(text, dtype, varying)
        text = {
            E.Div: f"_rt.tdiv({a.text}, {b.text})",
            E.Mod: f"_rt.tmod({a.text}, {b.text})",
            E.FloorDiv: f"({a.text} // {b.text})",
            E.FloorMod: f"({a.text} % {b.text})",
        }[kind]
        interval = _division_interval(kind, a.interval, b.interval)
        if varying:
            return Code(text, dtype, True, interval)
        return self.scalar_int(text, dtype, interval)

    def e_minmax(self, node, ctx) -> Code:
        a, b = self.expr(node.a, ctx), self.expr(node.b, ctx)
        is_min = isinstance(node, E.Min)
        interval = None
        if _both(a, b):
            pick = min if is_min else max
            interval = (pick(a.interval[0], b.interval[0]), pick(a.interval[1], b.interval[1]))
        varying = a.varying or b.varying
        if node.dtype.is_float or varying:
            fn = "np.minimum" if is_min else "np.maximum"
            text = f"{fn}({a.text}, {b.text})"
        else:
            text = f"{'min' if is_min else 'max'}({a.text}, {b.text})"
        return Code(text, node.dtype, varying, interval)

    # -- logic -------------------------------------------------------------------------------
    def e_compare(self, node, ctx) -> Code:
        a, b = self.expr(node.a, ctx), self.expr(node.b, ctx)
        text = f"({a.text} {_COMPARE[type(node)]} {b.text})"
        return Code(text, node.dtype, a.varying or b.varying, (0, 1))

    def e_logic(self, node, ctx) -> Code:
        a, b = self.expr(node.a, ctx), self.expr(node.b, ctx)
        varying = a.varying or b.varying
        if varying:
            symbol = "&" if isinstance(node, E.And) else "|"
        else:
            symbol = "and" if isinstance(node, E.And) else "or"
        return Code(f"({a.text} {symbol} {b.text})", node.dtype, varying, (0, 1))

    def e_not(self, node, ctx) -> Code:
        a = self.expr(node.a, ctx)
        text = f"(~{a.text})" if a.varying else f"(not {a.text})"
        return Code(text, node.dtype, a.varying, (0, 1))

    def e_select(self, node: E.Select, ctx) -> Code:
        c = self.expr(node.condition, ctx)
        t = self.expr(node.true_value, ctx)
        f = self.expr(node.false_value, ctx)
        return self.choose(c, t, f, node.dtype)

    def choose(self, c: Code, t: Code, f: Code, dtype: DataType, lazy: bool = False) -> Code:
        interval = None
        if _both(t, f):
            interval = (min(t.interval[0], f.interval[0]), max(t.interval[1], f.interval[1]))
        if lazy and not c.varying and (t.varying or f.varying):
            # a scalar condition picks one branch: never evaluate the other (its loads may be
            # out of bounds, e.g. a padding guard), even when the branches are arrays
            return Code(f"({t.text} if {c.text} else {f.text})", dtype, True, interval)
        if c.varying or t.varying or f.varying:
            dt = self.owner.dtype_const(dtype)
            return Code(f"_rt.where({c.text}, {t.text}, {f.text}, {dt})", dtype, True, interval)
        if lazy:
            return Code(f"({t.text} if {c.text} else {f.text})", dtype, False, interval)
        return Code(f"_rt.select({c.text}, {t.text}, {f.text})", dtype, False, interval)

    # -- conversions and bindings --------------------------------------------------------------
    def e_cast(self, node: E.Cast, ctx) -> Code:
        value = self.expr(node.value, ctx)
        source, target = value.dtype.element_of(), node.dtype.element_of()
        if value.varying:
            dt = self.owner.dtype_const(node.dtype)
            interval = value.interval if fits(value.interval, target) else None
            return Code(f"_rt.astype({value.text}, {dt})", node.dtype, True, interval)
        return self.cast_scalar(value, source, target, node.dtype)

    def cast_scalar(self, value: Code, source: DataType, target: DataType, full) -> Code:
        if source == target:
            return replace(value, dtype=full)
        if target.is_bool:
            return Code(f"({value.text} != 0)", full, False, (0, 1))
        if target.is_float:
            return Code(f"{self.owner.type_const(target)}({value.text})", full)
        if source.is_float:
            dt = self.owner.dtype_const(target)
            return Code(f"_rt.float_to_int({value.text}, {dt})", full, False, None)
        if source.is_bool:
            return Code(f"int({value.text})", full, False, (0, 1))
        return replace(self.scalar_int(value.text, target, value.interval), dtype=full)

    def e_let(self, node: E.Let, ctx) -> Code:
        value = self.expr(node.value, ctx)
        name = self.owner.bind_var(node.var, value)
        body = self.expr(node.body, replace(ctx, lazy=True))
        text = f"(({name} := {value.text}), {body.text})[1]"
        return Code(text, body.dtype, body.varying or value.varying, body.interval)

    # -- memory ------------------------------------------------------------------------------
    def e_load(self, node: E.BufferLoad, ctx) -> Code:
        info = self.owner.buffer_info(node.buffer)
        indices = [self.expr(i, ctx) for i in node.indices]
        varying = any(i.varying for i in indices)
        dtype = node.dtype
        if not varying:
            text = self.scalar_index(info, indices, ctx.guarded)
            element = node.buffer.dtype
            if element.is_integer or element.is_bool:
                interval = dtype_range(element) if element.is_integer else (0, 1)
                return Code(f"{info.name}.item({text})", dtype, False, interval)
            return Code(f"{info.name}[{text or '()'}]", dtype)
        texts = ", ".join(i.text for i in indices)
        if ctx.guarded:
            return Code(f"_rt.safe_load({info.name}, ({texts},))", dtype, True)
        return Code(f"{info.name}[{self.array_index(info, indices)}]", dtype, True)

    def scalar_index(self, info: BufInfo, indices: list[Code], guarded: bool) -> str:
        parts = []
        for dim, (index, extent) in enumerate(zip(indices, info.extents)):
            if _in_bounds(index, extent):
                parts.append(index.text)
            elif guarded:
                parts.append(f"_rt.clip({index.text}, {extent.text})")
            else:
                parts.append(self.checked_scalar(index.text, extent.text, info.label, dim))
        return ", ".join(parts)

    def checked_scalar(self, index: str, extent: str, label: str, dim: int) -> str:
        fail = f"_rt.out_of_bounds({label!r}, {dim}, {{v}}, {extent})"
        if index.isidentifier():
            return f"({index} if 0 <= {index} < {extent} else {fail.format(v=index)})"
        temp = self.owner.temp()
        return f"({temp} if 0 <= ({temp} := {index}) < {extent} else {fail.format(v=temp)})"

    def array_index(self, info: BufInfo, indices: list[Code]) -> str:
        parts = []
        for dim, (index, extent) in enumerate(zip(indices, info.extents)):
            if _in_bounds(index, extent):
                parts.append(index.text)
            elif index.varying:
                parts.append(f"_rt.check({index.text}, {extent.text}, {info.label!r}, {dim})")
            else:
                parts.append(self.checked_scalar(index.text, extent.text, info.label, dim))
        return ", ".join(parts) if len(parts) != 1 else parts[0]

    def e_ramp(self, node: E.Ramp, ctx) -> Code:
        base, stride = self.expr(node.base, ctx), self.expr(node.stride, ctx)
        lanes = self.owner.lanes_const(node.lanes, node.base.dtype, ctx.ndim)
        interval = None
        if _both(base, stride):
            last = (stride.interval[0] * (node.lanes - 1), stride.interval[1] * (node.lanes - 1))
            interval = (base.interval[0] + min(0, *last), base.interval[1] + max(0, *last))
            interval = interval if fits(interval, node.base.dtype) else None
        text = f"({base.text} + {stride.text} * {lanes})"
        return Code(text, node.dtype, True, interval)

    def e_broadcast(self, node: E.Broadcast, ctx) -> Code:
        # numpy broadcasting stands in for the lanes: the value is simply reused
        return replace(self.expr(node.value, ctx), dtype=node.dtype)

    def e_call(self, node: E.Call, ctx) -> Code:
        if node.op == "if_then_else":
            return self.if_then_else(node, ctx)
        if node.op == "likely":
            return self.expr(node.args[0], ctx)
        if node.op == "tvm_storage_sync":
            # a GPU barrier: running thread loops one after another is the sequential
            # semantics of barrier-separated phases, so it has nothing left to do
            return Code("None", node.dtype, False)
        args = [self.expr(a, ctx) for a in node.args]
        varying = any(a.varying for a in args)
        if node.op == "abs" and not node.dtype.is_float:
            text = f"_rt.iabs({args[0].text})"
            return (
                Code(text, node.dtype, True) if varying else self.scalar_int(text, node.dtype, None)
            )
        if node.op not in _MATH_NAMES:
            raise TranslateError(
                f"interpret: unsupported intrinsic {node.op!r} (known: "
                f"{', '.join(sorted(_MATH_NAMES | {'if_then_else', 'likely', 'abs'}))})"
            )
        joined = ", ".join(a.text for a in args)
        text = f"_rt.MATH[{node.op!r}]({joined})"
        if args and args[0].dtype.element_of() != node.dtype.element_of():
            dt = self.owner.dtype_const(node.dtype)
            text = f"_rt.astype({text}, {dt})" + ("" if varying else "[()]")
        return Code(text, node.dtype, varying)

    def if_then_else(self, node: E.Call, ctx: ExprCtx) -> Code:
        """Lazy: a scalar condition picks one branch; an array condition evaluates both branches
        with masked (non-faulting) loads and selects per lane."""
        condition = self.expr(node.args[0], ctx)
        inner = replace(ctx, lazy=True) if not condition.varying else replace(ctx, guarded=True)
        t, f = self.expr(node.args[1], inner), self.expr(node.args[2], inner)
        return self.choose(condition, t, f, node.dtype, lazy=True)


def _in_bounds(index: Code, extent: Code) -> bool:
    return (
        index.interval is not None
        and extent.interval is not None
        and index.interval[0] >= 0
        and index.interval[1] < extent.interval[0]
    )


def _division_interval(kind, a: Interval, b: Interval) -> Interval:
    if b is None or b[0] != b[1] or b[0] <= 0:
        return None
    divisor = b[0]
    if kind is E.FloorMod:
        if a is not None and a[0] >= 0 and a[1] < divisor:
            return a
        return (0, divisor - 1)
    if kind is E.Mod:
        if a is not None and a[0] >= 0:
            return (0, min(divisor - 1, a[1]))
        return (-(divisor - 1), divisor - 1)
    if a is None:
        return None
    if kind is E.FloorDiv:
        return (a[0] // divisor, a[1] // divisor)
    quotient = [abs(v) // divisor * (1 if v >= 0 else -1) for v in a]
    return (quotient[0], quotient[1])


_MATH_NAMES = {
    "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid",
    "erf", "floor", "ceil", "round", "trunc", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "isnan", "isinf", "isfinite", "pow", "fmod", "atan2", "abs", "fabs",
}  # fmt: skip

_DISPATCH = {
    E.Var: ExprGen.e_var,
    E.IntImm: ExprGen.e_int,
    E.FloatImm: ExprGen.e_float,
    E.StringImm: ExprGen.e_string,
    **{kind: ExprGen.e_arith for kind in _ARITH},
    **{kind: ExprGen.e_div for kind in (E.Div, E.Mod, E.FloorDiv, E.FloorMod)},
    E.Min: ExprGen.e_minmax,
    E.Max: ExprGen.e_minmax,
    **{kind: ExprGen.e_compare for kind in _COMPARE},
    E.And: ExprGen.e_logic,
    E.Or: ExprGen.e_logic,
    E.Not: ExprGen.e_not,
    E.Select: ExprGen.e_select,
    E.Cast: ExprGen.e_cast,
    E.Let: ExprGen.e_let,
    E.BufferLoad: ExprGen.e_load,
    E.Ramp: ExprGen.e_ramp,
    E.Broadcast: ExprGen.e_broadcast,
    E.Call: ExprGen.e_call,
}

__all__ = ["Code", "VarInfo", "BufInfo", "ExprCtx", "ExprGen", "TranslateError", "np"]

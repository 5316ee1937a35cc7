"""Parsing calls in expressions: `T.float32(0)`, `T.Cast(...)`, `T.exp(x)`, `T.floordiv(a, b)`.

Only names of the `T` namespace can be called; anything else (`__import__`, `open`, `eval`) is
an error, because script text is parsed and never run.
"""

from __future__ import annotations

import ast

from schedlab.ir import expr as E
from schedlab.ir.dtype import DataType, bool_
from schedlab.ir.intrin import INTRINSICS

from . import names as N
from ._parse_expr import STATEMENT_NAMES, ExprParser, _number


def call(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    """An expression-level call (dispatch on the callee's name)."""
    name = p.tir_name(node.func)
    if name is None:
        path = p.path(node.func)
        if path == "range":
            raise p.fail(node, "range(...) can only be the iterator of a for loop")
        shown = path or ast.unparse(node.func)
        raise p.fail(
            node,
            f"unknown function {shown!r}: script text may only call T.* constructs "
            "(it is parsed, never executed)",
        )
    dtype = N.dtype_from_name(name)
    if dtype is not None:
        return dtype_call(p, node, dtype)
    handler = _HANDLERS.get(name)
    if handler is not None:
        return handler(p, node)
    if name in N.BINARY_FUNCTIONS:
        a, b = _args(p, node, 2, f"T.{name}")
        return p.binary(node, N.BINARY_FUNCTIONS[name], a, b)
    if name in INTRINSICS:
        return _intrinsic(p, node, name)
    if name in STATEMENT_NAMES or name.startswith(f"{N.AXIS}."):
        raise p.fail(node, f"T.{name}(...) is a statement, not an expression")
    known = [*INTRINSICS, *N.BINARY_FUNCTIONS, *_HANDLERS, "float32", "int32"]
    raise p.fail(node, f"unknown function T.{name}{p._suggest(name, known)}")


def _no_keywords(p: ExprParser, node: ast.Call, what: str) -> None:
    if node.keywords:
        raise p.fail(node.keywords[0], f"{what} takes no keyword arguments")


def _args(p: ExprParser, node: ast.Call, count: int, what: str) -> list[E.PrimExpr]:
    _no_keywords(p, node, what)
    if len(node.args) != count:
        raise p.fail(node, f"{what} takes {count} argument(s), got {len(node.args)}")
    return [p.expr(arg) for arg in node.args]


def dtype_call(p: ExprParser, node: ast.Call, dtype: DataType) -> E.PrimExpr:
    """`T.float32(1.5)` is a constant, `T.float32(x)` a cast; `T.int32()` declares a variable,
    which only an assignment statement may do."""
    what = f"T.{N.dtype_name(dtype)}"
    if not node.args:
        raise p.fail(node, f"{what}() declares a variable; write it as `n = {what}()`")
    _no_keywords(p, node, what)
    if len(node.args) != 1:
        raise p.fail(node, f"{what} takes 1 argument, got {len(node.args)}")
    arg = node.args[0]
    value = _constant_value(p, arg, dtype)
    if value is None:
        return p.build(node, E.Cast, dtype, p.expr(arg))
    if dtype.is_float:
        return p.build(node, E.FloatImm, dtype, value)
    if dtype.is_bool:
        return E.IntImm(bool_, 1 if value else 0)
    if dtype.is_integer:
        if isinstance(value, float) and not value.is_integer():
            raise p.fail(arg, f"{what} needs an integer, got {value}")
        return p.build(node, E.IntImm, dtype, int(value))
    raise p.fail(node, f"{what} cannot hold a constant")


def _constant_value(p: ExprParser, arg: ast.AST, dtype: DataType):
    """The number written as a literal argument (or "inf"/"nan" for floats), else None."""
    number = _number(arg)
    if number is not None:
        return number
    if isinstance(arg, ast.Constant) and isinstance(arg.value, bool):
        return int(arg.value)
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        if dtype.is_float and arg.value in ("inf", "-inf", "nan"):
            return float(arg.value)
        raise p.fail(arg, f'a {dtype} constant takes a number (or "inf"/"nan"), got {arg.value!r}')
    return None


def _cast(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    _no_keywords(p, node, "T.Cast")
    if len(node.args) != 2:
        raise p.fail(node, f"T.Cast takes (dtype, value), got {len(node.args)} argument(s)")
    return p.build(node, E.Cast, p.dtype_arg(node.args[0]), p.expr(node.args[1]))


def _select(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    cond, a, b = _args(p, node, 3, "T.Select")
    a, b = p.unify(node, a, b)
    return p.build(node, E.Select, cond, a, b)


def _if_then_else(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    cond, a, b = _args(p, node, 3, "T.if_then_else")
    a, b = p.unify(node, a, b)
    args = (cond, a, b)
    return p.build(
        node, E.Call, INTRINSICS[N.IF_THEN_ELSE].result_dtype(args), N.IF_THEN_ELSE, args
    )


def _let(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    """`T.Let(body, where={x: value})`: `x` is a new variable seen only by `body`."""
    where = [kw for kw in node.keywords if kw.arg == "where"]
    if len(node.args) != 1 or len(where) != 1 or len(node.keywords) != 1:
        raise p.fail(node, "T.Let takes (body, where={var: value})")
    bindings = where[0].value
    if not isinstance(bindings, ast.Dict) or len(bindings.keys) != 1:
        raise p.fail(bindings, "T.Let: where= must be a dict with one {name: value} entry")
    key, value_node = bindings.keys[0], bindings.values[0]
    if not isinstance(key, ast.Name):
        raise p.fail(key, "T.Let: the where= key must be a new variable name")
    value = p.expr(value_node)
    var = E.Var(key.id, value.dtype)
    p.push()
    p.define(key.id, var)
    body = p.expr(node.args[0])
    p.pop()
    return p.build(node, E.Let, var, value, body)


def _ramp(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    _no_keywords(p, node, "T.Ramp")
    if len(node.args) != 3:
        raise p.fail(node, f"T.Ramp takes (base, stride, lanes), got {len(node.args)} argument(s)")
    base, stride = p.expr(node.args[0]), p.expr(node.args[1])
    return p.build(node, E.Ramp, base, stride, p.int_arg(node.args[2], "T.Ramp lanes"))


def _broadcast(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    _no_keywords(p, node, "T.Broadcast")
    if len(node.args) != 2:
        raise p.fail(node, f"T.Broadcast takes (value, lanes), got {len(node.args)} argument(s)")
    lanes = p.int_arg(node.args[1], "T.Broadcast lanes")
    return p.build(node, E.Broadcast, p.expr(node.args[0]), lanes)


def _call_intrin(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    _no_keywords(p, node, "T.call_intrin")
    if len(node.args) < 2:
        raise p.fail(node, "T.call_intrin takes (dtype, op_name, *args)")
    dtype = p.dtype_arg(node.args[0])
    op = p.str_arg(node.args[1], "T.call_intrin op name")
    return p.build(node, E.Call, dtype, op, tuple(p.expr(a) for a in node.args[2:]))


def _intrinsic(p: ExprParser, node: ast.Call, name: str) -> E.PrimExpr:
    spec = INTRINSICS[name]
    _no_keywords(p, node, f"T.{name}")
    if spec.arity is not None and len(node.args) != spec.arity:
        raise p.fail(node, f"T.{name} takes {spec.arity} argument(s), got {len(node.args)}")
    if not node.args:
        raise p.fail(node, f"T.{name} needs arguments")
    args = [p.expr(arg) for arg in node.args]
    return p.build(node, E.Call, spec.result_dtype(args), name, tuple(args))


_HANDLERS = {
    N.CAST: _cast,
    N.SELECT: _select,
    N.IF_THEN_ELSE: _if_then_else,
    N.LET: _let,
    N.RAMP: _ramp,
    N.BROADCAST: _broadcast,
    N.CALL_INTRIN: _call_intrin,
}

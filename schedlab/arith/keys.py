"""Hashable keys for expressions.

`expr_key` identifies an expression up to structure (variables and buffers by identity), so the
simplifier can merge equal terms. `order_key` sorts terms by names, so output does not depend
on object ids: `i*16 + j`, never `j + i*16`.
"""

from __future__ import annotations

from schedlab.ir import expr as E
from schedlab.ir.node import child_fields

_KEY_ATTR = "_arith_key"
_ORDER_ATTR = "_arith_order"


def _cached(node, attr: str, compute):
    found = node.__dict__.get(attr)
    if found is None:
        found = compute(node)
        node.__dict__[attr] = found  # a cache beside the frozen fields; never compared
    return found


def expr_key(node: E.PrimExpr) -> tuple:
    """A hashable key equal for structurally equal expressions (same free variables)."""
    return _cached(node, _KEY_ATTR, _compute_key)


def _compute_key(node) -> tuple:
    if isinstance(node, E.Var):
        return ("var", id(node))
    if isinstance(node, (E.IntImm, E.FloatImm, E.StringImm)):
        return ("imm", str(node.dtype), node.value)
    if isinstance(node, E.BufferLoad):
        return ("load", id(node.buffer), tuple(expr_key(i) for i in node.indices))
    parts: list = [type(node).__name__, str(node.dtype)]
    for name in child_fields(type(node)):
        parts.append(_value_key(getattr(node, name)))
    if isinstance(node, E.Call):
        parts.append(node.op)
    return tuple(parts)


def _value_key(value):
    if isinstance(value, E.PrimExpr):
        return expr_key(value)
    if isinstance(value, tuple):
        return tuple(_value_key(v) for v in value)
    return value


def order_key(node: E.PrimExpr) -> tuple:
    """A sort key built from names and values (not ids): deterministic across runs."""
    return _cached(node, _ORDER_ATTR, _compute_order)


def _compute_order(node) -> tuple:
    if isinstance(node, E.Var):
        return (0, node.name)
    if isinstance(node, (E.IntImm, E.FloatImm)):
        return (1, float(node.value), "")
    if isinstance(node, E.StringImm):
        return (2, node.value)
    if isinstance(node, E.BufferLoad):
        return (3, "BufferLoad", node.buffer.name, tuple(order_key(i) for i in node.indices))
    children: list = []
    for name in child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, E.PrimExpr):
            children.append(order_key(value))
        elif isinstance(value, tuple):
            children.extend(order_key(v) for v in value if isinstance(v, E.PrimExpr))
    label = node.op if isinstance(node, E.Call) else type(node).__name__
    return (3, label, "", tuple(children))

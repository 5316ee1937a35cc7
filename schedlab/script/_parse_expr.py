"""Parsing expressions, literal values, dtypes, buffers and regions from Python syntax trees.

Nodes are built with their constructors, never with the folding operators of `ir.op`, so the
parser returns exactly what was printed. Bare Python numbers are "weak": `x * 2` with a float32
`x` makes the 2 a float32 constant, as a person writing the text expects; printed text never
relies on this (it writes `T.float32(2)`).
"""

from __future__ import annotations

import ast
import difflib
from typing import Any

from schedlab.errors import ScriptError
from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer, BufferRegion
from schedlab.ir.dtype import ALL_SCALAR_TYPES, DataType, bool_, float32, int32, int64
from schedlab.ir.structural import structural_equal

from . import names as N

_BINOPS = {
    ast.Add: E.Add, ast.Sub: E.Sub, ast.Mult: E.Mul, ast.Div: E.Div, ast.FloorDiv: E.FloorDiv,
    ast.Mod: E.FloorMod,
}  # fmt: skip
_CMPOPS = {
    ast.Eq: E.EQ, ast.NotEq: E.NE, ast.Lt: E.LT, ast.LtE: E.LE, ast.Gt: E.GT, ast.GtE: E.GE,
}  # fmt: skip
_OP_SYMBOLS = {
    ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^",
    ast.BitAnd: "&", ast.MatMult: "@", ast.Invert: "~", ast.Is: "is", ast.IsNot: "is not",
    ast.In: "in", ast.NotIn: "not in",
}  # fmt: skip
# T.<name> constructs that are statements, named in "is not an expression" errors
STATEMENT_NAMES = frozenset(
    [N.GRID, N.BLOCK, N.INIT, N.WHERE, N.READS, N.WRITES, N.BLOCK_ATTR, N.FUNC_ATTR, N.BUFFER,
     N.MATCH_BUFFER, N.ALLOC_BUFFER, N.ALLOCATE, N.EVALUATE, N.LET_STMT, N.PRIM_FUNC, N.AXIS,
     *N.LOOP_KIND_BY_NAME]
)  # fmt: skip


def describe(node: ast.AST) -> str:
    """A short human name for a syntax node ("a list", "a lambda")."""
    names = {
        "List": "a list", "Tuple": "a tuple", "Dict": "a dict", "Set": "a set",
        "Lambda": "a lambda", "IfExp": "a conditional expression (use T.Select or "
        "T.if_then_else)", "ListComp": "a list comprehension", "GeneratorExp": "a generator",
        "DictComp": "a dict comprehension", "SetComp": "a set comprehension", "Starred":
        "a starred expression", "JoinedStr": "an f-string", "NamedExpr": "an assignment "
        "expression", "Await": "await", "Yield": "yield", "YieldFrom": "yield",
    }  # fmt: skip
    return names.get(type(node).__name__, type(node).__name__)


class ExprParser:
    """Expression half of the parser; the statement half (`parser.Parser`) inherits it."""

    def __init__(self, source):
        self.source = source
        self.scopes: list[dict[str, Any]] = [{}]
        self.weak: dict[int, E.PrimExpr] = {}  # constants written as bare Python numbers
        self.tir_aliases = {N.TIR_ALIAS}
        self.ir_aliases = {N.IR_ALIAS}

    # -- errors and scopes --------------------------------------------------------------------
    def fail(self, node: ast.AST | None, message: str) -> ScriptError:
        """A ScriptError at `node` (raise it: `raise self.fail(node, "...")`)."""
        return self.source.error(node, message)

    def lookup(self, name: str, node: ast.AST):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.fail(node, f"unknown name {name!r}{self._suggest(name, self._known())}")

    def _known(self) -> list[str]:
        return [name for scope in self.scopes for name in scope]

    @staticmethod
    def _suggest(name: str, candidates) -> str:
        close = difflib.get_close_matches(name, list(candidates), n=1)
        return f" (did you mean {close[0]!r}?)" if close else ""

    def define(self, name: str, value) -> None:
        self.scopes[-1][name] = value

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def build(self, node: ast.AST, cls, *args, **kwargs):
        """Construct an IR node, turning its own checks into errors at `node`."""
        try:
            return cls(*args, **kwargs)
        except (TypeError, ValueError) as err:
            raise self.fail(node, str(err)) from None

    # -- names of callees -----------------------------------------------------------------------
    def path(self, node: ast.AST) -> str | None:
        """`T.axis.remap` -> "tir.axis.remap", `I.ir_module` -> "ir.ir_module", `range` ->
        "range"; None for anything that is not a dotted name."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.reverse()
        if node.id in self.tir_aliases:
            return ".".join(["tir", *parts])
        if node.id in self.ir_aliases:
            return ".".join(["ir", *parts])
        return ".".join([node.id, *parts])

    def tir_name(self, node: ast.AST) -> str | None:
        """The name after `T.` of a call's function (`grid` for `T.grid`), else None."""
        path = self.path(node)
        return path[4:] if path and path.startswith("tir.") else None

    # -- expressions ----------------------------------------------------------------------------
    def expr(self, node: ast.AST) -> E.PrimExpr:
        method = getattr(self, f"_e_{type(node).__name__}", None)
        if method is None:
            raise self.fail(node, f"unsupported expression: {describe(node)}")
        return method(node)

    def _e_Constant(self, node: ast.Constant) -> E.PrimExpr:
        value = node.value
        if isinstance(value, bool):
            return E.IntImm(bool_, int(value))
        if isinstance(value, int):
            return self._weak(E.IntImm(int32 if -(2**31) <= value < 2**31 else int64, value))
        if isinstance(value, float):
            return self._weak(E.FloatImm(float32, value))
        if isinstance(value, str):
            return E.StringImm(value)
        raise self.fail(node, f"unsupported constant {value!r}")

    def _weak(self, imm: E.PrimExpr) -> E.PrimExpr:
        self.weak[id(imm)] = imm
        return imm

    def _e_Name(self, node: ast.Name) -> E.PrimExpr:
        if node.id in self.tir_aliases or node.id in self.ir_aliases:
            raise self.fail(node, f"{node.id} is a namespace, not a value")
        value = self.lookup(node.id, node)
        if isinstance(value, Buffer):
            raise self.fail(node, f"buffer {node.id} is not a value; load from it: {node.id}[...]")
        return value

    def _e_Attribute(self, node: ast.Attribute) -> E.PrimExpr:
        if isinstance(node.value, ast.Name) and node.attr == "data":
            owner = self.lookup(node.value.id, node.value)
            if isinstance(owner, Buffer):
                return owner.data
        name = self.tir_name(node)
        if name is not None and N.dtype_from_name(name) is not None:
            raise self.fail(node, f"T.{name} is a type; write T.{name}(value) for a constant")
        raise self.fail(node, f"unsupported attribute {ast.unparse(node)!r}")

    def _e_BinOp(self, node: ast.BinOp) -> E.PrimExpr:
        cls = _BINOPS.get(type(node.op))
        if cls is None:
            raise self.fail(
                node, f"operator {_OP_SYMBOLS.get(type(node.op), '?')} is not supported"
            )
        return self.binary(node, cls, self.expr(node.left), self.expr(node.right))

    def _e_UnaryOp(self, node: ast.UnaryOp) -> E.PrimExpr:
        if isinstance(node.op, ast.Not):
            return self.build(node, E.Not, self.expr(node.operand))
        if isinstance(node.op, ast.UAdd):
            return self.expr(node.operand)
        if isinstance(node.op, ast.USub):
            number = _number(node)
            if number is not None:
                return self._e_Constant(ast.Constant(number))
            operand = self.expr(node.operand)
            zero = E.FloatImm(operand.dtype, 0.0) if operand.dtype.is_float else None
            zero = zero or self.build(node, E.IntImm, operand.dtype, 0)
            return self.build(node, E.Sub, zero, operand)
        raise self.fail(node, f"operator {_OP_SYMBOLS.get(type(node.op), '?')} is not supported")

    def _e_BoolOp(self, node: ast.BoolOp) -> E.PrimExpr:
        cls = E.And if isinstance(node.op, ast.And) else E.Or
        result = self.expr(node.values[0])
        for value in node.values[1:]:
            result = self.build(node, cls, result, self.expr(value))
        return result

    def _e_Compare(self, node: ast.Compare) -> E.PrimExpr:
        left, result = self.expr(node.left), None
        for op, right_node in zip(node.ops, node.comparators):
            cls = _CMPOPS.get(type(op))
            if cls is None:
                raise self.fail(node, f"operator {_OP_SYMBOLS[type(op)]!r} is not supported")
            right = self.expr(right_node)
            term = self.binary(node, cls, left, right)
            result = term if result is None else self.build(node, E.And, result, term)
            left = right
        return result

    def _e_Subscript(self, node: ast.Subscript) -> E.PrimExpr:
        buffer = self.buffer_ref(node.value)
        indices = []
        for item in self.index_items(node):
            if isinstance(item, ast.Slice):
                raise self.fail(item, "slices are only allowed in T.reads/T.writes/T.match_buffer")
            indices.append(self.expr(item))
        self.check_rank(node, buffer, len(indices))
        return self.build(node, E.BufferLoad, buffer, tuple(indices))

    def _e_Call(self, node: ast.Call) -> E.PrimExpr:
        from . import _parse_call

        return _parse_call.call(self, node)

    # -- helpers shared with the statement parser ----------------------------------------------
    def binary(self, node: ast.AST, cls, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        a, b = self.unify(node, a, b)
        return self.build(node, cls, a, b)

    def unify(self, node: ast.AST, a: E.PrimExpr, b: E.PrimExpr) -> tuple[E.PrimExpr, E.PrimExpr]:
        """Give a bare-number operand the dtype of the other operand."""
        if a.dtype != b.dtype:
            if id(a) in self.weak:
                a = self.retype(node, a, b.dtype)
            elif id(b) in self.weak:
                b = self.retype(node, b, a.dtype)
        return a, b

    def retype(self, node: ast.AST, imm: E.PrimExpr, dtype: DataType) -> E.PrimExpr:
        if dtype.is_vector:
            return E.Broadcast(self.retype(node, imm, dtype.element_of()), dtype.lanes)
        if dtype.is_float:
            return self.build(node, E.FloatImm, dtype, imm.value)
        if dtype.is_integer and float(imm.value).is_integer():
            return self.build(node, E.IntImm, dtype, int(imm.value))
        return imm  # no sensible conversion: the node constructor reports the mismatch

    def buffer_ref(self, node: ast.AST) -> Buffer:
        if not isinstance(node, ast.Name):
            raise self.fail(node, f"expected a buffer name, got {describe(node)}")
        value = self.lookup(node.id, node)
        if not isinstance(value, Buffer):
            raise self.fail(node, f"{node.id} is not a buffer")
        return value

    @staticmethod
    def index_items(node: ast.Subscript) -> list[ast.AST]:
        index = node.slice
        return list(index.elts) if isinstance(index, ast.Tuple) else [index]

    def check_rank(self, node: ast.AST, buffer: Buffer, count: int) -> None:
        if count != len(buffer.shape):
            raise self.fail(
                node,
                f"buffer {buffer.name} has {len(buffer.shape)} dimension(s), got {count} "
                f"ind{'ex' if count == 1 else 'ices'}",
            )

    def dtype_arg(self, node: ast.AST) -> DataType:
        """A dtype written as a string ("float32") or as `T.float32`."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            dtype = N.dtype_from_name(node.value)
            if dtype is None:
                names = [str(t) for t in ALL_SCALAR_TYPES] + ["handle"]
                hint = self._suggest(node.value, names)
                raise self.fail(node, f"unknown dtype {node.value!r}{hint}")
            return dtype
        name = self.tir_name(node)
        if name is not None and N.dtype_from_name(name) is not None:
            return N.dtype_from_name(name)
        raise self.fail(node, f'expected a dtype such as "float32", got {describe(node)}')

    def int_arg(self, node: ast.AST, what: str) -> int:
        number = _number(node)
        if not isinstance(number, int) or isinstance(number, bool):
            raise self.fail(node, f"{what} must be an integer literal, got {ast.unparse(node)!r}")
        return number

    def str_arg(self, node: ast.AST, what: str) -> str:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            raise self.fail(node, f"{what} must be a string literal, got {ast.unparse(node)!r}")
        return node.value

    def exprs(self, node: ast.AST) -> list[E.PrimExpr]:
        """A tuple/list of expressions, or one expression."""
        items = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
        return [self.expr(item) for item in items]

    # -- literal values (annotations, attributes) ---------------------------------------------
    def literal(self, node: ast.AST):
        """A Python value from literal syntax; anything else is parsed as an expression."""
        if isinstance(node, ast.Constant):
            return node.value
        number = _number(node)
        if number is not None:
            return number
        if isinstance(node, ast.List):
            return [self.literal(item) for item in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.literal(item) for item in node.elts)
        if isinstance(node, ast.Dict):
            if any(key is None for key in node.keys):
                raise self.fail(node, "dict unpacking (**) is not supported")
            return {self.literal(k): self.literal(v) for k, v in zip(node.keys, node.values)}
        if self.path(getattr(node, "func", None)) == "float" and len(node.args) == 1:
            text = self.str_arg(node.args[0], "float()")
            if text not in ("inf", "-inf", "nan"):
                raise self.fail(node, f'float() takes "inf", "-inf" or "nan", got {text!r}')
            return float(text)
        if isinstance(node, ast.Name):
            value = self.lookup(node.id, node)
            if isinstance(value, Buffer):
                return value
        return self.expr(node)

    # -- regions and ranges ---------------------------------------------------------------------
    def region(self, node: ast.AST) -> BufferRegion:
        """`A[vi, 0:64]`: an index is a one-element range, a slice a range."""
        if not isinstance(node, ast.Subscript):
            raise self.fail(
                node, f"expected a buffer region such as A[i, 0:4], got {describe(node)}"
            )
        buffer = self.buffer_ref(node.value)
        items = [] if _is_empty_tuple(node.slice) else self.index_items(node)
        self.check_rank(node, buffer, len(items))
        ranges = []
        for dim, item in enumerate(items):
            if isinstance(item, ast.Slice):
                ranges.append(self.slice_range(item, buffer.shape[dim]))
            else:
                index = self.expr(item)
                ranges.append(E.Range(index, self.build(item, E.IntImm, index.dtype, 1)))
        return self.build(node, BufferRegion, buffer, tuple(ranges))

    def slice_range(self, item: ast.Slice, extent: E.PrimExpr) -> E.Range:
        if item.step is not None:
            raise self.fail(item, "buffer regions have unit stride; remove the slice step")
        if item.lower is None and item.upper is None:
            return E.Range(E.IntImm(extent.dtype, 0), extent)
        start = self.expr(item.lower) if item.lower is not None else E.IntImm(extent.dtype, 0)
        stop = self.expr(item.upper) if item.upper is not None else extent
        return E.Range(*self.bounds_to_range(item, start, stop))

    def bounds_to_range(self, node, start, stop) -> tuple[E.PrimExpr, E.PrimExpr]:
        """`(min, extent)` from printed `start, stop` (the printer writes stop = start + extent
        unless start is 0 or both are constants)."""
        start, stop = self.unify(node, start, stop)
        if _zero(start) and start.dtype == stop.dtype:
            return start, stop
        if _int_consts(start, stop):
            return start, self.build(node, E.IntImm, start.dtype, stop.value - start.value)
        if isinstance(stop, E.Add) and structural_equal(stop.a, start):
            return start, stop.b
        return start, self.build(node, E.Sub, stop, start)


def _number(node: ast.AST):
    """An int/float literal, possibly negated; None otherwise."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1 if isinstance(node.op, ast.USub) else 1
        node = node.operand
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return sign * node.value
    return None


def _zero(value: E.PrimExpr) -> bool:
    return isinstance(value, E.IntImm) and value.value == 0 and not value.dtype.is_bool


def _int_consts(a, b) -> bool:
    return (
        isinstance(a, E.IntImm) and isinstance(b, E.IntImm) and a.dtype == b.dtype
        and not a.dtype.is_bool
    )  # fmt: skip


def _is_empty_tuple(node: ast.AST) -> bool:
    return isinstance(node, ast.Tuple) and not node.elts

"""Expression rendering of the C-family renderer (a mixin of `CFamilyRenderer`).

Every `_e_<Node>` method returns `(text, precedence)`; parentheses are added only where C's
precedence needs them, so index math reads `A[i * 64 + k]`. Semantics kept exactly:
- integer Div/Mod are C's own truncation; FloorDiv/FloorMod become plain `/` `%` when both
  operands are provably non-negative, else small inline helpers;
- 8/16-bit integer arithmetic is cast back to its type (C would compute it in `int`);
- float16/bfloat16 values are `float`, rounded to their precision after every operation;
- `if_then_else` is lazy (`?:`), `Select` may evaluate both sides (`?:` is fine for that too).
"""

from __future__ import annotations

import math

import numpy as np

from schedlab.errors import LoweringError
from schedlab.ir import expr as E
from schedlab.ir.dtype import DataType, int32

from .c_vector import LANE_OP, contiguous_base, lane_of, native_vector

ATOM, UNARY, MUL, ADD, REL, EQUAL, LAND, LOR, COND = 16, 15, 13, 12, 10, 9, 5, 4, 3

_ARITH = {"Add": ("+", ADD), "Sub": ("-", ADD), "Mul": ("*", MUL), "Div": ("/", MUL),
          "Mod": ("%", MUL)}  # fmt: skip

# intrinsic -> C math function (float64 name; the float32 one adds "f")
MATH_FUNCTIONS = {
    "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10",
    "log1p": "log1p", "sqrt": "sqrt", "tanh": "tanh", "erf": "erf", "floor": "floor",
    "ceil": "ceil", "round": "nearbyint", "trunc": "trunc", "sin": "sin", "cos": "cos",
    "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh",
    "cosh": "cosh", "pow": "pow", "fmod": "fmod", "atan2": "atan2",
}  # fmt: skip


def type_tag(dtype: DataType) -> str:
    """Helper-name tag of a value type: float16/bfloat16 are computed as float32."""
    element = dtype.element_of()
    return "float32" if element.bits == 16 and element.is_float else str(element)


class CExprMixin:
    """Expression rendering; needs `names`, `prelude`, the type tables and `_nonneg`."""

    # -- entry points ---------------------------------------------------------------------------
    def expr(self, node: E.PrimExpr) -> str:
        """C text of an expression (top level: no outer parentheses)."""
        return self._render(node)[0]

    def _sub(self, node: E.PrimExpr, needed: int) -> str:
        text, prec = self._render(node)
        return text if prec >= needed else f"({text})"

    def _render(self, node: E.PrimExpr) -> tuple[str, int]:
        if not isinstance(node, E.PrimExpr):
            raise LoweringError(f"expected an expression, got {node!r}")
        if node.dtype.lanes > 1 and not isinstance(node, (E.Var, E.Let)):
            if not native_vector(node):
                return self._scalarize(node)
            vector = getattr(self, f"_v_{type(node).__name__}", None)
            if vector is not None:
                return vector(node)
        return self._dispatch(type(node))(self, node)

    @classmethod
    def _dispatch(cls, node_type):
        table = cls.__dict__.get("_expr_dispatch_table")
        if table is None:
            table = {}
            cls._expr_dispatch_table = table
        method = table.get(node_type)
        if method is None:
            for klass in node_type.__mro__:
                method = getattr(cls, f"_e_{klass.__name__}", None)
                if method is not None:
                    break
            else:
                raise LoweringError(f"the C backend cannot render {node_type.__name__}")
            table[node_type] = method
        return method

    # -- types ----------------------------------------------------------------------------------
    def value_ctype(self, dtype: DataType) -> str:
        """C type of a value of `dtype` (float16/bfloat16 values are float)."""
        if dtype.lanes > 1:
            return self.vector_ctype(dtype)
        return self.scalar_types[str(dtype)]

    def storage_ctype(self, dtype: DataType) -> str:
        """C type of one element in memory."""
        if dtype.lanes > 1:
            return self.vector_ctype(dtype)
        return self.storage_types.get(str(dtype), self.scalar_types[str(dtype)])

    def vector_ctype(self, dtype: DataType) -> str:
        element = dtype.element_of()
        if element.is_bool:
            tag, ctype = "bool", "int8_t"
        else:
            tag = type_tag(element)
            ctype = self.scalar_types[tag]
        name = f"sl_{tag}x{dtype.lanes}"
        self.prelude.use_vector(name, ctype, dtype.lanes)
        return name

    # -- leaves ---------------------------------------------------------------------------------
    def _e_Var(self, node: E.Var):
        name = self.names.lookup(node)
        if name is None:
            raise LoweringError(
                f"variable {node.name} ({node.dtype}) is used but not defined in the lowered "
                f"function (not a loop, let, parameter or shape variable)"
            )
        return name, ATOM

    def _e_IntImm(self, node: E.IntImm):
        value, dtype = node.value, str(node.dtype)
        if dtype == "bool":
            return ("true" if value else "false"), ATOM
        if dtype == "int64":
            text = "INT64_MIN" if value == -(2**63) else f"INT64_C({value})"
        elif dtype == "uint64":
            text = f"UINT64_C({value})"
        elif dtype == "uint32":
            text = f"{value}u"
        elif dtype == "int32" and value == -(2**31):
            return "(-2147483647 - 1)", ATOM
        else:
            text = str(value)
        return text, (UNARY if value < 0 else ATOM)

    def _e_FloatImm(self, node: E.FloatImm):
        return self.float_literal(node.value, node.dtype)

    def float_literal(self, value: float, dtype: DataType) -> tuple[str, int]:
        if math.isnan(value):
            return "NAN", ATOM
        if math.isinf(value):
            return ("INFINITY", ATOM) if value > 0 else ("-INFINITY", UNARY)
        if dtype.bits == 64:
            text = repr(float(value))
        else:  # float32, or a 16-bit float carried as float: its exactly rounded value
            exact = float(np.asarray(value, dtype=dtype.numpy)) if dtype.bits == 16 else value
            text = str(np.float32(exact)) + "f"
        return text, (UNARY if text.startswith("-") else ATOM)

    def _e_StringImm(self, node: E.StringImm):
        escaped = node.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"', ATOM

    # -- arithmetic -----------------------------------------------------------------------------
    def _arith(self, node, symbol: str, prec: int):
        dtype = node.dtype
        a, b = self._sub(node.a, prec), self._sub(node.b, prec + 1)
        if dtype.lanes > 1:
            return f"{a} {symbol} {b}", prec
        if dtype.is_integer and dtype.bits < 32:
            if dtype.is_uint and symbol == "*":  # uint16*uint16 would overflow int
                a = f"(uint32_t){self._sub(node.a, UNARY)}"
            return f"({self.value_ctype(dtype)})({a} {symbol} {b})", UNARY
        return self._rounded(dtype, f"{a} {symbol} {b}", prec)

    def _rounded(self, dtype: DataType, text: str, prec: int):
        """Round a float computation to float16/bfloat16 precision when the IR type says so."""
        if dtype.is_float and dtype.bits == 16:
            helper = "f16" if dtype.kind == "float" else "bf16"
            self.prelude.use(helper)
            return f"sl_round_{helper}({text})", ATOM
        return text, prec

    def _e_Add(self, node):
        return self._arith(node, "+", ADD)

    def _e_Sub(self, node):
        return self._arith(node, "-", ADD)

    def _e_Mul(self, node):
        return self._arith(node, "*", MUL)

    def _e_Div(self, node):
        return self._arith(node, "/", MUL)

    def _e_Mod(self, node):
        if node.dtype.is_float:
            return self._math_call(node, "fmod", (node.a, node.b))
        return self._arith(node, "%", MUL)

    def _e_FloorDiv(self, node):
        dtype = node.dtype
        if dtype.is_float:
            inner = f"{self._sub(node.a, MUL)} / {self._sub(node.b, MUL + 1)}"
            return self._rounded(dtype, f"{self.math_function('floor', dtype)}({inner})", ATOM)
        if dtype.is_uint or (self.known_nonneg(node.a) and self.known_nonneg(node.b)):
            return self._arith(node, "/", MUL)
        return self._typed_call("floordiv", "floordiv", node)

    def _e_FloorMod(self, node):
        dtype = node.dtype
        if dtype.is_float:
            text, _ = self._typed_call("floormod_float", "floormod", node)
            return self._rounded(dtype, text, ATOM)
        if dtype.is_uint or (self.known_nonneg(node.a) and self.known_nonneg(node.b)):
            return self._arith(node, "%", MUL)
        return self._typed_call("floormod", "floormod", node)

    def _typed_call(self, family: str, helper: str, node, args=None):
        tag = type_tag(node.dtype)
        self.prelude.use_typed(family, tag, self.scalar_types[tag])
        args = (node.a, node.b) if args is None else args
        return f"sl_{helper}_{tag}({', '.join(self.expr(a) for a in args)})", ATOM

    def _e_Min(self, node):
        return self._typed_call("minmax", "min", node)

    def _e_Max(self, node):
        return self._typed_call("minmax", "max", node)

    def _v_Min(self, node):
        return self._vector_minmax("min", node)

    def _v_Max(self, node):
        return self._vector_minmax("max", node)

    def _vector_minmax(self, which: str, node):
        vtype = self.vector_ctype(node.dtype)
        self.prelude.use_vector_helper("minmax", vtype)
        return f"sl_{which}_{vtype[3:]}({self.expr(node.a)}, {self.expr(node.b)})", ATOM

    # -- logic ----------------------------------------------------------------------------------
    def _e_CmpOp(self, node):
        prec = EQUAL if node.symbol in ("==", "!=") else REL
        return f"{self._sub(node.a, prec)} {node.symbol} {self._sub(node.b, prec + 1)}", prec

    def _e_And(self, node):
        return f"{self._sub(node.a, LAND)} && {self._sub(node.b, LAND + 1)}", LAND

    def _e_Or(self, node):
        return f"{self._sub(node.a, LOR)} || {self._sub(node.b, LOR + 1)}", LOR

    def _e_Not(self, node):
        return f"!{self._sub(node.a, UNARY)}", UNARY

    def _conditional(self, condition, true_value, false_value):
        c = self._sub(condition, LOR)
        return f"{c} ? {self._sub(true_value, LOR)} : {self._sub(false_value, LOR)}", COND

    def _e_Select(self, node):
        return self._conditional(node.condition, node.true_value, node.false_value)

    # -- conversions and bindings ---------------------------------------------------------------
    def _e_Cast(self, node):
        source, target = node.value.dtype, node.dtype
        if target.is_float and target.bits == 16:
            inner = self.expr(node.value)
            if self.value_ctype(source) != "float":
                inner = f"(float){self._sub(node.value, UNARY)}"
            return self._rounded(target, inner, ATOM)
        ctype = self.value_ctype(target)
        if self.value_ctype(source) == ctype:
            return self._render(node.value)
        return f"({ctype}){self._sub(node.value, UNARY)}", UNARY

    def _e_Let(self, node):
        value = self.expr(node.value)
        self.names.push_scope()
        try:
            name = self.names.declare(node.var, node.var.name)
            if self.known_nonneg(node.value):
                self._nonneg.add(id(node.var))
            body = self.expr(node.body)
        finally:
            self.names.pop_scope()
        return f"({{ {self.value_ctype(node.var.dtype)} {name} = {value}; {body}; }})", ATOM

    # -- memory ---------------------------------------------------------------------------------
    def buffer_index(self, node) -> E.PrimExpr:
        """The single (flat) index of a load/store, with the buffer's element offset."""
        if len(node.indices) != 1:
            raise LoweringError(
                f"buffer {node.buffer.name} is accessed with {len(node.indices)} indices; the C "
                f"backend needs flat buffers (lower with schedlab.transform.lower first)"
            )
        index, offset = node.indices[0], node.buffer.elem_offset
        if isinstance(offset, E.IntImm) and offset.value == 0:
            return index
        return index + offset

    def _e_BufferLoad(self, node):
        raw = f"{self.buffer_ref(node.buffer)}[{self.expr(self.buffer_index(node))}]"
        dtype = node.buffer.dtype
        if dtype.is_float and dtype.bits == 16 and dtype.lanes == 1:
            helper = "f16" if dtype.kind == "float" else "bf16"
            self.prelude.use(helper)
            return f"sl_{helper}_to_f32({raw})", ATOM
        return raw, ATOM

    # -- calls ----------------------------------------------------------------------------------
    def _e_Call(self, node):
        name, args = node.op, node.args
        if name == "if_then_else":
            return self._conditional(*args)
        if name == LANE_OP:
            return f"{self._sub(args[0], ATOM)}[{self.expr(args[1])}]", ATOM
        if name == "likely":
            return self.likely(self.expr(args[0])), ATOM
        if name in ("isnan", "isinf", "isfinite"):  # glibc's isinf(-inf) is -1: make it 0/1
            return f"{name}({self.expr(args[0])}) != 0", EQUAL
        if name == "abs":
            if node.dtype.is_integer:
                return self._typed_call("abs", "abs", node, args)
            return self._math_call(node, "fabs", args)
        if name == "sigmoid":
            text, _ = self._typed_call("sigmoid", "sigmoid", node, args)
            return self._rounded(node.dtype, text, ATOM)
        if name == "rsqrt":
            one = "1.0" if node.dtype.bits == 64 else "1.0f"
            root = f"{self.math_function('sqrt', node.dtype)}({self.expr(args[0])})"
            return self._rounded(node.dtype, f"{one} / {root}", MUL)
        if name == "exp10":
            return self._math_call(node, "pow", (E.FloatImm(args[0].dtype, 10.0), args[0]))
        if name in MATH_FUNCTIONS:
            return self._math_call(node, MATH_FUNCTIONS[name], args)
        return self.extern_call(node)

    def _math_call(self, node, function: str, args):
        text = f"{self.math_function(function, node.dtype)}({', '.join(map(self.expr, args))})"
        return self._rounded(node.dtype, text, ATOM)

    def math_function(self, name: str, dtype: DataType) -> str:
        """Hook: the C name of a math function for values of `dtype` (expf for float32)."""
        return name if dtype.element_of().bits == 64 else name + "f"

    def likely(self, condition: str) -> str:
        """Hook: a branch-probability hint."""
        return f"__builtin_expect(!!({condition}), 1)"

    def extern_call(self, node):
        """A call of an op no table knows: an external C function of that name."""
        if not node.op.isidentifier():
            raise LoweringError(f"the C backend does not know the intrinsic {node.op!r}")
        return f"{node.op}({', '.join(self.expr(a) for a in node.args)})", ATOM

    # -- vectors --------------------------------------------------------------------------------
    def _v_Ramp(self, node):
        vtype = self.vector_ctype(node.dtype)
        return f"sl_ramp_{vtype[3:]}({self.expr(node.base)}, {self.expr(node.stride)})", ATOM

    def _v_Broadcast(self, node):
        return f"sl_broadcast_{self.vector_ctype(node.dtype)[3:]}({self.expr(node.value)})", ATOM

    def _v_Cast(self, node):
        vtype = self.vector_ctype(node.dtype)
        return f"__builtin_convertvector({self.expr(node.value)}, {vtype})", ATOM

    def _v_BufferLoad(self, node):
        lanes = self._vector_arrays.get(id(node.buffer.data))
        if lanes:  # a whole vector of a scratch array of vectors
            return f"{self.buffer_ref(node.buffer)}[{node.indices[0].base.value // lanes}]", ATOM
        base = contiguous_base(self.buffer_index(node))
        if base is None:  # the elem_offset was folded into a non-Ramp index
            return self._scalarize(node)
        vtype = self.vector_ctype(node.dtype)
        pointer = self._sub_text(self.buffer_ref(node.buffer), ADD)
        return f"sl_load_{vtype[3:]}({pointer} + {self._sub(base, ADD + 1)})", ATOM

    @staticmethod
    def _sub_text(text: str, needed: int) -> str:
        return text if text.isidentifier() or needed <= ADD else f"({text})"

    def _scalarize(self, node):
        """A vector value built lane by lane: `({ vec r; for (l..) r[l] = lane_l; r; })`."""
        vtype = self.vector_ctype(node.dtype)
        self.names.push_scope()
        try:
            lane = E.Var("sl_l", int32)
            lane_name = self.names.declare(lane, "sl_l", internal=True)
            result = self.names.fresh("sl_r")
            self._nonneg.add(id(lane))
            body = self.expr(lane_of(node, lane))
        finally:
            self.names.pop_scope()
        loop = f"for (int32_t {lane_name} = 0; {lane_name} < {node.dtype.lanes}; ++{lane_name})"
        return f"({{ {vtype} {result}; {loop} {result}[{lane_name}] = {body}; {result}; }})", ATOM

    # -- facts ----------------------------------------------------------------------------------
    def known_nonneg(self, node: E.PrimExpr) -> bool:
        """Is this integer expression provably >= 0 (loop vars from non-negative mins, shape
        vars, non-negative constants, closed under + * / % min max)?"""
        if node.dtype.is_uint:
            return True
        if isinstance(node, E.IntImm):
            return node.value >= 0
        if isinstance(node, E.Var):
            return isinstance(node, E.SizeVar) or id(node) in self._nonneg
        if isinstance(node, (E.Add, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min)):
            return self.known_nonneg(node.a) and self.known_nonneg(node.b)
        if isinstance(node, E.Max):
            return self.known_nonneg(node.a) or self.known_nonneg(node.b)
        if isinstance(node, E.Cast):  # widening integer casts keep the sign
            source = node.value.dtype
            return (
                source.is_integer
                and node.dtype.bits >= source.bits
                and self.known_nonneg(node.value)
            )
        if isinstance(node, E.Select):
            return self.known_nonneg(node.true_value) and self.known_nonneg(node.false_value)
        return False

"""The one table of names the printer, the parser and the `T` namespace share.

Dtype constructors (`T.float32`), loop kinds (`T.unroll`), block axis kinds (`T.axis.reduce`,
the letters of `T.axis.remap`), operators printed as functions (`T.floordiv`) or infix (`//`),
expression constructors (`T.Select`) and intrinsic calls (`T.exp`, from the intrinsic registry)
are named here and nowhere else.
"""

from __future__ import annotations

import keyword
import re

from schedlab.ir import expr as E
from schedlab.ir.dtype import DataType
from schedlab.ir.intrin import INTRINSICS
from schedlab.ir.stmt import ForKind, IterType

# Aliases the text uses for the two namespaces (`from schedlab.script import tir as T`).
TIR_ALIAS = "T"
IR_ALIAS = "I"
TIR_MODULES = ("schedlab.script.tir", "tvm.script.tir")
IR_MODULES = ("schedlab.script.ir", "tvm.script.ir")
R_MODULES = ("schedlab.relax.R", "schedlab.script.relax", "tvm.script.relax")
SCRIPT_PACKAGES = ("schedlab.script", "tvm.script")

# ---------------------------------------------------------------------------------------------
# dtypes: `T.float32`, `T.int8`, `T.bool`, `T.handle`, vector types `T.float32x4`
# ---------------------------------------------------------------------------------------------
_DTYPE_NAME = re.compile(r"^(bool|handle|(?:int|uint|float|bfloat)\d+)(?:x\d+)?$")


def dtype_from_name(name: str) -> DataType | None:
    """The dtype a `T.<name>` constructor stands for, or None if `name` is not one."""
    if not _DTYPE_NAME.match(name):
        return None
    try:
        dtype = DataType(name)
    except ValueError:
        return None
    return dtype if str(dtype) == name else None


def dtype_name(dtype: DataType) -> str:
    """The attribute of `T` that constructs `dtype` (`float32` for T.float32)."""
    return str(dtype)


# ---------------------------------------------------------------------------------------------
# loops and block axes
# ---------------------------------------------------------------------------------------------
LOOP_KINDS: dict[ForKind, str] = {
    ForKind.SERIAL: "serial",
    ForKind.PARALLEL: "parallel",
    ForKind.VECTORIZED: "vectorized",
    ForKind.UNROLLED: "unroll",
    ForKind.THREAD_BINDING: "thread_binding",
}
LOOP_KIND_BY_NAME: dict[str, ForKind] = {name: kind for kind, name in LOOP_KINDS.items()}

AXIS_KINDS: dict[IterType, str] = {
    IterType.SPATIAL: "spatial",
    IterType.REDUCE: "reduce",
    IterType.SCAN: "scan",
    IterType.OPAQUE: "opaque",
}
AXIS_KIND_BY_NAME: dict[str, IterType] = {name: kind for kind, name in AXIS_KINDS.items()}
# `T.axis.remap("SSR", ...)` letters (TVM accepts spatial and reduce only)
REMAP_LETTERS: dict[IterType, str] = {IterType.SPATIAL: "S", IterType.REDUCE: "R"}
REMAP_KIND_BY_LETTER: dict[str, IterType] = {v: k for k, v in REMAP_LETTERS.items()}

# ---------------------------------------------------------------------------------------------
# operators
# ---------------------------------------------------------------------------------------------
# Python precedence levels, loosest first; a higher number binds tighter.
PREC_OR, PREC_AND, PREC_NOT, PREC_CMP, PREC_ADD, PREC_MUL, PREC_UNARY, PREC_ATOM = (
    1, 2, 3, 4, 6, 7, 8, 10,
)  # fmt: skip

# Infix operators: node type -> (symbol, precedence). Integer `Div` is truncated division and
# prints as T.truncdiv (Python's `/` is true division), so only float Div uses `/`.
INFIX: dict[type, tuple[str, int]] = {
    E.Add: ("+", PREC_ADD),
    E.Sub: ("-", PREC_ADD),
    E.Mul: ("*", PREC_MUL),
    E.Div: ("/", PREC_MUL),
    E.FloorDiv: ("//", PREC_MUL),
    E.FloorMod: ("%", PREC_MUL),
    E.EQ: ("==", PREC_CMP),
    E.NE: ("!=", PREC_CMP),
    E.LT: ("<", PREC_CMP),
    E.LE: ("<=", PREC_CMP),
    E.GT: (">", PREC_CMP),
    E.GE: (">=", PREC_CMP),
    E.And: ("and", PREC_AND),
    E.Or: ("or", PREC_OR),
}

# Binary nodes printed (or also accepted) as `T.<name>(a, b)`.
BINARY_FUNCTIONS: dict[str, type] = {
    "floordiv": E.FloorDiv,
    "floormod": E.FloorMod,
    "truncdiv": E.Div,
    "truncmod": E.Mod,
    "min": E.Min,
    "max": E.Max,
}
FUNCTION_OF_BINARY: dict[type, str] = {
    E.Mod: "truncmod",
    E.Min: "min",
    E.Max: "max",
}
TRUNCDIV = "truncdiv"

# Expression constructors with their own argument forms.
CAST, SELECT, LET, RAMP, BROADCAST = "Cast", "Select", "Let", "Ramp", "Broadcast"
CALL_INTRIN = "call_intrin"
IF_THEN_ELSE = "if_then_else"


def intrinsic_names() -> list[str]:
    """Intrinsics printed as `T.<name>(args)` (the registry may grow through extensions)."""
    return sorted(INTRINSICS)


def is_intrinsic(name: str) -> bool:
    return name in INTRINSICS


# ---------------------------------------------------------------------------------------------
# statement-level constructs of the T namespace
# ---------------------------------------------------------------------------------------------
PRIM_FUNC = "prim_func"
IR_MODULE = "ir_module"
MODULE_ATTRS = "module_attrs"
FUNC_ATTR = "func_attr"
BUFFER = "Buffer"
MATCH_BUFFER = "match_buffer"
ALLOC_BUFFER = "alloc_buffer"
ALLOCATE = "allocate"
GRID = "grid"
BLOCK = "block"
INIT = "init"
WHERE = "where"
READS = "reads"
WRITES = "writes"
BLOCK_ATTR = "block_attr"
AXIS = "axis"
REMAP = "remap"
EVALUATE = "evaluate"
LET_STMT = "LetStmt"
ROOT_BLOCK = "root"

# Keyword arguments of T.Buffer / T.match_buffer / T.alloc_buffer / T.allocate, in print order,
# with the Buffer field each sets.
BUFFER_KWARGS: tuple[str, ...] = (
    "data", "strides", "elem_offset", "scope", "data_alignment", "offset_factor",
    "axis_separators",
)  # fmt: skip

# Names a printed identifier must never take (they would shadow the text's own vocabulary).
RESERVED_NAMES = frozenset(
    [*keyword.kwlist, TIR_ALIAS, IR_ALIAS, "range", "float", "True", "False", "None"]
)


def sanitize_name(hint: str) -> str:
    """A valid, non-reserved Python identifier close to `hint` (`C.local` -> `C_local`)."""
    name = re.sub(r"\W", "_", hint or "")
    if not name:
        name = "v"
    if name[0].isdigit():
        name = "v_" + name
    if not name.isidentifier():
        name = "v"
    return name

"""The `T` namespace of the text form: `from schedlab.script import tir as T`.

`@T.prim_func` turns a hand-written Python function into a PrimFunc by parsing its source (it is
never run). Everything else here is vocabulary the parser reads: the objects exist so that
editors and type checkers know the names. Python evaluates parameter annotations when it
defines a function, so `T.Buffer(...)` and the dtypes (`T.int32`, `T.int32(is_size_var=True)`)
can be called and return harmless values; the statement constructs (`T.grid`, `T.block`, ...)
raise if called outside a parsed body.

    @T.prim_func
    def add_one(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi] + T.float32(1)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schedlab.ir import expr as _E
from schedlab.ir.buffer import Buffer as _Buffer
from schedlab.ir.buffer import decl_buffer as _decl_buffer
from schedlab.ir.dtype import DataType as _DataType
from schedlab.ir.function import PrimFunc as _PrimFunc
from schedlab.ir.op import const as _const

from . import names as _N


def prim_func(func: Callable | None = None, *, private: bool = False, check_well_formed=True):
    """Decorator: parse the decorated function's source into a PrimFunc (it is never called).
    `private` and `check_well_formed` are accepted for TVM compatibility and ignored."""
    from .parser import parse_object

    def parse(target: Callable) -> _PrimFunc:
        return parse_object(target)

    return parse if func is None else parse(func)


class _DType:
    """`T.float32` and friends: a type in annotations, a constant or variable when called."""

    def __init__(self, name: str):
        self.name = name
        self.dtype = _DataType(name)

    def __repr__(self) -> str:
        return f"T.{self.name}"

    def __call__(self, value: Any = None, *, is_size_var: bool = False) -> _E.PrimExpr:
        if value is None:
            return (_E.SizeVar if is_size_var else _E.Var)("v", self.dtype)
        if isinstance(value, _E.PrimExpr):
            return _E.Cast(self.dtype, value)
        if isinstance(value, str):
            value = float(value)
        return _const(value, self.dtype)


bool = _DType("bool")  # noqa: A001 - the dtype's name in TVMScript
int8, int16, int32, int64 = (_DType(f"int{b}") for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (_DType(f"uint{b}") for b in (8, 16, 32, 64))
float16, float32, float64 = (_DType(f"float{b}") for b in (16, 32, 64))
bfloat16 = _DType("bfloat16")
handle = _DType("handle")


def Buffer(shape, dtype="float32", data=None, strides=(), elem_offset=0, scope="global",  # noqa: N802
           data_alignment=64, offset_factor=1, axis_separators=()) -> _Buffer:  # fmt: skip
    """A buffer type in a parameter annotation (`A: T.Buffer((64, 64), "float32")`) or a buffer
    declaration in a body; called from Python it returns a fresh Buffer."""
    buffer = _decl_buffer(shape, dtype, "buffer", scope, strides, elem_offset, axis_separators)
    changes: dict[str, Any] = {"data_alignment": data_alignment, "offset_factor": offset_factor}
    if data is not None:
        changes["data"] = data
    return buffer.replace(**changes)


def _only_in_script(name: str, doc: str) -> Callable:
    def marker(*args, **kwargs):
        raise RuntimeError(
            f"T.{name} only has meaning inside a @T.prim_func body, which schedlab parses and "
            "never runs"
        )

    marker.__name__ = marker.__qualname__ = name
    marker.__doc__ = doc
    return marker


_STATEMENTS = {
    _N.GRID: "Nested serial loops: `for i, j in T.grid(64, 48):`.",
    _N.BLOCK: 'A block: `with T.block("C"):`.',
    _N.INIT: "The reduction init of a block: `with T.init():`.",
    _N.WHERE: "The predicate of a block: `T.where(i * 4 + j < 30)`.",
    _N.READS: "The regions a block reads: `T.reads(A[vi, 0:64])`.",
    _N.WRITES: "The regions a block writes: `T.writes(C[vi, vj])`.",
    _N.BLOCK_ATTR: 'Annotations of a block: `T.block_attr({"key": 1})`.',
    _N.FUNC_ATTR: 'Attributes of a function: `T.func_attr({"global_symbol": "f"})`.',
    _N.ALLOC_BUFFER: 'A buffer allocated by a block: `X = T.alloc_buffer((4,), "float32")`.',
    _N.MATCH_BUFFER: "A buffer bound to a parameter or to a region: `X = T.match_buffer(...)`.",
    _N.ALLOCATE: 'An allocation for the rest of the body: `X = T.allocate((16,), "float32")`.',
    _N.EVALUATE: "An expression evaluated for its effect: `T.evaluate(0)`.",
    _N.LET_STMT: "A let binding over an indented body: `with T.LetStmt(value) as x:`.",
    **{name: f"A loop of kind {kind.value}: `for i in T.{name}(64):`." for kind, name in
       _N.LOOP_KINDS.items()},
}  # fmt: skip
_EXPRESSIONS = {
    _N.CAST: 'A conversion: `T.Cast("float16", x)`.',
    _N.SELECT: "An eager conditional value: `T.Select(cond, a, b)`.",
    _N.LET: "A let expression: `T.Let(x + 1, where={x: value})`.",
    _N.RAMP: "The vector [base, base + stride, ...]: `T.Ramp(base, stride, lanes)`.",
    _N.BROADCAST: "A scalar repeated over lanes: `T.Broadcast(value, lanes)`.",
    _N.CALL_INTRIN: 'A call with an explicit result dtype: `T.call_intrin("float32", "exp", x)`.',
    **{name: f"`T.{name}(a, b)`." for name in _N.BINARY_FUNCTIONS},
}
for _name, _doc in {**_STATEMENTS, **_EXPRESSIONS}.items():
    globals()[_name] = _only_in_script(_name, _doc)


class axis:  # noqa: N801 - TVMScript's name
    """Block axes: `vi = T.axis.spatial(64, i)`, `vi, vk = T.axis.remap("SR", [i, k])`."""

    spatial = staticmethod(_only_in_script("axis.spatial", "A spatial block axis."))
    reduce = staticmethod(_only_in_script("axis.reduce", "A reduction block axis."))
    scan = staticmethod(_only_in_script("axis.scan", "A scan block axis."))
    opaque = staticmethod(_only_in_script("axis.opaque", "An opaque block axis."))
    remap = staticmethod(_only_in_script("axis.remap", 'Axes bound to loops: ("SSR", [i, j, k]).'))


def __getattr__(name: str):
    """Vector dtypes (`T.float32x4`) and intrinsics (`T.exp`, including registered ones)."""
    if _N.dtype_from_name(name) is not None:
        return _DType(name)
    if _N.is_intrinsic(name):
        return _only_in_script(name, f"The `{name}` intrinsic.")
    raise AttributeError(f"module 'schedlab.script.tir' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_N.intrinsic_names()])

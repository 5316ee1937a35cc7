"""The graph IR's expressions and bindings (TVM Relax style).

Every expression has a `struct_info` (shape/dtype information): variables carry it, the rest
derive it from their children (calls through the operator registry, see `infer.py`). The
derived value is cached outside the dataclass fields, so `replace` never copies a stale one.

    x = Var("x", TensorStructInfo((n, 4), "float32"))
    call = Call("relax.add", (x, x))
    call.struct_info  # TensorStructInfo((n, 4), float32)

Variables are defined by `VarBinding`/`MatchCast` and by `Function.params`; structural equality
maps them at those places (alpha-equivalence), like loop variables in the loop IR.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import numpy as np

from schedlab.host_arrays import aligned
from schedlab.ir.dtype import DataType
from schedlab.ir.expr import PrimExpr
from schedlab.ir.function import BaseFunc
from schedlab.ir.node import Node, ir_node, meta

from .struct_info import FuncStructInfo, ObjectStructInfo, StructInfo, TensorStructInfo


class Expr(Node):
    """Base class of graph expressions."""

    __slots__ = ()

    @property
    def struct_info(self) -> StructInfo:
        """What is known about this value (inferred and cached on first use)."""
        cached = self.__dict__.get("_sinfo")
        if cached is None:
            cached = self._infer_struct_info()
            object.__setattr__(self, "_sinfo", cached)
        return cached

    def _infer_struct_info(self) -> StructInfo:
        from .infer import infer_struct_info

        return infer_struct_info(self)

    def __repr__(self) -> str:
        try:
            return self.script()
        except Exception:
            return object.__repr__(self)

    def __getitem__(self, index: int) -> TupleGetItem:
        if not isinstance(index, int):
            raise TypeError(f"graph values are indexed by int (tuple fields), got {index!r}")
        return TupleGetItem(self, index)


def _check_sinfo(value, what: str) -> StructInfo:
    if not isinstance(value, StructInfo):
        raise TypeError(f"{what}: expected a StructInfo, got {type(value).__name__}")
    return value


@ir_node
class Var(Expr):
    """A named value; its struct info is given when it is defined."""

    name_hint: str = meta(child=False, compare=False)
    struct_info_: StructInfo = meta(default=None)
    _graph_var = True  # structural equality maps these like loop variables

    def __post_init__(self):
        if not isinstance(self.name_hint, str):
            raise TypeError(f"Var.name_hint: expected a str, got {self.name_hint!r}")
        sinfo = self.struct_info_ if self.struct_info_ is not None else ObjectStructInfo()
        object.__setattr__(self, "struct_info_", _check_sinfo(sinfo, f"Var {self.name_hint}"))

    def _infer_struct_info(self) -> StructInfo:
        return self.struct_info_


@ir_node
class DataflowVar(Var):
    """A variable local to a dataflow block (not visible after it)."""


@ir_node
class GlobalVar(Expr):
    """The name of a function in the IRModule (a PrimFunc or a graph function)."""

    name_hint: str

    def _infer_struct_info(self) -> StructInfo:
        return ObjectStructInfo()


@ir_node
class Constant(Expr):
    """A constant tensor (numpy data, read-only, C-contiguous and cache-line aligned: what the
    VM hands its kernels as is). Compared by dtype, shape and a 256-bit digest of its bytes
    (the bytes themselves would double the memory a model's weights take)."""

    data: Any = meta(child=False, compare=False)
    key: tuple = dataclasses.field(init=False, metadata={"child": False, "compare": True})

    def __post_init__(self):
        data = np.asarray(self.data, order="C")  # keeps 0-d (ascontiguousarray makes 1-d)
        DataType(str(data.dtype))  # fail early on dtypes the IR has no name for
        data = aligned(data)
        data.setflags(write=False)
        digest = hashlib.blake2b(data, digest_size=32).digest()
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "key", (str(data.dtype), data.shape, digest))

    def __setstate__(self, state: dict) -> None:
        # unpickled, the data is a fresh numpy allocation (16-byte aligned only): align it again
        data = aligned(state["data"])
        data.setflags(write=False)
        self.__dict__.update(state, data=data)

    def _infer_struct_info(self) -> StructInfo:
        return TensorStructInfo(self.data.shape, str(self.data.dtype))


@ir_node
class Tuple(Expr):
    """A tuple of values."""

    fields: tuple[Expr, ...]

    def __post_init__(self):
        object.__setattr__(self, "fields", _exprs(self.fields, "Tuple.fields"))


@ir_node
class TupleGetItem(Expr):
    """Field `index` of a tuple value."""

    tuple_value: Expr
    index: int


@ir_node
class ShapeExpr(Expr):
    """A shape value built from loop-IR integers."""

    values: tuple[PrimExpr, ...]

    def __post_init__(self):
        from .struct_info import _dims

        object.__setattr__(self, "values", _dims(self.values, "ShapeExpr.values"))


@ir_node
class PrimValue(Expr):
    """A loop-IR scalar used as a graph value."""

    value: PrimExpr


@ir_node
class StringImm(Expr):
    """A string constant."""

    value: str


@ir_node
class Call(Expr):
    """A call: `op` is an operator name from the registry ("relax.add", "relax.call_tir") or a
    GlobalVar naming a graph function. `sinfo_args` give output struct info where it cannot be
    inferred (call_tir's out_sinfo)."""

    op: str | GlobalVar
    args: tuple[Expr, ...]
    attrs: dict[str, Any] = meta(factory=dict)
    sinfo_args: tuple[StructInfo, ...] = meta(factory=tuple)

    def __post_init__(self):
        if not isinstance(self.op, (str, GlobalVar)):
            raise TypeError(f"Call.op: expected an op name or a GlobalVar, got {self.op!r}")
        object.__setattr__(self, "args", _exprs(self.args, f"Call({_op_name(self.op)}).args"))
        object.__setattr__(self, "attrs", dict(self.attrs))
        object.__setattr__(self, "sinfo_args", tuple(self.sinfo_args))


@ir_node
class If(Expr):
    """A conditional: both branches are SeqExprs (or plain expressions)."""

    cond: Expr
    true_branch: Expr
    false_branch: Expr


# ---------------------------------------------------------------------------------------------
# bindings, blocks, functions
# ---------------------------------------------------------------------------------------------
class Binding(Node):
    """Base class of bindings (a variable defined from a value)."""

    __slots__ = ()


@ir_node
class VarBinding(Binding):
    """`var = value`."""

    var: Var
    value: Expr
    _defines = ("var",)

    def __post_init__(self):
        _check_var(self.var, "VarBinding.var")
        _exprs((self.value,), f"VarBinding({self.var.name_hint}).value")


@ir_node
class MatchCast(Binding):
    """`var = match_cast(value, struct_info)`: asserts the shape/dtype at run time and binds
    the symbolic dimensions it names."""

    var: Var
    value: Expr
    struct_info: StructInfo
    _defines = ("var",)

    def __post_init__(self):
        _check_var(self.var, "MatchCast.var")
        _check_sinfo(self.struct_info, "MatchCast.struct_info")


@ir_node
class BindingBlock(Node):
    """Bindings in order (may have side effects)."""

    bindings: tuple[Binding, ...]

    def __post_init__(self):
        bindings = tuple(self.bindings)
        for k, item in enumerate(bindings):
            if not isinstance(item, Binding):
                raise TypeError(f"{type(self).__name__}.bindings[{k}]: got {item!r}")
        object.__setattr__(self, "bindings", bindings)


@ir_node
class DataflowBlock(BindingBlock):
    """Pure bindings; DataflowVars defined here are not visible after the block."""


@ir_node
class SeqExpr(Expr):
    """Blocks of bindings, then the value of `body`."""

    blocks: tuple[BindingBlock, ...]
    body: Expr

    def __post_init__(self):
        object.__setattr__(self, "blocks", tuple(self.blocks))

    def _infer_struct_info(self) -> StructInfo:
        return self.body.struct_info


@ir_node
class Function(BaseFunc, Expr):
    """A graph function: parameters, a body (usually a SeqExpr), the declared result struct
    info and attributes."""

    params: tuple[Var, ...]
    body: Expr
    ret_struct_info: StructInfo | None = None
    attrs: dict[str, Any] = meta(factory=dict)
    _defines = ("params",)

    def __post_init__(self):
        params = tuple(self.params)
        for k, param in enumerate(params):
            _check_var(param, f"Function.params[{k}]")
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "attrs", dict(self.attrs))
        if self.ret_struct_info is None:
            object.__setattr__(self, "ret_struct_info", self.body.struct_info)

    def _infer_struct_info(self) -> StructInfo:
        return FuncStructInfo(tuple(p.struct_info_ for p in self.params), self.ret_struct_info)

    @property
    def name(self) -> str:
        return self.attrs.get("global_symbol", "main")


def _op_name(op) -> str:
    return op if isinstance(op, str) else op.name_hint


def _check_var(var, what: str) -> None:
    if not isinstance(var, Var):
        raise TypeError(f"{what}: expected a relax Var, got {type(var).__name__}")


def _exprs(values, what: str) -> tuple[Expr, ...]:
    values = tuple(values)
    for k, value in enumerate(values):
        if not isinstance(value, Expr):
            raise TypeError(f"{what}[{k}]: expected a graph expression, got {value!r}")
    return values


def is_graph_node(node) -> bool:
    """Whether `node` belongs to the graph IR (printed by the graph printer)."""
    return isinstance(node, (Expr, Binding, BindingBlock, StructInfo))

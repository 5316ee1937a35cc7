"""Struct-info inference (normalization) for graph expressions.

Calls to registry operators go through `get_op(name).infer_info([TensorInfo...], attrs)`;
`relax.call_tir` takes its result from `out_sinfo`; calls of graph functions use the callee's
declared result (given as a GlobalVar with the module's functions, see BlockBuilder).
"""

from __future__ import annotations

from collections.abc import Mapping

from schedlab.errors import SchedlabError
from schedlab.ir.op import convert

from . import expr as X
from .struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)  # fmt: skip

CALL_TIR = "relax.call_tir"


class GraphTypeError(SchedlabError, TypeError):
    """A graph expression whose inputs do not fit (shape, dtype, arity, kind)."""


def infer_struct_info(expr: X.Expr, functions: Mapping | None = None) -> StructInfo:
    """The struct info of `expr` from its children's. `functions` maps names to functions for
    calls of graph functions by GlobalVar."""
    if isinstance(expr, X.Call):
        return _call(expr, functions or {})
    if isinstance(expr, X.Tuple):
        return TupleStructInfo(tuple(f.struct_info for f in expr.fields))
    if isinstance(expr, X.TupleGetItem):
        return _tuple_item(expr)
    if isinstance(expr, X.ShapeExpr):
        return ShapeStructInfo(expr.values)
    if isinstance(expr, X.PrimValue):
        return PrimStructInfo(expr.value.dtype)
    if isinstance(expr, X.If):
        return expr.true_branch.struct_info
    if type(expr)._infer_struct_info is not X.Expr._infer_struct_info:
        return expr._infer_struct_info()  # variables, constants, SeqExpr, Function
    return ObjectStructInfo()


def _tuple_item(expr: X.TupleGetItem) -> StructInfo:
    sinfo = expr.tuple_value.struct_info
    if not isinstance(sinfo, TupleStructInfo):
        raise GraphTypeError(f"TupleGetItem: the value is not a tuple but {sinfo}")
    if not 0 <= expr.index < len(sinfo.fields):
        raise GraphTypeError(
            f"TupleGetItem: index {expr.index} out of range for a {len(sinfo.fields)}-tuple"
        )
    return sinfo.fields[expr.index]


def _call(call: X.Call, functions: Mapping) -> StructInfo:
    if isinstance(call.op, X.GlobalVar):
        func = functions.get(call.op.name_hint)
        if func is None or not isinstance(func, X.Function):
            return call.sinfo_args[0] if call.sinfo_args else ObjectStructInfo()
        sinfo = func.struct_info
        return sinfo.ret if isinstance(sinfo, FuncStructInfo) else ObjectStructInfo()
    if call.op == CALL_TIR:
        return _call_tir(call)
    from schedlab.relax.op import get_op

    spec = get_op(call.op)
    infos = [_tensor_info(call, k, arg) for k, arg in enumerate(call.args)]
    return _from_info(spec.infer_info(infos, dict(call.attrs)), call.op)


def _call_tir(call: X.Call) -> StructInfo:
    if len(call.sinfo_args) != 1:
        raise GraphTypeError(f"{CALL_TIR}: needs exactly one out_sinfo, got {call.sinfo_args}")
    if not call.args or not isinstance(call.args[0], X.GlobalVar):
        raise GraphTypeError(f"{CALL_TIR}: the first argument must be the PrimFunc's GlobalVar")
    return call.sinfo_args[0]


def _tensor_info(call: X.Call, k: int, arg: X.Expr):
    from schedlab.relax.op import TensorInfo

    sinfo = arg.struct_info
    if not isinstance(sinfo, TensorStructInfo):
        raise GraphTypeError(f"{call.op}: input {k} must be a tensor, got {sinfo}")
    return TensorInfo(sinfo.shape, sinfo.dtype)


def _from_info(info, op: str) -> StructInfo:
    from schedlab.relax.op import TensorInfo

    if isinstance(info, StructInfo):
        return info
    if isinstance(info, TensorInfo):
        return TensorStructInfo(tuple(convert(d) for d in info.shape), info.dtype)
    if isinstance(info, (tuple, list)):
        return TupleStructInfo(tuple(_from_info(item, op) for item in info))
    raise GraphTypeError(f"{op}: its infer function returned {info!r}, not a TensorInfo")

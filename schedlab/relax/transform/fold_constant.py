"""FoldConstant: evaluate at compile time every call whose inputs are all constants and put a
Constant in its place (weights preprocessing, shape arithmetic on constant tensors). Variables
bound to constants are replaced by the constants, so chains fold in one pass; the dead bindings
and PrimFuncs left behind are for DeadCodeElimination.

Calls of registered operators run through the graph interpreter
(`schedlab.relax.interpreter.run_op`: legalized for the constants' shapes, then the loop-IR
interpreter); `call_tir`s of module PrimFuncs run directly on `schedlab.interpret`. Operators
without tensor inputs (zeros, full) are not folded: that would only store a big constant.
"""

from __future__ import annotations

import numpy as np

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ..functor import ExprMutator
from ..infer import CALL_TIR
from ..struct_info import TensorStructInfo, TupleStructInfo
from ._util import map_functions


def _output_arrays(sinfo) -> list[np.ndarray] | None:
    """Zeroed arrays for a call_tir's outputs, or None when a shape is not static."""
    sinfos = sinfo.fields if isinstance(sinfo, TupleStructInfo) else (sinfo,)
    arrays = []
    for item in sinfos:
        shape = item.static_shape() if isinstance(item, TensorStructInfo) else None
        if shape is None:
            return None
        arrays.append(np.zeros(shape, item.dtype.numpy))
    return arrays


def run_call_tir(func: PrimFunc, args: list[np.ndarray], out_sinfo) -> X.Expr | None:
    """A Constant (a Tuple of them for several outputs) with the result of running `func`, or
    None when the outputs' shapes are not static."""
    from schedlab import interpret

    outs = _output_arrays(out_sinfo)
    if outs is None:
        return None
    interpret(func, *[np.array(a) for a in args], *outs)
    if isinstance(out_sinfo, TupleStructInfo):
        return X.Tuple(tuple(X.Constant(o) for o in outs))
    return X.Constant(outs[0])


class _Folder(ExprMutator):
    def __init__(self, mod: IRModule):
        super().__init__()
        self.mod = mod
        self.known: dict[X.Var, X.Expr] = {}  # vars bound to constants (or tuples of them)

    def visit_Var(self, var):  # noqa: N802 - dispatch name
        var = super().visit_Var(var)
        value = self.known.get(var)
        return value if isinstance(value, X.Constant) else var

    def visit_VarBinding(self, binding: X.VarBinding) -> X.VarBinding:  # noqa: N802
        binding = super().visit_VarBinding(binding)
        if _is_constant(binding.value):
            self.known[binding.var] = binding.value
        return binding

    def visit_TupleGetItem(self, item: X.TupleGetItem) -> X.Expr:  # noqa: N802
        item = self.generic_visit(item)
        value = self.known.get(item.tuple_value, item.tuple_value)
        if isinstance(value, X.Tuple) and isinstance(value.fields[item.index], X.Constant):
            return value.fields[item.index]
        return item

    def visit_Call(self, call: X.Call) -> X.Expr:  # noqa: N802
        call = self.generic_visit(call)
        if call.op == CALL_TIR:
            folded = self._fold_call_tir(call, self.mod)
        elif isinstance(call.op, str) and call.args and all(_is_const(a) for a in call.args):
            folded = _fold_op(call)
        else:
            folded = None
        return call if folded is None else folded

    def _fold_call_tir(self, call: X.Call, mod: IRModule) -> X.Expr | None:
        gvar, args = call.args[0], call.args[1]
        if not isinstance(args, X.Tuple) or not all(_is_const(a) for a in args.fields):
            return None
        func = mod[gvar.name_hint]
        if not isinstance(func, PrimFunc):
            return None
        return run_call_tir(func, [a.data for a in args.fields], call.sinfo_args[0])


def _fold_op(call: X.Call) -> X.Expr:
    """Run a registered operator on its constant inputs (the graph interpreter legalizes it
    for their shapes and runs the loop-IR interpreter)."""
    from schedlab.relax.interpreter import run_op

    result = run_op(call.op, [a.data for a in call.args], call.attrs)
    if isinstance(result, tuple):
        return X.Tuple(tuple(X.Constant(r) for r in result))
    return X.Constant(result)


def _is_const(expr: X.Expr) -> bool:
    return isinstance(expr, X.Constant)


def _is_constant(expr: X.Expr) -> bool:
    if isinstance(expr, X.Tuple):
        return all(_is_const(f) for f in expr.fields)
    return _is_const(expr)


def FoldConstant() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """The FoldConstant pass (see the module docstring)."""

    @module_pass(name="FoldConstant")
    def fold_constant(mod: IRModule) -> IRModule:
        """Replace all-constant calls by their values in every graph function."""
        return map_functions(mod, lambda func: _Folder(mod).visit(func))

    return fold_constant

"""Rewriting graph functions binding by binding (TVM's relax.ExprMutator).

The generic `Mutator` already rebuilds graph nodes; this one also keeps variables consistent:
when a binding's new value has different struct info, the bound variable is replaced by a
fresh one (same name and kind) and every later use follows. Override `visit_<Class>` for the
values to rewrite (`visit_Call`, ...), calling `self.generic_visit(node)` for the children.
"""

from __future__ import annotations

from schedlab.ir.functor import Mutator
from schedlab.ir.structural import structural_equal

from . import expr as X


class ExprMutator(Mutator):
    """A Mutator for graph functions that re-types rebound variables (see module docstring)."""

    def __init__(self):
        self.var_remap: dict[X.Var, X.Var] = {}

    def visit_Var(self, var: X.Var):  # noqa: N802 - dispatch name
        if not isinstance(var, X.Var):  # a loop-IR Var (symbolic dim): unchanged
            return var
        return self.var_remap.get(var, var)

    def visit_VarBinding(self, binding: X.VarBinding) -> X.VarBinding:  # noqa: N802
        value = self.visit(binding.value)
        var = self._rebind(binding.var, value)
        if value is binding.value and var is binding.var:
            return binding
        return X.VarBinding(var, value)

    def visit_MatchCast(self, binding: X.MatchCast) -> X.MatchCast:  # noqa: N802
        value = self.visit(binding.value)
        return binding if value is binding.value else binding.replace(value=value)

    def _rebind(self, var: X.Var, value: X.Expr) -> X.Var:
        sinfo = value.struct_info
        if structural_equal(sinfo, var.struct_info_, map_free_vars=False):
            return var
        fresh = type(var)(var.name_hint, sinfo)
        self.var_remap[var] = fresh
        return fresh

    def visit_Function(self, func: X.Function) -> X.Function:  # noqa: N802
        body = self.visit(func.body)
        if body is func.body:
            return func
        ret = func.ret_struct_info
        if not structural_equal(body.struct_info, ret):
            ret = body.struct_info
        return X.Function(func.params, body, ret, func.attrs)

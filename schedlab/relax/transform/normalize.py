"""Normalize: give every call nested inside another call's arguments its own binding (TVM's
A-normal form), so each binding computes one call of variables and constants:

    lv = R.add(R.matmul(x, w), b)   ->   lv0 = R.matmul(x, w); lv = R.add(lv0, b)

Graph passes that reason binding by binding (FuseOps groups producer/consumer bindings) only
see a producer when it is bound. Calls nested in a call's argument tuple (`call_tir`'s
arguments) are lifted too; new variables are DataflowVars inside dataflow blocks and are named
"lv<k>" with numbers no other variable of the function uses.
"""

from __future__ import annotations

from schedlab.ir.functor import post_order_visit
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ._util import map_functions


class _Flattener:
    """Rewrites the bindings of one function, lifting nested calls into new bindings."""

    def __init__(self, func: X.Function):
        self.taken = _var_names(func)
        self.counter = 0

    def fresh_name(self) -> str:
        while f"lv{self.counter}" in self.taken:
            self.counter += 1
        name = f"lv{self.counter}"
        self.taken.add(name)
        return name

    def block(self, block: X.BindingBlock) -> X.BindingBlock:
        """`block` with every nested call of its bindings bound first (same block if none)."""
        out: list[X.Binding] = []
        var_kind = X.DataflowVar if isinstance(block, X.DataflowBlock) else X.Var
        for binding in block.bindings:
            if isinstance(binding, X.VarBinding) and isinstance(binding.value, X.Call):
                value = self.call_args(binding.value, out, var_kind)
                if value is not binding.value:
                    binding = X.VarBinding(binding.var, value)
            out.append(binding)
        return block if len(out) == len(block.bindings) else type(block)(tuple(out))

    def call_args(self, call: X.Call, out: list, var_kind) -> X.Call:
        """`call` with each nested call argument replaced by a variable bound in `out`."""
        args = tuple(self.arg(a, out, var_kind) for a in call.args)
        if all(a is b for a, b in zip(args, call.args)):
            return call
        return call.replace(args=args)

    def arg(self, arg: X.Expr, out: list, var_kind) -> X.Expr:
        if isinstance(arg, X.Tuple):
            fields = tuple(self.arg(f, out, var_kind) for f in arg.fields)
            if all(a is b for a, b in zip(fields, arg.fields)):
                return arg
            return X.Tuple(fields)
        if not isinstance(arg, X.Call):
            return arg
        inner = self.call_args(arg, out, var_kind)  # innermost calls are bound first
        var = var_kind(self.fresh_name(), inner.struct_info)
        out.append(X.VarBinding(var, inner))
        return var


def _var_names(func: X.Function) -> set[str]:
    names: set[str] = set()

    def record(node):
        if isinstance(node, X.Var):
            names.add(node.name_hint)

    post_order_visit(func, record)
    return names


def normalize_function(func: X.Function) -> X.Function:
    """`func` with the nested calls of its top-level bindings bound (the same function when
    there are none)."""
    if not isinstance(func.body, X.SeqExpr):
        return func
    flattener = _Flattener(func)
    blocks = tuple(flattener.block(b) for b in func.body.blocks)
    if all(a is b for a, b in zip(blocks, func.body.blocks)):
        return func
    return func.replace(body=X.SeqExpr(blocks, func.body.body))


def Normalize() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """The Normalize pass (see the module docstring)."""

    @module_pass(name="Normalize")
    def normalize(mod):
        """Bind every nested call of every graph function."""
        return map_functions(mod, normalize_function)

    return normalize

"""CanonicalizeBindings: fold variable-to-variable bindings (`y = x`) by using `x` wherever `y`
was used. Such trivial bindings come from other rewrites (constant folding, inlining) and hide
the real producer of a value from pattern-based passes like FuseOps.

A binding that makes a dataflow-local value visible after its block (`gv = lv` with `lv` a
DataflowVar and `gv` a Var) is kept: replacing `gv` by `lv` outside the block would be invalid.
"""

from __future__ import annotations

from schedlab.ir.function import IRModule
from schedlab.ir.structural import structural_equal
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ..functor import ExprMutator
from ._util import map_functions, rebuild_block


class _Canonicalizer(ExprMutator):
    def visit_BindingBlock(self, block: X.BindingBlock) -> X.BindingBlock:  # noqa: N802
        kept = []
        for binding in block.bindings:
            new = self.visit(binding)
            if not self._fold(new):
                kept.append(new)
        return rebuild_block(block, kept)

    def _fold(self, binding: X.Binding) -> bool:
        """Record `var -> value` for a foldable `var = value` binding."""
        if not isinstance(binding, X.VarBinding) or not isinstance(binding.value, X.Var):
            return False
        var, value = binding.var, binding.value
        if isinstance(value, X.DataflowVar) and not isinstance(var, X.DataflowVar):
            return False
        if not structural_equal(var.struct_info_, value.struct_info_, map_free_vars=False):
            return False  # the binding carries more precise information; keep it
        self.var_remap[var] = self.var_remap.get(value, value)
        return True


def CanonicalizeBindings() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """The CanonicalizeBindings pass (see the module docstring)."""

    @module_pass(name="CanonicalizeBindings")
    def canonicalize_bindings(mod: IRModule) -> IRModule:
        """Fold `y = x` bindings in every graph function."""
        return map_functions(mod, lambda func: _Canonicalizer().visit(func))

    return canonicalize_bindings

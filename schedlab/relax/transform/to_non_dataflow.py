"""ToNonDataflow: turn every DataflowBlock into a plain BindingBlock and every DataflowVar into
a Var. Later stages (the VM, code generation) then see one kind of block and variable; the
dataflow guarantees are no longer needed once the graph optimizations are done."""

from __future__ import annotations

from schedlab.ir.function import IRModule
from schedlab.ir.functor import Mutator
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ._util import map_functions


class _NonDataflow(Mutator):
    def __init__(self):
        self.remap: dict[X.DataflowVar, X.Var] = {}

    def visit_DataflowVar(self, var: X.DataflowVar) -> X.Var:  # noqa: N802 - dispatch name
        new = self.remap.get(var)
        if new is None:  # its definition comes first: a binding's var is visited there
            new = X.Var(var.name_hint, var.struct_info_)
            self.remap[var] = new
        return new

    def visit_DataflowBlock(self, block: X.DataflowBlock) -> X.BindingBlock:  # noqa: N802
        return X.BindingBlock(tuple(self.visit(b) for b in block.bindings))


def ToNonDataflow() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """The ToNonDataflow pass (see the module docstring)."""

    @module_pass(name="ToNonDataflow")
    def to_non_dataflow(mod: IRModule) -> IRModule:
        """DataflowBlocks -> BindingBlocks and DataflowVars -> Vars in every graph function."""
        return map_functions(mod, lambda func: _NonDataflow().visit(func))

    return to_non_dataflow

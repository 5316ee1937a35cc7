"""Helpers shared by the graph passes: rewriting every graph function of a module, collecting
the variables and functions an expression uses, and the op-pattern kinds."""

from __future__ import annotations

from collections.abc import Callable

from schedlab.ir.function import IRModule
from schedlab.ir.functor import post_order_visit

from .. import expr as X

# TVM's OpPatternKind values, by the registry's pattern names.
OP_PATTERN_KINDS = {
    "elemwise": 0,
    "broadcast": 1,
    "injective": 2,
    "comm_reduce": 3,
    "out_ewise_fusable": 4,
    "opaque": 8,
}


def map_functions(mod: IRModule, rewrite: Callable[[X.Function], X.Function]) -> IRModule:
    """`mod` with `rewrite` applied to each graph function (the same module if none changed)."""
    if not isinstance(mod, IRModule):
        raise TypeError(f"graph pass: expected an IRModule, got {type(mod).__name__}")
    updated = {}
    for name, func in mod.items():
        if isinstance(func, X.Function):
            new = rewrite(func)
            if new is not func:
                updated[name] = new
    return mod.update(updated) if updated else mod


def used_vars(node) -> set:
    """The graph variables read anywhere inside `node` (an expression or binding value)."""
    found: set = set()

    def record(item):
        if isinstance(item, X.Var):
            found.add(item)

    post_order_visit(node, record)
    return found


def called_functions(node) -> set[str]:
    """Names of the module functions referenced (by GlobalVar) inside `node`."""
    names: set[str] = set()

    def record(item):
        if isinstance(item, X.GlobalVar):
            names.add(item.name_hint)

    post_order_visit(node, record)
    return names


def rebuild_block(block: X.BindingBlock, bindings) -> X.BindingBlock:
    """A block of the same kind with `bindings` (the same block when nothing changed)."""
    bindings = tuple(bindings)
    if len(bindings) == len(block.bindings) and all(
        a is b for a, b in zip(bindings, block.bindings)
    ):
        return block
    return type(block)(bindings)

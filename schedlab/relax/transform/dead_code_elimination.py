"""DeadCodeElimination: drop bindings whose variable is never used and functions no entry
point reaches. Other passes leave both behind (a folded constant's PrimFunc, a fused call's
original producers); removing them keeps the module small and the VM from running dead work.

Bindings are removed when they are pure: any binding inside a DataflowBlock, and in other
blocks only calls of registered operators / `call_tir` and value-only expressions (a call of a
graph function may have effects and is kept). MatchCast bindings are kept: they check shapes
at run time and define symbolic dimensions.
"""

from __future__ import annotations

from collections.abc import Sequence

from schedlab.ir.function import IRModule
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ._util import called_functions, map_functions, rebuild_block, used_vars


def _removable(binding: X.Binding, in_dataflow: bool) -> bool:
    if not isinstance(binding, X.VarBinding):
        return False
    if in_dataflow:
        return True
    value = binding.value
    return not (isinstance(value, X.Call) and isinstance(value.op, X.GlobalVar))


def _prune_function(func: X.Function) -> X.Function:
    """`func` without unused pure bindings (one backward sweep: uses flow to producers)."""
    body = func.body
    if not isinstance(body, X.SeqExpr):
        return func
    live = used_vars(body.body)
    blocks = []
    for block in reversed(body.blocks):
        kept = []
        for binding in reversed(block.bindings):
            dataflow = isinstance(block, X.DataflowBlock)
            if binding.var not in live and _removable(binding, dataflow):
                continue
            kept.append(binding)
            live |= used_vars(binding.value)
        if kept:
            blocks.append(rebuild_block(block, reversed(kept)))
    blocks.reverse()
    if len(blocks) == len(body.blocks) and all(a is b for a, b in zip(blocks, body.blocks)):
        return func
    return func.replace(body=X.SeqExpr(tuple(blocks), body.body))


def _entry_names(mod: IRModule, entry_functions: Sequence[str] | None) -> list[str]:
    if entry_functions is not None:
        missing = [name for name in entry_functions if name not in mod]
        if missing:
            raise ValueError(
                f"DeadCodeElimination: entry_functions {missing} are not in the module "
                f"(functions: {', '.join(mod)})"
            )
        return list(entry_functions)
    graph = [n for n, f in mod.items() if isinstance(f, X.Function)]
    public = [n for n in graph if n == "main" or "global_symbol" in mod[n].attrs]
    return public or graph


def _reachable(mod: IRModule, entries: list[str]) -> set[str]:
    seen, todo = set(entries), list(entries)
    while todo:
        func = mod[todo.pop()]
        if not isinstance(func, X.Function):
            continue  # PrimFuncs call no module functions
        for name in called_functions(func) - seen:
            if name in mod:
                seen.add(name)
                todo.append(name)
    return seen


def DeadCodeElimination(entry_functions: Sequence[str] | None = None) -> Pass:  # noqa: N802
    """The DeadCodeElimination pass. `entry_functions`: the names kept whatever uses them
    (default: "main" and graph functions with a "global_symbol"; all graph functions when
    there are none of those)."""

    @module_pass(name="DeadCodeElimination")
    def dead_code_elimination(mod: IRModule) -> IRModule:
        """Remove unused bindings, then the functions no entry reaches."""
        mod = map_functions(mod, _prune_function)
        keep = _reachable(mod, _entry_names(mod, entry_functions))
        if len(keep) == len(mod):
            return mod
        return IRModule({n: f for n, f in mod.items() if n in keep}, mod.attrs)

    return dead_code_elimination

"""UnrollLoop (TVM: same name): expand unrolled loops into straight-line code.

- A loop of kind UNROLLED with a constant extent is replaced by `extent` copies of its body,
  each with the loop var substituted by its value and then simplified — as long as the result
  holds at most `max_statements` leaf statements (default 512). Longer loops stay UNROLLED
  (the C renderer emits `#pragma GCC unroll`).
- TVM's auto-unroll: inside a loop annotated `"pragma_auto_unroll_max_step": N`, every serial
  loop with a constant extent that executes at most N leaf statements in all (inner loops
  included, all of constant extent) is unrolled too. With `"pragma_unroll_explicit": 0` such
  loops are only marked UNROLLED (left to the compiler) instead of being expanded.

Each copy gets fresh loop/let variables and allocations, so the result stays in SSA form.
The limit can also be set with `PassContext(config={"tir.UnrollLoop": {"max_statements": n}})`.
"""

from __future__ import annotations

from schedlab.ir import op
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator, substitute
from schedlab.ir.stmt import (
    Allocate,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)  # fmt: skip
from schedlab.ir.transform import Pass, PassContext, prim_func_pass

from ._util import as_int, leaf_count, renew_defs, simplify_stmt, with_doc

DEFAULT_MAX_STATEMENTS = 512
AUTO_UNROLL_KEY = "pragma_auto_unroll_max_step"
EXPLICIT_KEY = "pragma_unroll_explicit"


def unroll_loop(func: PrimFunc, max_statements: int | None = None) -> PrimFunc:
    """`func` with unrolled (and auto-unrolled) loops expanded."""
    if max_statements is None:
        config = PassContext.current().config.get("tir.UnrollLoop", {})
        max_statements = int(config.get("max_statements", DEFAULT_MAX_STATEMENTS))
    body = _Unroller(max_statements).visit(func.body)
    return func if body is func.body else func.with_body(body)


def UnrollLoop(max_statements: int | None = None) -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `unroll_loop`."""
    return with_doc(
        prim_func_pass(lambda func: unroll_loop(func, max_statements), name="UnrollLoop"), __doc__
    )


class _Unroller(Mutator):
    def __init__(self, max_statements: int):
        self.max_statements = max_statements
        self.auto: list[tuple[int, bool]] = []  # (max steps, explicit) of enclosing pragmas

    def visit_For(self, node: For) -> Stmt:
        pragma = node.annotations.get(AUTO_UNROLL_KEY)
        if pragma is not None:
            explicit = bool(int(node.annotations.get(EXPLICIT_KEY, 1)))
            self.auto.append((int(pragma), explicit))
        try:
            node = self.generic_visit(node)
        finally:
            if pragma is not None:
                self.auto.pop()
        extent = as_int(node.extent)
        if extent is None:
            return node
        if node.kind == ForKind.UNROLLED:
            return self.expand(node, extent) or node
        if node.kind == ForKind.SERIAL and self.auto and self._auto_applies(node):
            if not self.auto[-1][1]:
                return node.replace(kind=ForKind.UNROLLED)
            return self.expand(node, extent) or node
        return node

    def _auto_applies(self, node: For) -> bool:
        steps = executed_steps(node)
        return steps is not None and steps <= self.auto[-1][0]

    def expand(self, node: For, extent: int) -> Stmt | None:
        """The copies of the body, or None when they would exceed the statement limit."""
        if extent * leaf_count(node.body) > self.max_statements:
            return None
        copies = []
        for i in range(extent):
            value = op.add(node.min, op.const(i, node.loop_var.dtype))
            body = node.body if i == 0 else renew_defs(node.body)
            copies.append(simplify_stmt(substitute(body, {node.loop_var: value})))
        return SeqStmt.flatten(*copies)


def executed_steps(stmt: Stmt) -> int | None:
    """How many leaf statements `stmt` executes (None if some loop extent is not constant)."""
    if isinstance(stmt, (BufferStore, Evaluate)):
        return 1
    if isinstance(stmt, SeqStmt):
        total = 0
        for item in stmt.seq:
            steps = executed_steps(item)
            if steps is None:
                return None
            total += steps
        return total
    if isinstance(stmt, For):
        extent = as_int(stmt.extent)
        inner = executed_steps(stmt.body)
        return None if extent is None or inner is None else extent * inner
    if isinstance(stmt, IfThenElse):
        parts = [executed_steps(stmt.then_case)]
        if stmt.else_case is not None:
            parts.append(executed_steps(stmt.else_case))
        return None if None in parts else sum(parts)
    if isinstance(stmt, (LetStmt, Allocate)):
        return executed_steps(stmt.body)
    return None

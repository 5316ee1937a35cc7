"""RemoveNoOp (TVM: same name): drop statements that do nothing.

Earlier passes leave debris behind: `Evaluate(0)` placeholders, loops whose body vanished or
whose extent is 0, branches on constant conditions, allocations of nothing. Removing them
keeps the generated code readable and stops empty loops from reaching the compiler.
A branch on a non-constant condition with no-op arms is removed only if the condition is pure.
"""

from __future__ import annotations

from schedlab.ir.expr import IntImm
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator
from schedlab.ir.op import const, logical_not
from schedlab.ir.stmt import (
    Allocate,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
    is_no_op,
)  # fmt: skip
from schedlab.ir.transform import Pass, prim_func_pass

from ._util import is_pure_expr, with_doc


def remove_no_op(func: PrimFunc) -> PrimFunc:
    """`func` without no-op statements."""
    body = _RemoveNoOp().visit(func.body)
    return func if body is func.body else func.with_body(body)


def RemoveNoOp() -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `remove_no_op`."""
    return with_doc(prim_func_pass(remove_no_op, name="RemoveNoOp"), __doc__)


_NO_OP = Evaluate(const(0))


class _RemoveNoOp(Mutator):
    def visit_SeqStmt(self, node: SeqStmt) -> Stmt:
        items = [self.visit(stmt) for stmt in node.seq]
        unchanged = all(a is b for a, b in zip(items, node.seq))
        # nested sequences (a lowered block inside a sequence) are flattened too: the printed
        # form cannot show nesting, so only flat sequences round-trip through the text form
        if unchanged and not any(is_no_op(s) or isinstance(s, SeqStmt) for s in items):
            return node
        return SeqStmt.flatten(*items)

    def visit_For(self, node: For) -> Stmt:
        extent = node.extent
        if isinstance(extent, IntImm) and extent.value <= 0:
            return _NO_OP
        node = self.generic_visit(node)
        return _NO_OP if is_no_op(node.body) else node

    def visit_IfThenElse(self, node: IfThenElse) -> Stmt:
        condition = node.condition
        if isinstance(condition, IntImm):
            taken = node.then_case if condition.value else node.else_case
            return _NO_OP if taken is None else self.visit(taken)
        node = self.generic_visit(node)
        else_case = node.else_case
        if else_case is not None and is_no_op(else_case):
            node = node.replace(else_case=None)
            else_case = None
        if is_no_op(node.then_case):
            if else_case is None:
                return _NO_OP if is_pure_expr(condition) else node
            return IfThenElse(logical_not(condition), else_case)
        return node

    def visit_LetStmt(self, node: LetStmt) -> Stmt:
        node = self.generic_visit(node)
        return _NO_OP if is_no_op(node.body) and is_pure_expr(node.value) else node

    def visit_Allocate(self, node: Allocate) -> Stmt:
        node = self.generic_visit(node)
        return _NO_OP if is_no_op(node.body) else node

    def visit_Evaluate(self, node: Evaluate) -> Stmt:
        # an expression evaluated only for its value does nothing
        return _NO_OP if is_no_op(node) or is_pure_expr(node.value) else node

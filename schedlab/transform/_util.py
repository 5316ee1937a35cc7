"""Small helpers shared by the lowering passes."""

from __future__ import annotations

from schedlab.arith import Analyzer
from schedlab.arith import simplify_stmt as arith_simplify_stmt
from schedlab.errors import LoweringError
from schedlab.ir.buffer import Buffer
from schedlab.ir.expr import IntImm, Let, PrimExpr, Var
from schedlab.ir.functor import Mutator, post_order_visit
from schedlab.ir.stmt import (
    Allocate,
    Block,
    BufferStore,
    Evaluate,
    For,
    LetStmt,
    Stmt,
)  # fmt: skip


def as_int(expr: PrimExpr) -> int | None:
    """The value of an integer constant, None for anything else."""
    return expr.value if isinstance(expr, IntImm) else None


def analyzer():
    """A fresh `schedlab.arith.Analyzer`."""
    return Analyzer()


def simplify_stmt(stmt: Stmt) -> Stmt:
    """`stmt` with its expressions simplified by schedlab.arith (loop ranges bound inside)."""
    return arith_simplify_stmt(stmt, analyzer())


def leaf_count(stmt: Stmt) -> int:
    """How many leaf statements (stores, evaluates) `stmt` holds as written (not as executed)."""
    count = 0

    def visit(node):
        nonlocal count
        if isinstance(node, (BufferStore, Evaluate)):
            count += 1

    post_order_visit(stmt, visit)
    return count


class _RenewDefs(Mutator):
    """Copies a statement giving every variable and buffer it defines a fresh object, so that a
    duplicated body (unrolling) keeps loop and let variables SSA, as the verifier requires."""

    def __init__(self):
        self.vars: dict[int, Var] = {}
        self.buffers: dict[int, Buffer] = {}

    def fresh_var(self, var: Var) -> Var:
        new = type(var)(var.name, var.dtype)
        self.vars[id(var)] = new
        return new

    def visit_Var(self, var: Var) -> PrimExpr:
        return self.vars.get(id(var), var)

    def visit_For(self, node: For) -> Stmt:
        loop_var = self.fresh_var(node.loop_var)
        return For(
            loop_var,
            self.visit(node.min),
            self.visit(node.extent),
            node.kind,
            self.visit(node.body),
            node.thread_tag,
            dict(node.annotations),
        )

    def visit_LetStmt(self, node: LetStmt) -> Stmt:
        value = self.visit(node.value)
        return LetStmt(self.fresh_var(node.var), value, self.visit(node.body))

    def visit_Let(self, node: Let) -> PrimExpr:
        value = self.visit(node.value)
        return Let(self.fresh_var(node.var), value, self.visit(node.body))

    def visit_Allocate(self, node: Allocate) -> Stmt:
        buffer = self.buffer(node.buffer)
        new = buffer.replace(data=Var(buffer.data.name, buffer.data.dtype))
        self.buffers[id(node.buffer)] = new
        return Allocate(new, self.visit(node.body), dict(node.annotations))

    def buffer(self, buffer: Buffer) -> Buffer:
        return self.buffers.get(id(buffer), buffer)

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        new = self.generic_visit(node)
        buffer = self.buffer(node.buffer)
        return new if buffer is node.buffer else new.replace(buffer=buffer)

    def visit_BufferLoad(self, node):
        new = self.generic_visit(node)
        buffer = self.buffer(node.buffer)
        return new if buffer is node.buffer else new.replace(buffer=buffer)

    def visit_Block(self, node: Block) -> Stmt:  # blocks have iter vars and buffers to renew
        raise LoweringError(f"cannot copy block {node.name_hint!r}: unrolling needs lowered IR")

    visit_BlockRealize = visit_Block


def renew_defs(stmt: Stmt) -> Stmt:
    """A copy of a lowered statement with fresh loop/let variables and allocated buffers."""
    return _RenewDefs().visit(stmt)


def is_pure_expr(expr: PrimExpr) -> bool:
    """Whether evaluating `expr` has no side effects (every Call in the registry is pure)."""
    from schedlab.ir.expr import Call
    from schedlab.ir.intrin import INTRINSICS

    pure = True

    def visit(node):
        nonlocal pure
        if isinstance(node, Call):
            spec = INTRINSICS.get(node.op)
            if spec is None or not spec.pure:
                pure = False

    post_order_visit(expr, visit)
    return pure


__all__ = [
    "as_int", "analyzer", "simplify_stmt", "leaf_count", "renew_defs",
    "is_pure_expr", "with_doc",
]  # fmt: skip


def with_doc(pass_, doc: str | None):
    """`pass_` documented by its module's docstring (what the pass does and why), which the
    explorer shows next to the pass name."""
    pass_.__doc__ = doc
    return pass_

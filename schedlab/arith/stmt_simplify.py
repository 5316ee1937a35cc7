"""Simplify every expression of a statement (TVM's StmtSimplifier), binding loop vars and block
iter vars to their ranges while descending and assuming branch conditions inside branches."""

from __future__ import annotations

from schedlab.ir import expr as E
from schedlab.ir import stmt as S
from schedlab.ir.buffer import BufferRegion, MatchBufferRegion
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator

from .analyzer import Analyzer


class StmtSimplifier(Mutator):
    """A mutator that simplifies expressions under the facts of its Analyzer."""

    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer

    def visit_PrimExpr(self, expr: E.PrimExpr) -> E.PrimExpr:
        return self.analyzer.simplify(expr)

    def visit_Range(self, rng: E.Range) -> E.Range:
        low, extent = self.analyzer.simplify(rng.min), self.analyzer.simplify(rng.extent)
        return rng if low is rng.min and extent is rng.extent else E.Range(low, extent)

    def visit_For(self, loop: S.For) -> S.Stmt:
        low, extent = self.analyzer.simplify(loop.min), self.analyzer.simplify(loop.extent)
        with self.analyzer.scope():
            self.analyzer.bind(loop.loop_var, E.Range(low, extent), allow_override=True)
            body = self.visit(loop.body)
        if low is loop.min and extent is loop.extent and body is loop.body:
            return loop
        return loop.replace(min=low, extent=extent, body=body)

    def visit_IfThenElse(self, node: S.IfThenElse) -> S.Stmt:
        cond = self.analyzer.simplify(node.condition)
        if isinstance(cond, E.IntImm):
            if cond.value:
                return self.visit(node.then_case)
            if node.else_case is None:
                return S.Evaluate(E.IntImm(E.DataType("int32"), 0))
            return self.visit(node.else_case)
        with self.analyzer.constraint_scope(cond):
            then_case = self.visit(node.then_case)
        else_case = node.else_case
        if else_case is not None:
            negated = self.analyzer._simplifier.negate(cond)
            with self.analyzer.constraint_scope(negated):
                else_case = self.visit(else_case)
        if cond is node.condition and then_case is node.then_case and else_case is node.else_case:
            return node
        return S.IfThenElse(cond, then_case, else_case)

    def visit_LetStmt(self, node: S.LetStmt) -> S.Stmt:
        value = self.analyzer.simplify(node.value)
        with self.analyzer.let_scope(node.var, value):
            body = self.visit(node.body)
        if value is node.value and body is node.body:
            return node
        return node.replace(value=value, body=body)

    def visit_Let(self, node: E.Let) -> E.PrimExpr:
        return self.analyzer.simplify(node)

    def visit_Block(self, block: S.Block) -> S.Stmt:
        with self.analyzer.scope():
            for iv in block.iter_vars:
                self.analyzer.bind(iv.var, iv.dom, allow_override=True)
            return self.generic_visit(block)

    def visit_BufferRegion(self, region: BufferRegion) -> BufferRegion:
        return self.generic_visit(region)

    def visit_MatchBufferRegion(self, match: MatchBufferRegion) -> MatchBufferRegion:
        return self.generic_visit(match)


def simplify_stmt(stmt: S.Stmt, analyzer: Analyzer | None = None) -> S.Stmt:
    """`stmt` with every expression simplified; loop vars and block iter vars are bound to
    their ranges inside their bodies, and branch conditions assumed inside their branches."""
    return StmtSimplifier(analyzer if analyzer is not None else Analyzer()).visit(stmt)


def simplify_prim_func(func: PrimFunc, analyzer: Analyzer | None = None) -> PrimFunc:
    """`func` with its body simplified by `simplify_stmt` (the transform `Simplify` pass)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"simplify_prim_func: expected a PrimFunc, got {type(func).__name__}")
    body = simplify_stmt(func.body, analyzer)
    return func if body is func.body else func.with_body(body)

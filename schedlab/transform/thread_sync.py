"""InjectThreadSync (TVM: ThreadSync("shared")): barriers between shared-memory phases.

Runs on kernels from LowerThreadBinding. Threads of a block see each other's shared-memory
writes only after a barrier (`__syncthreads()`, `barrier(CLK_LOCAL_MEM_FENCE)`). Walking each
statement list in order, with the shared buffers read and written since the last barrier:
a statement that reads a buffer written since then (read after write), or writes one read
since then (write after read: the next tile must not overwrite what a slower thread still
reads), gets a barrier before it; two writes need none (TVM's rule: each thread of a tile copy
writes its own elements). A loop's body is walked twice, the second time with
what its end leaves pending, so a conflict across iterations (the next iteration's copy over
this one's reads) also gets its barrier.

Barriers go only where every thread of the block arrives: a branch or loop whose condition or
extent depends on the thread index is treated as one statement (its barrier goes before it);
a conflict inside such a branch is an error, since a barrier there would hang the block.
Global memory gets no barriers (threads of other blocks could not be waited for anyway), as
in TVM.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schedlab.errors import LoweringError
from schedlab.ir import expr as E
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Visitor
from schedlab.ir.stmt import Allocate, For, IfThenElse, LetStmt, SeqStmt, Stmt
from schedlab.ir.transform import Pass, prim_func_pass

from ._util import with_doc
from .thread_binding import BLOCK_SCOPES, THREAD_INDEX, barrier, scope_of


@dataclass
class _Pending:
    reads: set[int] = field(default_factory=set)
    writes: set[int] = field(default_factory=set)

    def merged(self, other: _Pending) -> _Pending:
        return _Pending(self.reads | other.reads, self.writes | other.writes)

    def conflicts(self, reads: set[int], writes: set[int]) -> bool:
        # write after write is no conflict (TVM's rule too): a tile copy's threads each
        # write their own elements, iteration after iteration
        return bool(reads & self.writes or writes & self.reads)


def inject_thread_sync(func: PrimFunc) -> PrimFunc:
    """`func` (a kernel) with the barriers its shared-memory accesses need."""
    if "gpu.launch" not in func.attrs:
        return func
    syncer = _Sync()
    body, _ = syncer.block(func.body, _Pending())
    return func if body is func.body else func.with_body(body)


def InjectThreadSync() -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `inject_thread_sync`."""
    return with_doc(prim_func_pass(inject_thread_sync, name="InjectThreadSync"), __doc__)


class _Sync:
    def __init__(self):
        self.varying: set[int] = set()  # let variables that depend on the thread index

    def block(self, stmt: Stmt, pending: _Pending) -> tuple[Stmt, _Pending]:
        """`stmt` as a statement list where barriers may go; returns it and what is pending."""
        items = stmt.seq if isinstance(stmt, SeqStmt) else (stmt,)
        out: list[Stmt] = []
        for item in items:
            item, pending = self.item(item, pending, out)
            out.append(item)
        if len(out) == len(items) and all(a is b for a, b in zip(out, items)):
            return stmt, pending
        return SeqStmt.flatten(*out), pending

    def item(self, node: Stmt, pending: _Pending, out: list[Stmt]) -> tuple[Stmt, _Pending]:
        reads, writes = _shared_accesses(node)
        if not reads and not writes:
            if isinstance(node, LetStmt) and self._depends(node.value):
                self.varying.add(id(node.var))
            return node, pending
        if isinstance(node, LetStmt):
            if self._depends(node.value):
                self.varying.add(id(node.var))
            body, pending = self.block(node.body, pending)
            return node.replace(body=body) if body is not node.body else node, pending
        if isinstance(node, Allocate):
            body, pending = self.block(node.body, pending)
            return node.replace(body=body) if body is not node.body else node, pending
        uniform_loop = isinstance(node, For) and not self._depends(node.min, node.extent)
        uniform_if = isinstance(node, IfThenElse) and not self._depends(node.condition)
        if (uniform_loop or uniform_if) and pending.conflicts(reads, writes):
            out.append(barrier("shared"))  # one barrier before it, not one per iteration
            pending = _Pending()
        if uniform_loop:
            _, after_first = self.block(node.body, pending)
            body, after = self.block(node.body, pending.merged(after_first))
            result = node.replace(body=body) if body is not node.body else node
            return result, pending.merged(after)  # the loop may run no iteration
        if uniform_if:
            then, pend_then = self.block(node.then_case, pending)
            pend_else = pending
            else_case = node.else_case
            if else_case is not None:
                else_case, pend_else = self.block(else_case, pending)
            result = node.replace(then_case=then, else_case=else_case)
            return result, pend_then.merged(pend_else)
        # one statement: threads may diverge inside, so no barrier can go in there
        self._check_divergent(node)
        if pending.conflicts(reads, writes):
            out.append(barrier("shared"))
            pending = _Pending()
        return node, pending.merged(_Pending(reads, writes))

    def _check_divergent(self, node: Stmt) -> None:
        inner = _Sync()
        inner.varying = set(self.varying)
        if isinstance(node, IfThenElse):
            bodies = [node.then_case, node.else_case]
        else:
            bodies = [getattr(node, "body", None)]
        probes = [inner.block(body, _Pending())[0] for body in bodies if body is not None]
        if any(_has_barrier(probe) for probe in probes):
            raise LoweringError(
                "shared memory is written and then read by other threads inside a branch or "
                "loop that depends on the thread index: the barrier it needs would not be "
                "reached by every thread of the block (make the tile loops cover the same "
                f"thread extents, or move the copy out of the branch):\n{node!r}"
            )

    def _depends(self, *exprs: E.PrimExpr) -> bool:
        found = False

        class _Find(Visitor):
            def visit_Call(inner, node):  # noqa: N805
                nonlocal found
                found = found or node.op == THREAD_INDEX
                inner.generic_visit(node)

            def visit_Var(inner, node):  # noqa: N805
                nonlocal found
                found = found or id(node) in self.varying

        for expr in exprs:
            _Find().visit(expr)
        return found


def _shared_accesses(node: Stmt) -> tuple[set[int], set[int]]:
    reads: set[int] = set()
    writes: set[int] = set()

    class _Access(Visitor):
        def visit_BufferLoad(self, load):
            if scope_of(load.buffer) in BLOCK_SCOPES:
                reads.add(id(load.buffer.data))
            self.generic_visit(load)

        def visit_BufferStore(self, store):
            if scope_of(store.buffer) in BLOCK_SCOPES:
                writes.add(id(store.buffer.data))
            self.generic_visit(store)

    _Access().visit(node)
    return reads, writes


def _has_barrier(node: Stmt) -> bool:
    from .thread_binding import BARRIER

    found = False

    class _Find(Visitor):
        def visit_Call(self, call):
            nonlocal found
            found = found or call.op == BARRIER
            self.generic_visit(call)

    _Find().visit(node)
    return found


__all__ = ["inject_thread_sync", "InjectThreadSync"]

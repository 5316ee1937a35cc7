"""`verify_lowered`: the contract between lowering and the code generators.

A lowered PrimFunc has no Block/BlockRealize left, every buffer is flat (one axis per physical
dimension, compact, no element offset), and every `Allocate` size is computable where the
allocation happens: a constant, or an expression of the function's scalar parameters, the sizes
in its parameter buffers' shapes and enclosing loop/let variables (code generators put such
allocations on the heap). Code generators call this first, so a pipeline bug surfaces as a
LoweringError naming the construct rather than as bad C.
"""

from __future__ import annotations

from schedlab.errors import LoweringError
from schedlab.ir.buffer import Buffer
from schedlab.ir.expr import BufferLoad, IntImm
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import Visitor, collect_vars
from schedlab.ir.stmt import Allocate, Block, BlockRealize, BufferStore, For, LetStmt

from .flatten_buffer import is_flat


def verify_lowered(func: PrimFunc | IRModule) -> None:
    """Raise LoweringError when `func` (or any PrimFunc of a module) is not in lowered form."""
    if isinstance(func, IRModule):
        for item in func.functions().values():
            if isinstance(item, PrimFunc):
                verify_lowered(item)
        return
    if not isinstance(func, PrimFunc):
        raise TypeError(f"verify_lowered: expected a PrimFunc or IRModule, got {type(func)}")
    checker = _LoweredChecker(func)
    checker.visit(func.body)
    for buffer in func.buffer_map.values():
        checker.check_flat(buffer, "parameter buffer")


class _LoweredChecker(Visitor):
    def __init__(self, func: PrimFunc):
        self.name = func.name
        self.params = {id(b.data) for b in func.buffer_map.values()}
        # variables an allocation size may use: scalar params, sizes bound from argument
        # shapes, and (added while visiting) the loop/let variables in scope
        self.known: set[int] = {id(p) for p in func.params}
        for buffer in func.buffer_map.values():
            for expr in (*buffer.shape, *buffer.strides, buffer.elem_offset):
                self.known |= {id(v) for v in collect_vars(expr)}

    def fail(self, what: str) -> None:
        raise LoweringError(f"function {self.name} is not lowered: {what}")

    def check_flat(self, buffer: Buffer, use: str) -> None:
        if not is_flat(buffer):
            self.fail(
                f"{use} {buffer!r} is not flat (expected shape (n,), no strides, elem_offset 0; "
                f"got shape {tuple(buffer.shape)}, strides {tuple(buffer.strides)}, "
                f"elem_offset {buffer.elem_offset})"
            )

    def visit_Block(self, node: Block) -> None:
        self.fail(f"block {node.name_hint!r} remains (run LowerOpaqueBlock)")

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        self.visit_Block(node.block)

    def visit_Allocate(self, node: Allocate) -> None:
        buffer = node.buffer
        self.check_flat(buffer, "allocated buffer")
        symbolic = [s for s in buffer.shape if not isinstance(s, IntImm)]
        unknown = sorted(
            {v.name for s in symbolic for v in collect_vars(s) if id(v) not in self.known}
        )
        if unknown and id(buffer.data) not in self.params:
            self.fail(
                f"Allocate of {buffer!r} has a non-constant size {tuple(buffer.shape)} that uses "
                f"{', '.join(unknown)}: expected a constant or an expression of the function's "
                "parameters, the sizes in its parameter buffers' shapes and enclosing loop/let "
                "variables"
            )
        self.generic_visit(node)

    def _scoped(self, var, node) -> None:
        fresh = id(var) not in self.known
        self.known.add(id(var))
        try:
            self.generic_visit(node)
        finally:
            if fresh:
                self.known.discard(id(var))

    def visit_For(self, node: For) -> None:
        self._scoped(node.loop_var, node)

    def visit_LetStmt(self, node: LetStmt) -> None:
        self._scoped(node.var, node)

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.check_flat(node.buffer, "loaded buffer")
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.check_flat(node.buffer, "stored buffer")
        self.generic_visit(node)

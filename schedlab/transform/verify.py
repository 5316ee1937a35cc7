"""`verify_lowered`: the contract between lowering and the code generators.

A lowered PrimFunc has no Block/BlockRealize left, every buffer is flat (one axis per physical
dimension, compact, no element offset), and every `Allocate` has a constant size (parameters
may be symbolic: their memory comes from the caller). Code generators call this first, so a
pipeline bug surfaces as a LoweringError naming the construct rather than as bad C.
"""

from __future__ import annotations

from schedlab.errors import LoweringError
from schedlab.ir.buffer import Buffer
from schedlab.ir.expr import BufferLoad, IntImm
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import Visitor
from schedlab.ir.stmt import Allocate, Block, BlockRealize, BufferStore

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
        if symbolic and id(buffer.data) not in self.params:
            self.fail(
                f"Allocate of {buffer!r} has a non-constant size {tuple(buffer.shape)}; "
                "give the buffer a constant shape (or let compaction bound it)"
            )
        self.generic_visit(node)

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.check_flat(node.buffer, "loaded buffer")
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.check_flat(node.buffer, "stored buffer")
        self.generic_visit(node)

"""PlanAndUpdateBufferAllocationLocation (TVM: same name): allocate each intermediate buffer at
the lowest common ancestor (LCA) of its uses.

`te.create_prim_func` allocates every intermediate in the root block, i.e. for the whole
function. Moving the allocation down to the deepest loop or block that still encloses every
access makes its lifetime one iteration of that loop, and lets CompactBufferAllocation shrink
it to the region one iteration touches (a `cache_write(..., "local")` tile becomes a few
registers). A buffer whose LCA is a block moves to that block's `alloc_buffers`; one whose LCA
is a loop gets an `Allocate` around the loop body.

A reduction carries its partial results across the iterations of its reduction loops, so the
buffers a reduction block writes count as accessed *above* the outermost loop bound to one of
its reduce iter vars (TVM's LCA detector has the same rule); otherwise a buffer written and
read only by the reduction would be re-allocated, and lose its sum, on each iteration.
Buffers nobody accesses stay where they are. Parameters are never moved.
"""

from __future__ import annotations

from schedlab.ir.buffer import Buffer
from schedlab.ir.expr import BufferLoad
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator, Visitor, post_order_visit, uses_var
from schedlab.ir.stmt import Allocate, Block, BlockRealize, BufferStore, For, IterType, Stmt
from schedlab.ir.transform import Pass, prim_func_pass

from ._util import with_doc


def plan_and_update_buffer_allocation_location(func: PrimFunc) -> PrimFunc:
    """`func` with every block-allocated buffer moved to the LCA of its accesses."""
    detector = _LCADetector()
    detector.visit(func.body)
    targets = detector.placements()
    if not targets:
        return func
    body = _Relocate(targets).visit(func.body)
    return func.with_body(body)


def PlanAndUpdateBufferAllocationLocation() -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `plan_and_update_buffer_allocation_location`."""
    return with_doc(
        prim_func_pass(
            plan_and_update_buffer_allocation_location, name="PlanAndUpdateBufferAllocationLocation"
        ),
        __doc__,
    )


class _LCADetector(Visitor):
    """Walks the tree keeping the chain of enclosing loops and blocks; for each buffer
    allocated by a block, keeps the longest chain prefix shared by all of its accesses."""

    def __init__(self):
        self.stack: list[Stmt] = []
        self.owner: dict[int, Block] = {}  # buffer id -> allocating block
        self.buffers: dict[int, Buffer] = {}
        self.lca: dict[int, list[Stmt]] = {}
        # (ids of buffers a reduction block writes, depth above its outermost reduction loop)
        self.reductions: list[tuple[set[int], int]] = []

    def record(self, buffer: Buffer) -> None:
        key = id(buffer)
        if key not in self.owner:
            return
        depth = len(self.stack)
        for written, ceiling in self.reductions:
            if key in written:
                depth = min(depth, ceiling)
        path = self.stack[:depth]
        known = self.lca.get(key)
        if known is None:
            self.lca[key] = path
            return
        common = 0
        while common < min(len(known), len(path)) and known[common] is path[common]:
            common += 1
        del known[common:]

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.record(node.buffer)
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.record(node.buffer)
        self.generic_visit(node)

    def visit_For(self, node: For) -> None:
        self.visit(node.min)
        self.visit(node.extent)
        self.stack.append(node)
        self.visit(node.body)
        self.stack.pop()

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        for value in node.iter_values:
            self.visit(value)
        self.visit(node.predicate)
        ceiling = self._reduction_ceiling(node)
        if ceiling is not None:
            self.reductions.append((_written_buffers(node.block), ceiling))
        self.visit(node.block)
        if ceiling is not None:
            self.reductions.pop()

    def _reduction_ceiling(self, realize: BlockRealize) -> int | None:
        """Depth of the outermost enclosing loop bound to a reduce iter var of the block."""
        values = [
            value
            for iv, value in zip(realize.block.iter_vars, realize.iter_values)
            if iv.iter_type == IterType.REDUCE
        ]
        for depth, node in enumerate(self.stack):
            if isinstance(node, For) and any(
                uses_var(value, lambda var, loop=node: var is loop.loop_var) for value in values
            ):
                return depth
        return None

    def visit_Block(self, block: Block) -> None:
        for buffer in block.alloc_buffers:
            self.owner[id(buffer)] = block
            self.buffers[id(buffer)] = buffer
        self.stack.append(block)
        for match in block.match_buffers:
            self.record(match.source.buffer)
            self.visit(match.source)
        if block.init is not None:
            self.visit(block.init)
        self.visit(block.body)
        self.stack.pop()

    def placements(self) -> dict[int, list[Buffer]]:
        """id(node) -> buffers to allocate at that node, for the buffers that move; their old
        owners get an entry too (maybe empty) so that they drop them."""
        targets: dict[int, list[Buffer]] = {}
        for key, buffer in self.buffers.items():
            path = self.lca.get(key)
            if not path or path[-1] is self.owner[key]:
                continue
            targets.setdefault(id(path[-1]), []).append(buffer)
            targets.setdefault(id(self.owner[key]), [])
        return targets


def _written_buffers(block: Block) -> set[int]:
    written: set[int] = set()

    def visit(node):
        if isinstance(node, BufferStore):
            written.add(id(node.buffer))

    post_order_visit(block, visit)
    return written


class _Relocate(Mutator):
    """Rebuilds the tree with each moved buffer allocated at its new owner (looked up by the
    identity of the original node, before its children are rewritten)."""

    def __init__(self, targets: dict[int, list[Buffer]]):
        self.targets = targets
        self.moved = {id(b) for buffers in targets.values() for b in buffers}

    def visit_For(self, node: For) -> Stmt:
        here = self.targets.get(id(node), [])
        new = self.generic_visit(node)
        body = new.body
        for buffer in reversed(here):
            body = Allocate(buffer, body)
        return new if body is new.body else new.replace(body=body)

    def visit_Block(self, node: Block) -> Stmt:
        here = self.targets.get(id(node))
        new = self.generic_visit(node)
        if here is None:
            return new
        kept = tuple(b for b in node.alloc_buffers if id(b) not in self.moved)
        return new.replace(alloc_buffers=kept + tuple(here))

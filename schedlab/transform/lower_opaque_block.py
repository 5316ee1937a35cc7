"""Blocks to plain loops, in TVM's two steps.

- **ConvertBlocksToOpaque** (TVM: same name): every block iter var is replaced by the value it
  is bound to, so block bodies speak in terms of the surrounding loop variables and the blocks
  keep no iter vars ("opaque" blocks). Regions are rewritten the same way.
- **LowerOpaqueBlock** (TVM: same name; also does TVM's LowerMatchBuffer): blocks disappear. A
  block's predicate becomes an `IfThenElse` around its body, its `alloc_buffers` become
  `Allocate` statements around the body, and each `match_buffer` view is resolved by rewriting
  accesses to the view into accesses to the matched region of the source buffer. Block
  annotations are dropped (loop annotations stay), except that a "buffer_dim_align" request
  (storage_align) moves to the `Allocate` of the buffer it names, for CompactBufferAllocation.

Both expect the inits to be lowered already (LowerInitBlock) and raise LoweringError otherwise.
"""

from __future__ import annotations

from schedlab.errors import LoweringError
from schedlab.ir import op
from schedlab.ir.buffer import BufferRegion, MatchBufferRegion
from schedlab.ir.expr import BufferLoad, IntImm, PrimExpr, Var
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator, collect_vars, substitute
from schedlab.ir.stmt import Allocate, Block, BlockRealize, BufferStore, IfThenElse, Stmt
from schedlab.ir.transform import Pass, prim_func_pass

from ._util import with_doc

DIM_ALIGN_ATTR = "buffer_dim_align"  # block annotation from storage_align (TVM's name)


def convert_blocks_to_opaque(func: PrimFunc) -> PrimFunc:
    """`func` with every block's iter vars substituted by their bindings."""
    body = _ToOpaque().visit(func.body)
    return func if body is func.body else func.with_body(body)


def lower_opaque_block(func: PrimFunc) -> PrimFunc:
    """`func` without blocks: predicates as IfThenElse, alloc_buffers as Allocate."""
    body = _LowerBlocks().visit(func.body)
    return func if body is func.body else func.with_body(body)


def ConvertBlocksToOpaque() -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `convert_blocks_to_opaque`."""
    return with_doc(prim_func_pass(convert_blocks_to_opaque, name="ConvertBlocksToOpaque"), __doc__)


def LowerOpaqueBlock() -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `lower_opaque_block`."""
    return with_doc(prim_func_pass(lower_opaque_block, name="LowerOpaqueBlock"), __doc__)


def _check_no_init(block: Block) -> None:
    if block.init is not None:
        raise LoweringError(
            f"block {block.name_hint!r} still has an init statement; "
            "run LowerInitBlock before lowering blocks"
        )


def make_opaque(realize: BlockRealize) -> BlockRealize:
    """`realize` with its block's iter vars replaced by their bound values."""
    block = realize.block
    _check_no_init(block)
    if not block.iter_vars:
        return realize
    bindings = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    new_block = block.replace(
        iter_vars=(),
        reads=tuple(_substitute_region(r, bindings) for r in block.reads),
        writes=tuple(_substitute_region(r, bindings) for r in block.writes),
        body=substitute(block.body, bindings),
        match_buffers=tuple(
            MatchBufferRegion(m.buffer, _substitute_region(m.source, bindings))
            for m in block.match_buffers
        ),
    )
    return BlockRealize((), realize.predicate, new_block)


def _substitute_region(region: BufferRegion, bindings) -> BufferRegion:
    return BufferRegion(region.buffer, tuple(substitute(r, bindings) for r in region.region))


class _ToOpaque(Mutator):
    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        # children first: an inner block's bindings may use this block's iter vars, which the
        # substitution below then rewrites along with the rest of the body
        return make_opaque(self.generic_visit(realize))


class _LowerBlocks(Mutator):
    def __init__(self):
        # buffer id -> [[axis, factor, offset], ...] from blocks' "buffer_dim_align" (storage_align)
        self.dim_align: dict[int, list[list[int]]] = {}

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        inner = realize.block
        _check_no_init(inner)
        self._record_dim_align(inner)
        body = self.visit(inner.body)
        realize = make_opaque(realize.replace(block=inner.replace(body=body)))
        block = realize.block
        body = block.body
        for match in reversed(block.match_buffers):
            body = _inline_match_buffer(body, match)
        for buffer in reversed(block.alloc_buffers):
            body = Allocate(buffer, body, self._allocate_annotations(buffer))
        if isinstance(realize.predicate, IntImm) and realize.predicate.value:
            return body
        return IfThenElse(realize.predicate, body)

    def visit_Allocate(self, node: Allocate) -> Stmt:
        new = self.generic_visit(node)  # the writers inside record their alignment first
        extra = self._allocate_annotations(node.buffer)
        return new.replace(annotations={**new.annotations, **extra}) if extra else new

    def _record_dim_align(self, block: Block) -> None:
        """Block annotations disappear here, but a storage_align request must reach the
        allocation (always above the writing block), where CompactBufferAllocation uses it."""
        for index, axis, factor, offset in block.annotations.get(DIM_ALIGN_ATTR, ()):
            if not 0 <= int(index) < len(block.writes):
                raise LoweringError(
                    f"block {block.name_hint!r}: {DIM_ALIGN_ATTR} names write {index}, but the "
                    f"block writes {len(block.writes)} buffer(s)"
                )
            buffer = block.writes[int(index)].buffer
            entries = self.dim_align.setdefault(id(buffer), [])
            entries[:] = [e for e in entries if e[0] != int(axis)]
            entries.append([int(axis), int(factor), int(offset)])

    def _allocate_annotations(self, buffer) -> dict:
        entries = self.dim_align.get(id(buffer))
        return {DIM_ALIGN_ATTR: entries} if entries else {}

    def visit_Block(self, block: Block) -> Stmt:
        raise LoweringError(f"block {block.name_hint!r} appears without a BlockRealize")


def _inline_match_buffer(body: Stmt, match: MatchBufferRegion) -> Stmt:
    """Rewrite accesses to the view `match.buffer` into accesses to its source region.

    The view's dimensions line up with the trailing dimensions of the region; leading region
    dimensions must have extent 1 (TVM's rule). The view's own strides and elem_offset only
    describe that region, so they are not needed once accesses go to the source directly."""
    view, ranges = match.buffer, match.source.region
    leading = len(ranges) - view.ndim
    if leading < 0 or any(not _is_one(r.extent) for r in ranges[:leading]):
        raise LoweringError(
            f"match_buffer {view.name}: a {view.ndim}-d view cannot match the region "
            f"{list(ranges)} of {match.source.buffer.name} (leading dimensions need extent 1)"
        )
    return _MatchBufferInliner(match, leading).visit(body)


class _MatchBufferInliner(Mutator):
    def __init__(self, match: MatchBufferRegion, leading: int):
        self.view, self.source = match.buffer, match.source
        self.leading = leading
        # strides/elem_offset variables of a view are bound by the match (TVM); shapes usually
        # reuse variables defined elsewhere, so only the former are refused in the body
        view = self.view
        self.view_vars = {id(v) for s in (*view.strides, view.elem_offset) for v in collect_vars(s)}

    def remap(self, indices) -> tuple[PrimExpr, ...]:
        ranges = self.source.region
        head = tuple(r.min for r in ranges[: self.leading])
        return head + tuple(op.add(r.min, i) for r, i in zip(ranges[self.leading :], indices))

    def visit_BufferLoad(self, node: BufferLoad) -> PrimExpr:
        node = self.generic_visit(node)
        if node.buffer is not self.view:
            return node
        return BufferLoad(self.source.buffer, self.remap(node.indices))

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        node = self.generic_visit(node)
        if node.buffer is not self.view:
            return node
        return BufferStore(self.source.buffer, node.value, self.remap(node.indices))

    def visit_Var(self, var: Var) -> PrimExpr:
        if id(var) in self.view_vars:
            raise LoweringError(
                f"match_buffer {self.view.name}: its stride/offset variable {var.name} is used "
                "in the block body; bind it explicitly instead"
            )
        return var


def _is_one(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 1


__all__ = [
    "convert_blocks_to_opaque", "lower_opaque_block", "ConvertBlocksToOpaque",
    "LowerOpaqueBlock", "make_opaque",
]  # fmt: skip

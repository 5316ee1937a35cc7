"""The rewriting behind cache_read / cache_write (TVM's cache_read_write.cc, in schedlab's
terms): the copy block, its insertion, and the switch of the chosen blocks to the cache. Where
the stage goes and what it copies are decided in ../analysis/buffers.py.

- With no writer in the scope (a function input) the stage opens the scope; with no related
  block it closes it.
- **Shape.** At the scope level the cache holds just the copied region ("compact", indices
  shifted by the region's start); inside a loop it has the buffer's full shape, so that what
  each iteration copies accumulates for readers after the loop (TVM's rule).
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.arith import Analyzer
from schedlab.ir import op
from schedlab.ir.buffer import Buffer, BufferRegion
from schedlab.ir.expr import BufferLoad, PrimExpr, Range, Var
from schedlab.ir.stmt import Block, BlockRealize, BufferStore, For, IterType, IterVar, SeqStmt, Stmt

from ..analysis.buffers import free_of, loop_and_iter_vars
from ..state import ScheduleState
from .buffer import BufferRewriter


@dataclass
class Placement:
    """Where a stage goes (`loc`: a For or the scope Block; `pos`: index in its body), the
    region it copies, and whether the cache holds only that region."""

    loc: For | Block
    pos: int
    region: BufferRegion
    compact: bool


def scope_end(scope: Block) -> int:
    return len(scope.body.seq) if isinstance(scope.body, SeqStmt) else 1


def can_be_compact(scope: Block, loc: Stmt, region: BufferRegion) -> bool:
    """A region-sized cache needs the stage at the scope level and a shape that uses no
    variable defined in the scope."""
    if loc is not scope:
        return False
    inner = loop_and_iter_vars(scope)
    return all(free_of(r.extent, inner) for r in region.region)


# -- the copy block -------------------------------------------------------------------------
def make_cache_stage(region: BufferRegion, src: Buffer, dst: Buffer, name: str,
                     compact: bool) -> tuple[Stmt, Block]:  # fmt: skip
    """Loops `ax0, ax1, ...` over the region around a block `dst[...] = src[...]` with one
    spatial iter var per dimension. `region.buffer` is the original buffer (src or dst); the
    cache side is indexed from 0 when `compact`, else like the original."""
    original = region.buffer
    simplify = Analyzer().simplify
    loop_vars, iter_vars, values, orig_idx, cache_idx = [], [], [], [], []
    for k, rng in enumerate(region.region):
        dtype = rng.extent.dtype
        loop_var, var = Var(f"ax{k}", dtype), Var(f"v{k}", dtype)
        loop_vars.append(loop_var)
        if compact:
            iter_vars.append(IterVar(var, Range(op.const(0, dtype), rng.extent), IterType.SPATIAL))
            values.append(loop_var)
            orig_idx.append(simplify(rng.min + var))
        else:
            extent = original.shape[k]
            iter_vars.append(IterVar(var, Range(op.const(0, extent.dtype), extent)))
            values.append(simplify(rng.min + loop_var))
            orig_idx.append(var)
        cache_idx.append(var)
    src_idx = orig_idx if src is original else cache_idx
    dst_idx = orig_idx if dst is original else cache_idx
    block = Block(
        iter_vars=tuple(iter_vars),
        reads=(_point(src, src_idx),),
        writes=(_point(dst, dst_idx),),
        name_hint=name,
        body=BufferStore(dst, BufferLoad(src, tuple(src_idx)), tuple(dst_idx)),
    )
    stmt: Stmt = BlockRealize(tuple(values), True, block)
    for loop_var, rng in reversed(list(zip(loop_vars, region.region))):
        stmt = For(loop_var, op.const(0, rng.extent.dtype), rng.extent, "serial", stmt)
    return stmt, block


def _point(buffer: Buffer, indices) -> BufferRegion:
    return BufferRegion(buffer, tuple(Range(i, op.const(1, i.dtype)) for i in indices))


def insert_stage(body: Stmt, pos: int, stage: Stmt) -> Stmt:
    items = list(body.seq) if isinstance(body, SeqStmt) else [body]
    items.insert(pos, stage)
    return SeqStmt.flatten(*items)


# -- rewriting ------------------------------------------------------------------------------
class StageRewriter(BufferRewriter):
    """Switches chosen blocks from `old` to the cache `new` (their whole subtree: accesses,
    regions) and inserts the stage at `placement`. `rewrites(block)` says whether a block
    switches; blocks in `skip` are left exactly as they are."""

    def __init__(self, old: Buffer, new: Buffer, offset, placement: Placement, stage: Stmt,
                 rewrites, skip: tuple[Block, ...] = ()):  # fmt: skip
        super().__init__(old, new, offset)
        self.placement, self.stage = placement, stage
        self.rewrites, self.skip = rewrites, skip
        self.inside = False

    def active(self) -> bool:
        return self.inside

    def visit_Block(self, node: Block) -> Stmt:
        if any(node is s for s in self.skip):
            return node
        outer = self.inside
        self.inside = outer or self.rewrites(node)
        try:
            new = super().visit_Block(node)
        finally:
            self.inside = outer
        return self._insert_if_loc(node, new)

    def visit_For(self, node: For) -> Stmt:
        return self._insert_if_loc(node, self.generic_visit(node))

    def _insert_if_loc(self, old: Stmt, new: Stmt) -> Stmt:
        if old is not self.placement.loc:
            return new
        return new.replace(body=insert_stage(new.body, self.placement.pos, self.stage))


def rewrite_scope(state: ScheduleState, scope: Block, rewriter: StageRewriter,
                  cache: Buffer) -> ScheduleState:  # fmt: skip
    """The state with the scope's body rewritten, the stage inserted and the cache allocated by
    the scope."""
    body = rewriter.visit(scope.body)
    if rewriter.placement.loc is scope:
        body = insert_stage(body, rewriter.placement.pos, rewriter.stage)
    new_scope = scope.replace(body=body, alloc_buffers=scope.alloc_buffers + (cache,))
    return state.replace(scope, new_scope)


def region_offset(placement: Placement) -> tuple[PrimExpr, ...] | None:
    return tuple(r.min for r in placement.region.region) if placement.compact else None


__all__ = [
    "Placement", "scope_end", "can_be_compact", "make_cache_stage", "insert_stage",
    "StageRewriter", "rewrite_scope", "region_offset",
]  # fmt: skip

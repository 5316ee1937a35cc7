"""Pieces shared by the compute-location primitives (compute_at, reverse_compute_at,
compute_inline, reverse_compute_inline): their error classes, removing a block together with the
loops only it uses, and recomputing a block's read/write signature after its body changed.

Not a primitive module (the leading underscore keeps the registry from importing it as one);
the public modules `compute_location` and `compute_inline` re-export the errors.
"""

from __future__ import annotations

from schedlab.arith import block_access_regions
from schedlab.ir.stmt import Block, SeqStmt, Stmt

from ..analysis.stage_pipeline import NotStagePipelineError, OutputBlockError
from ..errors import LocationError, ScheduleError
from ..state import ScheduleState

__all__ = [
    "NotInSameScopeError", "BlocksNotUnderLoopError", "InsertionPointError",
    "UnsolvableDomainError", "RegionCoverError", "OnlyLeafError", "OutputBlockError",
    "NotStagePipelineError", "expect_block", "plan_leaf_removal",
    "remove_leaf", "with_inferred_signature",
]  # fmt: skip


class NotInSameScopeError(LocationError):
    """The block and the loop are not in the same block scope, or the loop encloses the block."""


class BlocksNotUnderLoopError(LocationError):
    """compute_at needs every consumer (reverse_compute_at: every producer) under the loop."""


class InsertionPointError(LocationError):
    """No position under the loop keeps producers before and consumers after the block, or the
    requested `index` is not one of the valid positions."""


class UnsolvableDomainError(ScheduleError):
    """The block's new iteration domain cannot be derived from its access pattern."""


class RegionCoverError(ScheduleError):
    """At the new location the block would not produce (or would read beyond) the region its
    neighbours need there."""


class OnlyLeafError(ScheduleError):
    """Removing the block would leave its scope empty."""


def expect_block(value, name: str) -> Block:
    """`value` when it is a Block (what a block handle resolves to); else a ScheduleError."""
    if not isinstance(value, Block):
        raise ScheduleError(f"{name} must be a block handle, got {type(value).__name__}")
    return value


def plan_leaf_removal(state: ScheduleState, block: Block) -> tuple[Stmt, Stmt]:
    """(old, new): replacing `old` by `new` removes `block` and the loops that hold nothing else
    (TVM's LeafBlockRemovalPlan). Raises OnlyLeafError when the block is all its scope holds."""
    child: Stmt = state.realize_of(block)
    for ancestor in reversed(state.ancestors(child)):
        if isinstance(ancestor, SeqStmt):
            rest = [stmt for stmt in ancestor.seq if stmt is not child]
            return ancestor, SeqStmt.flatten(*rest)
        if isinstance(ancestor, Block):
            raise OnlyLeafError(
                f"block {block.name_hint!r} is the only block in the scope of "
                f"{ancestor.name_hint!r}; removing it would leave the scope empty",
                [block],
            )
        child = ancestor  # a loop (or if/let) that holds only this block: it goes too
    raise OnlyLeafError(f"block {block.name_hint!r} has no enclosing scope", [block])


def remove_leaf(state: ScheduleState, block: Block) -> ScheduleState:
    """A new state without `block` and the loops only it used."""
    old, new = plan_leaf_removal(state, block)
    return state.replace(old, new)


def with_inferred_signature(block: Block) -> Block:
    """`block` with reads/writes recomputed from its body, as TVM's GetBlockReadWriteRegion: a
    block with an init does not list what it writes among its reads."""
    reads, writes = block_access_regions(block)
    if block.init is not None:
        written = {id(region.buffer) for region in writes}
        reads = [region for region in reads if id(region.buffer) not in written]
    return block.replace(reads=tuple(reads), writes=tuple(writes))

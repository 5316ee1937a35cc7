"""Block-kind and scope facts TVM caches per block: is a block complete, a reduction, dominant,
an output block; is its scope a stage pipeline (TVM's `stage_pipeline` flag).

Each fact comes as a `*_violation` function returning None (the fact holds) or a sentence saying
why not, a boolean `is_*` form, and a `check_*` form that raises the matching ScheduleError with
the offending block marked. They read a ScheduleState and never change it.

- complete block: every iter var is spatial, it is the only writer of what it writes in its
  scope (dominant), and it does not read what it writes;
- reduction block: it has an `init`, an affine binding, only spatial and reduce iter vars, it is
  dominant, and no reduce iter var indexes what it writes;
- output block: it writes a buffer its scope block does not allocate (a function output);
- stage pipeline: no block of the scope writes a buffer that an earlier block of the scope reads
  (no write-after-read dependence), so blocks can move along the data flow.
"""

from __future__ import annotations

from schedlab.ir.functor import collect_vars, post_order_visit
from schedlab.ir.stmt import Block, BufferStore, IterType

from ..errors import NotCompleteBlockError, NotReductionBlockError, ScheduleError
from ..state import ScheduleState
from .affine import is_affine_binding
from .dependence import WAR, scope_child_blocks, scope_dependences


class OutputBlockError(ScheduleError):
    """The block writes a buffer that its scope does not allocate (an output of the function)."""


class NotStagePipelineError(ScheduleError):
    """The block scope has a write-after-read dependence, so its blocks cannot be reordered."""


# -- helpers ---------------------------------------------------------------------------------
def scope_of(state: ScheduleState, block: Block) -> Block:
    """The scope block of `block` (its nearest enclosing block); the root block has none."""
    scope = state.scope_block(block)
    if scope is None:
        raise ScheduleError(
            f"block {block.name_hint!r} is the root block of its function; it has no scope",
            [block],
        )
    return scope


def writers_in_scope(state: ScheduleState, scope: Block, buffer) -> list[Block]:
    """The child blocks of `scope` that write `buffer`."""
    return [
        b for b in scope_child_blocks(state, scope) if any(r.buffer is buffer for r in b.writes)
    ]


# -- dominance, output -----------------------------------------------------------------------
def dominance_violation(
    state: ScheduleState, block: Block, scope: Block | None = None
) -> str | None:
    """None when `block` is the only block of its scope writing each buffer it writes."""
    scope = scope if scope is not None else scope_of(state, block)
    for region in block.writes:
        others = [b for b in writers_in_scope(state, scope, region.buffer) if b is not block]
        if others:
            names = ", ".join(repr(b.name_hint) for b in others)
            return (
                f"block {block.name_hint!r} is not the only writer of buffer "
                f"{region.buffer.name!r}: {names} also write it"
            )
    return None


def is_output_block(state: ScheduleState, block: Block, scope: Block | None = None) -> bool:
    """Whether `block` writes a buffer its scope block does not allocate (TVM's IsOutputBlock)."""
    return output_buffer(state, block, scope) is not None


def output_buffer(state: ScheduleState, block: Block, scope: Block | None = None):
    """The first buffer `block` writes that its scope does not allocate (None if there is none)."""
    scope = scope if scope is not None else scope_of(state, block)
    allocated = {id(b) for b in scope.alloc_buffers}
    for region in block.writes:
        if id(region.buffer) not in allocated:
            return region.buffer
    return None


def check_not_output_block(state: ScheduleState, block: Block, scope: Block | None = None) -> None:
    """Raise OutputBlockError when `block` writes an output of its scope."""
    buffer = output_buffer(state, block, scope)
    if buffer is not None:
        raise OutputBlockError(
            f"block {block.name_hint!r} writes {buffer.name!r}, which is not allocated inside its "
            f"scope (an output of the function); an output block cannot be computed at a "
            f"consumer or inlined (move it with reverse_compute_at, or write it through "
            f"cache_write first)",
            [block],
        )


# -- complete and reduction blocks ------------------------------------------------------------
def complete_block_violation(
    state: ScheduleState, block: Block, scope: Block | None = None
) -> str | None:
    """None when `block` is a complete block (TVM's IsCompleteBlock); else the reason."""
    scope = scope if scope is not None else scope_of(state, block)
    not_spatial = [iv.var.name for iv in block.iter_vars if iv.iter_type != IterType.SPATIAL]
    if not_spatial:
        return (
            f"block {block.name_hint!r} has iter vars that are not spatial "
            f"({', '.join(not_spatial)})"
        )
    reason = dominance_violation(state, block, scope)
    if reason is not None:
        return reason
    written = {id(r.buffer) for r in block.writes}
    both = [r.buffer.name for r in block.reads if id(r.buffer) in written]
    if both:
        return f"block {block.name_hint!r} reads buffer {both[0]!r}, which it also writes"
    return None


def is_complete_block(state: ScheduleState, block: Block, scope: Block | None = None) -> bool:
    """Whether `block` is a complete block (see `complete_block_violation`)."""
    return complete_block_violation(state, block, scope) is None


def check_complete_block(state: ScheduleState, block: Block, scope: Block | None = None) -> None:
    """Raise NotCompleteBlockError when `block` is not complete."""
    reason = complete_block_violation(state, block, scope)
    if reason is not None:
        raise NotCompleteBlockError(f"{reason}, so it is not a complete block", [block])


def reduction_block_violation(
    state: ScheduleState, block: Block, scope: Block | None = None
) -> str | None:
    """None when `block` is a reduction block in TVM's structural sense (IsReductionBlock)."""
    scope = scope if scope is not None else scope_of(state, block)
    name = block.name_hint
    if block.init is None:
        return f"block {name!r} has no init statement"
    if not is_affine_binding(state, block):
        return f"block {name!r} has iter values that are not an affine map of its loops"
    others = [iv.var.name for iv in block.iter_vars
              if iv.iter_type not in (IterType.SPATIAL, IterType.REDUCE)]  # fmt: skip
    if others:
        return f"block {name!r} has iter vars that are neither spatial nor reduce: {others}"
    reason = dominance_violation(state, block, scope)
    if reason is not None:
        return reason
    reduce_vars = {id(iv.var) for iv in block.iter_vars if iv.iter_type == IterType.REDUCE}
    for var in _write_index_vars(block):
        if id(var) in reduce_vars:
            return f"block {name!r} indexes its output with the reduce iter var {var.name}"
    return None


def is_reduction_block(state: ScheduleState, block: Block, scope: Block | None = None) -> bool:
    """Whether `block` is a reduction block (see `reduction_block_violation`)."""
    return reduction_block_violation(state, block, scope) is None


def check_complete_or_reduction_block(state: ScheduleState, block: Block,
                                      scope: Block | None = None) -> None:  # fmt: skip
    """Raise when `block` is neither a complete nor a reduction block (TVM's
    CheckCompleteOrReductionBlock)."""
    complete = complete_block_violation(state, block, scope)
    if complete is None:
        return
    reduction = reduction_block_violation(state, block, scope)
    if reduction is None:
        return
    raise NotReductionBlockError(
        f"block {block.name_hint!r} is neither a complete block ({complete}) nor a reduction "
        f"block ({reduction})",
        [block],
    )


def _write_index_vars(block: Block) -> list:
    found = []
    for region in block.writes:
        for rng in region.region:
            found.extend(collect_vars(rng.min))

    def visit(node):
        if isinstance(node, BufferStore):
            for index in node.indices:
                found.extend(collect_vars(index))

    post_order_visit(block.body, visit)
    return found


# -- stage pipeline ---------------------------------------------------------------------------
def stage_pipeline_violation(state: ScheduleState, scope: Block) -> str | None:
    """None when the scope is a stage pipeline: no block writes a buffer that an earlier block
    of the scope reads (a write-after-read dependence pins both blocks in place)."""
    for dep in scope_dependences(state, scope):
        if dep.kind == WAR:
            read = {id(r.buffer) for r in dep.src.reads}
            buffer = next(r.buffer for r in dep.dst.writes if id(r.buffer) in read)
            return (
                f"block {dep.dst.name_hint!r} writes buffer {buffer.name!r} after block "
                f"{dep.src.name_hint!r} reads it (a write-after-read dependence)"
            )
    return None


def is_stage_pipeline(state: ScheduleState, scope: Block) -> bool:
    """Whether the scope block `scope` is a stage pipeline (no write-after-read dependence)."""
    return stage_pipeline_violation(state, scope) is None


def check_stage_pipeline(state: ScheduleState, block: Block) -> Block:
    """The scope block of `block`; raise NotStagePipelineError unless it is a stage pipeline."""
    scope = scope_of(state, block)
    reason = stage_pipeline_violation(state, scope)
    if reason is not None:
        raise NotStagePipelineError(
            f"the scope {scope.name_hint!r} of block {block.name_hint!r} is not a stage "
            f"pipeline: {reason}; blocks in it cannot be moved or inlined",
            [block],
        )
    return scope

"""Cache primitives: stage a buffer through a copy in another storage scope.

`cache_read` makes readers read a copy filled by a new block; `cache_write` makes a writer
write a copy that a new block writes back. Together with compute_at / reverse_compute_at
(which move those blocks under tile loops) and the lowering's buffer compaction, this is how
shared-memory tiles and register accumulators are built. Where the stage goes and what it
copies is decided in ../analysis/buffers.py; the rewriting lives in cache_stage.py.
"""

from __future__ import annotations

from schedlab.ir.buffer import Buffer
from schedlab.ir.stmt import Block, For

from ..analysis.buffer_writes import writes_densely
from ..analysis.buffers import (
    BlockInInitError,
    CacheLocationError,
    RegionCoverError,
    check_cover,
    check_not_in_init,
    check_storage_scope,
    conditions_between,
    location_between,
    readers_in_scope,
    reads_old_contents,
    region_of,
    relaxed_access,
    resolve_buffer,
    writers_in_scope,
)
from ..errors import BufferIndexError, ScheduleError
from ..instruction import PrimitiveContext, primitive
from ..state import ScheduleState
from .buffer import scoped_buffer
from .cache_stage import (
    Placement,
    StageRewriter,
    can_be_compact,
    make_cache_stage,
    region_offset,
    rewrite_scope,
    scope_end,
)


class NotSingleWriterError(ScheduleError):
    """The buffer is written by several blocks of the scope (a cache needs at most one)."""


class CacheConsumerError(ScheduleError):
    """A block given as a consumer does not read the buffer in the same scope."""


class CacheWriteError(ScheduleError):
    """The block's writes cannot be staged through a cache (they read old contents, or leave
    holes the write-back would overwrite)."""


@primitive("CacheRead", inputs=("block", "consumer_blocks"), outputs="block")
def cache_read(ctx: PrimitiveContext, block: Block, read_buffer_index, storage_scope: str,
               consumer_blocks=None):  # fmt: skip
    """Copy a buffer the block reads into a new buffer in `storage_scope`, and make the readers
    read the copy. Returns the new copy block, named `<buffer>_<scope>`.

    The copy goes right after the buffer's writer and before its first reader, at the level
    that holds both (at the start of the scope for a function input); it copies what the
    writer writes (the whole buffer for an input). Use compute_at to move it under a loop.
    The new buffer is allocated by the scope block (the root block, normally).

    Preconditions: `read_buffer_index` picks one of the block's reads (an int index into
    `block.reads` or a buffer name); `storage_scope` is a known scope; the block is not inside
    another block's init (decompose_reduction first); at most one block of the scope writes
    the buffer, and `block` is not it; each of `consumer_blocks` reads the buffer in the same
    scope; the writer and the first reader are separate statements of a loop or block body
    (not under one shared `if`); every reader switched to the copy reads only elements the
    copy holds.

    Parameters: block -- a block reading the buffer; read_buffer_index -- int or name;
    storage_scope -- "shared", "local", ...; consumer_blocks -- the blocks that read the copy
    (default: every reader in the scope).

    >>> A = te.placeholder((4, 4), name="A")
    >>> k = te.reduce_axis((0, 4), name="k")
    >>> B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    >>> sch = Schedule(te.create_prim_func([A, B]))
    >>> print(sch.func.script(show_header=False))  # before  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, k in T.grid(4, 4):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.reads(A[vi, vk])
                T.writes(B[vi])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
    >>> copy = sch.cache_read(sch.get_block("B"), 0, "shared")
    >>> print(sch.func.script(show_header=False))  # after  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        A_shared = T.alloc_buffer((4, 4), "float32", scope="shared")
        for ax0, ax1 in T.grid(4, 4):
            with T.block("A_shared"):
                v0, v1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(A[v0, v1])
                T.writes(A_shared[v0, v1])
                A_shared[v0, v1] = A[v0, v1]
        for i, k in T.grid(4, 4):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.reads(A_shared[vi, vk])
                T.writes(B[vi])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A_shared[vi, vk]
    """
    state = ctx.state
    buffer = _buffer(block, read_buffer_index, "read", "cache_read", "read_buffer_index")
    check_storage_scope(storage_scope, "cache_read")
    scope = _scope(state, block, "cache_read")
    consumers = _consumers(state, scope, buffer, consumer_blocks, "cache_read")
    writer = _only_writer(state, scope, buffer, "cache_read")
    if writer is block:
        raise CacheConsumerError(
            f"block {block.name_hint!r} both reads and writes {buffer.name}; a read "
            "cache filled before it would miss its own writes",
            [block],
        )
    readers = consumers or [b for b in readers_in_scope(state, scope, buffer) if b is not writer]
    placement = _read_placement(state, scope, buffer, writer, readers)
    check_cover(state, scope, placement.loc, placement.region, writer, readers, "cache_read")
    cache = _cache_buffer(buffer, storage_scope, placement)
    name = f"{buffer.name}_{storage_scope}"
    stage, stage_block = make_cache_stage(placement.region, buffer, cache, name, placement.compact)
    chosen = None if consumer_blocks is None or not consumers else consumers
    rewriter = StageRewriter(
        buffer, cache, region_offset(placement), placement, stage,
        rewrites=lambda b: chosen is None or any(b is c for c in chosen),
        skip=(writer,) if writer is not None else (),
    )  # fmt: skip
    return rewrite_scope(state, scope, rewriter, cache), stage_block


def _read_placement(state, scope, buffer, writer, readers) -> Placement:
    if writer is None:  # a function input (or written outside the scope): copy at the start
        region = region_of(scope.reads, buffer) or buffer.full_region()
        return Placement(scope, 0, region, can_be_compact(scope, scope, region))
    loc, pos = location_between(state, scope, writer, readers, buffer, "cache_read")
    region, _ = relaxed_access(state, writer, region_of(writer.writes, buffer), loc)
    return Placement(loc, pos, region, can_be_compact(scope, loc, region))


@primitive("CacheWrite", inputs=("block", "consumer_blocks"), outputs="block")
def cache_write(ctx: PrimitiveContext, block: Block, write_buffer_index, storage_scope: str,
                consumer_blocks=None):  # fmt: skip
    """Make the block write a new buffer in `storage_scope` instead, and copy that buffer back
    with a new block named `<buffer>_<scope>` (returned), placed right after the block's loop
    nest and before the buffer's first other reader.

    With reverse_compute_at of the returned block under a tile loop, the lowering shrinks the
    cache to one tile: `cache_write(C, 0, "local")` is how a register accumulator is made.
    The new buffer is allocated by the scope block.

    Preconditions: `write_buffer_index` picks one of the block's writes (an int index into
    `block.writes` or a buffer name); `storage_scope` is a known scope; the block is not inside
    another block's init (decompose_reduction first); it is the only writer of the buffer in
    the scope; it does not read the buffer's previous contents (a reduction with an init is
    fine); it writes every element of the region it declares, unconditionally (no holes, no
    `if` around it or its stores, no predicate that skips elements inside the buffer), so the
    copy back overwrites nothing with garbage; each of `consumer_blocks` reads the buffer in
    the same scope.

    Parameters: block -- the writer; write_buffer_index -- int or name; storage_scope --
    "local", "shared", ...; consumer_blocks -- readers that read the cache directly instead of
    the written-back buffer.

    >>> A = te.placeholder((4, 4), name="A")
    >>> k = te.reduce_axis((0, 4), name="k")
    >>> B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    >>> sch = Schedule(te.create_prim_func([A, B]))
    >>> print(sch.func.script(show_header=False))  # before  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, k in T.grid(4, 4):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.reads(A[vi, vk])
                T.writes(B[vi])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
    >>> back = sch.cache_write(sch.get_block("B"), 0, "local")
    >>> print(sch.func.script(show_header=False))  # after  # doctest: +ELLIPSIS
    @T.prim_func
    def main(...):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        B_local = T.alloc_buffer((4,), "float32", scope="local")
        for i, k in T.grid(4, 4):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.reads(A[vi, vk])
                T.writes(B_local[vi])
                with T.init():
                    B_local[vi] = T.float32(0)
                B_local[vi] = B_local[vi] + A[vi, vk]
        for ax0 in range(4):
            with T.block("B_local"):
                v0 = T.axis.spatial(4, ax0)
                T.reads(B_local[v0])
                T.writes(B[v0])
                B[v0] = B_local[v0]
    """
    state = ctx.state
    buffer = _buffer(block, write_buffer_index, "write", "cache_write", "write_buffer_index")
    check_storage_scope(storage_scope, "cache_write")
    scope = _scope(state, block, "cache_write")
    consumers = _consumers(state, scope, buffer, consumer_blocks, "cache_write") or []
    _only_writer(state, scope, buffer, "cache_write")
    if reads_old_contents(block, buffer):
        raise CacheWriteError(
            f"block {block.name_hint!r} reads the previous contents of "
            f"{buffer.name} (it loads it and has no init); the cache would start empty",
            [block],
        )
    placement = _write_placement(state, scope, block, buffer, consumers)
    check_cover(state, scope, placement.loc, placement.region, block, consumers, "cache_write")
    cache = _cache_buffer(buffer, storage_scope, placement)
    name = f"{buffer.name}_{storage_scope}"
    stage, stage_block = make_cache_stage(placement.region, cache, buffer, name, placement.compact)
    rewriter = StageRewriter(
        buffer, cache, region_offset(placement), placement, stage,
        rewrites=lambda b: b is block or any(b is c for c in consumers),
    )  # fmt: skip
    return rewrite_scope(state, scope, rewriter, cache), stage_block


def _write_placement(state, scope, block, buffer, consumers) -> Placement:
    before, after = _readers_around(state, scope, block, buffer)
    _check_earlier_readers(state, scope, block, buffer, before, consumers)
    others = [b for b in after if not any(b is c for c in consumers)]
    if others:
        loc, pos = location_between(state, scope, block, others, buffer, "cache_write")
    else:
        loc, pos = scope, scope_end(scope)
    _check_unconditional(state, block, buffer, loc)
    region, _ = relaxed_access(state, block, region_of(block.writes, buffer), loc)
    if not writes_densely(state, block, buffer, loc, region):
        raise CacheWriteError(
            f"cannot show that block {block.name_hint!r} writes every element of "
            f"the region of {buffer.name} it declares ({_show(region)}): strided, "
            "conditional or irregular stores; the copy back would overwrite the elements it "
            "skips",
            [block],
        )
    return Placement(loc, pos, region, can_be_compact(scope, loc, region))


def _check_unconditional(state, block, buffer, loc) -> None:
    """The copy back runs whenever its place runs; a writer under an `if` below that place
    may not have written what it copies."""
    guards = conditions_between(state, block, loc)
    if guards:
        raise CacheWriteError(
            f"block {block.name_hint!r} runs under the condition "
            f"`{guards[0].condition}`, but the copy back of {buffer.name} would run "
            "regardless and overwrite the elements with garbage whenever the condition is "
            "false; cache_write needs a writer that is not under an `if` inside its scope",
            [block],
        )


def _readers_around(state, scope, block, buffer) -> tuple[list[Block], list[Block]]:
    """The other readers of `buffer` in the scope, (before `block`, after it) in program
    order. Only the later ones read what the block writes (TVM's RAW dependences)."""
    order = state.child_blocks(scope)
    here = _order_of(order, block)
    readers = readers_in_scope(state, scope, buffer)
    before = [b for b in readers if any(b is o for o in order[:here])]
    after = [b for b in readers if any(b is o for o in order[here + 1 :])]
    return before, after


def _show(region) -> str:
    return "[" + ", ".join(f"{r.min}:{r.min + r.extent}" for r in region.region) + "]"


def _order_of(order: list[Block], block: Block) -> int:
    for index, other in enumerate(order):
        if other is block:
            return index
    raise CacheLocationError(  # guarded by check_not_in_init; kept for unusual IR
        f"block {block.name_hint!r} is not a child block of its scope", [block]
    )


def _check_earlier_readers(state, scope, block, buffer, before, consumers) -> None:
    """A reader earlier than the writer reads the old contents, unless a loop around both
    carries the writer's values to its next iteration; then the copy back, placed after the
    writer, would come too late for it. A cache consumer must come after the writer."""
    for reader in before:
        if any(reader is c for c in consumers):
            raise CacheConsumerError(
                f"consumer block {reader.name_hint!r} runs before the writer "
                f"{block.name_hint!r}, so it cannot read the cache",
                [reader],
            )
        shared = [a for a in state.ancestors(block) if state.is_ancestor(a, reader)]
        if any(isinstance(a, For) and state.is_ancestor(scope, a) for a in shared):
            raise CacheLocationError(
                f"block {reader.name_hint!r} reads {buffer.name} before its writer "
                f"{block.name_hint!r} inside a loop around both; it may read values written "
                "by an earlier iteration, which the copy back would deliver too late",
                [reader, block],
            )


# -- shared checks ----------------------------------------------------------------------------
def _buffer(block, index, kind: str, primitive_name: str, arg: str) -> Buffer:
    if not isinstance(block, Block):
        raise ScheduleError(f"block must be a block handle, got {type(block).__name__}")
    return resolve_buffer(block, index, kind, primitive_name, arg)[0]


def _scope(state: ScheduleState, block: Block, primitive_name: str) -> Block:
    scope = state.scope_block(block)
    if scope is None:
        raise ScheduleError(
            "the root block has no scope to cache in", [block], primitive=primitive_name
        )
    check_not_in_init(state, block, primitive_name)
    return scope


def _only_writer(state, scope: Block, buffer: Buffer, primitive_name: str) -> Block | None:
    writers = writers_in_scope(state, scope, buffer)
    if len(writers) > 1:
        names = ", ".join(repr(w.name_hint) for w in writers)
        raise NotSingleWriterError(
            f"buffer {buffer.name} is written by {len(writers)} blocks "
            f"({names}); a cache needs a single writer in the scope (cache before "
            "decompose_reduction / rfactor, or inline the extra writers)",
            writers,
            primitive=primitive_name,
        )
    return writers[0] if writers else None


def _consumers(state, scope: Block, buffer: Buffer, blocks, primitive_name: str):
    if blocks is None:
        return None
    if not isinstance(blocks, (list, tuple)):
        raise CacheConsumerError(
            f"consumer_blocks must be a list of block handles, got {type(blocks).__name__}"
        )
    readers = readers_in_scope(state, scope, buffer)
    for consumer in blocks:
        if isinstance(consumer, Block) and state.scope_block(consumer) is scope:
            check_not_in_init(state, consumer, primitive_name)
        if not isinstance(consumer, Block) or not any(consumer is r for r in readers):
            what = consumer.name_hint if isinstance(consumer, Block) else repr(consumer)
            known = ", ".join(repr(r.name_hint) for r in readers) or "none"
            raise CacheConsumerError(
                f"consumer block {what!r} does not read {buffer.name} in this "
                f"scope; the readers are: {known}",
                [consumer] if isinstance(consumer, Block) else [],
                primitive=primitive_name,
            )
    return list(blocks) or None


def _cache_buffer(buffer: Buffer, scope: str, placement: Placement) -> Buffer:
    cache = scoped_buffer(buffer, scope)
    if placement.compact:
        cache = cache.replace(shape=tuple(r.extent for r in placement.region.region))
    return cache


__all__ = [
    "cache_read", "cache_write", "NotSingleWriterError", "CacheConsumerError",
    "CacheWriteError", "CacheLocationError", "RegionCoverError", "BufferIndexError",
    "BlockInInitError",
]  # fmt: skip

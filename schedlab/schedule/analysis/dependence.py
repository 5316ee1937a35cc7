"""Dependences between the blocks of one scope (TVM's BlockScope), by buffer: block B depends on
an earlier block A when B reads what A writes (RAW), writes what A writes (WAW) or writes what A
reads (WAR). Blocks are compared at buffer granularity; regions refine this where primitives
need it."""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.ir.stmt import Block

from ..state import ScheduleState

RAW, WAW, WAR = "RAW", "WAW", "WAR"


@dataclass(frozen=True)
class Dependence:
    src: Block
    dst: Block
    kind: str


def scope_child_blocks(state: ScheduleState, scope: Block) -> list[Block]:
    """The blocks whose nearest enclosing block is `scope`, in program order."""
    return state.child_blocks(scope)


def _buffers(regions) -> set[int]:
    return {id(region.buffer) for region in regions}


def scope_dependences(state: ScheduleState, scope: Block) -> list[Dependence]:
    """All dependences among the child blocks of `scope`."""
    blocks = scope_child_blocks(state, scope)
    found = []
    for later_index, dst in enumerate(blocks):
        for src in blocks[:later_index]:
            found.extend(_between(src, dst))
    return found


def _between(src: Block, dst: Block) -> list[Dependence]:
    kinds = []
    if _buffers(src.writes) & _buffers(dst.reads):
        kinds.append(RAW)
    if _buffers(src.writes) & _buffers(dst.writes):
        kinds.append(WAW)
    if _buffers(src.reads) & _buffers(dst.writes):
        kinds.append(WAR)
    return [Dependence(src, dst, kind) for kind in kinds]


def producers(state: ScheduleState, block: Block) -> list[Block]:
    """Blocks of the same scope that write a buffer `block` reads (RAW sources), in order."""
    scope = state.scope_block(block)
    if scope is None:
        return []
    return _unique(
        d.src for d in scope_dependences(state, scope) if d.dst is block and d.kind == RAW
    )


def consumers(state: ScheduleState, block: Block) -> list[Block]:
    """Blocks of the same scope that read a buffer `block` writes (RAW destinations)."""
    scope = state.scope_block(block)
    if scope is None:
        return []
    return _unique(
        d.dst for d in scope_dependences(state, scope) if d.src is block and d.kind == RAW
    )


def _unique(blocks) -> list[Block]:
    seen: dict[int, Block] = {}
    for block in blocks:
        seen.setdefault(id(block), block)
    return list(seen.values())

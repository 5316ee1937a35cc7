"""`BlockedTranspose`: a 2-D transpose done tile by tile on the presets' targets.

A plain transpose walks one of its two matrices a column at a time: every element of that side
lands on another cache line. Cut into square tiles of one vector's width, both sides of a tile
stay in L1 while it is copied: the output is written a vector at a time, the input read as
gathers from `tile` rows. The rule fires only on targets made from this package's presets
(other targets keep schedlab's `Elementwise` rule, which the rule comes before)."""

from __future__ import annotations

from schedlab.dlight import ScheduleRule, register_rule
from schedlab.ir.expr import BufferLoad
from schedlab.ir.stmt import BufferStore

from .presets import is_ours


class BlockedTranspose(ScheduleRule):
    """out[i, j] = in[j, i] with both extents whole multiples of the tile (the SIMD width in
    elements of the output dtype): tiles of `tile x tile`, rows of tiles in parallel, the
    inner loop vectorized. Declines anything else (and other targets)."""

    name = "BlockedTranspose"

    def schedule_block(self, sch, block, info, target) -> bool:
        if not is_ours(target) or not is_transpose(info):
            return False
        tile = target.simd_width // info.block.writes[0].buffer.dtype.bits
        loops = sch.get_loops(block)
        extents = [getattr(sch.get(loop).extent, "value", None) for loop in loops]
        if tile < 2 or any(e is None or e % tile or e < 2 * tile for e in extents):
            return False
        i0, i1 = sch.split(loops[0], [None, tile])
        j0, j1 = sch.split(loops[1], [None, tile])
        sch.reorder(i0, j0, i1, j1)
        sch.parallel(i0)
        sch.vectorize(j1)
        return True


def is_transpose(info) -> bool:
    """A block with two spatial loops whose body is `out[a, b] = in[b, a]` (block iter vars)."""
    body = info.block.body
    if not info.is_injective or len(info.loops) != 2 or not isinstance(body, BufferStore):
        return False
    load = body.value
    if not isinstance(load, BufferLoad) or load.buffer.dtype != body.buffer.dtype:
        return False
    a, b = (loop.var for loop in info.loops)
    store, read = body.indices, load.indices
    return len(read) == 2 and store[0] is a and store[1] is b and read[0] is b and read[1] is a


def register() -> None:
    """Entry point of group `schedlab.schedule_rules`."""
    register_rule(BlockedTranspose, target="cpu", before="Elementwise")

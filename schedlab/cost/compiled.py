"""What the compiled loop nest looks like to the core: which loops are straight-line code, the
innermost loop that stays a loop, and the loads and stores left in it once gcc has merged the
copies of an access and hoisted what that loop does not move.

The C back end writes out the loops the schedule unrolled and turns an innermost vectorized
loop of a power-of-two extent into vector statements of the target's width; gcc then unrolls
the small loops around them completely (its size model: `early_unroll.py`) before its loop
invariant motion runs. So `vectorize` and `unroll` decide which loop is innermost, and with it
what stays in registers: a tile of C kept across the k loops, rows of B loaded once for every
row of the tile, as far as the target's vector registers hold them (AVX2: 16, AVX-512: 32).
gcc's own vectorization of a loop happens after that motion, so it keeps the loop a loop."""

from __future__ import annotations

import math

from schedlab.ir.stmt import ForKind
from schedlab.target import Target

from . import model as M
from .early_unroll import straight_line
from .nest import Nest


def vector_registers(target: Target) -> int:
    """Architectural SIMD registers of `target`: 32 with AVX-512 and on aarch64, else 16."""
    isa = target.attrs.get("isa") or ()
    return 32 if "avx512f" in isa or target.attrs.get("arch") == "aarch64" else 16


def element_bits(nest: Nest) -> int:
    """Bits of the element type the block stores (float32: 32)."""
    return max(8, int("".join(c for c in nest.dtype if c.isdigit()) or 32))


def rewritten(nest: Nest, vloop: int) -> bool:
    """Whether the vectorized loop becomes vector statements (VectorizeLoop: the innermost
    loop, a power-of-two extent up to 64), not an `omp simd` loop that gcc vectorizes."""
    loop = nest.loops[vloop] if vloop >= 0 else None
    return (loop is not None and loop.kind == ForKind.VECTORIZED and vloop == len(nest.loops) - 1
            and loop.extent <= 64 and loop.extent & (loop.extent - 1) == 0)  # fmt: skip


def compiled_shape(nest: Nest, shapes, target: Target, vloop: int) -> tuple[set[int], int]:
    """(straight, kept): the loops that are straight-line code when gcc's loop invariant
    motion runs (written out by the C back end: unrolled by the schedule, or vector statements
    whose copies differ by a constant offset; or unrolled completely by gcc), and the innermost
    loop that stays a loop (-1: none)."""
    written = {j: lp.extent for j, lp in enumerate(nest.loops) if lp.kind == ForKind.UNROLLED}
    offsets: frozenset[int] = frozenset()
    if rewritten(nest, vloop):
        width = max(1, target.simd_width // element_bits(nest))
        written[vloop] = max(1, math.ceil(nest.loops[vloop].extent / width))
        offsets = frozenset({vloop})
    straight = straight_line(nest, shapes, written, offsets=offsets)
    kept = max((j for j in range(len(nest.loops)) if j not in straight), default=-1)
    return straight, kept


def load_stores(nest: Nest, shapes, lanes: float, vloop: int, target: Target,
                passes: int = 1) -> tuple[float, bool, set[int]]:  # fmt: skip
    """(instructions, in_register, straight): the loads and stores the compiled nest executes,
    whether its accumulator stays in registers across the innermost kept loop, and the loops
    that are straight-line code (`compiled_shape`).

    In the straight-line body copies of an access with one address are one; what the kept
    loop does not move is hoisted out of it (gcc's LIM, stores too: the pointers are
    `restrict`) and out of the kept loops around it that do not move it either, while the
    target's vector registers last: past them the rest are spilled, reloaded on every use.
    A store under a predicate (a split that does not divide) is conditional and stays. Along
    the vector loop a contiguous access moves `lanes` elements per instruction (`passes`
    times where the datapath is narrower), an invariant one is one broadcast, a strided one
    moves each element by itself and stays where it is."""
    straight, kept = compiled_shape(nest, shapes, target, vloop)
    iters = math.prod(lp.extent for lp in nest.loops)

    def steps(j: int) -> float:  # iterations of loop j in vector instructions
        return max(1.0, nest.loops[j].extent / lanes) if j == vloop else nest.loops[j].extent

    total, hoisted = 0.0, []
    for sh in shapes:
        moves = [any(sh.spread[j]) for j in range(len(nest.loops))]
        strided = vloop >= 0 and sh.linear_stride[vloop] not in (0, 1)
        ops = float(iters)
        if vloop >= 0:
            ops = ops * M.STRIDED_SIMD_COST if strided else ops / lanes * passes
        for j in straight:
            if not moves[j]:
                ops /= steps(j)
        movable = not strided and not (sh.access.write and nest.guarded)
        out = 1.0
        for j in range(kept, -1, -1):
            if not movable or moves[j] or j in straight:
                break
            out *= steps(j)
        if out > 1.0:
            copies = math.prod(steps(j) for j in straight if moves[j])
            hoisted.append((sh, copies, ops, ops / out))
        else:
            total += ops
    # a load and a store of one address (an accumulator) share their registers
    need = sum({(id(sh.access.buffer), str(sh.access.indices)): copies
                for sh, copies, _, _ in hoisted}.values())  # fmt: skip
    room = max(1, vector_registers(target) - M.RESERVED_REGISTERS)
    spilled = max(0.0, 1.0 - room / need) if need else 0.0
    total += sum(out + spilled * (inside - out) for _, _, inside, out in hoisted)
    in_register = spilled == 0 and any(sh.access.write for sh, *_ in hoisted)
    return total, in_register, straight

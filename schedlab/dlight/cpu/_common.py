"""Target-derived sizes shared by the CPU rules."""

from __future__ import annotations

from schedlab.target import Target

# Below this many block instances a kernel is too small to split across threads: starting
# and joining an OpenMP team costs more than it saves (and much more on a busy machine).
MIN_PARALLEL_WORK = 1 << 15
# Fuse into the parallel loop only as many outer loops as give each core this many chunks.
PARALLEL_CHUNKS_PER_CORE = 8


def vector_lanes(target: Target, dtype) -> int:
    """Elements of `dtype` in one SIMD register of `target` (at least 1)."""
    width = int(target.attrs.get("simd_width", 128) or 128)
    bits = max(int(getattr(dtype, "bits", 32)) * int(getattr(dtype, "lanes", 1)), 8)
    return max(width // bits, 1)


def vector_registers(target: Target) -> int:
    """Architectural SIMD registers: 32 with AVX-512 and on aarch64 (NEON/SVE), else 16."""
    isa = target.attrs.get("isa", ()) or ()
    return 32 if "avx512f" in isa or target.attrs.get("arch") in ("aarch64", "arm64") else 16


def output_dtype(block):
    """The dtype of the block's first written buffer."""
    return block.writes[0].buffer.dtype


def fit_lanes(extent: int, lanes: int) -> int:
    """The vector length for a loop of `extent`: the whole loop when it fits in one vector,
    else the largest divisor of `extent` between lanes/2 and lanes (no predicate), else
    `lanes` (the last vector is predicated)."""
    if extent <= lanes:
        return extent
    divisors = [d for d in range(lanes, max(lanes // 2, 1) - 1, -1) if extent % d == 0]
    return divisors[0] if divisors else lanes


def vectorize_innermost(sch, loop, extent: int, lanes: int):
    """Vectorize `loop` (of `extent`): split into [outer, vector] when a whole number of
    vectors (of `lanes` or half that) covers it; else vectorize it whole (`omp simd`: gcc runs
    full vectors and one remainder), unless it is long enough to be worth splitting for the
    threads (then [outer, `lanes`], the last vector predicated). A vector of an odd width such
    as 11 lanes would be a short gcc loop with a remainder on every step: a 128x55x55 concat
    took 76 us that way, 50 us as one 3025-element loop per channel (Zen 5, one thread).
    Returns the outer loop, or None when the whole loop was vectorized."""
    width = next((w for w in (lanes, lanes // 2) if w > 1 and extent % w == 0), None)
    if width is None and extent > MIN_PARALLEL_WORK:
        width = lanes
    if width is not None and extent > width:
        outer, inner = sch.split(loop, [None, width])
        sch.vectorize(inner)
        return outer
    sch.vectorize(loop)
    return None


def extent_of(sch, loop) -> int | None:
    """The constant extent of a loop handle, or None when symbolic."""
    value = getattr(sch.get(loop).extent, "value", None)
    return int(value) if value is not None else None


def constant_loops(sch, block) -> list | None:
    """The loops above `block`, or None when one has a symbolic extent (the tiled plans size
    their tiles from the extents)."""
    loops = sch.get_loops(block)
    return None if any(extent_of(sch, loop) is None for loop in loops) else loops


def parallelize(sch, loops, info) -> bool:
    """Fuse `loops` (adjacent, outermost first) and make the result parallel, when the block
    (`info`, a BlockInfo taken before scheduling) does enough work; True if it did."""
    work = info.work()
    if not loops or (work is not None and work < MIN_PARALLEL_WORK):
        return False
    sch.parallel(sch.fuse(*loops) if len(loops) > 1 else loops[0])
    return True


def register_tile(sch, loops) -> None:
    """Rows and vector groups unrolled, the innermost loop vectorized."""
    *unrolled, lanes = loops
    for loop in unrolled:
        sch.unroll(loop)
    sch.vectorize(lanes)


def inline_epilogue(sch, write_back) -> bool:
    """Fold the single consumer of a tiled reduction's output (a bias/ReLU epilogue) into its
    write-back block."""
    consumers = sch.get_consumers(write_back)
    if len(consumers) != 1:
        return False
    sch.reverse_compute_inline(consumers[0])
    return True


def parallel_prefix(sch, loops, target: Target) -> int:
    """How many of `loops` (outermost first) to fuse into the parallel loop: the fewest whose
    iterations give every core PARALLEL_CHUNKS_PER_CORE chunks, all when fewer do. The loops
    inside stay serial: a fused loop's every index is a division and a modulo of the fused
    one (a 64x58x58 padding copy: 0.13 -> 0.11 ms of a 0.63 ms 3x3 layer)."""
    wanted = PARALLEL_CHUNKS_PER_CORE * max(int(target.attrs.get("num_cores", 1) or 1), 1)
    total = 1
    for count, loop in enumerate(loops, start=1):
        extent = extent_of(sch, loop)
        if extent is None:
            return len(loops)
        total *= extent
        if total >= wanted:
            return count
    return len(loops)


def rows_before_channel_blocks(sch, block, info):
    """For a block writing an NCHW{b}c tensor ([N, C/b, H, W, b], each index a loop var, the
    rows after the channel blocks), the row loop moved before the channel-block loop; returns
    the block's BlockInfo afterwards (`info` when nothing moved). The BlockedConv rule splits
    (batch, row, channel block) across threads, so a thread's rows of every channel are in its
    own cache: an element-wise kernel or pooling reading them splits the same way (a blocked
    concat ran 0.64x slower on two threads than on one when split by channel blocks)."""
    from ..analysis import block_info

    write = info.block.writes[0] if len(info.block.writes) == 1 else None
    if write is None or len(write.region) != 5:
        return info
    dims = [r.min for r in write.region]
    positions = {loop.var: k for k, loop in enumerate(info.loops)}
    if not all(d in positions for d in dims) or positions[dims[2]] < positions[dims[1]]:
        return info
    loops = sch.get_loops(block)
    sch.reorder(loops[positions[dims[2]]], loops[positions[dims[1]]])
    return block_info(sch.state, sch.get(block)) or info

"""The analytical latency model: a roofline over compute, load/store issue and the traffic at
each memory level, computed per block from loop-nest footprints.

For every leaf block (see `nest.py`) and every loop level L, the footprint of each buffer under L
is the bounding box its indices span over the loops inside L, counted in cache lines. A cache of
capacity C holds the nest below the outermost level whose total footprint fits in C (for the L1,
rows a power-of-two pitch apart count for the few sets they map to); the traffic into that cache
is that footprint times the trips of the loops outside it. Compute time follows the C back end as
gcc -O3 compiles it: the vector lanes actually used (explicit `vectorize`: vector statements of
the target's width, or an `omp simd` loop gcc vectorizes, an outer one too; or the loop gcc
auto-vectorizes once its early complete unrolling, estimated from gcc's own size model in
`early_unroll.py`, has removed the short loops: the innermost loop left when it is spatial with
contiguous stores, a dense group of unrolled stores, or the loop around it (outer-loop
vectorization); remainders and epilogues included; vectors wider than the core's datapath issue
in passes; strided accesses in a vector loop move element by element); the loads and stores the
compiled loop keeps (`compiled.py`: vector statements and unrolled loops are straight-line code,
gcc unrolls small loops around them, and what the innermost remaining loop does not move is
hoisted out of it while the target's vector registers last: a register tile); and the latency
of the reduction chains: a sum stays in a register across the straight-line steps and where it
is hoisted, and goes through memory (a store forwarded to the next load) between the others,
overlapped as far as the out-of-order window sees independent outputs; and the cores used by
`parallel` loops (with load imbalance). The terms combine as a p-norm (`OVERLAP_NORM`): the
largest dominates, the others still count. The init of a reduction is hoisted out of its loops
by LowerInitBlock, so no branch sits in them.

The constants below were fitted on `schedlab bench-cost`'s tuning seeds (see benchmark.py;
measured on a Zen 5 machine as AVX2 code, Target("zen3"), and as AVX-512 code, the host) within
what the hardware documents allow; gcc's own limits are its --param defaults and its
-fopt-info-vec / -fdump-tree-cunrolli-details reports on those schedules."""

from __future__ import annotations

import math
from dataclasses import dataclass

from schedlab.ir import expr as E

from .nest import Access, Nest

# instructions in flight whose dependence chains the core overlaps: an iteration with few
# loads and stores leaves room for more of them (Zen 3's reorder buffer holds 256, Zen 5's 448)
OOO_WINDOW_INSTRUCTIONS = 400
AUTO_UNROLL_EXTENT = 16  # gcc -O3 peels constant loops up to about this many trips ...
AUTO_UNROLL_BODY = 16  # ... while the unrolled body stays about this small
# cycles between dependent steps of a sum (an FMA is 4; gcc splits FMA chains into a multiply
# and an add on Zen, and the chain pays for the loop around it)
FMA_LATENCY = 5
VECTOR_FORWARD_CYCLES = 4  # a vector store forwarded to the next load of the same address
# loads + stores per cycle per core: Zen and recent Intel cores issue 3 loads or 2 stores a
# cycle (fewer at 512 bits); 3 fits bench-cost's tuning seeds best
LDST_PER_CYCLE = 3
# a vector loop over a non-contiguous access (an `omp simd` across rows, a strided load): each
# element is inserted into / extracted from its vector register by itself, at about this many
# times the cost of a scalar load or store
STRIDED_SIMD_COST = 3.0
# bytes per cycle per core a level delivers into the one above it (register file <- L1, ...)
LEVEL_BYTES_PER_CYCLE = {"L1": 64.0, "L2": 16.0, "L3": 16.0}
L1_WAYS = 8  # associativity of an L1 data cache whose size does not say it (see predict.py)
ISSUE_WIDTH = 5  # arithmetic + load/store instructions a core issues per cycle
PARALLEL_LAUNCH_S = 3e-6  # entering one OpenMP parallel region
# gcc's cost model still vectorizes a loop whose store moves by a short constant stride (a
# small image row) with element inserts, but not one that jumps whole rows of a big matrix
AUTOVEC_MAX_STORE_STRIDE = 16
RESERVED_REGISTERS = 4  # vector registers a loop body needs besides the values kept in them
# the terms of the roofline combine as a p-norm: the bottleneck dominates, the others add a
# little (the core overlaps its resources, not perfectly)
OVERLAP_NORM = 3.0
# gcc vectorizes the loop around a strided spatial innermost loop in about this share of
# bench-cost's schedules (its -fopt-info reports): the prediction weighs vector and scalar
OUTER_VECTOR_ODDS = 0.65


def eval_int(node, env: dict) -> int:
    """Value of an integer index expression with loop variables bound in `env` (others = 0)."""
    if isinstance(node, E.IntImm):
        return int(node.value)
    if isinstance(node, E.Var):
        return env.get(node, 0)
    if isinstance(node, E.Cast):
        return eval_int(node.value, env)
    a = eval_int(node.a, env) if hasattr(node, "a") else 0
    b = eval_int(node.b, env) if hasattr(node, "b") else 0
    return _binary(node, a, b)


def _binary(node, a: int, b: int) -> int:
    if isinstance(node, E.Add):
        return a + b
    if isinstance(node, E.Sub):
        return a - b
    if isinstance(node, E.Mul):
        return a * b
    if isinstance(node, E.FloorDiv | E.Div):
        return a // b if b else 0
    if isinstance(node, E.FloorMod | E.Mod):
        return a % b if b else 0
    if isinstance(node, E.Min):
        return min(a, b)
    if isinstance(node, E.Max):
        return max(a, b)
    return 0  # unknown forms (Select, Call) count as invariant: an optimistic footprint


@dataclass(frozen=True)
class AccessShape:
    """Per loop: the stride of the access along its last dimension and the per-dim spread."""

    access: Access
    spread: list[list[int]]  # spread[loop][dim]: how far the index moves over the loop
    inner_stride: list[int]  # stride along the last dimension when the loop steps by one
    linear_stride: list[int]  # elements the flattened address moves when the loop steps by one
    shape: tuple[int, ...]
    elem_bytes: int


def analyze_access(access: Access, nest: Nest) -> AccessShape:
    """Spread of each index over each loop (finite differences: affine forms are exact, floordiv
    and floormod from `fuse` are caught by evaluating at the loop's last iteration)."""
    base = [eval_int(i, {}) for i in access.indices]
    spread, stride, linear = [], [], []
    shape = tuple(_const(s) for s in access.buffer.shape)
    row = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    for loop in nest.loops:
        one = [eval_int(i, {loop.var: 1}) for i in access.indices]
        last = [eval_int(i, {loop.var: loop.extent - 1}) for i in access.indices]
        spread.append([max(abs(o - b) * (loop.extent - 1), abs(z - b))
                       for o, b, z in zip(one, base, last, strict=True)])  # fmt: skip
        stride.append(abs(one[-1] - base[-1]) if base else 0)
        linear.append(abs(sum((o - b) * r for o, b, r in zip(one, base, row, strict=True))))
        if any(one[d] != base[d] for d in range(len(base) - 1)):
            stride[-1] = max(stride[-1], 1 << 20)  # moves an outer dim: not contiguous
    bits = max(1, access.buffer.dtype.bits // 8)
    return AccessShape(access, spread, stride, linear, shape, bits)


def _const(value) -> int:
    return int(value.value) if isinstance(value, E.IntImm) else 1 << 30


def footprints(shapes: list[AccessShape], nest: Nest, line: int, set_span: int = 0) -> list[float]:
    """Bytes (whole cache lines) touched below each loop level; index len(loops) = one iteration.
    Accesses to one buffer are merged (the largest box). With `set_span` (cache bytes / ways),
    the bytes are what the box costs that cache: see `_conflict_factor`."""
    n = len(nest.loops)
    result = []
    for level in range(n + 1):
        per_buffer: dict[int, float] = {}
        for sh in shapes:
            dims = [1 + sum(sh.spread[j][d] for j in range(level, n)) for d in range(len(sh.shape))]
            dims = [min(v, cap) for v, cap in zip(dims, sh.shape, strict=True)] or [1]
            lines = math.ceil(dims[-1] * sh.elem_bytes / line)
            size = lines * line * math.prod(dims[:-1])
            if set_span:
                size *= _conflict_factor(dims, sh, line, set_span)
            key = id(sh.access.buffer)
            per_buffer[key] = max(per_buffer.get(key, 0.0), size)
        result.append(sum(per_buffer.values()))
    return result


def _conflict_factor(dims: list[int], sh: AccessShape, line: int, set_span: int) -> float:
    """How much more of a set-associative cache a box takes than its size: rows a power-of-two
    pitch apart (a column of a 256-float matrix: 1 KiB) map to few sets, and only `ways` of
    them fit per set. R rows over D distinct set offsets fit iff R / D <= ways, which is the
    capacity test on the box inflated by (sets / D)."""
    outer = [d for d in range(len(dims) - 1) if dims[d] > 1]
    if not outer:
        return 1.0
    d = outer[-1]
    pitch = math.prod(sh.shape[d + 1 :]) * sh.elem_bytes
    distinct = set_span // math.gcd(pitch, set_span)
    rows, sets = dims[d], set_span // line
    return max(1.0, min(rows, sets) / distinct) if rows > distinct else 1.0


def level_traffic(fp: list[float], nest: Nest, capacity: float,
                  fit: list[float] | None = None) -> tuple[float, int]:  # fmt: skip
    """Bytes moved into a cache of `capacity`. Let L be the outermost level whose footprint fits
    (`fit`: the footprints as that cache holds them, default `fp`): one iteration of the loop
    just outside it reuses everything it touches, so that loop's whole footprint is loaded once
    per trip of the loops outside it. Returns (bytes, L)."""
    fit = fit or fp
    for level in range(len(fp)):
        if fit[level] <= capacity:
            streamed = max(0, level - 1)
            outer = math.prod(lp.extent for lp in nest.loops[:streamed])
            return fp[streamed] * outer, level
    return fp[-1] * math.prod(lp.extent for lp in nest.loops), len(fp) - 1

"""The analytical latency model: a roofline over compute, load/store issue and the traffic at
each memory level, computed per block from loop-nest footprints.

For every leaf block (see `nest.py`) and every loop level L, the footprint of each buffer under L
is the bounding box its indices span over the loops inside L, counted in cache lines. A cache of
capacity C holds the nest below the outermost level whose total footprint fits in C; the traffic
into that cache is that footprint times the trips of the loops outside it. Compute time uses the
vector lanes actually used (explicit `vectorize`, or a loop the C compiler can auto-vectorize),
the FMA latency chain of the innermost reduction (independent accumulators = spatial iterations
inside it) and the cores used by `parallel` loops (with load imbalance)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from schedlab.ir import expr as E

from .nest import Access, Nest

OOO_WINDOW_ITERS = 48  # loop iterations the out-of-order window holds (~256 uops / ~5 each)
AUTO_UNROLL_EXTENT = 16  # gcc -O3 peels constant loops up to about this many trips ...
AUTO_UNROLL_BODY = 64  # ... while the unrolled body stays about this small
FMA_LATENCY = 4  # cycles between dependent FMAs (typical of x86 cores)
LDST_PER_CYCLE = 3  # vector loads + stores issued per cycle per core (2 loads, 1 store)
# bytes per cycle per core a level delivers into the one above it (register file <- L1, ...)
LEVEL_BYTES_PER_CYCLE = {"L1": 64.0, "L2": 32.0, "L3": 16.0}
LOOP_OVERHEAD_CYCLES = 0.0  # per trip of the innermost loop: no visible cost in bench-cost
PARALLEL_LAUNCH_S = 3e-6  # entering one OpenMP parallel region
AUTO_PEEL_EXTENT = 4  # gcc peels innermost constant loops this short before vectorizing
AUTO_PEEL_BODY = 64
AUTOVEC_DEPTH = 1  # loops gcc tries to vectorize (1: only the innermost left after peeling)
AUTOVEC_EFFICIENCY = 0.5  # auto-vectorized loops: remainder handling, unknown aliasing


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
    shape: tuple[int, ...]
    elem_bytes: int


def analyze_access(access: Access, nest: Nest) -> AccessShape:
    """Spread of each index over each loop (finite differences: affine forms are exact, floordiv
    and floormod from `fuse` are caught by evaluating at the loop's last iteration)."""
    base = [eval_int(i, {}) for i in access.indices]
    spread, stride = [], []
    for loop in nest.loops:
        one = [eval_int(i, {loop.var: 1}) for i in access.indices]
        last = [eval_int(i, {loop.var: loop.extent - 1}) for i in access.indices]
        spread.append([max(abs(o - b) * (loop.extent - 1), abs(z - b))
                       for o, b, z in zip(one, base, last, strict=True)])  # fmt: skip
        stride.append(abs(one[-1] - base[-1]) if base else 0)
        if any(one[d] != base[d] for d in range(len(base) - 1)):
            stride[-1] = max(stride[-1], 1 << 20)  # moves an outer dim: not contiguous
    shape = tuple(_const(s) for s in access.buffer.shape)
    return AccessShape(access, spread, stride, shape, max(1, access.buffer.dtype.bits // 8))


def _const(value) -> int:
    return int(value.value) if isinstance(value, E.IntImm) else 1 << 30


def footprints(shapes: list[AccessShape], nest: Nest, line: int) -> list[float]:
    """Bytes (whole cache lines) touched below each loop level; index len(loops) = one iteration.
    Accesses to one buffer are merged (the largest box)."""
    n = len(nest.loops)
    result = []
    for level in range(n + 1):
        per_buffer: dict[int, float] = {}
        for sh in shapes:
            dims = [1 + sum(sh.spread[j][d] for j in range(level, n)) for d in range(len(sh.shape))]
            dims = [min(v, cap) for v, cap in zip(dims, sh.shape, strict=True)] or [1]
            lines = math.ceil(dims[-1] * sh.elem_bytes / line)
            size = lines * line * math.prod(dims[:-1])
            key = id(sh.access.buffer)
            per_buffer[key] = max(per_buffer.get(key, 0.0), size)
        result.append(sum(per_buffer.values()))
    return result


def level_traffic(fp: list[float], nest: Nest, capacity: float) -> tuple[float, int]:
    """Bytes moved into a cache of `capacity`. Let L be the outermost level whose footprint fits:
    one iteration of the loop just outside it reuses everything it touches, so that loop's whole
    footprint is loaded once per trip of the loops outside it. Returns (bytes, L)."""
    for level in range(len(fp)):
        if fp[level] <= capacity:
            streamed = max(0, level - 1)
            outer = math.prod(lp.extent for lp in nest.loops[:streamed])
            return fp[streamed] * outer, level
    return fp[-1] * math.prod(lp.extent for lp in nest.loops), len(fp) - 1

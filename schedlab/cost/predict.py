"""`predict(func_or_mod, target)`: seconds, and the assumptions behind them (see model.py)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.stmt import ForKind
from schedlab.target import Target

from . import model as M
from .nest import Nest, extract

_COMPUTE_TERMS = ("compute", "load_store", "issue")


@dataclass
class NestPrediction:
    """The model's view of one block: the terms of its roofline and what it assumed."""

    block: str
    seconds: float
    bound: str  # the largest term: compute / load_store / issue / L2->L1 / L3->L2 / DRAM->L3
    terms: dict[str, float]  # seconds per term
    flops: int
    iterations: int
    cores_used: int
    parallel_imbalance: float
    vector_lanes: int
    vectorization: str  # "explicit", "auto" or "none"
    ilp: float  # independent accumulators of the innermost reduction (vector ops)
    bytes_moved: dict[str, float]  # bytes per memory level (L2->L1, L3->L2, DRAM->L3)
    fits_at_loop: dict[str, str]  # per cache: the outermost loop whose footprint fits
    load_store_ops: float
    footprint_per_loop: list[tuple[str, float]]  # (loop, bytes touched below it)


@dataclass
class Prediction:
    """Predicted latency of a function and the assumptions behind it."""

    seconds: float
    bound: str  # "compute" or "memory" (of the block taking most time)
    flops: int
    bytes_moved: dict[str, float]
    roofline_seconds: float  # FLOPs at peak vs DRAM bytes at peak bandwidth, whichever larger
    peaks: dict[str, float]
    nests: list[NestPrediction] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        lines = [
            f"predicted {self.seconds * 1e3:.3f} ms, {self.bound}-bound, "
            f"{self.flops / 1e6:.1f} MFLOP, roofline {self.roofline_seconds * 1e3:.3f} ms"
        ]
        for n in self.nests:
            lines.append(
                f"  {n.block}: {n.seconds * 1e3:.3f} ms ({n.bound}), cores {n.cores_used}"
                f", lanes {n.vector_lanes} ({n.vectorization}), ilp {n.ilp:g}"
            )
        return "\n".join(lines)


def _as_func(func_or_mod) -> PrimFunc:
    if isinstance(func_or_mod, PrimFunc):
        return func_or_mod
    if isinstance(func_or_mod, IRModule):
        prims = [f for f in func_or_mod.functions().values() if isinstance(f, PrimFunc)]
        if len(prims) == 1:
            return prims[0]
        if "main" in func_or_mod.functions():
            return func_or_mod["main"]
    mod = getattr(func_or_mod, "mod", None)  # a Schedule
    if mod is not None:
        return _as_func(mod)
    raise TypeError(f"predict: expected a PrimFunc, IRModule or Schedule, got {func_or_mod!r}")


def predict(func_or_mod, target: str | Target = "cpu") -> Prediction:
    """Predicted latency (seconds) of a TensorIR function (scheduled or not) on `target`, with
    the peaks, FLOPs, bytes per memory level, parallelism and vectorization it assumed."""
    func = _as_func(func_or_mod)
    target = target if isinstance(target, Target) else Target(target)
    nests = [_predict_nest(n, target) for n in extract(func)]
    flops = sum(n.flops for n in nests)
    levels = ("L2->L1", "L3->L2", "DRAM->L3")
    moved = {lv: sum(n.bytes_moved[lv] for n in nests) for lv in levels}
    peak = target.peak_flops(_dtype(_func_dtype(func)))
    bw = target.mem_bandwidth_gbs * 1e9
    roofline = max(flops / peak, moved["DRAM->L3"] / bw)
    worst = max(nests, key=lambda n: n.seconds) if nests else None
    bound = "compute" if worst is None or worst.bound in _COMPUTE_TERMS else "memory"
    peaks = {
        "flops": peak,
        "dram_bytes_per_s": bw,
        "clock_hz": target.clock_ghz * 1e9,
        **{f"{k}_bytes_per_cycle_per_core": v for k, v in M.LEVEL_BYTES_PER_CYCLE.items()},
    }
    return Prediction(sum(n.seconds for n in nests), bound, flops, moved, roofline, peaks, nests)


def _func_dtype(func: PrimFunc) -> str:
    """The element type of the last parameter (the output, by convention)."""
    bufs = list(func.buffer_map.values())
    return str(bufs[-1].dtype) if bufs else "float32"


def _dtype(name: str) -> str:
    return (
        name
        if name in ("float64", "float32", "float16", "bfloat16", "int32", "int8")
        else "float32"
    )


def _lanes(nest: Nest, shapes, target: Target) -> tuple[int, str, int]:
    """Vector lanes, how they come about, and the loop that carries them. Explicit: a vectorized
    innermost loop. Auto: gcc vectorizes the innermost loop that is not unrolled away (small
    constant loops inside it become its body) when every access is contiguous or invariant
    along it and the store moves with it."""
    if not nest.loops:
        return 1, "none", -1
    bits = max(8, int("".join(c for c in nest.dtype if c.isdigit()) or 32))
    width = max(1, target.simd_width // bits) if not target.is_gpu else 1
    inner = nest.loops[-1]
    if inner.kind == ForKind.VECTORIZED:
        return max(1, min(width, inner.extent)), "explicit", len(nest.loops) - 1
    # gcc first peels small constant innermost loops completely, then vectorizes the innermost
    # loop left (the peeled ones become its body), or in a 2-deep nest the outer loop
    first, body = len(nest.loops) - 1, 1
    while first > 0 and _peeled(nest.loops[first], body):
        body *= nest.loops[first].extent
        first -= 1
    for cand in range(first, max(-1, first - M.AUTOVEC_DEPTH), -1):
        loop = nest.loops[cand]
        if loop.reduce or loop.extent < 4:
            continue
        strides = [sh.inner_stride[cand] for sh in shapes]
        store_moves = any(sh.access.write and sh.inner_stride[cand] == 1 for sh in shapes)
        if store_moves and all(st in (0, 1) for st in strides):
            return max(1, min(width, loop.extent)), "auto", cand
    return 1, "none", -1


def _peeled(loop, body: int) -> bool:
    """Whether gcc -O3 peels this loop completely before vectorizing (small constant trips)."""
    return loop.extent <= M.AUTO_PEEL_EXTENT and body * loop.extent <= M.AUTO_PEEL_BODY


def _unrolled_away(loop, body: int) -> bool:
    """gcc -O3 peels a small constant loop completely, or the schedule asked to unroll it."""
    if loop.kind == ForKind.UNROLLED:
        return True
    return loop.extent <= M.AUTO_UNROLL_EXTENT and body * loop.extent <= M.AUTO_UNROLL_BODY


def _register_tile(nest: Nest) -> int:
    """Index of the first loop of the innermost run the compiler sees whole: the innermost loop
    plus the unrolled/vectorized loops around it, and small constant loops gcc -O3 unrolls
    completely by itself. Accesses invariant in them stay in registers."""
    start, body = len(nest.loops) - 1, nest.loops[-1].extent if nest.loops else 1
    while start > 0:
        lp = nest.loops[start - 1]
        if lp.kind != ForKind.VECTORIZED and not _unrolled_away(lp, body):
            break
        start, body = start - 1, body * lp.extent
    return max(0, start)


def _ldst_ops(nest: Nest, shapes, lanes: int, vloop: int, iters: int) -> float:
    """Load/store instructions: accesses invariant in a register-tile loop are hoisted into
    registers; contiguous accesses along the vector loop move `lanes` elements at once."""
    tile = _register_tile(nest)
    total = 0.0
    for sh in shapes:
        reuse = 1
        for j in range(tile, len(nest.loops)):
            if not any(sh.spread[j]):
                reuse *= nest.loops[j].extent
        vec = lanes if vloop >= 0 and sh.inner_stride[vloop] == 1 else 1
        total += iters / reuse / vec
    return total


def _ilp(nest: Nest, lanes: int) -> float:
    """Independent accumulator chains the core overlaps (in vector registers): the spatial
    iterations inside the innermost reduction loop, the spatial loops of the register tile
    (unrolled together), or more when whole chains fit the out-of-order window."""
    reduce = [j for j, lp in enumerate(nest.loops) if lp.reduce]
    if not reduce:
        return math.inf
    inner = math.prod(lp.extent for lp in nest.loops[reduce[-1] + 1 :])
    start = _register_tile(nest)
    tile = math.prod(lp.extent for lp in nest.loops[start:] if not lp.reduce)
    chain = math.prod(lp.extent for lp in nest.loops[start:] if lp.reduce)
    chain = max(chain, nest.loops[reduce[-1]].extent)
    return max(1.0, max(inner, tile) / lanes, M.OOO_WINDOW_ITERS / chain)


def _parallelism(nest: Nest, target: Target) -> tuple[int, float, int]:
    par = [j for j, lp in enumerate(nest.loops) if lp.kind == ForKind.PARALLEL]
    if not par:
        return 1, 1.0, 0
    work = math.prod(nest.loops[j].extent for j in par)
    cores = max(1, min(target.num_cores, work))
    imbalance = math.ceil(work / cores) / (work / cores)
    launches = math.prod(lp.extent for lp in nest.loops[: par[0]])
    return cores, imbalance, launches


def _predict_nest(nest: Nest, target: Target) -> NestPrediction:
    shapes = [M.analyze_access(a, nest) for a in nest.accesses]
    iters = math.prod(lp.extent for lp in nest.loops)
    lanes, how, vloop = _lanes(nest, shapes, target)
    eff_lanes = lanes * (M.AUTOVEC_EFFICIENCY if how == "auto" else 1.0)
    cores, imbalance, launches = _parallelism(nest, target)
    clock = target.clock_ghz * 1e9
    ilp = _ilp(nest, lanes)
    fma_units = target.attrs.get("fma_units", 1)
    rate = min(fma_units, ilp / M.FMA_LATENCY) * max(1.0, eff_lanes)  # scalar ops per cycle
    instr = max(1, nest.flops_per_iter - nest.fma_per_iter)
    compute = iters * instr / rate / clock / cores
    ldst = _ldst_ops(nest, shapes, max(1, int(eff_lanes)), vloop, iters)
    tile = _register_tile(nest)
    trips = iters / math.prod(lp.extent for lp in nest.loops[tile + 1 :]) if nest.loops else 1
    terms = {
        "compute": compute,
        "load_store": ldst / M.LDST_PER_CYCLE / clock / cores,
        "issue": (iters * instr / max(1.0, eff_lanes) + ldst + trips * M.LOOP_OVERHEAD_CYCLES * 4)
        / 4
        / clock
        / cores,
    }
    line = target.attrs.get("cache_line_bytes", 64)
    fp = M.footprints(shapes, nest, line)
    moved, fits = _memory_terms(nest, fp, target, cores, clock, terms)
    bound = max(terms, key=terms.get)
    seconds = terms[bound] * imbalance + launches * M.PARALLEL_LAUNCH_S
    names = [lp.var.name for lp in nest.loops] + ["(one iteration)"]
    flops = iters * nest.flops_per_iter
    return NestPrediction(
        nest.name,
        seconds,
        bound,
        terms,
        flops,
        iters,
        cores,
        imbalance,
        lanes,
        how,
        ilp if ilp != math.inf else -1.0,
        moved,
        fits,
        ldst,
        list(zip(names, fp, strict=True)),
    )


def _memory_terms(nest, fp, target, cores, clock, terms):
    levels = [
        ("L2->L1", "l1d_bytes", M.LEVEL_BYTES_PER_CYCLE["L2"] * clock * cores),
        ("L3->L2", "l2_bytes", M.LEVEL_BYTES_PER_CYCLE["L3"] * clock * cores),
        ("DRAM->L3", "l3_bytes", target.mem_bandwidth_gbs * 1e9),
    ]
    names = [lp.var.name for lp in nest.loops] + ["(one iteration)"]
    moved, fits = {}, {}
    for name, attr, bw in levels:
        capacity = target.attrs.get(attr, 0) or 0
        if name == "DRAM->L3" and capacity:
            capacity = capacity / max(1, target.num_cores) * cores  # a fair share of the L3
        nbytes, level = M.level_traffic(fp, nest, capacity)
        moved[name], fits[name] = nbytes, names[level]
        terms[name] = nbytes / bw
    return moved, fits

"""`predict(func_or_mod, target)`: seconds, and the assumptions behind them (see model.py)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.stmt import ForKind
from schedlab.target import Target

from . import model as M
from .compiled import element_bits, load_stores, rewritten
from .early_unroll import unrolled_before_vectorizing
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
    vector_lanes: int  # width of the widest vector instruction the block uses (1: scalar)
    vectorization: str  # "explicit", "auto", "strided" (omp simd across rows) or "none"
    ilp: float  # independent accumulators of the innermost reduction (vector ops)
    bytes_moved: dict[str, float]  # bytes per memory level (L2->L1, L3->L2, DRAM->L3)
    fits_at_loop: dict[str, str]  # per cache: the outermost loop whose footprint fits
    load_store_ops: float
    footprint_per_loop: list[tuple[str, float]]  # (loop, bytes touched below it)
    vector_fill: float = 1.0  # elements per vector instruction, remainders included


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


def as_func(func_or_mod) -> PrimFunc:
    """The PrimFunc of a PrimFunc, an IRModule (its only PrimFunc, or "main") or a Schedule."""
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
        return as_func(mod)
    raise TypeError(f"predict: expected a PrimFunc, IRModule or Schedule, got {func_or_mod!r}")


def predict(func_or_mod, target: str | Target = "cpu") -> Prediction:
    """Predicted latency (seconds) of a TensorIR function (scheduled or not) on `target`, with
    the peaks, FLOPs, bytes per memory level, parallelism and vectorization it assumed."""
    func = as_func(func_or_mod)
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


def _lanes(nest: Nest, shapes, target: Target) -> tuple[float, str, int]:
    """Vector lanes (average elements per vector instruction), how they come about ("explicit",
    "auto", "strided" or "none"), and the loop that carries them, as gcc -O3 emits the C.
    Vector statements of a power-of-two loop take full vectors then power-of-two remainders;
    a loop gcc vectorizes takes the vectors it fills, then an epilogue (`_gcc_fill`)."""
    if not nest.loops:
        return 1.0, "none", -1
    bits = element_bits(nest)
    width = max(1, target.simd_width // bits) if not target.is_gpu else 1
    writes = [sh for sh in shapes if sh.access.write]
    vectorized = [j for j, lp in enumerate(nest.loops) if lp.kind == ForKind.VECTORIZED]
    if vectorized:
        # the innermost one: vector statements, or (loops inside it) an `omp simd` loop that
        # gcc vectorizes as an outer loop. Contiguous stores are packed directly; across rows
        # (a column of C) the arithmetic is still vector, but each element moves by itself
        v = vectorized[-1]
        extent = nest.loops[v].extent
        fill = _vector_fill(extent, width) if rewritten(nest, v) else _gcc_fill(extent, width)
        if all(sh.linear_stride[v] == 1 for sh in writes):
            return fill, "explicit", v
        return fill, "strided", v
    if not writes:
        return 1.0, "none", -1
    found = _auto_vector_loop(nest, shapes, writes)
    if found is None:
        return 1.0, "none", -1
    elements, loop = found
    return _gcc_fill(elements, max(1, _auto_vector_bits(target) // bits)), "auto", loop


def _outer_over_spatial(nest: Nest, shapes, loop: int) -> bool:
    """Whether gcc's vector loop is the loop around a strided spatial innermost loop (which
    gcc's -fopt-info reports vectorized in only about 60% of bench-cost's schedules)."""
    unrolled = unrolled_before_vectorizing(nest, shapes)
    inner = max((j for j in range(len(nest.loops)) if j not in unrolled), default=-1)
    return 0 <= loop < inner and not nest.loops[inner].reduce


# gcc's tuning for these Intel cores prefers 256-bit vectors in the code it vectorizes itself
# (-mprefer-vector-width=256); explicit vectors (GCC vector types) use the full width
_PREFER_256 = ("skylake-avx512", "cascadelake", "cooperlake", "icelake-client",
               "icelake-server", "tigerlake", "sapphirerapids", "cannonlake",
               "rocketlake")  # fmt: skip


def _auto_vector_bits(target: Target) -> int:
    """Widest vector gcc's own vectorizer uses for `target`: the SIMD width, unless the flags
    or the -march tuning prefer narrower vectors."""
    width = target.simd_width
    for flag in target.attrs.get("cflags") or ():
        if flag.startswith("-mprefer-vector-width="):
            return min(width, int(flag.split("=")[1]))
    return min(width, 256) if target.attrs.get("march") in _PREFER_256 else width


def _auto_vector_loop(nest: Nest, shapes, writes) -> tuple[int, int] | None:
    """(elements, loop) gcc's loop vectorizer packs, on the nest as it is once the loops gcc
    unrolls first are gone (`early_unroll`): the innermost remaining loop when it is spatial
    and its stores are contiguous (`j_0 i_1:2 k_1:8` runs j_0 in vectors, sums in registers),
    or when the unrolled loops inside it store a dense group (j_1:8 unrolled under i_2: a
    vector per group); else the loop around it (outer-loop vectorization: a vector of sums
    kept across a reduction loop, or of rows across a strided spatial one)."""
    unrolled = unrolled_before_vectorizing(nest, shapes)
    inner = max((j for j in range(len(nest.loops)) if j not in unrolled), default=-1)
    if inner < 0:  # all straight-line code: the SLP vectorizer packs a dense store group
        group = min(_store_group(sh, nest, 0) for sh in writes)
        return group if group[0] > 1 else None
    loop = nest.loops[inner]
    if not loop.reduce and loop.kind == ForKind.SERIAL:
        if all(sh.linear_stride[inner] == 1 for sh in writes):
            return loop.extent, inner
        group = min(_store_group(sh, nest, inner + 1) for sh in writes)
        if group[0] > 1:
            return group
        stride = _short_stride(nest, writes, inner)
        if stride is not None:
            return stride
    outer = inner - 1
    if outer >= 0 and not nest.loops[outer].reduce and nest.loops[outer].kind == ForKind.SERIAL:
        if all(sh.linear_stride[outer] == 1 for sh in writes):
            return nest.loops[outer].extent, outer
    return None


def _short_stride(nest: Nest, writes, cand: int) -> tuple[int, int] | None:
    """(elements, loop) for the innermost loop left, `cand`, when its store moves by a short
    constant stride (a small image row) and no unrolled loop sits inside it: gcc's cost model
    still vectorizes it with element inserts."""
    stores = [sh.linear_stride[cand] for sh in writes]
    innermost = cand == len(nest.loops) - 1
    short = innermost and all(0 < st <= M.AUTOVEC_MAX_STORE_STRIDE for st in stores)
    if short and nest.loops[cand].extent >= 4:
        return nest.loops[cand].extent, cand
    return None


def _store_group(sh, nest: Nest, first: int) -> tuple[int, int]:
    """(g, loop): the elements a store covers densely over the loops from `first` inward
    (strides 1, e1, e1*e2, ... for extents e1, e2, ...), and the loop of stride 1."""
    moving = sorted(
        (sh.linear_stride[j], nest.loops[j].extent, j)
        for j in range(first, len(nest.loops))
        if sh.linear_stride[j]
    )
    group, unit = 1, -1
    for stride, extent, j in moving:
        if stride != group:
            return (group, unit) if group > 1 else (1, -1)
        unit = j if stride == 1 else unit
        group *= extent
    return (group, unit) if group > 1 else (1, -1)


def _widest_vector(fill: float, vloop: int, nest: Nest, target: Target) -> int:
    """The widest vector a vectorized loop uses: its full width, or the largest power of two
    not above the elements it covers."""
    if fill <= 1.0 or vloop < 0:
        return 1
    bits = element_bits(nest)
    width = max(1, target.simd_width // bits)
    return min(width, 1 << (math.ceil(fill) - 1).bit_length()) if fill < width else width


def _vector_fill(extent: int, width: int) -> float:
    """Elements per vector instruction over a loop of `extent`: full vectors of `width`, then
    one vector per set bit of the remainder."""
    ops = extent // width + bin(extent % width).count("1")
    return extent / max(1, ops)


def _gcc_fill(extent: int, width: int) -> float:
    """Elements per instruction of a loop gcc vectorizes itself (or under `omp simd`): the
    widest vectors that the trip count fills at least once, then one epilogue vector of half
    that width, then scalar iterations (gcc 12's vectorized epilogues)."""
    vector = 1 << (min(width, max(1, extent)).bit_length() - 1)
    rest = extent % vector
    half = vector // 2
    ops = extent // vector + (rest // half + rest % half if half > 1 else rest)
    return extent / max(1, ops)


def _unrolled_away(loop, body: int) -> bool:
    """gcc -O3 peels a small constant loop completely, or the schedule asked to unroll it."""
    if loop.kind == ForKind.UNROLLED:
        return True
    return loop.extent <= M.AUTO_UNROLL_EXTENT and body * loop.extent <= M.AUTO_UNROLL_BODY


def _ilp(nest: Nest, lanes: float, vloop: int, window: float) -> float:
    """Independent accumulator chains the core overlaps. Every reduction step waits on the
    previous one of its output element (in a register, or through memory when a store sits
    between them: see `_predict_nest`'s forward latency); the out-of-order window (`window`
    vector iterations) overlaps the distinct outputs it sees. Walking out from the innermost
    loop until the window is full: spatial loops multiply the chains, reduction loops only
    lengthen them."""
    if not any(lp.reduce for lp in nest.loops):
        return math.inf
    span, chains = 1.0, 1.0
    for j in range(len(nest.loops) - 1, -1, -1):
        loop = nest.loops[j]
        extent = max(1.0, loop.extent / lanes) if j == vloop else float(loop.extent)
        if span * extent >= window:
            if not loop.reduce:
                chains *= max(1.0, window / span)
            break
        span *= extent
        if not loop.reduce:
            chains *= extent
    return chains


def _unrolled_reduction(nest: Nest) -> int:
    """Reduction steps in a row that gcc unrolls completely (innermost reduction loops)."""
    steps, body = 1, 1
    for loop in reversed(nest.loops):
        if not loop.reduce or not _unrolled_away(loop, body):
            break
        steps, body = steps * loop.extent, body * loop.extent
    return steps


def _parallelism(nest: Nest, target: Target) -> tuple[int, float, int]:
    par = [j for j, lp in enumerate(nest.loops) if lp.kind == ForKind.PARALLEL]
    if not par:
        return 1, 1.0, 0
    work = math.prod(nest.loops[j].extent for j in par)
    cores = max(1, min(target.num_cores, work))
    imbalance = math.ceil(work / cores) / (work / cores)
    launches = math.prod(lp.extent for lp in nest.loops[: par[0]])
    return cores, imbalance, launches


def _predict_nest(nest: Nest, target: Target, scalar: bool = False) -> NestPrediction:
    shapes = [M.analyze_access(a, nest) for a in nest.accesses]
    lanes, how, vloop = (1.0, "none", -1) if scalar else _lanes(nest, shapes, target)
    if how == "auto" and _outer_over_spatial(nest, shapes, vloop):
        # gcc vectorizes a loop around a strided spatial one only some of the time: the
        # expected cost lies between the vector code and the scalar walk down the columns
        vector, plain = (
            _estimate(nest, shapes, target, lanes, how, vloop),
            _predict_nest(nest, target, scalar=True),
        )
        w = M.OUTER_VECTOR_ODDS
        vector.seconds = vector.seconds**w * plain.seconds ** (1 - w)
        return vector
    return _estimate(nest, shapes, target, lanes, how, vloop)


def _estimate(nest: Nest, shapes, target: Target, lanes: float, how: str,
              vloop: int) -> NestPrediction:  # fmt: skip
    """The roofline terms of one block compiled with the vectorization (`lanes` along loop
    `vloop`) that `_lanes` found."""
    iters = math.prod(lp.extent for lp in nest.loops)
    cores, imbalance, launches = _parallelism(nest, target)
    clock = target.clock_ghz * 1e9
    fma_units = target.attrs.get("fma_units", 1)
    # a vector wider than the core's datapath issues as several halves (Zen 4's 512-bit ops)
    pump = _datapath_passes(_widest_vector(lanes, vloop, nest, target), nest, target)
    ldst, in_register, straight = load_stores(nest, shapes, lanes, vloop, target, pump)
    instr = max(1, nest.flops_per_iter - nest.fma_per_iter)
    vector_iters = iters / max(1.0, lanes)
    # the out-of-order window holds as many iterations as their instructions fill
    per_iter = (ldst + vector_iters * instr) / vector_iters
    ilp = _ilp(nest, lanes, vloop, M.OOO_WINDOW_INSTRUCTIONS / max(1.0, per_iter))
    latency = M.FMA_LATENCY + _forward_cycles(nest, lanes, vloop, in_register, straight)
    rate = min(fma_units / pump, ilp / latency) * max(1.0, lanes)  # scalar ops per cycle
    terms = {
        "compute": iters * instr / rate / clock / cores,
        "load_store": ldst / M.LDST_PER_CYCLE / clock / cores,
        "issue": (vector_iters * instr + ldst) / M.ISSUE_WIDTH / clock / cores,
    }
    line = target.attrs.get("cache_line_bytes", 64)
    mem_nest, mem_shapes = _in_vector_order(nest, shapes, vloop)
    fp = M.footprints(mem_shapes, mem_nest, line)
    l1_span = (target.attrs.get("l1d_bytes", 0) or 0) // _l1_ways(target)
    fp_l1 = M.footprints(mem_shapes, mem_nest, line, l1_span) if l1_span >= line else fp
    moved, fits = _memory_terms(mem_nest, fp, fp_l1, target, cores, clock, terms)
    bound = max(terms, key=terms.get)
    # the core overlaps its resources, but not perfectly: every term adds a little to the
    # largest one (a p-norm; p = infinity would be the roofline, blind to all but the
    # bottleneck, so that vectorizing or unrolling a loop that is not it changed nothing)
    combined = sum(t**M.OVERLAP_NORM for t in terms.values()) ** (1 / M.OVERLAP_NORM)
    seconds = combined * imbalance + launches * M.PARALLEL_LAUNCH_S
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
        _widest_vector(lanes, vloop, nest, target),
        how,
        ilp if ilp != math.inf else -1.0,
        moved,
        fits,
        ldst,
        list(zip(names, fp, strict=True)),
        lanes,
    )


def _forward_cycles(nest: Nest, lanes: float, vloop: int, in_register: bool,
                    straight: set[int]) -> float:  # fmt: skip
    """Cycles a vector accumulator kept in memory adds to each reduction step: a full-width
    store forwarded to the next load, except between the steps the straight-line code holds
    in a register (reduction loops unrolled completely: written out as vector statements, or
    by gcc) and where the accumulator stays in a register across the kept loop."""
    if in_register or lanes <= 1:
        return 0.0
    if rewritten(nest, vloop):
        steps = math.prod(nest.loops[j].extent for j in straight if nest.loops[j].reduce)
    else:
        steps = _unrolled_reduction(nest)
    return M.VECTOR_FORWARD_CYCLES / steps


def _l1_ways(target: Target) -> int:
    """Associativity of the L1 data cache: x86 L1s are indexed by the page offset (64 sets of
    64 bytes: 4 KiB per way), so their size says it (Zen 3: 32 KiB, 8 ways; Zen 5: 48 KiB,
    12 ways); elsewhere `L1_WAYS`."""
    size = target.attrs.get("l1d_bytes", 0) or 0
    if target.attrs.get("arch") == "x86_64" and size >= 4096:
        return size // 4096
    return M.L1_WAYS


def _datapath_passes(vector_lanes: int, nest: Nest, target: Target) -> int:
    """Passes through the core's SIMD datapath one vector instruction of `vector_lanes` takes."""
    bits = element_bits(nest)
    datapath = target.attrs.get("simd_datapath_bits") or target.attrs.get("simd_width") or bits
    return max(1, math.ceil(vector_lanes * bits / max(1, datapath)))


def _in_vector_order(nest: Nest, shapes, vloop: int):
    """The nest in the order the vector code walks memory: a vectorized outer loop's lanes are
    the innermost dimension (the loops inside it run once per vector, not once per lane)."""
    if vloop < 0 or vloop == len(nest.loops) - 1:
        return nest, shapes
    loops = nest.loops[:vloop] + nest.loops[vloop + 1 :] + [nest.loops[vloop]]
    moved = replace(nest, loops=loops)
    return moved, [M.analyze_access(a, moved) for a in nest.accesses]


def _memory_terms(nest, fp, fp_l1, target, cores, clock, terms):
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
        fit = fp_l1 if name == "L2->L1" else fp
        nbytes, level = M.level_traffic(fp, nest, capacity, fit)
        moved[name], fits[name] = nbytes, names[level]
        terms[name] = nbytes / bw
    return moved, fits

"""Per-store features of a scheduled loop nest, for the learned cost model (TVM's PerStoreFeature).

`extract_features(func_or_mod, target)` returns one row per store (per leaf block, in program
order, as `schedlab.cost.nest.extract` lists them) with the `FEATURE_NAMES` columns:

- arithmetic: float fma/add/mul/div/min-max/math-function calls, integer and boolean ops (the
  index arithmetic a `fuse` leaves included), each times the block's iterations;
- loops: count, iterations, reduction loops, innermost extent, the spatial tile inside the
  innermost reduction loop, parallel / vectorized / unrolled extents, counts and positions, the
  `pragma_auto_unroll_max_step` over the block;
- the `N_INNER` innermost loops one by one (extent, reduction, vectorized, unrolled), and the
  nest as gcc -O3 sees it: the loops its early complete unrolling removes (the analytical
  model's estimate), loop back edges per iteration, the loop it vectorizes and the strides
  along it;
- per accessed buffer (`N_BUFFERS` of them: the stored one, then the reads touching most
  bytes): read/write, scope, bytes touched, unique bytes and lines, reuse (the innermost loop
  it is invariant in: trips, distance in iterations and in bytes), the elements its address
  moves per step of each of the `N_INNER` innermost loops and of the innermost loop moving it;
- caches: how deep in the nest the footprint first fits the target's L1/L2/L3, and the
  arithmetic intensity (FLOPs per byte of footprint) at `N_CURVE` loop levels;
- allocation: compacted size of the cache buffer a block writes or reads (as lowering will
  compact it), and how often it is refilled;
- the analytical model (`schedlab.cost.predict`): the function's and the block's predicted
  time, its roofline terms, lanes, ILP, cores, bound: a strong prior the trees refine.

Counts, bytes and times are scaled by log2(1 + x) as TVM does; times are in nanoseconds.
Everything is read from the scheduled TensorIR form (no lowering: a few ms per candidate)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from schedlab.cost import model as M
from schedlab.cost.early_unroll import body_statements, unrolled_before_vectorizing
from schedlab.cost.nest import Nest, extract
from schedlab.cost.predict import NestPrediction, _lanes, _predict_nest, as_func
from schedlab.ir import expr as E
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import Block, BlockRealize, For, ForKind
from schedlab.target import Target

N_BUFFERS = 3  # accessed buffers described per store: the stored one, then reads by bytes
N_CURVE = 8  # loop levels the arithmetic-intensity curve is sampled at
N_INNER = 4  # innermost loops described one by one (the micro-kernel gcc compiles)
# auto-unroll pragmas -> whether the unrolling is explicit (None: `pragma_unroll_explicit`
# says, default 1); the meta_schedule ones are what the space writes before its postprocessor
AUTO_UNROLL_KEYS = {"pragma_auto_unroll_max_step": None, "meta_schedule.unroll_explicit": 1,
                    "meta_schedule.unroll_implicit": 0}  # fmt: skip
EXPLICIT_KEY = "pragma_unroll_explicit"
_MATH_CALLS = frozenset(("exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt",
                         "rsqrt", "tanh", "sigmoid", "erf", "pow", "sin", "cos", "tan", "atan",
                         "fast_exp", "fast_tanh", "fast_erf"))  # fmt: skip

ARITH_NAMES = (
    "float_mad", "float_addsub", "float_mul", "float_divmod", "float_cmp", "float_math_func",
    "float_other_func", "int_addsub", "int_mul", "int_divmod", "int_cmp", "bool_op",
    "select_op", "index_int_ops",
)  # fmt: skip
LOOP_NAMES = (
    "num_loops", "iterations", "reduce_loops", "reduce_extent", "innermost_extent",
    "innermost_is_reduce", "inner_spatial_tile", "parallel_extent", "parallel_num",
    "parallel_per_core", "parallel_imbalance", "parallel_outer_trips", "vector_lanes",
    "vector_num", "vector_position", "vector_per_simd", "unroll_extent", "unroll_num",
    "auto_unroll_max_step", "unroll_explicit",
)  # fmt: skip
GCC_NAMES = (
    "gcc_unrolled_num", "gcc_unrolled_copies", "gcc_kept_extent", "gcc_kept_reduce",
    "loop_branches_per_iter", "body_statements", "statements_per_branch", "vloop_depth",
    "vloop_extent", "vloop_store_stride", "vloop_max_load_stride", "vloop_invariant_loads",
)  # fmt: skip
INNER_FIELDS = ("extent", "reduce", "vectorized", "unrolled")
BUFFER_FIELDS = (
    "present", "read", "write", "local", "bytes", "unique_bytes", "unique_lines", "reuse_ratio",
    "moving_stride", "reuse_ct", "reuse_dis_iter", "reuse_dis_bytes", "l1_fit_depth",
    *(f"stride_{k}" for k in range(N_INNER)),
)  # fmt: skip
CACHE_NAMES = ("footprint", "l1_fit_depth", "l2_fit_depth", "l3_fit_depth")
CURVE_NAMES = tuple(f"intensity_{k}" for k in range(N_CURVE))
ALLOC_NAMES = ("alloc_write_bytes", "alloc_write_refills", "alloc_write_local", "alloc_read_bytes")
TERMS = ("compute", "load_store", "issue", "L2->L1", "L3->L2", "DRAM->L3")
PRIOR_NAMES = (
    "prior_func_ns", "prior_store_ns", "prior_store_share", "prior_flops",
    *(f"prior_{t.lower().replace('->', '_')}_ns" for t in TERMS),
    "prior_l1_bytes", "prior_l2_bytes", "prior_dram_bytes", "prior_vector_lanes",
    "prior_vector_fill", "prior_vec_explicit", "prior_vec_auto", "prior_vec_strided", "prior_ilp",
    "prior_cores", "prior_imbalance", "prior_ldst_ops", "prior_bound_compute",
    "prior_bound_ldst", "prior_bound_memory",
)  # fmt: skip
FEATURE_NAMES: tuple[str, ...] = (
    *ARITH_NAMES, *LOOP_NAMES,
    *(f"inner{k}_{f}" for k in range(N_INNER) for f in INNER_FIELDS), *GCC_NAMES,
    *(f"buf{b}_{f}" for b in range(N_BUFFERS) for f in BUFFER_FIELDS),
    *CACHE_NAMES, *CURVE_NAMES, *ALLOC_NAMES, *PRIOR_NAMES,
)  # fmt: skip
N_FEATURES = len(FEATURE_NAMES)


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


@dataclass(frozen=True)
class _Leaf:
    """What `Nest` leaves out of a leaf block: its body and the pragmas above it."""

    block: Block
    auto_unroll: int
    explicit: int


def extract_features(func_or_mod, target: str | Target = "cpu") -> np.ndarray:
    """Features of every store of a scheduled TensorIR function (PrimFunc, IRModule holding one,
    or Schedule): float32 array of shape [n_stores, N_FEATURES], deterministic."""
    func = as_func(func_or_mod)
    target = target if isinstance(target, Target) else Target(target)
    nests = extract(func)
    leaves = _leaves(func)
    if len(leaves) != len(nests):  # both walk the same tree in the same order
        raise AssertionError(f"features: {len(leaves)} leaf blocks but {len(nests)} nests")
    # what `schedlab.cost.predict` computes, on the nests extracted once (its per-nest
    # internals: one extraction serves the prior and the features)
    preds = [_predict_nest(nest, target) for nest in nests]
    func_s = sum(pred.seconds for pred in preds)
    shapes = [[M.analyze_access(a, n) for a in n.accesses] for n in nests]
    allocs = _allocation_sizes(func, nests, shapes)
    rows = [
        _row(nest, leaf, sh, allocs, pred, func_s, target)
        for nest, leaf, sh, pred in zip(nests, leaves, shapes, preds, strict=True)
    ]
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), N_FEATURES)


def _row(nest: Nest, leaf: _Leaf, shapes, allocs, pred: NestPrediction, func_s: float,
         target: Target) -> list[float]:  # fmt: skip
    line = target.attrs.get("cache_line_bytes", 64) or 64
    fp = M.footprints(shapes, nest, line)
    return [
        *_arith(nest, leaf),
        *_loops(nest, leaf, target),
        *_inner(nest),
        *_compiled(nest, shapes),
        *_vector_loop(nest, shapes, target),
        *_buffers(nest, shapes, fp, line, target),
        *_caches(nest, fp, target),
        *_curve(nest, fp, pred),
        *_alloc(nest, allocs),
        *_prior(pred, func_s),
    ]


# -- the tree: leaf blocks and the pragmas above them ---------------------------------------------
def _leaves(func) -> list[_Leaf]:
    leaves: list[_Leaf] = []
    _walk(func.body, 0, 1, leaves)
    return leaves


def _pragmas(annotations: dict, unroll: int, explicit: int) -> tuple[int, int]:
    for key, implies in AUTO_UNROLL_KEYS.items():
        if key in annotations:
            unroll = max(unroll, int(annotations[key] or 0))
            explicit = explicit if implies is None else implies
    if EXPLICIT_KEY in annotations:
        explicit = int(annotations[EXPLICIT_KEY] or 0)
    return unroll, explicit


def _walk(stmt, unroll: int, explicit: int, leaves: list[_Leaf]) -> bool:
    """Appends the leaf blocks under `stmt` in program order, as `cost.nest` finds them (a
    block with blocks below it is walked through); returns whether it met any block."""
    if isinstance(stmt, For):
        unroll, explicit = _pragmas(stmt.annotations, unroll, explicit)
        return _walk(stmt.body, unroll, explicit, leaves)
    if isinstance(stmt, BlockRealize):
        block = stmt.block
        unroll, explicit = _pragmas(block.annotations, unroll, explicit)
        if not _walk(block.body, unroll, explicit, leaves):
            leaves.append(_Leaf(block, unroll, explicit))
        return True
    children = getattr(stmt, "seq", None) or [
        getattr(stmt, name, None) for name in ("body", "then_case", "else_case")
    ]
    found = False
    for child in children:
        if child is not None:
            found = _walk(child, unroll, explicit, leaves) or found
    return found


# -- arithmetic -----------------------------------------------------------------------------------
_FLOAT_KIND = {E.Add: 1, E.Sub: 1, E.Mul: 2, E.Div: 3, E.FloorDiv: 3, E.Mod: 3, E.FloorMod: 3,
               E.Min: 4, E.Max: 4}  # fmt: skip
_INT_KIND = {E.Add: 7, E.Sub: 7, E.Mul: 8, E.Div: 9, E.FloorDiv: 9, E.Mod: 9, E.FloorMod: 9,
             E.Min: 10, E.Max: 10}  # fmt: skip


def _count_ops(node, counts: list[float]) -> None:
    """Adds the operations of `node`'s tree to `counts` (indexed as ARITH_NAMES)."""

    def visit(n) -> None:
        kind = type(n)
        if isinstance(n, E.CmpOp):
            counts[4 if n.a.dtype.is_float else 10] += 1
        elif isinstance(n, E.LogicalOp | E.Not):
            counts[11] += 1
        elif isinstance(n, E.Select):
            counts[12] += 1
        elif isinstance(n, E.Call):
            _count_call(n, counts)
        elif kind in _FLOAT_KIND and n.dtype.is_float:
            fma = kind in (E.Add, E.Sub) and (isinstance(n.a, E.Mul) or isinstance(n.b, E.Mul))
            if fma:  # one fused multiply-add instead of the add and its multiply
                counts[0], counts[2] = counts[0] + 1, counts[2] - 1
            else:
                counts[_FLOAT_KIND[kind]] += 1
        elif kind in _INT_KIND:
            counts[_INT_KIND[kind]] += 1

    post_order_visit(node, visit)


def _count_call(call: E.Call, counts: list[float]) -> None:
    if call.op == "if_then_else":
        counts[12] += 1
    elif call.dtype.is_float:
        counts[5 if call.op in _MATH_CALLS else 6] += 1


def _arith(nest: Nest, leaf: _Leaf) -> list[float]:
    counts = [0.0] * len(ARITH_NAMES)
    _count_ops(leaf.block.body, counts)
    index = [0.0] * len(ARITH_NAMES)
    for access in nest.accesses:
        for i in access.indices:
            _count_ops(i, index)
    counts[-1] = sum(index)
    iters = math.prod(lp.extent for lp in nest.loops)
    return [_log(max(0.0, c) * iters) for c in counts]


# -- loops ----------------------------------------------------------------------------------------
def _loops(nest: Nest, leaf: _Leaf, target: Target) -> list[float]:
    loops = nest.loops
    n = len(loops)
    extents = [lp.extent for lp in loops]
    reduce = [j for j, lp in enumerate(loops) if lp.reduce]
    inner_tile = math.prod(extents[reduce[-1] + 1 :]) if reduce else 1
    return [
        n,
        _log(math.prod(extents)),
        len(reduce),
        _log(math.prod(extents[j] for j in reduce)),
        _log(extents[-1] if loops else 1),
        float(bool(loops) and loops[-1].reduce),
        _log(inner_tile),
        *_parallel(nest, target),
        *_vector(nest, target),
        _log(math.prod(lp.extent for lp in loops if lp.kind == ForKind.UNROLLED)),
        sum(lp.kind == ForKind.UNROLLED for lp in loops),
        _log(leaf.auto_unroll),
        float(leaf.explicit),
    ]


def _inner(nest: Nest) -> list[float]:
    """INNER_FIELDS of the `N_INNER` innermost loops, innermost first (0 beyond the nest)."""
    values: list[float] = []
    for loop in reversed(nest.loops[-N_INNER:]):
        kind = loop.kind
        values += [_log(loop.extent), float(loop.reduce), float(kind == ForKind.VECTORIZED),
                   float(kind == ForKind.UNROLLED)]  # fmt: skip
    return values + [0.0] * (N_INNER * len(INNER_FIELDS) - len(values))


def _compiled(nest: Nest, shapes) -> list[float]:
    """The loop nest as gcc -O3 compiles it: the loops its early complete unrolling removes (or
    the schedule unrolled), the innermost loop kept, the back edges taken per iteration of the
    block and the statements between them (loop overhead dominates tiny inner loops)."""
    unrolled = unrolled_before_vectorizing(nest, shapes) if nest.loops else set()
    kept = [j for j in range(len(nest.loops)) if j not in unrolled]
    inner = [1] * (len(nest.loops) + 1)
    for j in range(len(nest.loops) - 1, -1, -1):
        inner[j] = inner[j + 1] * nest.loops[j].extent
    branches = sum(1.0 / inner[j + 1] for j in kept)
    statements = sum(count for count, _ in body_statements(nest, shapes))
    copies = math.prod(nest.loops[j].extent for j in unrolled)
    return [
        len(unrolled),
        _log(copies),
        _log(nest.loops[kept[-1]].extent) if kept else 0.0,
        float(bool(kept) and nest.loops[kept[-1]].reduce),
        branches,
        _log(statements),
        _log(statements / branches) if branches else _log(statements * copies),
    ]


def _vector_loop(nest: Nest, shapes, target: Target) -> list[float]:
    """The loop the analytical model expects gcc to vectorize: its depth from the innermost, its
    extent, and how the buffers move along it (contiguous, strided or invariant)."""
    _, _, vloop = _lanes(nest, shapes, target)
    if vloop < 0:
        return [0.0] * 5
    writes = [sh.linear_stride[vloop] for sh in shapes if sh.access.write]
    reads = [sh.linear_stride[vloop] for sh in shapes if not sh.access.write]
    return [
        float(len(nest.loops) - vloop),
        _log(nest.loops[vloop].extent),
        _log(max(writes, default=0)),
        _log(max(reads, default=0)),
        float(sum(st == 0 for st in reads)),
    ]


def _parallel(nest: Nest, target: Target) -> list[float]:
    par = [j for j, lp in enumerate(nest.loops) if lp.kind == ForKind.PARALLEL]
    if not par:
        return [0.0, 0.0, 0.0, 1.0, 0.0]
    work = math.prod(nest.loops[j].extent for j in par)
    cores = max(1, min(target.num_cores, work))
    imbalance = math.ceil(work / cores) * cores / work
    trips = math.prod(lp.extent for lp in nest.loops[: par[0]])
    return [_log(work), len(par), work / max(1, target.num_cores), imbalance, _log(trips)]


def _vector(nest: Nest, target: Target) -> list[float]:
    vec = [j for j, lp in enumerate(nest.loops) if lp.kind == ForKind.VECTORIZED]
    if not vec:
        return [0.0, 0.0, 0.0, 0.0]
    lanes = math.prod(nest.loops[j].extent for j in vec)
    width = max(1, (target.attrs.get("simd_width") or 128) // _elem_bits(nest.dtype))
    return [_log(lanes), len(vec), (vec[-1] + 1) / len(nest.loops), lanes / width]


def _elem_bits(dtype: str) -> int:
    return max(8, int("".join(c for c in dtype if c.isdigit()) or 32))


# -- buffers --------------------------------------------------------------------------------------
def _buffers(nest: Nest, shapes, fp: list[float], line: int, target: Target) -> list[float]:
    """The `N_BUFFERS` buffers touching most bytes, each as BUFFER_FIELDS; absent ones are 0."""
    groups: dict[int, list] = defaultdict(list)
    for sh in shapes:
        groups[id(sh.access.buffer)].append(sh)
    iters = math.prod(lp.extent for lp in nest.loops)
    described = [_buffer(group, nest, fp, iters, line, target) for group in groups.values()]
    # the stored buffer first (its slot means the same in every row), then the reads by bytes
    described.sort(key=lambda row: (-row[2], -row[4], -row[5]))
    described = described[:N_BUFFERS]
    described += [[0.0] * len(BUFFER_FIELDS)] * (N_BUFFERS - len(described))
    return [value for row in described for value in row]


def _buffer(group, nest: Nest, fp, iters: int, line: int, target: Target) -> list[float]:
    first = group[0]
    elem = first.elem_bytes
    own = M.footprints(group, nest, line)
    reuse_ct, dis_iter, dis_bytes = _reuse(group, nest, fp)
    moving = [st for st in first.linear_stride if st]
    l1 = target.attrs.get("l1d_bytes", 0) or 0
    touched = iters * len(group) * elem
    return [
        1.0,
        float(any(not sh.access.write for sh in group)),
        float(any(sh.access.write for sh in group)),
        float(first.access.buffer.scope != "global"),
        _log(touched),
        _log(own[0]),
        _log(own[0] / line),
        _log(touched / max(1.0, own[0])),
        _log(moving[-1] if moving else 0),
        _log(reuse_ct),
        _log(dis_iter),
        _log(dis_bytes),
        _fit_depth(own, l1),
        *_inner_strides(group, nest),
    ]


def _inner_strides(group, nest: Nest) -> list[float]:
    """Elements the buffer's address moves per step of each of the `N_INNER` innermost loops
    (innermost first; 0 beyond the nest)."""
    n = len(nest.loops)
    strides = [max(sh.linear_stride[j] for sh in group) for j in range(max(0, n - N_INNER), n)]
    strides = [_log(s) for s in reversed(strides)]
    return strides + [0.0] * (N_INNER - len(strides))


def _reuse(group, nest: Nest, fp) -> tuple[int, int, float]:
    """(trips, iterations between uses, bytes between uses) of the innermost loop the buffer's
    accesses do not move in (TVM's loop-multiple-read reuse); zeros without such a loop."""
    for j in range(len(nest.loops) - 1, -1, -1):
        if not any(any(sh.spread[j]) for sh in group):
            inner = math.prod(lp.extent for lp in nest.loops[j + 1 :])
            return nest.loops[j].extent, inner, fp[j + 1]
    return 0, 0, 0.0


def _fit_depth(fp: list[float], capacity: float) -> float:
    """How deep the outermost level whose footprint fits `capacity` lies: 0 when the whole nest
    fits, 1 when not even one iteration does."""
    n = len(fp) - 1
    if not capacity:
        return 0.0
    level = next((lv for lv, size in enumerate(fp) if size <= capacity), n + 1)
    return level / max(1, n) if level <= n else 1.0


def _caches(nest: Nest, fp: list[float], target: Target) -> list[float]:
    attrs = target.attrs
    return [_log(fp[0])] + [
        _fit_depth(fp, attrs.get(key, 0) or 0) for key in ("l1d_bytes", "l2_bytes", "l3_bytes")
    ]


def _curve(nest: Nest, fp: list[float], pred: NestPrediction) -> list[float]:
    """FLOPs per byte of footprint below `N_CURVE` levels, innermost (one iteration) first."""
    n = len(nest.loops)
    flops = pred.flops / max(1, pred.iterations)
    inner = [1] * (n + 1)
    for j in range(n - 1, -1, -1):
        inner[j] = inner[j + 1] * nest.loops[j].extent
    points = []
    for k in range(N_CURVE):
        level = round(n - k * n / (N_CURVE - 1))
        points.append(_log(flops * inner[level] / max(1.0, fp[level])))
    return points


# -- allocation -----------------------------------------------------------------------------------
def _allocation_sizes(func, nests: list[Nest], shapes) -> dict[int, tuple[float, int]]:
    """Per allocated buffer: (bytes once compacted, refills). Lowering compacts a buffer to the
    region its blocks touch below the loops they all share, refilled once per trip of those."""
    allocated = _allocated(func)
    users: dict[int, list[tuple[Nest, list]]] = defaultdict(list)
    for nest, nest_shapes in zip(nests, shapes, strict=True):
        for sh in nest_shapes:
            if id(sh.access.buffer) in allocated:
                users[id(sh.access.buffer)].append((nest, sh))
    sizes = {}
    for key, uses in users.items():
        shared = _shared_loops([nest for nest, _ in uses])
        box = [1] * len(uses[0][1].shape)
        for nest, sh in uses:
            for d, cap in enumerate(sh.shape):
                span = 1 + sum(sh.spread[j][d] for j in range(shared, len(nest.loops)))
                box[d] = max(box[d], min(span, cap))
        refills = math.prod(lp.extent for lp in uses[0][0].loops[:shared])
        sizes[key] = (float(math.prod(box) * uses[0][1].elem_bytes), refills)
    return sizes


def _allocated(func) -> set[int]:
    found: set[int] = set()

    def visit(node) -> None:
        if isinstance(node, Block):
            found.update(id(buf) for buf in node.alloc_buffers)

    post_order_visit(func.body, visit)
    return found


def _shared_loops(nests: list[Nest]) -> int:
    """How many outermost loops every nest shares (the same loop variables)."""
    shared = min(len(n.loops) for n in nests)
    for nest in nests[1:]:
        same = 0
        while same < shared and nest.loops[same].var is nests[0].loops[same].var:
            same += 1
        shared = same
    return shared


def _alloc(nest: Nest, allocs: dict) -> list[float]:
    write = next((a for a in nest.accesses if a.write and id(a.buffer) in allocs), None)
    size, refills = allocs[id(write.buffer)] if write is not None else (0.0, 0)
    local = float(write is not None and write.buffer.scope != "global")
    reads = {id(a.buffer) for a in nest.accesses if not a.write and id(a.buffer) in allocs}
    return [_log(size), _log(refills), local, _log(sum(allocs[k][0] for k in reads))]


# -- the analytical model -------------------------------------------------------------------------
def _prior(pred: NestPrediction, func_s: float) -> list[float]:
    ns = 1e9
    moved = pred.bytes_moved
    memory_bound = pred.bound not in ("compute", "load_store", "issue")
    return [
        _log(func_s * ns),
        _log(pred.seconds * ns),
        pred.seconds / func_s if func_s > 0 else 0.0,
        _log(pred.flops),
        *(_log(pred.terms.get(term, 0.0) * ns) for term in TERMS),
        _log(moved.get("L2->L1", 0.0)),
        _log(moved.get("L3->L2", 0.0)),
        _log(moved.get("DRAM->L3", 0.0)),
        float(pred.vector_lanes),
        float(pred.vector_fill),
        float(pred.vectorization == "explicit"),
        float(pred.vectorization == "auto"),
        float(pred.vectorization == "strided"),
        _log(max(0.0, pred.ilp)),
        float(pred.cores_used),
        float(pred.parallel_imbalance),
        _log(pred.load_store_ops),
        float(pred.bound == "compute"),
        float(pred.bound in ("load_store", "issue")),
        float(memory_bound),
    ]

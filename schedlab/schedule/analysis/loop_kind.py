"""May a loop's iterations run at the same time: in parallel, as SIMD lanes, or on GPU threads?
(TVM's CheckParallelizability, CheckSubtreeCompactDataflow and the stage-pipeline flag.)

`check_parallelizable(state, loop, kind, thread_tag)` raises a ScheduleError naming the first
condition that fails:
1. every block under the loop has an affine binding (its iter values are an affine map of the
   loops above it);
2. the loop variable appears only in the bindings of spatial iter vars (a reduce iter may be
   bound to a `threadIdx.*` loop: a cross-thread reduction);
3. the blocks directly under the loop have a compact dataflow: spatial and reduce iter vars
   only, outputs indexed by spatial iter vars only, and a block that reads what it writes reads
   exactly the element it writes;
4. the loop's scope is a stage pipeline (no block overwrites what an earlier block of the scope
   read: stage_pipeline.py), and what a block under the loop reads from an earlier block under
   the loop was produced in the same iteration (region cover per iteration);
5. (parallel and vectorize) a block that does not depend on the loop variable writes only
   buffers private to the loop; otherwise every iteration would write the same elements (a
   loop of extent 1 has no other iteration to race with, so it passes).

Conditions 1-3 are TVM's (3 without TVM's dominance clause, so an update block left by
decompose_reduction may run in parallel); 4 is TVM's stage-pipeline property plus its region
cover checked per iteration; 5 is stricter than TVM, which would let such a schedule race.
"""

from __future__ import annotations

from schedlab.arith import Analyzer, region_union, relax_region
from schedlab.ir import expr as E
from schedlab.ir.buffer import BufferRegion
from schedlab.ir.functor import post_order_visit, substitute, uses_var
from schedlab.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IterType, SeqStmt
from schedlab.ir.structural import structural_equal

from ..errors import DependencyError, LoopKindError, NonAffineBindingError
from ..state import ScheduleState
from .affine import affine_terms, check_affine_binding, constant_extents, is_radix, tiles
from .loops import realizes_under
from .reduction import reduce_vars_in_output
from .stage_pipeline import NotStagePipelineError, stage_pipeline_violation


class WrongIterTypeError(LoopKindError):
    """The loop variable is bound to a reduce (or other non-spatial) iter var of a block."""


class NotCompactDataflowError(LoopKindError):
    """A block under the loop is neither a complete block nor a reduction block."""


class CrossIterationDependenceError(DependencyError):
    """A block under the loop reads what another block under it writes in other iterations."""


class LoopInvariantWriteError(LoopKindError):
    """A block under the loop writes the same shared elements in every iteration."""


def action_name(kind: ForKind, thread_tag: str | None = None) -> str:
    """How messages name the request: "parallelize", "vectorize", "bind to threadIdx.x"."""
    if kind == ForKind.THREAD_BINDING:
        return f"bind to {thread_tag}"
    return {ForKind.PARALLEL: "parallelize", ForKind.VECTORIZED: "vectorize"}.get(kind, str(kind))


def check_parallelizable(state: ScheduleState, loop: For, kind: ForKind,
                         thread_tag: str | None = None) -> None:  # fmt: skip
    """Raise unless the iterations of `loop` may run concurrently as `kind` (see the module
    docstring for the conditions)."""
    action = action_name(kind, thread_tag)
    for realize in realizes_under(loop.body, nested=True):
        _check_block_iters(state, realize, loop, action, thread_tag)
    blocks = state.child_blocks(loop)
    for block in blocks:
        _check_compact_dataflow(block, loop, action)
    _check_stage_pipeline(state, loop, action)
    _check_iteration_cover(state, loop, blocks, action)
    if kind in (ForKind.PARALLEL, ForKind.VECTORIZED):
        _check_loop_invariant_writes(state, loop, blocks, action)


def _loop_name(loop: For) -> str:
    return loop.loop_var.name


# -- conditions 1 and 2: bindings ---------------------------------------------------------------
def _check_block_iters(state, realize: BlockRealize, loop: For, action: str, thread_tag) -> None:
    block = realize.block
    try:
        check_affine_binding(state, block, why=f" to {action} loop {_loop_name(loop)}")
    except NonAffineBindingError as err:
        err.nodes = (*err.nodes, loop)
        raise
    cross_thread = thread_tag is not None and thread_tag.startswith("threadIdx")
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if not uses_var(value, lambda v: v is loop.loop_var):
            continue
        if iv.iter_type == IterType.SPATIAL:
            continue
        if iv.iter_type == IterType.REDUCE and cross_thread:
            continue
        raise WrongIterTypeError(
            f"cannot {action} loop {_loop_name(loop)}: it is bound to {iv.iter_type} iter var "
            f"{iv.var.name} of block {block.name_hint!r}, so its iterations combine into the "
            "same elements; only loops of spatial iter vars can run concurrently (rfactor turns "
            "part of a reduction into a spatial loop)",
            [loop, block],
        )  # fmt: skip


# -- condition 3: compact dataflow --------------------------------------------------------------
def _check_compact_dataflow(block: Block, loop: For, action: str) -> None:
    odd = [iv.var.name for iv in block.iter_vars
           if iv.iter_type not in (IterType.SPATIAL, IterType.REDUCE)]  # fmt: skip
    problem = None
    if odd:
        problem = f"it has iter vars {odd} that are neither spatial nor reduce"
    else:
        indexed = reduce_vars_in_output(block)
        if indexed:
            problem = f"its reduce iter vars {indexed} index the buffer it writes"
        else:
            problem = _self_access_problem(block)
    if problem:
        raise NotCompactDataflowError(
            f"cannot {action} loop {_loop_name(loop)}: block {block.name_hint!r} is neither a "
            f"complete nor a reduction block: {problem}",
            [block, loop],
        )  # fmt: skip


def _self_access_problem(block: Block) -> str | None:
    """A block that reads a buffer it writes must read the very element it writes."""
    written = {id(r.buffer) for r in block.writes}
    stores: dict[int, list] = {}
    loads: dict[int, list] = {}

    def collect(node):
        if isinstance(node, BufferStore) and id(node.buffer) in written:
            stores.setdefault(id(node.buffer), []).append(node.indices)
        elif isinstance(node, E.BufferLoad) and id(node.buffer) in written:
            loads.setdefault(id(node.buffer), []).append((node.buffer, node.indices))

    for stmt in (block.init, block.body):
        if stmt is not None:
            post_order_visit(stmt, collect)
    for key, accesses in loads.items():
        for buffer, indices in accesses:
            if not any(structural_equal(indices, s) for s in stores.get(key, [])):
                return f"it reads {buffer.name} at other elements than those it writes"
    return None


# -- condition 4: stage pipeline within one iteration -------------------------------------------
def _check_stage_pipeline(state, loop: For, action: str) -> None:
    scope = state.scope_block(loop)
    reason = None if scope is None else stage_pipeline_violation(state, scope)
    if reason is not None:
        raise NotStagePipelineError(
            f"cannot {action} loop {_loop_name(loop)}: its scope {scope.name_hint!r} is not a "
            f"stage pipeline: {reason}; iterations running at the same time could see each "
            "other's writes",
            [loop],
        )  # fmt: skip


def _check_iteration_cover(state, loop: For, blocks: list[Block], action: str) -> None:
    analyzer = None
    for index, consumer in enumerate(blocks):
        for read in consumer.reads:
            producers = [b for b in blocks[:index] if _writes(b, read.buffer)]
            if not producers or _one_exact_producer_covers(state, loop, consumer, read, producers):
                continue
            analyzer = analyzer or _loop_analyzer(state, loop)
            need = _iteration_region(state, consumer, read, loop, analyzer)
            have = None
            for producer in producers:
                for write in producer.writes:
                    if write.buffer is read.buffer:
                        got = _iteration_region(state, producer, write, loop, analyzer)
                        have = got if have is None else region_union(have, got, analyzer)
            if not _covers(have, need, analyzer):
                raise CrossIterationDependenceError(
                    f"cannot {action} loop {_loop_name(loop)}: block {consumer.name_hint!r} "
                    f"reads {need}, which the blocks under the loop that write "
                    f"{read.buffer.name} ({', '.join(p.name_hint for p in producers)}) do not "
                    f"produce in the same iteration (they write {have})",
                    [consumer, *producers, loop],
                )  # fmt: skip


def _one_exact_producer_covers(state, loop: For, consumer: Block, read: BufferRegion,
                               producers: list[Block]) -> bool:  # fmt: skip
    """A quick sufficient condition for the cover check: in one iteration of `loop`, one
    producer writes exactly a box (no predicate; its write region is a mixed-radix map of the
    loops under `loop`) that contains the box around what the consumer reads, the two boxes
    starting at the same expression of the outer loops (`C_local[f // 4 * 8:f // 4 * 8 + 8]`
    from both the init and the update of a tiled reduction). False means "not shown", and the
    general check (relaxed regions, their union, proofs) decides."""
    need = _affine_iteration_box(state, consumer, read, loop)
    if need is None:
        return False
    for producer in producers:
        if not _runs_every_iteration(state, producer, loop):
            continue
        for write in producer.writes:
            if write.buffer is not read.buffer:
                continue
            have = _affine_iteration_box(state, producer, write, loop, exact=True)
            if have is not None and _box_contains(have, need):
                return True
    return False


def _runs_every_iteration(state, block: Block, loop: For) -> bool:
    """No predicate and nothing but loops between `loop` and the block."""
    realize = state.realize_of(block)
    predicate = realize.predicate
    if not (isinstance(predicate, E.IntImm) and predicate.value):
        return False
    path = state.ancestors(block)  # ends with the block's own BlockRealize
    below = path[next(i for i, x in enumerate(path) if x is loop) + 1 : -1]
    return all(isinstance(node, (For, SeqStmt)) for node in below)


def _affine_iteration_box(state, block: Block, region: BufferRegion, loop: For,
                          exact: bool = False) -> list[tuple] | None:  # fmt: skip
    """Per dimension (start, extent) of `region` over one iteration of `loop`: the start free
    of the loops under `loop`, the extent an int. None when the region is not affine in those
    loops (or, with `exact`, when it does not cover its box exactly: a unit-extent region whose
    index digits, per dimension a mixed-radix number, tile each loop they use)."""
    loops = state.loops_above(block)
    extents = constant_extents(loops[next(i for i, x in enumerate(loops) if x is loop) + 1 :])
    if extents is None:
        return None
    realize = state.realize_of(block)
    binding = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    box, used = [], {}
    for rng in substitute(region, binding).region:
        form = affine_terms(rng.min, extents)
        if form is None or not isinstance(rng.extent, E.IntImm):
            return None
        digits, free = form
        if exact and (rng.extent.value != 1 or not is_radix(digits)):
            return None
        for _, key, lower, size in digits:
            used.setdefault(key, []).append((lower, size))
        span = sum(scale * (size - 1) for scale, _, _, size in digits)
        box.append((_sum(free, rng.min.dtype), rng.extent.value + span))
    if exact and not all(tiles(parts, extents[key]) for key, parts in used.items()):
        return None
    return box


def _sum(parts: list, dtype) -> E.PrimExpr:
    total = parts[0] if parts else E.IntImm(dtype, 0)
    for part in parts[1:]:
        total = E.Add(total, part)
    return total


def _box_contains(have: list[tuple], need: list[tuple]) -> bool:
    return len(have) == len(need) and all(
        n_extent <= h_extent and structural_equal(h_start, n_start)
        for (h_start, h_extent), (n_start, n_extent) in zip(have, need)
    )


def _writes(block: Block, buffer) -> bool:
    return any(w.buffer is buffer for w in block.writes)


def _loop_analyzer(state, loop: For) -> Analyzer:
    analyzer = Analyzer()
    for outer in [*state.loops_above(loop), loop]:
        analyzer.bind(outer.loop_var, E.Range(outer.min, outer.extent), allow_override=True)
    return analyzer


def _iteration_region(state, block: Block, region: BufferRegion, loop: For,
                      analyzer: Analyzer) -> BufferRegion:  # fmt: skip
    """The part of `region` (in `block`'s iter vars) touched in one iteration of `loop`."""
    realize = state.realize_of(block)
    binding = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    loops = state.loops_above(block)
    inner = loops[next(i for i, x in enumerate(loops) if x is loop) + 1 :]
    dom = {x.loop_var: E.Range(x.min, x.extent) for x in inner}
    return relax_region(substitute(region, binding), dom, analyzer)


def _covers(have: BufferRegion, need: BufferRegion, analyzer: Analyzer) -> bool:
    """`have` contains `need` within the buffer's bounds (out-of-bounds parts of a relaxed
    region are never accessed: predicates guard them)."""
    for dim, (outer, inner) in enumerate(zip(have.region, need.region)):
        extent = need.buffer.shape[dim]
        low_ok = analyzer.can_prove(outer.min <= inner.min) or analyzer.can_prove(outer.min <= 0)
        outer_end, inner_end = outer.min + outer.extent, inner.min + inner.extent
        high_ok = analyzer.can_prove(inner_end <= outer_end) or analyzer.can_prove(
            extent <= outer_end
        )
        if not (low_ok and high_ok):
            return False
    return True


# -- condition 5: loop-invariant blocks ---------------------------------------------------------
def _check_loop_invariant_writes(state, loop: For, blocks: list[Block], action: str) -> None:
    if isinstance(loop.extent, E.IntImm) and loop.extent.value == 1:
        return  # a single iteration cannot race with another
    for block in blocks:
        realize = state.realize_of(block)
        bound = (*realize.iter_values, realize.predicate)
        if any(uses_var(value, lambda v: v is loop.loop_var) for value in bound):
            continue
        for write in block.writes:
            if not _private_to(state, loop, write.buffer):
                raise LoopInvariantWriteError(
                    f"cannot {action} loop {_loop_name(loop)}: block {block.name_hint!r} does "
                    f"not depend on it, so every iteration writes the same elements of "
                    f"{write.buffer.name} at the same time; move the block out of the loop "
                    f"(or make {write.buffer.name} local to it)",
                    [block, loop],
                )  # fmt: skip


def _private_to(state, loop: For, buffer) -> bool:
    """Whether `buffer` is only used under `loop` (so the lowering allocates it inside it)."""
    func = state.func_of(loop.uid)
    if any(b is buffer for b in func.buffer_map.values()):
        return False
    blocks: list[Block] = []
    post_order_visit(func.body, lambda n: blocks.append(n) if isinstance(n, Block) else None)
    for block in blocks:
        regions = (*block.reads, *block.writes)
        if not any(r.buffer is buffer for r in regions):
            continue
        if not state.is_ancestor(loop, block) and not state.is_ancestor(block, loop):
            return False
    return True

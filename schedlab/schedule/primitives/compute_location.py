"""Compute location: move a producer under a loop of its consumers (`compute_at`), a consumer
under a loop of its producers (`reverse_compute_at`), and sample where a block should go
(`sample_compute_location`). Inlining lives in `compute_inline.py`.

Both moves regenerate the block's loops over just the region needed at the new place (region
inference over the loops below the target loop, TVM's algorithm): the moved block keeps its
identity (handles to it keep working), its old loops disappear, and the new loops are named
`ax0, ax1, ...`. Legality facts come from `analysis/stage_pipeline.py` (scope, block kinds) and
`analysis/region_cover.py` (regions under a loop, region cover).
"""

from __future__ import annotations

from bisect import bisect_left

from schedlab.arith import Analyzer, IntervalSet, eval_set
from schedlab.ir import expr as E
from schedlab.ir.stmt import Block, For, IterType, SeqStmt

from ..analysis.dependence import consumers, producers, scope_dependences
from ..analysis.loops import loop_iter_type
from ..analysis.region_cover import (
    bind_loops,
    clip_to_buffer,
    covers,
    format_region,
    outer_loops,
    regions_under,
    uncovered_read,
    union,
)
from ..analysis.stage_pipeline import (
    NotStagePipelineError,
    OutputBlockError,
    check_complete_or_reduction_block,
    check_not_output_block,
    check_stage_pipeline,
)
from ..errors import DependencyError, ScheduleError
from ..instruction import PrimitiveContext, primitive
from ..state import ScheduleState
from ._block_var_domain import block_var_domains, make_loop_nest, predicate_in_iter_vars
from ._compute_common import (
    BlocksNotUnderLoopError,
    InsertionPointError,
    NotInSameScopeError,
    OnlyLeafError,
    RegionCoverError,
    UnsolvableDomainError,
    expect_block,
    remove_leaf,
)
from .compute_inline import compute_inline_impl, reverse_compute_inline_impl

__all__ = [
    "compute_at", "reverse_compute_at", "sample_compute_location", "compute_at_impl",
    "collect_compute_locations", "NotInSameScopeError", "BlocksNotUnderLoopError",
    "InsertionPointError", "UnsolvableDomainError", "RegionCoverError", "OnlyLeafError",
    "OutputBlockError", "NotStagePipelineError", "DependencyError",
]  # fmt: skip


@primitive("ComputeAt", inputs=("block", "loop"))
def compute_at(ctx: PrimitiveContext, block: Block, loop: For, preserve_unit_loops: bool = False,
               index: int = -1):  # fmt: skip
    """Move a producer block under `loop` of its consumers, computing at each iteration of
    `loop` just the region the consumers read there.

    The block's loops are regenerated (`ax0, ax1, ...`) over that region; a predicate keeps the
    block inside its domain where the region overhangs it (non-divisible tiles).

    Preconditions:
      - the block's scope is a stage pipeline (no block writes what an earlier block reads);
      - the block is a complete block or a reduction block, and not an output block (it writes
        only buffers allocated in its scope);
      - `loop` is in the same scope as the block and does not enclose it;
      - every consumer of the block is under `loop`, and the block can be placed after its
        producers and before its consumers there;
      - the block writes everything its consumers read (region cover), and its write indices
        are affine in its iter vars so the needed iterations can be solved.

    Parameters:
      block: the producer block to move.
      loop: the loop to move it under (a handle returned by `sample_compute_location` for the
        "root" or "inline" decision is accepted too: the block stays, or is inlined).
      preserve_unit_loops: keep loops of extent 1 instead of binding the iter var directly.
      index: where among the statements of `loop`'s body to insert: -1 (default) the last
        legal position (right before the first consumer), -2 the first legal position, or an
        explicit position in that range.

    >>> A = te.placeholder((7,), name="A")
    >>> B = te.compute((7,), lambda i: A[i] * 2.0, name="B")
    >>> C = te.compute((6,), lambda i: B[i] + B[i + 1], name="C")
    >>> sch = Schedule(te.create_prim_func([A, C]))
    >>> i, = sch.get_loops(sch.get_block("C"))
    >>> sch.compute_at(sch.get_block("B"), i)
    >>> print(sch.func.script(show_header=False))
    @T.prim_func
    def main(A: T.Buffer((7,), "float32"), C: T.Buffer((6,), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        B = T.alloc_buffer((7,), "float32")
        for i in range(6):
            for ax0 in range(2):
                with T.block("B"):
                    vi = T.axis.spatial(7, i + ax0)
                    T.reads(A[vi])
                    T.writes(B[vi])
                    B[vi] = A[vi] * T.float32(2)
            with T.block("C"):
                vi_1 = T.axis.spatial(6, i)
                T.reads(B[vi_1:vi_1 + 2])
                T.writes(C[vi_1])
                C[vi_1] = B[vi_1] + B[vi_1 + 1]
    """
    block = expect_block(block, "block")
    marked = _marked_location(ctx.state, block, loop, "compute_at", compute_inline_impl)
    if marked is not None:
        return marked, None
    return compute_at_impl(ctx.state, block, loop, preserve_unit_loops, index, False), None


@primitive("ReverseComputeAt", inputs=("block", "loop"))
def reverse_compute_at(ctx: PrimitiveContext, block: Block, loop: For,
                       preserve_unit_loops: bool = False, index: int = -1):  # fmt: skip
    """Move a consumer block under `loop` of its producers, consuming at each iteration of
    `loop` just the region the producers wrote there (how a `cache_write` write-back goes
    under the tile loops).

    Preconditions:
      - the block's scope is a stage pipeline;
      - the block is a complete block or a reduction block;
      - `loop` is in the same scope as the block and does not enclose it;
      - every producer of the block is under `loop`, and the block can be placed after them and
        before its own consumers there;
      - each instance of the block reads only data produced in the same iteration of `loop`
        (its read indices are affine in its iter vars), and a reduction is not split across
        iterations of `loop`;
      - instances that read outside the buffer (a guarded read, such as a padding border) run
        at the iteration that produces the buffer's edge, so that iteration must be known
        statically (e.g. `loop` produces the whole dimension at each iteration).

    Parameters:
      block: the consumer block to move.
      loop: the loop to move it under (or a "root"/"inline" handle from
        `sample_compute_location`).
      preserve_unit_loops: keep loops of extent 1.
      index: insertion position in `loop`'s body: -1 (default) the last legal position, -2 the
        first legal position (right after the last producer), or an explicit position.

    >>> A = te.placeholder((4, 6), name="A")
    >>> B = te.compute((4, 6), lambda i, j: A[i, j] * 2.0, name="B")
    >>> C = te.compute((4, 6), lambda i, j: B[i, j] + 1.0, name="C")
    >>> sch = Schedule(te.create_prim_func([A, C]))
    >>> i, j = sch.get_loops(sch.get_block("B"))
    >>> sch.reverse_compute_at(sch.get_block("C"), i)
    >>> print(sch.func.script(show_header=False))
    @T.prim_func
    def main(A: T.Buffer((4, 6), "float32"), C: T.Buffer((4, 6), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        B = T.alloc_buffer((4, 6), "float32")
        for i in range(4):
            for j in range(6):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(A[vi, vj])
                    T.writes(B[vi, vj])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for ax0 in range(6):
                with T.block("C"):
                    vi_1, vj_1 = T.axis.remap("SS", [i, ax0])
                    T.reads(B[vi_1, vj_1])
                    T.writes(C[vi_1, vj_1])
                    C[vi_1, vj_1] = B[vi_1, vj_1] + T.float32(1)
    """
    block = expect_block(block, "block")
    inline = reverse_compute_inline_impl
    marked = _marked_location(ctx.state, block, loop, "reverse_compute_at", inline)
    if marked is not None:
        return marked, None
    return compute_at_impl(ctx.state, block, loop, preserve_unit_loops, index, True), None


def _marked_location(state: ScheduleState, block: Block, loop, name: str, inline):
    """TVM's root/inline marks: `loop` is the block's scope block ("stay at root": the state is
    unchanged) or the block itself ("inline"). None for an ordinary loop."""
    if isinstance(loop, For):
        return None
    if loop is block:
        return inline(state, block)
    if isinstance(loop, Block) and loop is state.scope_block(block):
        return state
    raise ScheduleError(
        f"{name} needs a loop handle (or a location from sample_compute_location), "
        f"got {type(loop).__name__}" + (f" {loop.name_hint!r}" if isinstance(loop, Block) else ""),
        [loop] if isinstance(loop, Block) else [],
    )


# -- the move ---------------------------------------------------------------------------------
def compute_at_impl(state: ScheduleState, block: Block, loop: For, preserve_unit_loops: bool,
                    index: int, reverse: bool) -> ScheduleState:  # fmt: skip
    """The state after compute_at (reverse: reverse_compute_at) of `block` under `loop`;
    raises a ScheduleError (the state is untouched) when a precondition fails."""
    if not isinstance(index, int) or isinstance(index, bool):
        raise InsertionPointError(f"index must be an int, got {index!r}")
    scope = check_stage_pipeline(state, block)
    check_complete_or_reduction_block(state, block, scope)
    _check_same_scope(state, block, loop, scope)
    if not reverse:
        check_not_output_block(state, block, scope)
    block_producers, block_consumers = producers(state, block), consumers(state, block)
    if reverse:
        _check_reads_covered(state, block)
    else:
        _check_consumers_covered(state, block, block_consumers)
    position = _insertion_point(state, block, loop, block_producers, block_consumers, index,
                                reverse)  # fmt: skip
    analyzer = Analyzer()
    bind_loops(analyzer, outer_loops(state, loop))
    neighbours = block_producers if reverse else block_consumers
    provided, required, buffers = _provided_required(state, block, loop, neighbours, analyzer,
                                                     reverse)  # fmt: skip
    domains = block_var_domains(block, provided, required, buffers, analyzer, not reverse)
    if reverse:
        _check_reduction_not_split(block, domains, loop, analyzer)
    own_predicate = predicate_in_iter_vars(state.realize_of(block))
    nest = make_loop_nest(block, domains, analyzer, preserve_unit_loops, own_predicate)
    _check_new_region(block, nest, provided, required, buffers, loop, analyzer, reverse)
    moved = _move(state, block, loop, nest.stmt, position)
    _check_order_kept(state, moved, block, scope, loop)
    return moved


def _check_same_scope(state, block: Block, loop, scope: Block) -> None:
    if not isinstance(loop, For):
        raise ScheduleError(f"loop must be a loop handle, got {type(loop).__name__}")
    if state.scope_block(loop) is not scope or state.is_ancestor(loop, block):
        where = "encloses the block" if state.is_ancestor(loop, block) else "is in another scope"
        raise NotInSameScopeError(
            f"block {block.name_hint!r} and loop {loop.loop_var.name} must be in the same block "
            f"scope, with the loop not enclosing the block, but the loop {where}; pick a loop of "
            f"the block's consumers (producers for reverse_compute_at)",
            [block, loop],
        )


def _check_consumers_covered(state, block: Block, block_consumers: list[Block]) -> None:
    written = {id(region.buffer) for region in block.writes}
    for consumer in block_consumers:
        found = uncovered_read(state, consumer, written)
        if found is not None:
            raise RegionCoverError(
                f"consumer {consumer.name_hint!r} reads "
                f"{format_region(found.buffer_name, found.read)} but block {block.name_hint!r} "
                f"writes only {format_region(found.buffer_name, found.produced)}; compute_at "
                f"needs the block to produce everything its consumers read",
                [block, consumer],
            )


def _check_reads_covered(state, block: Block) -> None:
    found = uncovered_read(state, block)
    if found is not None:
        raise RegionCoverError(
            f"block {block.name_hint!r} reads {format_region(found.buffer_name, found.read)} but "
            f"its producers write only {format_region(found.buffer_name, found.produced)}; "
            f"reverse_compute_at needs the producers to write everything the block reads",
            [block],
        )


def _insertion_point(state, block, loop: For, block_producers, block_consumers, index: int,
                     reverse: bool) -> int:  # fmt: skip
    """TVM's FindInsertionPoint: the position in `loop`'s body after the last producer and up to
    the first consumer, chosen by `index`."""
    items = list(loop.body.seq) if isinstance(loop.body, SeqStmt) else [loop.body]
    producer_ids = {id(b) for b in block_producers}
    consumer_ids = {id(b) for b in block_consumers}
    last_producer, first_consumer, seen = -1, len(items), set()
    for position, item in enumerate(items):
        for child in state.child_blocks(item):
            if id(child) in producer_ids:
                last_producer = position
            if id(child) in consumer_ids:
                first_consumer = min(first_consumer, position)
            seen.add(id(child))
    _check_all_under_loop(block, loop, block_producers if reverse else block_consumers, seen,
                          "producer" if reverse else "consumer")  # fmt: skip
    if last_producer >= first_consumer:
        raise InsertionPointError(
            f"under loop {loop.loop_var.name} a consumer of block {block.name_hint!r} comes before "
            f"one of its producers, so there is no place for the block there",
            [block, loop],
        )
    low, high = last_producer + 1, first_consumer
    if index == -1:
        return high
    if index == -2:
        return low
    if low <= index <= high:
        return index
    raise InsertionPointError(
        f"index {index} is not a valid insertion position under loop {loop.loop_var.name}: use "
        f"-1, -2 or a position from {low} to {high}",
        [loop],
    )


def _check_all_under_loop(block, loop, required, seen, what: str) -> None:
    missing = [b for b in required if id(b) not in seen]
    if missing:
        names = ", ".join(repr(b.name_hint) for b in missing)
        raise BlocksNotUnderLoopError(
            f"every {what} of block {block.name_hint!r} must be under loop "
            f"{loop.loop_var.name}, but {names} {'is' if len(missing) == 1 else 'are'} not; "
            f"pick a loop that encloses all of them",
            [block, loop, *missing],
        )


def _provided_required(state, block, loop, neighbours, analyzer, reverse: bool):
    """The block's own regions of the buffers it shares with its neighbours (its writes for
    compute_at, reads for reverse), and what the neighbours touch in one iteration of `loop`."""
    mine = block.reads if reverse else block.writes
    provided = {id(r.buffer): [_interval(rng, analyzer) for rng in r.region] for r in mine}
    buffers = {id(r.buffer): r.buffer for r in mine}
    required: dict[int, list] = {}
    which = "writes" if reverse else "reads"
    for other in neighbours:
        found = regions_under(state, other, which, loop, analyzer, set(provided), not reverse)
        for key, regions in found.items():
            required.setdefault(key, []).extend(regions)
    return provided, required, buffers


def _interval(rng: E.Range, analyzer) -> IntervalSet:
    return IntervalSet(rng.min, analyzer.simplify(rng.min + rng.extent - 1))


def _check_reduction_not_split(block: Block, domains, loop: For, analyzer) -> None:
    for iv, info in zip(block.iter_vars, domains):
        if iv.iter_type != IterType.REDUCE:
            continue
        full = IntervalSet.from_range(iv.dom, analyzer)
        whole = info.bound is None and analyzer.can_prove_equal(info.dom.min, full.min)
        if not (whole and analyzer.can_prove_equal(info.dom.max, full.max)):
            raise UnsolvableDomainError(
                f"moving reduction block {block.name_hint!r} under loop {loop.loop_var.name} "
                f"would split its reduction over {iv.var.name} across iterations of the loop; "
                f"pick a loop outside the reduction",
                [block, loop],
            )


def _check_new_region(block, nest, provided, required, buffers, loop, analyzer, reverse) -> None:
    """The safety net of region inference: at the new place the block must write all that is
    read there (compute_at), or read only what was written there (reverse_compute_at)."""
    dom = {iv.var: nest.var_ranges[id(iv.var)] for iv in block.iter_vars}
    for key, region in provided.items():
        if not required.get(key):
            continue
        buffer = buffers[key]
        touched = [_relax_interval(interval, dom, analyzer) for interval in region]
        needed = union(required[key], analyzer)
        if reverse:  # reads outside the buffer are guarded (padding): they never execute
            touched = clip_to_buffer(touched, buffer, analyzer)
        else:
            needed = clip_to_buffer(needed, buffer, analyzer)
        ok = covers(needed, touched, analyzer) if reverse else covers(touched, needed, analyzer)
        if not ok:
            raise RegionCoverError(_region_message(block, buffer, loop, touched, needed, reverse),
                                   [block, loop])  # fmt: skip


def _relax_interval(interval: IntervalSet, dom, analyzer) -> IntervalSet:
    return IntervalSet(eval_set(interval.min, dom, analyzer).min,
                       eval_set(interval.max, dom, analyzer).max)  # fmt: skip


def _region_message(block, buffer, loop, touched, needed, reverse: bool) -> str:
    mine, theirs = format_region(buffer.name, touched), format_region(buffer.name, needed)
    at = f"at each iteration of loop {loop.loop_var.name}"
    if reverse:
        return (
            f"block {block.name_hint!r} would read {mine} {at}, but its producers write only "
            f"{theirs} there: it would read data not produced yet"
        )
    return (
        f"block {block.name_hint!r} would write only {mine} {at}, but its consumers read "
        f"{theirs} there"
    )


def _check_order_kept(state, moved: ScheduleState, block: Block, scope: Block, loop: For) -> None:
    """Every dependence between the block and another block of the scope keeps its direction
    (a block moved past a consumer, or ahead of a producer, would read stale data)."""
    order = {b.uid: k for k, b in enumerate(moved.child_blocks(moved.node(scope.uid)))}
    for dep in scope_dependences(state, scope):
        if block not in (dep.src, dep.dst) or order[dep.src.uid] < order[dep.dst.uid]:
            continue
        other = dep.dst if dep.src is block else dep.src
        role = "consumer" if dep.src is block else "producer"
        raise DependencyError(
            f"moving block {block.name_hint!r} under loop {loop.loop_var.name} would put it "
            f"{'after' if role == 'consumer' else 'before'} its {role} {other.name_hint!r} "
            f"({dep.kind} dependence); pick a loop that keeps the data flow in order",
            [block, loop, other],
        )


def _move(state: ScheduleState, block: Block, loop: For, new_stmt, position: int):
    moved = remove_leaf(state, block)
    target = moved.node(loop.uid)
    items = list(target.body.seq) if isinstance(target.body, SeqStmt) else [target.body]
    items.insert(position, new_stmt)
    return moved.replace(target, target.replace(body=SeqStmt.flatten(*items)))


# -- sampling ---------------------------------------------------------------------------------
@primitive("SampleComputeLocation", inputs=("block",), outputs="loop", sampling=True)
def sample_compute_location(ctx: PrimitiveContext, block: Block, decision: int | None = None):
    """Sample a legal location for `block` (TVM's SampleComputeLocation) and return it as a
    LoopRV to pass to `compute_at`.

    The candidates are: inline (decision -2, when `compute_inline` is legal), stay at the root
    (decision -1, always), and each loop around the first consumer, down to where the
    consumers meet, at which `compute_at` is legal (decision = the loop's position among
    `get_loops(first consumer)`). Unit loops, spatial loops below a reduction loop and trailing
    reduction loops are skipped (as in TVM). A replayed decision that is no longer legal falls
    back to the nearest legal one before it.

    What the handle points at: a loop for a loop decision. TVM returns special "root" and
    "inline" marks; a LoopRV here must point at a node of the IR, so for -1 it points at the
    block's scope block (`sch.get(l)` is that Block) and for -2 at the block itself. `compute_at`
    and `reverse_compute_at` understand both: with the scope block they leave the block where it
    is, with the block itself they inline it. So `sch.compute_at(b, sch.sample_compute_location(b))`
    works for every decision, as in TVM.

    Preconditions: the block has a scope (it is not a function's root block).

    >>> sch = Schedule(workloads.get("matmul_bias_relu", M=4, N=6, K=3)[0])
    >>> block = sch.get_block("matmul")
    >>> loc = sch.sample_compute_location(block, decision=0)
    >>> sch.get(loc).loop_var.name
    'i'
    >>> sch.compute_at(block, loc)
    >>> [sch.get(l).loop_var.name for l in sch.get_loops(block)]
    ['i', 'ax0', 'ax1']
    """
    block = expect_block(block, "block")
    if ctx.state.scope_block(block) is None:
        raise ScheduleError("sample_compute_location: the root block has no compute location",
                            [block])  # fmt: skip
    if decision is not None:
        # a replay (the tuner replays thousands): check the recorded location alone, and only
        # enumerate every legal one when it is no longer legal
        location = _recorded_location(ctx.state, block, decision)
        if location is not None:
            ctx.decision = decision
            return ctx.state, location
    if decision is None:
        ctx.decision, location = _sample_location(ctx, block)
        return ctx.state, location
    locations = collect_compute_locations(ctx.state, block)
    indices = [index for index, _ in locations]
    pick = _replayed(decision, indices)
    ctx.decision = indices[pick]
    return ctx.state, locations[pick][1]


def _sample_location(ctx: PrimitiveContext, block: Block) -> tuple[int, Block | For]:
    """A location drawn uniformly among the legal ones, testing legality lazily: candidates are
    drawn in random order and the first legal one is taken (as uniform as listing them all, but
    most draws test one or two locations instead of every loop)."""
    state = ctx.state
    candidates: list[tuple[int, Block | For]] = [(-2, block), (-1, state.scope_block(block))]
    block_consumers = consumers(state, block)
    if block_consumers:
        loops = _loops_around_all(state, block_consumers)
        candidates += list(_candidate_loops(state, loops))
    while True:
        decision, location = candidates.pop(ctx.rng.randint(0, len(candidates)))
        if decision == -1 or _recorded_location(state, block, decision) is not None:
            return decision, location


def _recorded_location(state: ScheduleState, block: Block, decision) -> Block | For | None:
    """The location `decision` names when it is legal (what `collect_compute_locations` would
    list under that decision), else None."""
    if not isinstance(decision, int) or isinstance(decision, bool):
        return None
    if decision == -1:
        return state.scope_block(block)
    if decision == -2:
        return block if _legal(compute_inline_impl, state, block) else None
    block_consumers = consumers(state, block)
    if decision < 0 or not block_consumers:
        return None
    candidates = _loops_around_all(state, block_consumers)
    for position, loop in _candidate_loops(state, candidates):
        if position == decision:
            legal = _legal(compute_at_impl, state, block, loop, True, -1, False)
            return loop if legal else None
    return None


def _replayed(decision, indices: list[int]) -> int:
    if not isinstance(decision, int) or isinstance(decision, bool):
        raise ScheduleError(f"sample_compute_location: decision must be an int, got {decision!r}")
    position = bisect_left(indices, decision)
    if position < len(indices) and indices[position] == decision:
        return position
    root = indices.index(-1) if -1 in indices else 0  # "stay at root" is always a candidate
    return max(position - 1, root)


def collect_compute_locations(state: ScheduleState, block: Block) -> list[tuple[int, Block | For]]:
    """[(decision, location)] sorted by decision: (-2, block) when it can be inlined, (-1, its
    scope block), then (i, loop) for each legal compute-at loop, i its position among the loops
    of the first consumer (TVM's CollectComputeLocation)."""
    locations: list[tuple[int, Block | For]] = []
    if _legal(compute_inline_impl, state, block):
        locations.append((-2, block))
    locations.append((-1, state.scope_block(block)))
    block_consumers = consumers(state, block)
    if not block_consumers:
        return locations
    candidates = _loops_around_all(state, block_consumers)
    for position, loop in _candidate_loops(state, candidates):
        if _legal(compute_at_impl, state, block, loop, True, -1, False):
            locations.append((position, loop))
    return locations


def _candidate_loops(state, loops: list[For]):
    """Skip unit loops, spatial loops after a reduction loop and trailing reduction loops."""
    kinds = [loop_iter_type(loop) for loop in loops]
    last_spatial = max((i for i, kind in enumerate(kinds) if kind == IterType.SPATIAL),
                       default=-1)  # fmt: skip
    seen_reduce = False
    for position, (loop, kind) in enumerate(zip(loops, kinds)):
        if isinstance(loop.extent, E.IntImm) and loop.extent.value == 1:
            continue
        if kind == IterType.SPATIAL:
            if seen_reduce:
                return
        else:
            seen_reduce = True
            if position > last_spatial:
                return
        yield position, loop


def _loops_around_all(state: ScheduleState, blocks: list[Block]) -> list[For]:
    """The loops above `blocks[0]` (outermost first) down to the innermost one that encloses
    every block: where the blocks meet (empty when they meet only at the scope block)."""
    loops = []
    for loop in state.loops_above(blocks[0]):
        if not all(state.is_ancestor(loop, block) for block in blocks[1:]):
            break
        loops.append(loop)
    return loops


def _legal(impl, state, *args) -> bool:
    try:
        impl(state, *args)
    except ScheduleError:
        return False
    return True

"""Regions touched under a loop, and region cover (TVM's `region_cover` flag).

A block's read/write regions are written in its iter vars; substituting its binding puts them in
loop variables, and relaxing the loops between the block and some loop `L` (exclusive) gives the
region touched during one iteration of `L` — what compute_at must produce there. Intervals are
kept per dimension as `IntervalSet`s (`schedlab.arith.eval_set`).

A consumer has region cover when, at every loop where it meets its producers, what the producers
write there contains what it reads there (TVM's ScheduleState::region_cover). When it fails, the
consumer would read elements nobody computed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from schedlab.arith import Analyzer, IntervalSet, eval_set
from schedlab.ir import expr as E
from schedlab.ir.buffer import BufferRegion
from schedlab.ir.expr import IntImm, Range, Var
from schedlab.ir.functor import substitute
from schedlab.ir.stmt import Block, For, ForKind

from ..state import ScheduleState
from .dependence import RAW, scope_dependences

# TVM's storage ranks; a buffer of rank r is shared by the threads of thread ranks >= r, so
# regions of such buffers are relaxed over those thread loops even above the compute-at loop.
_STORAGE_RANK = {"global": 0, "shared": 1, "shared.dyn": 1, "warp": 2, "local": 3}

Region = list[IntervalSet]  # one interval per buffer dimension


@dataclass(frozen=True)
class UncoveredRead:
    """Why region cover fails: `consumer` reads `read` of a buffer under `at` (a loop, or the
    scope block), but the producers write only `produced` there."""

    consumer: Block
    buffer_name: str
    read: Region
    produced: Region
    at: For | Block


# -- loops ------------------------------------------------------------------------------------
def loops_between(state: ScheduleState, node, stop: For | None) -> list[For]:
    """The loops strictly between `node` and `stop` (exclusive), innermost first; with `stop`
    None, every loop up to the scope block."""
    loops = []
    for ancestor in reversed(state.ancestors(node)):
        if ancestor is stop or isinstance(ancestor, Block):
            break
        if isinstance(ancestor, For):
            loops.append(ancestor)
    return loops


def _thread_loops_above(state: ScheduleState, stop: For, scope: str) -> list[For]:
    """Thread-bound loops above `stop` whose threads share a buffer of storage `scope`."""
    rank = _STORAGE_RANK.get(scope, _STORAGE_RANK.get(scope.split(".")[0], 0))
    if rank in (_STORAGE_RANK["global"], _STORAGE_RANK["local"]):
        return []
    found = []
    for ancestor in state.ancestors(stop) + [stop]:
        if isinstance(ancestor, For) and ancestor.kind == ForKind.THREAD_BINDING:
            tag = ancestor.thread_tag or ""
            if rank == _STORAGE_RANK["warp"]:
                relax = tag == "threadIdx.x"
            else:
                relax = tag.startswith("threadIdx") or tag.startswith("vthread")
            if relax:
                found.append(ancestor)
    return found


def loop_domain(loops: Iterable[For]) -> dict[Var, Range]:
    """{loop var: its range} for `loops`."""
    return {loop.loop_var: Range(loop.min, loop.extent) for loop in loops}


def bind_loops(analyzer: Analyzer, loops: Iterable[For]) -> None:
    """Tell `analyzer` the range of each loop variable."""
    for loop in loops:
        analyzer.bind(loop.loop_var, Range(loop.min, loop.extent), allow_override=True)


def outer_loops(state: ScheduleState, node) -> list[For]:
    """The loops above `node` (and `node` itself if it is a loop) up to its scope block."""
    loops = state.loops_above(node)
    return loops + [node] if isinstance(node, For) else loops


# -- regions ----------------------------------------------------------------------------------
def bound_regions(state: ScheduleState, block: Block, which: str) -> list[BufferRegion]:
    """The block's `reads` or `writes` with its iter vars replaced by their bindings."""
    realize = state.realize_of(block)
    binding = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    return [substitute(region, binding) for region in getattr(block, which)]


def relax(region: BufferRegion, dom: dict[Var, Range], analyzer: Analyzer) -> Region:
    """Per-dimension intervals of `region` when the variables of `dom` range over it; an end
    that cannot be bounded becomes the buffer's end."""
    result = []
    for dim, rng in enumerate(region.region):
        low = eval_set(rng.min, dom, analyzer).min
        high = eval_set(rng.min + rng.extent - 1, dom, analyzer).max
        extent = region.buffer.shape[dim]
        low = IntImm(extent.dtype, 0) if low is None else low
        high = analyzer.simplify(extent - 1) if high is None else high
        result.append(IntervalSet(low, high))
    return result


def regions_under(state: ScheduleState, block: Block, which: str, stop: For | None,
                  analyzer: Analyzer, buffers: set[int] | None = None,
                  relax_storage_scope: bool = False) -> dict[int, list[Region]]:  # fmt: skip
    """What `block` reads or writes (`which`) during one iteration of `stop`: its regions
    relaxed over the loops between it and `stop`, keyed by id(buffer); only `buffers` when
    given. With `relax_storage_scope`, shared-memory regions are also relaxed over the thread
    loops above `stop` that share them (as TVM's compute_at)."""
    inner = loops_between(state, state.realize_of(block), stop)
    result: dict[int, list[Region]] = {}
    for region in bound_regions(state, block, which):
        key = id(region.buffer)
        if buffers is not None and key not in buffers:
            continue
        loops = list(inner)
        if relax_storage_scope and stop is not None:
            loops += _thread_loops_above(state, stop, region.buffer.scope)
        result.setdefault(key, []).append(relax(region, loop_domain(loops), analyzer))
    return result


def union(regions: list[Region], analyzer: Analyzer) -> Region:
    """The per-dimension bounding box of several regions of one buffer."""
    box = regions[0]
    for region in regions[1:]:
        box = [a.union(b, analyzer) for a, b in zip(box, region)]
    return box


def covers(outer: Region, inner: Region, analyzer: Analyzer) -> bool:
    """Whether `outer` provably contains `inner`, dimension by dimension."""
    for big, small in zip(outer, inner):
        if not (prove_le(big.min, small.min, analyzer) and prove_le(small.max, big.max, analyzer)):
            return False
    return True


def prove_le(a, b, analyzer: Analyzer) -> bool:
    """Prove `a <= b`, splitting the min/max that clipped regions bring (`min(x + 3, 9) <= x + 3`
    is out of the simplifier's reach)."""
    if analyzer.can_prove(a <= b):
        return True
    if isinstance(a, E.Min):
        return prove_le(a.a, b, analyzer) or prove_le(a.b, b, analyzer)
    if isinstance(a, E.Max):
        return prove_le(a.a, b, analyzer) and prove_le(a.b, b, analyzer)
    if isinstance(b, E.Max):
        return prove_le(a, b.a, analyzer) or prove_le(a, b.b, analyzer)
    if isinstance(b, E.Min):
        return prove_le(a, b.a, analyzer) and prove_le(a, b.b, analyzer)
    return False


def clip_to_buffer(region: Region, buffer, analyzer: Analyzer) -> Region:
    """`region` intersected with the buffer's extent (reads past it never execute: they come
    from relaxing loops whose predicate keeps them in bounds)."""
    clipped = []
    for interval, extent in zip(region, buffer.shape):
        bounds = IntervalSet(IntImm(extent.dtype, 0), analyzer.simplify(extent - 1))
        clipped.append(interval.intersect(bounds, analyzer))
    return clipped


def format_region(name: str, region: Region) -> str:
    """`B[lo:hi + 1, ...]` for error messages."""
    dims = ", ".join(str(i.min) if i.is_single_point() else f"{i.min}:{i.max} + 1" for i in region)
    return f"{name}[{dims}]"


# -- region cover -----------------------------------------------------------------------------
def lowest_common_loop(state: ScheduleState, a, b) -> For | None:
    """The innermost loop above both `a` and `b` inside their scope (None: only the scope)."""
    above_b = {id(loop) for loop in outer_loops(state, b)}
    common = [loop for loop in outer_loops(state, a) if id(loop) in above_b]
    return common[-1] if common else None


def uncovered_read(
    state: ScheduleState, consumer: Block, buffers: set[int] | None = None
) -> UncoveredRead | None:
    """None when `consumer` has region cover; else the first read its producers do not cover
    (only reads of `buffers`, ids of Buffers, when given)."""
    scope = state.scope_block(consumer)
    if scope is None:
        return None
    by_lca: dict[int, tuple[For | None, list[Block]]] = {}
    for dep in scope_dependences(state, scope):
        if dep.dst is consumer and dep.kind == RAW:
            lca = lowest_common_loop(state, dep.src, consumer)
            by_lca.setdefault(id(lca), (lca, []))[1].append(dep.src)
    for lca, producers in by_lca.values():
        found = _uncovered_at(state, consumer, producers, lca, buffers)
        if found is not None:
            return found
    return None


def _uncovered_at(state, consumer, producers, lca, only) -> UncoveredRead | None:
    analyzer = Analyzer()
    bind_loops(analyzer, outer_loops(state, lca) if lca is not None else [])
    read = regions_under(state, consumer, "reads", lca, analyzer, only)
    produced: dict[int, list[Region]] = {}
    for producer in producers:
        for key, regions in regions_under(
            state, producer, "writes", lca, analyzer, set(read)
        ).items():
            produced.setdefault(key, []).extend(regions)
    buffers = {id(r.buffer): r.buffer for r in consumer.reads}
    for key, regions in produced.items():
        need = clip_to_buffer(union(read[key], analyzer), buffers[key], analyzer)
        have = union(regions, analyzer)
        if not covers(have, need, analyzer):
            at = lca if lca is not None else state.scope_block(consumer)
            return UncoveredRead(consumer, buffers[key].name, need, have, at)
    return None


def has_region_cover(state: ScheduleState, consumer: Block) -> bool:
    """Whether what `consumer` reads is written by its producers (TVM's region_cover)."""
    return uncovered_read(state, consumer) is None

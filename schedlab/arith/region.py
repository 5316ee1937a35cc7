"""Buffer regions: what a block reads and writes (TVM's GetBlockReadWriteRegion), relaxing a
region over loop domains, union and cover.

Every access `B[i0, i1, ...]` is the point region `B[i0:i0+1, ...]`; accesses under loops inside
the block are relaxed over those loops; accesses inside nested blocks count through the nested
blocks' own reads/writes (with their iter vars replaced by their bindings). Several accesses to
one buffer merge into their bounding box: `A[v]` and `A[v + 1]` give `A[v:v + 2]`.
"""

from __future__ import annotations

from collections.abc import Mapping

from schedlab.ir import expr as E
from schedlab.ir import stmt as S
from schedlab.ir.buffer import Buffer, BufferRegion
from schedlab.ir.dtype import bool_
from schedlab.ir.functor import Visitor, substitute

from .analyzer import Analyzer
from .int_set import IntervalSet, eval_set


def _full_range(buffer: Buffer, dim: int) -> E.Range:
    extent = buffer.shape[dim]
    return E.Range(E.IntImm(extent.dtype, 0), extent)


def relax_region(
    region: BufferRegion, dom_map: Mapping[E.Var, E.Range], analyzer: Analyzer | None = None
) -> BufferRegion:
    """The region covered by `region` when the variables of `dom_map` range over their domains
    (per-dimension interval bounds, simplified; unknown ends fall back to the buffer's)."""
    analyzer = analyzer if analyzer is not None else Analyzer()
    ranges = []
    for dim, rng in enumerate(region.region):
        if not dom_map:
            ranges.append(_simplified_range(rng, analyzer))
            continue
        low = eval_set(rng.min, dom_map, analyzer).min
        high = eval_set(rng.min + rng.extent - 1, dom_map, analyzer).max
        interval = IntervalSet(low, high)
        ranges.append(interval.cover_range(_full_range(region.buffer, dim), analyzer))
    return BufferRegion(region.buffer, tuple(ranges))


def _simplified_range(rng: E.Range, analyzer: Analyzer) -> E.Range:
    low, extent = analyzer.simplify(rng.min), analyzer.simplify(rng.extent)
    return rng if low is rng.min and extent is rng.extent else E.Range(low, extent)


def region_union(
    a: BufferRegion, b: BufferRegion, analyzer: Analyzer | None = None
) -> BufferRegion:
    """The bounding box of two regions of the same buffer."""
    if a.buffer is not b.buffer:
        raise ValueError(
            f"region_union: regions of different buffers {a.buffer.name} and {b.buffer.name}"
        )
    analyzer = analyzer if analyzer is not None else Analyzer()
    ranges = []
    for ra, rb in zip(a.region, b.region):
        low = analyzer.simplify(E.Min(ra.min, rb.min))
        end = analyzer.simplify(E.Max(ra.min + ra.extent, rb.min + rb.extent))
        ranges.append(E.Range(low, analyzer.simplify(end - low)))
    return BufferRegion(a.buffer, tuple(ranges))


def region_covers(
    outer: BufferRegion, inner: BufferRegion, analyzer: Analyzer | None = None
) -> bool:
    """Whether `outer` provably contains `inner` (same buffer, every dimension)."""
    if outer.buffer is not inner.buffer:
        return False
    analyzer = analyzer if analyzer is not None else Analyzer()
    for ro, ri in zip(outer.region, inner.region):
        if not analyzer.can_prove(ro.min <= ri.min):
            return False
        if not analyzer.can_prove(ri.min + ri.extent <= ro.min + ro.extent):
            return False
    return True


class _AccessCollector(Visitor):
    """Collects the regions a block touches, in first-access order."""

    def __init__(self, analyzer: Analyzer, excluded: set[int], matched: dict[int, BufferRegion]):
        self.analyzer = analyzer
        self.excluded = excluded
        self.matched = matched
        self.dom: dict[E.Var, E.Range] = {}
        self.lets: dict[E.Var, E.PrimExpr] = {}
        self.reads: dict[int, BufferRegion] = {}
        self.writes: dict[int, BufferRegion] = {}

    # -- recording --------------------------------------------------------------------------
    def record(self, table: dict[int, BufferRegion], region: BufferRegion) -> None:
        buffer = region.buffer
        if id(buffer) in self.excluded:
            return
        if id(buffer) in self.matched:
            region = self.matched[id(buffer)]
            buffer = region.buffer
        if self.lets:
            region = substitute(region, dict(self.lets))
        region = relax_region(region, self.dom, self.analyzer)
        old = table.get(id(buffer))
        table[id(buffer)] = region if old is None else region_union(old, region, self.analyzer)

    def point_region(self, buffer: Buffer, indices) -> BufferRegion:
        ranges = []
        for index in indices:
            if isinstance(index, E.Ramp):  # a vector access covers all its lanes
                ranges.append(eval_set(index, {}, self.analyzer).to_range(self.analyzer))
            else:
                ranges.append(E.Range(index, E.IntImm(index.dtype, 1)))
        return BufferRegion(buffer, tuple(ranges))

    # -- visiting ---------------------------------------------------------------------------
    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        self.generic_visit(node)
        self.record(self.reads, self.point_region(node.buffer, node.indices))

    def visit_BufferStore(self, node: S.BufferStore) -> None:
        self.generic_visit(node)
        self.record(self.writes, self.point_region(node.buffer, node.indices))

    def visit_For(self, node: S.For) -> None:
        self.visit(node.min)
        self.visit(node.extent)
        self.dom[node.loop_var] = E.Range(node.min, node.extent)
        self.visit(node.body)
        del self.dom[node.loop_var]

    def visit_LetStmt(self, node: S.LetStmt) -> None:
        self.visit(node.value)
        self.lets[node.var] = node.value
        self.visit(node.body)
        del self.lets[node.var]

    def visit_Let(self, node: E.Let) -> None:
        self.visit(node.value)
        self.lets[node.var] = node.value
        self.visit(node.body)
        del self.lets[node.var]

    def visit_Allocate(self, node: S.Allocate) -> None:
        self.excluded.add(id(node.buffer))
        self.visit(node.body)

    def visit_BlockRealize(self, node: S.BlockRealize) -> None:
        for value in node.iter_values:
            self.visit(value)
        self.visit(node.predicate)
        block = node.block
        binding = {iv.var: value for iv, value in zip(block.iter_vars, node.iter_values)}
        for region in block.reads:
            self.record(self.reads, substitute(region, binding))
        for region in block.writes:
            self.record(self.writes, substitute(region, binding))


def block_access_regions(
    block: S.Block, analyzer: Analyzer | None = None
) -> tuple[list[BufferRegion], list[BufferRegion]]:
    """The (reads, writes) of `block` inferred from its init and body, in terms of its iter
    vars: point accesses unioned per buffer into their bounding box, relaxed over loops inside
    the block, nested blocks through their declared regions; buffers the block allocates are
    left out; a buffer both read and written (a reduction update) is in both lists."""
    if not isinstance(block, S.Block):
        raise TypeError(f"block_access_regions: expected a Block, got {type(block).__name__}")
    analyzer = analyzer if analyzer is not None else Analyzer()
    with analyzer.constraint_scope(E.IntImm(bool_, 1)):  # the iter var bounds stay local
        for iv in block.iter_vars:
            # extent-1 iter vars stay symbolic (`A[vi0, ...]`, as written), others give bounds
            if not (isinstance(iv.dom.extent, E.IntImm) and iv.dom.extent.value == 1):
                analyzer.bind(iv.var, iv.dom, allow_override=True)
        excluded = {id(b) for b in block.alloc_buffers}
        matched = {id(m.buffer): m.source for m in block.match_buffers}
        collector = _AccessCollector(analyzer, excluded, matched)
        if block.init is not None:
            collector.visit(block.init)
        collector.visit(block.body)
    return list(collector.reads.values()), list(collector.writes.values())


def get_block_read_write_region(block: S.Block):
    """TVM's name for `block_access_regions`."""
    return block_access_regions(block)

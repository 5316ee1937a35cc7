"""Facts about loop nests that the loop primitives (and others) check before rewriting:

- `block_accesses(stmt)`: what each block under a statement reads and writes during one
  execution of that statement (its declared regions, bindings substituted, relaxed over the
  loops in between);
- `iteration_conflict(first, second, domains)`: whether two of those blocks may touch the same
  data in *different* iterations of some loops — the condition under which changing the order of
  those iterations (reorder, merge) could change the result;
- `realizes_under(stmt)` and `loop_iter_type(loop)`: the blocks a statement holds, and whether a
  loop feeds spatial or reduction iter vars (TVM's GetLoopIterType).

Two accesses only meet within one iteration when, on some buffer dimensions, both touch the same
aligned tile `[e * q, e * q + e)` and the tile numbers `q` are a one-to-one function of the loop
variables (`B[i, 0:16]` against `B[i, 0:16]` over loop `i`; `C[i0 * 8:i0 * 8 + 8, ...]` over `i0`).
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.arith import Analyzer, detect_iter_map, relax_region
from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer, BufferRegion
from schedlab.ir.functor import post_order_visit, pre_order_visit, substitute, uses_var
from schedlab.ir.node import child_fields
from schedlab.ir.op import convert
from schedlab.ir.stmt import Block, BlockRealize, BufferStore, For, IterType, LetStmt, Stmt


@dataclass(frozen=True)
class BlockAccess:
    """One block under a statement (None for a store outside any block) and the regions it
    reads and writes during one execution of that statement."""

    block: Block | None
    reads: tuple[BufferRegion, ...]
    writes: tuple[BufferRegion, ...]

    @property
    def name(self) -> str:
        return self.block.name_hint if self.block is not None else "a store outside blocks"


def block_accesses(stmt: Stmt, analyzer: Analyzer | None = None) -> list[BlockAccess]:
    """The blocks directly under `stmt` (not those nested in other blocks), in program order,
    with their accesses relaxed over the loops between `stmt` and them. Variables defined above
    `stmt` (outer loops) stay symbolic."""
    found: list[BlockAccess] = []
    _collect(stmt, {}, {}, analyzer or Analyzer(), found)
    return found


def _collect(stmt, dom: dict, lets: dict, analyzer: Analyzer, found: list) -> None:
    def relaxed(regions) -> tuple[BufferRegion, ...]:
        regions = [substitute(r, lets) if lets else r for r in regions]
        return tuple(relax_region(r, dom, analyzer) for r in regions)

    if isinstance(stmt, BlockRealize):
        block = stmt.block
        binding = {iv.var: value for iv, value in zip(block.iter_vars, stmt.iter_values)}
        reads = [substitute(r, binding) for r in block.reads]
        writes = [substitute(r, binding) for r in block.writes]
        found.append(BlockAccess(block, relaxed(reads), relaxed(writes)))
        return
    if isinstance(stmt, BufferStore):
        reads = [_point(load.buffer, load.indices) for load in _loads(stmt)]
        writes = [_point(stmt.buffer, stmt.indices)]
        found.append(BlockAccess(None, relaxed(reads), relaxed(writes)))
        return
    if isinstance(stmt, For):
        inner = {**dom, stmt.loop_var: E.Range(stmt.min, stmt.extent)}
        _collect(stmt.body, inner, lets, analyzer, found)
        return
    if isinstance(stmt, LetStmt):
        _collect(stmt.body, dom, {**lets, stmt.var: stmt.value}, analyzer, found)
        return
    for field in child_fields(type(stmt)):
        value = getattr(stmt, field)
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, Stmt):
                _collect(item, dom, lets, analyzer, found)


def _loads(stmt: Stmt) -> list[E.BufferLoad]:
    loads: list[E.BufferLoad] = []
    post_order_visit(stmt, lambda n: loads.append(n) if isinstance(n, E.BufferLoad) else None)
    return loads


def _point(buffer: Buffer, indices) -> BufferRegion:
    return BufferRegion(buffer, tuple(E.Range(i, E.IntImm(i.dtype, 1)) for i in indices))


def iteration_conflict(first: BlockAccess, second: BlockAccess, domains: dict[E.Var, E.Range],
                       analyzer: Analyzer | None = None) -> Buffer | None:  # fmt: skip
    """A buffer that `first` and `second` both access (at least one writing it) at places that
    may coincide in two *different* iterations of the loops in `domains`; None when every such
    access meets only within one iteration (so reordering those iterations keeps the result)."""
    analyzer = analyzer or Analyzer()
    pairs = [(a, b) for a in first.writes for b in (*second.reads, *second.writes)]
    pairs += [(a, b) for a in first.reads for b in second.writes]
    for region_a, region_b in pairs:
        if region_a.buffer is not region_b.buffer:
            continue
        if not _same_iteration_only(region_a, region_b, domains, analyzer):
            return region_a.buffer
    return None


def shared_written_buffer(first: BlockAccess, second: BlockAccess) -> Buffer | None:
    """A buffer both access with at least one of them writing it (so their order matters)."""
    for a in first.writes:
        if any(a.buffer is b.buffer for b in (*second.reads, *second.writes)):
            return a.buffer
    for a in first.reads:
        if any(a.buffer is b.buffer for b in second.writes):
            return a.buffer
    return None


def _same_iteration_only(a: BufferRegion, b: BufferRegion, domains, analyzer: Analyzer) -> bool:
    varying = {v: r for v, r in domains.items() if not _is_one(r.extent)}
    if not varying:
        return True
    with analyzer.constraint_scope(convert(True)):
        for var, rng in varying.items():
            analyzer.bind(var, rng, allow_override=True)
        tiles = [_tile_number(ra, rb, analyzer) for ra, rb in zip(a.region, b.region)]
    tiles = [t for t in tiles if t is not None and uses_var(t, lambda v: v in varying)]
    if not tiles:
        return False
    return bool(detect_iter_map(tiles, varying, check_level="bijective"))


def _tile_number(ra: E.Range, rb: E.Range, analyzer: Analyzer):
    """`q` when both ranges are the same aligned tile `[e*q + c, e*q + c + e)` (c constant)."""
    if not (isinstance(ra.extent, E.IntImm) and isinstance(rb.extent, E.IntImm)):
        return None
    extent = ra.extent.value
    if extent != rb.extent.value or extent < 1 or not analyzer.can_prove_equal(ra.min, rb.min):
        return None
    if extent == 1:
        return analyzer.simplify(ra.min)
    size = E.IntImm(ra.min.dtype, extent)
    if not isinstance(analyzer.simplify(E.FloorMod(ra.min, size)), E.IntImm):
        return None
    return analyzer.simplify(E.FloorDiv(ra.min, size))


def _is_one(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


def realizes_under(stmt: Stmt, nested: bool = False) -> list[BlockRealize]:
    """The BlockRealizes below `stmt` in program order: those of its own scope, or with
    `nested` those inside their blocks too. Only statements are walked (a block's iter values,
    regions and stores cannot hold a block), which keeps this cheap on big loop bodies."""
    found: list[BlockRealize] = []

    def visit(node) -> bool | None:
        if isinstance(node, BlockRealize):
            found.append(node)
            return None if nested else False
        return None if isinstance(node, Stmt) and not isinstance(node, BufferStore) else False

    pre_order_visit(stmt, visit)
    return found


def loop_iter_type(loop: For) -> IterType:
    """SPATIAL when the blocks of the loop's scope use its variable only in spatial bindings (or
    not at all), REDUCE when only in reduce bindings, OPAQUE when both or in other iter vars
    (TVM's GetLoopIterType)."""
    var = loop.loop_var
    used: set[IterType] = set()
    for realize in realizes_under(loop.body):
        for iter_var, value in zip(realize.block.iter_vars, realize.iter_values):
            if uses_var(value, lambda v: v is var):
                kind = iter_var.iter_type
                used.add(kind if kind in (IterType.SPATIAL, IterType.REDUCE) else IterType.OPAQUE)
    if IterType.OPAQUE in used or len(used) == 2:
        return IterType.OPAQUE
    return IterType.REDUCE if IterType.REDUCE in used else IterType.SPATIAL

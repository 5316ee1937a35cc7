"""What the schedule rules read from a block: iter types, binding shape, access patterns (TVM's
meta_schedule utils: GetLoopIterType, IsTrivialBinding, AnalyzeReadWritePattern,
NeedsMultiLevelTiling, IsWriteCache, ...). Pure functions of the IR; nothing here schedules."""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.ir import expr as E
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import collect_vars, post_order_visit
from schedlab.ir.stmt import Block, For, IterType
from schedlab.schedule import Schedule
from schedlab.schedule.analysis.loops import loop_iter_type  # noqa: F401 - the rules read it here
from schedlab.schedule.errors import HandleError

# TVM's iter type of a loop whose blocks use it both ways (or in scan/opaque iter vars).
OPAQUE = IterType.OPAQUE


def block_of(sch: Schedule, block_rv) -> Block | None:
    """The block behind a handle, None when an earlier primitive removed it (TVM's HasBlock)."""
    try:
        node = sch.get(block_rv)
    except HandleError:
        return None
    return node if isinstance(node, Block) else None


def const_extent(loop: For) -> int | None:
    return loop.extent.value if isinstance(loop.extent, E.IntImm) else None


def is_root(sch: Schedule, block: Block) -> bool:
    return sch.state.scope_block(block) is None


def is_trivial_binding(sch: Schedule, block: Block) -> bool:
    """Each iter var is bound to exactly the loop at its position (TVM's IsTrivialBinding)."""
    loops = sch.state.loops_above(block)
    values = sch.state.realize_of(block).iter_values
    if len(loops) != len(values):
        return False
    return all(value is loop.loop_var for value, loop in zip(values, loops))


def is_spatial(block: Block) -> bool:
    return all(iv.iter_type == IterType.SPATIAL for iv in block.iter_vars)


def is_spatial_func(func: PrimFunc) -> bool:
    """No block of the function has a non-spatial iter var (TVM's IsSpatialPrimFunc)."""
    found = []
    post_order_visit(
        func.body, lambda n: found.append(n) if isinstance(n, Block) and not is_spatial(n) else None
    )
    return not found


def block_names_post_order(func: PrimFunc) -> list[str]:
    """Every block name, children before their parent (the root block last)."""
    names: list[str] = []
    post_order_visit(
        func.body, lambda n: names.append(n.name_hint) if isinstance(n, Block) else None
    )
    return names


def has_if_then_else(block: Block) -> bool:
    found = []

    def visit(node) -> None:
        if isinstance(node, E.Select) or (isinstance(node, E.Call) and node.op == "if_then_else"):
            found.append(node)

    post_order_visit(block.body, visit)
    return bool(found)


def has_op(block: Block, ops: tuple[str, ...]) -> bool:
    """Whether the block body calls one of `ops` (names as in `T.exp`: "exp", "tir.exp")."""
    wanted = {op.removeprefix("tir.") for op in ops}
    found = []
    post_order_visit(
        block.body,
        lambda n: found.append(n) if isinstance(n, E.Call) and n.op.removeprefix("tir.") in wanted
        else None,
    )  # fmt: skip
    return bool(found)


@dataclass(frozen=True)
class Pattern:
    """How a read's indices map onto the write's (TVM's AnalyzeReadWritePattern)."""

    exists: bool
    surjective: bool = False
    injective: bool = False
    ordered: bool = False
    no_const_read: bool = False
    no_shift_read: bool = False


def read_write_pattern(read, write) -> Pattern:
    """Each read index must be a constant or `write var +/- constant`; then: are all write vars
    used (surjective), each at most once (injective), in the write's order (ordered)?"""
    position: dict[int, int] = {}
    for dim, rng in enumerate(write.region):
        if not isinstance(rng.extent, E.IntImm) or not isinstance(rng.min, E.Var):
            return Pattern(False)
        position[id(rng.min)] = dim
    mapped, no_const, no_shift = [], True, True
    for rng in read.region:
        if not isinstance(rng.extent, E.IntImm):
            return Pattern(False)
        if isinstance(rng.min, E.IntImm):
            no_const = False
            continue
        var, shifted = _var_with_shift(rng.min)
        if var is None or id(var) not in position:
            return Pattern(False)
        mapped.append(position[id(var)])
        no_shift = no_shift and not shifted
    counts = [mapped.count(dim) for dim in range(len(write.region))]
    return Pattern(True, 0 not in counts, max(counts, default=0) <= 1,
                   mapped == sorted(mapped), no_const, no_shift)  # fmt: skip


def _var_with_shift(index) -> tuple[E.Var | None, bool]:
    if isinstance(index, E.Var):
        return index, False
    if isinstance(index, (E.Add, E.Sub)):
        if isinstance(index.a, E.Var) and isinstance(index.b, E.IntImm):
            return index.a, True
        if (
            isinstance(index, E.Add)
            and isinstance(index.b, E.Var)
            and isinstance(index.a, E.IntImm)
        ):
            return index.b, True
    return None, False


def is_write_cache(block: Block) -> bool:
    """One write, every read an injective, ordered image of it: a copy-like epilogue."""
    if len(block.writes) != 1:
        return False
    patterns = [read_write_pattern(r, block.writes[0]) for r in block.reads]
    return all(p.injective and p.ordered for p in patterns)


def needs_multi_level_tiling(sch: Schedule, block: Block) -> bool:
    """A reduction-like block with data reuse: some read does not depend on some spatial iter
    var (TVM's NeedsMultiLevelTiling)."""
    if "meta_schedule.tiling_structure" in block.annotations:
        return False
    if len(block.writes) != 1 or not block.reads or is_spatial(block):
        return False
    if not is_trivial_binding(sch, block):
        return False
    out = block.writes[0].buffer
    spatial = [iv.var for iv in block.iter_vars
               if iv.iter_type == IterType.SPATIAL and not _unit_domain(iv)]  # fmt: skip
    seen: set[int] = set()
    unused = 0
    for read in block.reads:
        if id(read.buffer) in seen:
            return False
        seen.add(id(read.buffer))
        if read.buffer is out:
            continue
        if any(not isinstance(rng.extent, E.IntImm) for rng in read.region):
            return False
        used = {id(v) for rng in read.region for v in collect_vars(rng.min)}
        unused += sum(1 for var in spatial if id(var) not in used)
    return unused >= 1


def _unit_domain(iter_var) -> bool:
    dom = iter_var.dom
    return getattr(dom.min, "value", None) == 0 and getattr(dom.extent, "value", None) == 1


def cumulative_lengths(sch: Schedule, block: Block) -> tuple[int, int] | None:
    """(product of spatial loop extents, product of reduce loop extents) above the block, or
    None when a loop is symbolic or used both ways."""
    space = reduce = 1
    for loop in sch.state.loops_above(block):
        extent = const_extent(loop)
        kind = loop_iter_type(loop)
        if extent is None or kind == OPAQUE:
            return None
        if kind == IterType.SPATIAL:
            space *= extent
        else:
            reduce *= extent
    return space, reduce

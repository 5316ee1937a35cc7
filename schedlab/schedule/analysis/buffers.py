"""Facts about the buffers a block touches, used by the cache and buffer primitives: which buffer
an index or name refers to, where a buffer is allocated, which blocks of a scope write or read
it, whether a block sits in another block's init, and for a cache stage: where it can go, the
region it must copy, and whether that covers the readers (TVM's cache_read_write.cc makes the
same decisions). Whether a block's writes fill a region densely (so a copy back cannot clobber
data) is in buffer_writes.py.

A stage goes into the innermost loop or block that holds both the buffer's writer and the first
"related" block (the readers served through the stage), right before the child that holds that
block: after the writer, before the first reader. It copies what the writer writes, relaxed over
the loops between the writer and that place (clamped to the buffer).

Buffer arguments follow TVM's Python API: an int indexes `block.reads` or `block.writes` (which
one depends on the primitive), a str names a buffer the block accesses, and `("read", i)` /
`("write", i)` picks one explicitly (a JSON trace turns the tuple into a list; both work).
"""

from __future__ import annotations

from schedlab.arith import Analyzer, region_covers, relax_region
from schedlab.ir import op
from schedlab.ir.buffer import SCOPES, Buffer, BufferRegion
from schedlab.ir.expr import BufferLoad, Range
from schedlab.ir.functor import collect_vars, post_order_visit, substitute
from schedlab.ir.stmt import Block, BufferStore, For, IfThenElse, SeqStmt, Stmt

from ..errors import BufferIndexError, ScheduleError
from ..state import ScheduleState

KINDS = ("read", "write")


class StorageScopeError(ScheduleError):
    """The storage scope is not one schedlab knows."""


class NotAllocatedBufferError(ScheduleError):
    """The buffer is a function parameter (or a match_buffer view), not an intermediate that a
    block allocates."""


class BlockInInitError(ScheduleError):
    """The block sits inside another block's `init` (after blockize of a reduction), where no
    stage can be placed."""


def check_storage_scope(scope, primitive: str) -> str:
    """`scope` itself when it is a known storage scope; a StorageScopeError naming them if not."""
    if not isinstance(scope, str) or scope not in SCOPES:
        raise StorageScopeError(
            f"storage_scope {scope!r} is not a storage scope; use one of "
            f"{', '.join(repr(s) for s in SCOPES)}",
            primitive=primitive,
        )
    return scope


# -- which buffer ---------------------------------------------------------------------------
def resolve_buffer(block: Block, index, default_kind: str | None, primitive: str, arg: str):
    """The (buffer, kind, position) that `index` picks among the block's reads or writes.

    `default_kind` ("read"/"write") is where an int or a name is looked up; None means an int
    is ambiguous and a name is looked up among both (writes win when a buffer is in both)."""
    if isinstance(index, (tuple, list)):
        return _by_pair(block, index, primitive, arg)
    if isinstance(index, int) and not isinstance(index, bool):
        if default_kind is None:
            raise BufferIndexError(
                f"{arg}={index} is ambiguous; pass ('read', i), ('write', i) or a "
                f"buffer name. {_listing(block)}",
                [block],
                primitive=primitive,
            )
        return _by_position(block, default_kind, index, primitive, arg)
    if isinstance(index, str):
        return _by_name(block, index, default_kind, primitive, arg)
    raise BufferIndexError(
        f"{arg} must be an int, a buffer name or ('read'|'write', int), got "
        f"{type(index).__name__} {index!r}. {_listing(block)}",
        [block],
        primitive=primitive,
    )


def _regions(block: Block, kind: str) -> tuple[BufferRegion, ...]:
    return block.reads if kind == "read" else block.writes


def _listing(block: Block, kinds=KINDS) -> str:
    parts = []
    for kind in kinds:
        names = [f"{i}: {r.buffer.name}" for i, r in enumerate(_regions(block, kind))]
        verb = "reads" if kind == "read" else "writes"
        parts.append(f"block {block.name_hint!r} {verb} " + (", ".join(names) or "nothing"))
    return "; ".join(parts) + "."


def _by_position(block: Block, kind: str, index: int, primitive: str, arg: str):
    regions = _regions(block, kind)
    if not 0 <= index < len(regions):
        raise BufferIndexError(
            f"{arg}={index} is out of range. {_listing(block, (kind,))}",
            [block],
            primitive=primitive,
        )
    return regions[index].buffer, kind, index


def _by_pair(block: Block, pair, primitive: str, arg: str):
    if len(pair) != 2 or pair[0] not in KINDS or not isinstance(pair[1], int):
        raise BufferIndexError(
            f"{arg} {pair!r} must be ('read', i) or ('write', i). {_listing(block)}",
            [block],
            primitive=primitive,
        )
    return _by_position(block, pair[0], pair[1], primitive, arg)


def _by_name(block: Block, name: str, kind: str | None, primitive: str, arg: str):
    kinds = KINDS if kind is None else (kind,)
    found = None
    for each in kinds:  # reads first, so a buffer also written resolves to the write
        for position, region in enumerate(_regions(block, each)):
            if region.buffer.name == name:
                found = (region.buffer, each, position)
    if found is None:
        raise BufferIndexError(
            f"{arg}={name!r} is not a buffer the block accesses. {_listing(block, kinds)}",
            [block],
            primitive=primitive,
        )
    return found


# -- where a buffer lives, who touches it -----------------------------------------------------
def allocation_site(state: ScheduleState, block: Block, buffer: Buffer) -> Block | None:
    """The block (`block` or one above it) whose alloc_buffers hold `buffer`; None for a
    function parameter. A match_buffer view raises NotAllocatedBufferError."""
    for node in [block, *reversed(state.ancestors(block))]:
        if not isinstance(node, Block):
            continue
        if any(b is buffer for b in node.alloc_buffers):
            return node
        if any(m.buffer is buffer for m in node.match_buffers):
            raise NotAllocatedBufferError(
                f"buffer {buffer.name} is a match_buffer view of block {node.name_hint!r}, "
                "not an allocated buffer",
                [node],
            )
    return None


def require_allocated(state: ScheduleState, block: Block, buffer: Buffer, primitive: str):
    """The block allocating `buffer`; NotAllocatedBufferError for a function parameter."""
    site = allocation_site(state, block, buffer)
    if site is None:
        raise NotAllocatedBufferError(
            f"buffer {buffer.name} is a parameter of the function (an input or "
            "output), not an intermediate buffer allocated by a block; only intermediates can "
            "be changed this way",
            [block],
            primitive=primitive,
        )
    return site


def init_owner(state: ScheduleState, block: Block) -> Block | None:
    """The block whose `init` holds `block` (then its scope block), or None.

    Such blocks (blockize of a reduction puts the init's loop nest there) run only on the
    first reduction iteration. Like TVM, whose sref tree leaves inits out, the scope's child
    blocks do not include them (ScheduleState.child_blocks walks the body only)."""
    for node, field, _ in reversed(state.location(block).path):
        if isinstance(node, Block):
            return node if field == "init" else None
    return None


def check_not_in_init(state: ScheduleState, block: Block, primitive: str) -> None:
    """A BlockInInitError when `block` is inside its scope block's init."""
    owner = init_owner(state, block)
    if owner is None:
        return
    raise BlockInInitError(
        f"block {block.name_hint!r} is inside the init of block {owner.name_hint!r}, which "
        f"runs only on the first reduction iteration; {primitive} cannot place a stage "
        f"there. Run decompose_reduction on {owner.name_hint!r} first: it moves the init "
        "into a block of its own, which can then be cached",
        [block],
        primitive=primitive,
    )


def accesses(regions, buffer: Buffer) -> bool:
    return any(r.buffer is buffer for r in regions)


def region_of(regions, buffer: Buffer) -> BufferRegion | None:
    for region in regions:
        if region.buffer is buffer:
            return region
    return None


def writers_in_scope(state: ScheduleState, scope: Block, buffer: Buffer) -> list[Block]:
    """The child blocks of `scope` that write `buffer`, in program order."""
    return [b for b in state.child_blocks(scope) if accesses(b.writes, buffer)]


def readers_in_scope(state: ScheduleState, scope: Block, buffer: Buffer) -> list[Block]:
    """The child blocks of `scope` that read `buffer`, in program order."""
    return [b for b in state.child_blocks(scope) if accesses(b.reads, buffer)]


def loads_buffer(stmt: Stmt | None, buffer: Buffer) -> bool:
    """Whether `stmt` (nested blocks included) loads from `buffer`."""
    found = []

    def visit(node):
        if isinstance(node, BufferLoad) and node.buffer is buffer:
            found.append(node)

    if stmt is not None:
        post_order_visit(stmt, visit)
    return bool(found)


def stores_buffer(stmt: Stmt | None, buffer: Buffer) -> bool:
    found = []

    def visit(node):
        if isinstance(node, BufferStore) and node.buffer is buffer:
            found.append(node)

    if stmt is not None:
        post_order_visit(stmt, visit)
    return bool(found)


def reads_old_contents(block: Block, buffer: Buffer) -> bool:
    """Whether `block` reads values of `buffer` it did not write itself first: it loads the
    buffer and has no init that stores it (a reduction's init makes the loads see its own
    partial results)."""
    return loads_buffer(block.body, buffer) and not stores_buffer(block.init, buffer)


def free_of(expr, variables: set[int]) -> bool:
    """Whether `expr` uses none of the variables whose ids are in `variables`."""
    return not any(id(v) in variables for v in collect_vars(expr))


def loop_and_iter_vars(stmt: Stmt) -> set[int]:
    """Ids of the loop and block iter variables defined inside `stmt`."""
    found: set[int] = set()

    def visit(node):
        if isinstance(node, For):
            found.add(id(node.loop_var))
        elif isinstance(node, Block):
            found.update(id(iv.var) for iv in node.iter_vars)

    post_order_visit(stmt, visit)
    return found


# -- cache stages: where, which region, is it enough --------------------------------------------
class CacheLocationError(ScheduleError):
    """The cache stage has no place that runs after the writer and before the readers."""


class RegionCoverError(ScheduleError):
    """A reader needs elements the cache would not hold."""


# -- location -------------------------------------------------------------------------------
def first_in_order(state: ScheduleState, scope: Block, blocks: list[Block]) -> Block:
    """The block of `blocks` that comes first among the scope's child blocks."""
    order = {id(b): i for i, b in enumerate(state.child_blocks(scope))}
    for block in blocks:
        if id(block) not in order:
            raise CacheLocationError(
                f"block {block.name_hint!r} is not a child block of the scope "
                f"{scope.name_hint!r} (it is nested in another block or in an init)",
                [block],
            )
    return min(blocks, key=lambda b: order[id(b)])


def location_between(state: ScheduleState, scope: Block, writer: Block, related: list[Block],
                     buffer: Buffer, primitive: str) -> tuple[For | Block, int]:  # fmt: skip
    """(loc, pos): inside the deepest loop/block holding `writer` and the first related block,
    right before the child that holds that block."""
    first = first_in_order(state, scope, related)
    path_w = [*state.ancestors(writer), writer]
    path_f = [*state.ancestors(first), first]
    common = 0
    while common < min(len(path_w), len(path_f)) and path_w[common] is path_f[common]:
        common += 1
    depths = [i for i in range(common) if isinstance(path_w[i], (For, Block))]
    if not depths:  # pragma: no cover - both are under their scope block
        raise CacheLocationError("the writer and the reader share no loop or block", [writer])
    depth = depths[-1]
    loc = path_w[depth]
    if not _apart_in_body(loc, depth, path_w, path_f):
        raise CacheLocationError(
            f"cannot find a place between the writer {writer.name_hint!r} and the "
            f"reader {first.name_hint!r} for the cache stage: {_describe(loc)}, the innermost "
            "loop or block around both, does not run them as separate statements of its body "
            "(they share a condition, a let or one loop nest)",
            [writer, first],
            primitive=primitive,
        )
    pos_w = _child_index(loc.body, path_w[depth + 2])
    pos_f = _child_index(loc.body, path_f[depth + 2])
    if pos_w >= pos_f:
        raise CacheLocationError(
            f"block {first.name_hint!r} reads {buffer.name} before (or "
            f"in the same loop nest as) its writer {writer.name_hint!r}; a cache stage "
            "cannot go between them",
            [writer, first],
            primitive=primitive,
        )
    return loc, pos_f


def _apart_in_body(loc, depth: int, path_w: list, path_f: list) -> bool:
    """Whether both paths go through `loc.body`, a sequence, into different statements."""
    body = loc.body
    if not isinstance(body, SeqStmt) or depth + 2 >= min(len(path_w), len(path_f)):
        return False
    return path_w[depth + 1] is body and path_f[depth + 1] is body


def _describe(node: For | Block) -> str:
    if isinstance(node, For):
        return f"loop {node.loop_var.name}"
    return f"block {node.name_hint!r}"


def conditions_between(state: ScheduleState, block: Block, loc: Stmt) -> list[IfThenElse]:
    """The `if` statements strictly between `loc` (an ancestor) and `block`."""
    ancestors = state.ancestors(block)
    cut = _position_of(ancestors, loc, block)
    return [a for a in ancestors[cut + 1 :] if isinstance(a, IfThenElse)]


def _child_index(seq: SeqStmt, child: Stmt) -> int:
    for index, stmt in enumerate(seq.seq):
        if stmt is child:
            return index
    raise CacheLocationError("the cache stage's place is not a statement of the loop body")


# -- region ---------------------------------------------------------------------------------
def _position_of(ancestors: list[Stmt], loc: Stmt, block: Block) -> int:
    for index, ancestor in enumerate(ancestors):
        if ancestor is loc:
            return index
    raise ScheduleError(
        f"block {block.name_hint!r} is not inside the place chosen for the cache stage", [block]
    )


def loops_between(state: ScheduleState, block: Block, loc: Stmt) -> tuple[list[For], list[For]]:
    """(loops strictly below `loc` around `block`, loops at or above `loc`)."""
    ancestors = state.ancestors(block)
    cut = _position_of(ancestors, loc, block)
    above = [a for a in ancestors[: cut + 1] if isinstance(a, For)]
    below = [a for a in ancestors[cut + 1 :] if isinstance(a, For)]
    return below, above


def bound_analyzer(loops: list[For]) -> Analyzer:
    analyzer = Analyzer()
    for loop in loops:
        analyzer.bind(loop.loop_var, Range(loop.min, loop.extent), allow_override=True)
    return analyzer


def enclosing_analyzer(state: ScheduleState, block: Block, loops: list[For]) -> Analyzer:
    """An analyzer that knows `loops` and the iter vars of the blocks around `block` (each
    stays in its domain)."""
    analyzer = bound_analyzer(loops)
    for outer in state.ancestors(block):
        if isinstance(outer, Block):
            for iv in outer.iter_vars:
                analyzer.bind(iv.var, iv.dom, allow_override=True)
    return analyzer


def relaxed_access(state: ScheduleState, block: Block, region: BufferRegion, loc: Stmt):
    """`region` (in the block's iter vars) as the loops between `block` and `loc` run, clamped
    to the buffer; the analyzer knows the loops above."""
    realize = state.realize_of(block)
    binding = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    below, above = loops_between(state, block, loc)
    analyzer = enclosing_analyzer(state, block, above)
    bound = substitute(region, binding)
    dom = {loop.loop_var: Range(loop.min, loop.extent) for loop in below}
    relaxed = relax_region(bound, dom, analyzer)
    return clamp_region(relaxed, analyzer), analyzer


def clamp_region(region: BufferRegion, analyzer: Analyzer) -> BufferRegion:
    """Each range cut to `[0, shape)` (a predicated tail may relax past the end)."""
    ranges = []
    for rng, extent in zip(region.region, region.buffer.shape):
        low, end = rng.min, analyzer.simplify(rng.min + rng.extent)
        if not analyzer.can_prove(low >= 0):
            low = analyzer.simplify(op.max(low, op.const(0, low.dtype)))
        if not analyzer.can_prove(end <= extent):
            end = analyzer.simplify(op.min(end, extent))
        ranges.append(Range(low, analyzer.simplify(end - low)))
    return BufferRegion(region.buffer, tuple(ranges))


def check_cover(state: ScheduleState, scope: Block, loc: Stmt, held_region: BufferRegion,
                writer: Block | None, readers: list[Block], primitive: str) -> None:  # fmt: skip
    """Every reader switched to the cache reads only elements the cache holds: readers under
    the stage's loop within one iteration's region, readers after it within the writer's
    whole region."""
    buffer = held_region.buffer
    total = None
    for reader in readers:
        wanted = region_of(reader.reads, buffer)
        if wanted is None:
            continue
        inside = loc is scope or state.is_ancestor(loc, reader)
        where = loc if inside else scope
        needed, analyzer = relaxed_access(state, reader, wanted, where)
        if inside:
            held = held_region
        else:
            total = total or relaxed_access(state, writer, _written(writer, buffer), scope)[0]
            held = total
        if not region_covers(held, needed, analyzer):
            raise RegionCoverError(
                f"block {reader.name_hint!r} reads {_show(needed)} of "
                f"{buffer.name}, but the cache holds only {_show(held)} (what "
                f"{writer.name_hint if writer else 'the scope'} writes there)",
                [reader],
                primitive=primitive,
            )


def _written(writer: Block, buffer: Buffer) -> BufferRegion:
    return region_of(writer.writes, buffer)


def _show(region: BufferRegion) -> str:
    parts = [f"{r.min}:{r.min + r.extent}" for r in region.region]
    return "[" + ", ".join(parts) + "]"


__all__ = [
    "StorageScopeError", "NotAllocatedBufferError", "check_storage_scope", "resolve_buffer",
    "allocation_site", "require_allocated", "accesses", "region_of", "writers_in_scope",
    "readers_in_scope", "loads_buffer", "stores_buffer", "reads_old_contents", "free_of",
    "loop_and_iter_vars", "CacheLocationError", "RegionCoverError", "first_in_order",
    "location_between", "loops_between", "bound_analyzer", "enclosing_analyzer",
    "relaxed_access", "clamp_region", "check_cover", "BlockInInitError", "init_owner",
    "check_not_in_init", "conditions_between",
]  # fmt: skip

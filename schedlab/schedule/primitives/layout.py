"""Layout: re-lay out a buffer (`transform_layout`), a block's iteration space
(`transform_block_layout`), and pad an einsum's iteration domain (`pad_einsum`).

A layout change goes through an `IndexMap` (or a lambda): every access `B[idx]` in the function
becomes `B'[index_map(idx)]`, and the buffer's shape becomes the image's shape. A parameter
buffer can be re-laid out too (as in TVM): the function's signature changes, and the caller
passes the array in the new layout.
"""

from __future__ import annotations

from schedlab.arith import Analyzer, eval_set
from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer, BufferRegion
from schedlab.ir.dtype import bool_
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator, collect_vars, post_order_visit, substitute
from schedlab.ir.op import const, convert
from schedlab.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    IterType,
    IterVar,
    SeqStmt,
)

from ..analysis.buffers import resolve_buffer
from ..errors import ScheduleError
from ..index_map import IndexMap, IndexMapError, as_index_map
from ..instruction import PrimitiveContext, primitive
from ..state import ScheduleState


class LayoutError(ScheduleError):
    """The index map cannot be applied: wrong number of indices, not an injective affine map,
    a layout that does not start at 0, or a buffer that cannot be re-laid out."""


class TransformationPaddingError(LayoutError):
    """The new layout has padding (points that no old index maps to), and the function writes
    the buffer: pass `pad_value` to say what the padding holds."""


class NotTrivialBindingError(ScheduleError):
    """The block's iter values are not exactly the loops above it, one loop per iter var."""


# ---------------------------------------------------------------------------------------------
# transform_layout
# ---------------------------------------------------------------------------------------------
@primitive("TransformLayout", inputs=("block", "index_map"))
def transform_layout(ctx: PrimitiveContext, block: Block, buffer, index_map,
                     pad_value=None, assume_injective_transform: bool = False):  # fmt: skip
    """Re-lay out a buffer: its shape becomes the image of `index_map`, and every access to it
    in the function (loads, stores, block regions, match_buffer sources) goes through the map.

    Preconditions:
    - `buffer` names one of the block's reads/writes: `("read", i)`, `("write", i)` or the
      buffer's name; it is a parameter or an allocated buffer (not a match_buffer view) with a
      compact layout (no explicit strides or axis separators);
    - `index_map` takes one index per buffer dimension and is an injective affine map of them
      whose outputs start at 0;
    - where the new shape has padding (e.g. `i // 4, i % 4` on 10 rows), the buffer is either
      never written in the function (the caller supplies its padding) or `pad_value` is given:
      a new block `<buffer>_pad`, right after the block that writes the buffer, fills it.

    A parameter buffer may be re-laid out: the function's signature changes with it.

    Parameters:
    - block: a block that accesses the buffer;
    - buffer: `("read"|"write", index)` into the block's regions, or the buffer's name;
    - index_map: an `IndexMap` or a lambda, e.g. `lambda i, j: (i // 4, j, i % 4)`;
    - pad_value: the value of the padding (a number), for buffers the function writes;
    - assume_injective_transform: skip the injectivity check (then padding is not allowed).

    >>> sch = Schedule(workloads.get("gemm", M=4, N=4, K=4)[0])
    >>> sch.transform_layout(sch.get_block("C"), ("read", 1), lambda k, j: (j, k))
    >>> print(sch.func.body.block.body.script(show_header=False))  # B is stored transposed
    A = T.Buffer((4, 4), "float32")
    B = T.Buffer((4, 4), "float32")
    C = T.Buffer((4, 4), "float32")
    for i, j, k in T.grid(4, 4, 4):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vj, vk])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
    """
    expect_block(block)
    state = ctx.state
    func_name = state.location(block).func_name
    func = state.mod[func_name]
    target = resolve_buffer(block, buffer, None, "transform_layout", "buffer")[0]
    _check_relayable(func, target, block)
    imap = _layout_map(index_map, target, block)
    new_shape = _guarded(lambda: imap.map_shape(target.shape), block)
    inputs, padding = _padding_of(imap, target, block, assume_injective_transform)
    new_buffer = target.replace(shape=tuple(new_shape))
    has_padding = padding is not None and not _is_false(padding)
    writer = _single_writer(state, func, target) if has_padding else None
    _check_padding(padding, pad_value, target, writer, block)
    body = LayoutRewriter(target, new_buffer, imap).visit(func.body)
    buffer_map = {p: (new_buffer if b is target else b) for p, b in func.buffer_map.items()}
    new_state = state.with_func(func_name, func.replace(body=body, buffer_map=buffer_map))
    if writer is not None:
        value = _pad_constant(pad_value, target, block)
        new_state = _insert_padding(new_state, writer.uid, new_buffer, inputs, padding, value)
    return new_state, None


def _check_relayable(func: PrimFunc, buffer: Buffer, block: Block) -> None:
    if buffer.strides or buffer.axis_separators:
        raise LayoutError(
            f"buffer {buffer.name} has explicit strides or axis separators; transform_layout "
            "re-lays out compact buffers only", [block],
        )  # fmt: skip
    views = []

    def find(node):
        if isinstance(node, Block):
            views.extend(m for m in node.match_buffers if m.buffer is buffer)

    post_order_visit(func.body, find)
    if views:
        source = views[0].source.buffer.name
        raise LayoutError(
            f"buffer {buffer.name} is a match_buffer view of {source}; re-lay out {source} "
            "instead", [block],
        )  # fmt: skip


def _layout_map(index_map, buffer: Buffer, block: Block) -> IndexMap:
    dtype = buffer.shape[0].dtype if buffer.shape else "int32"
    return _guarded(lambda: as_index_map(index_map, buffer.ndim, dtype), block)


def _guarded(fn, block: Block):
    """Run an IndexMap computation, turning its errors into a LayoutError on `block`."""
    try:
        return fn()
    except IndexMapError as err:
        raise LayoutError(str(err), [block]) from None


def _padding_of(imap: IndexMap, buffer: Buffer, block: Block, assume_injective: bool):
    """(the new indices, the padding predicate over them); the predicate is None when the
    injectivity check is skipped (then the padding is unknown)."""
    if assume_injective:
        return (), None
    inverse, padding = _guarded(lambda: imap.non_surjective_inverse(buffer.shape), block)
    return inverse.initial_indices, padding


def _check_padding(padding, pad_value, buffer: Buffer, writer, block: Block) -> None:
    if padding is None and pad_value is not None:
        raise LayoutError(
            "pad_value needs the padding of the new layout, which is unknown with "
            "assume_injective_transform=True", [block],
        )  # fmt: skip
    if padding is None or _is_false(padding):
        if pad_value is not None:
            raise LayoutError(
                f"pad_value={pad_value!r} was given, but the new layout of {buffer.name} has no "
                "padding; leave pad_value out", [block],
            )  # fmt: skip
        return
    if writer is None and pad_value is not None:
        raise LayoutError(
            f"buffer {buffer.name} is never written in this function, so its padding (where "
            f"{padding}) is the caller's data; leave pad_value out", [block],
        )  # fmt: skip
    if writer is not None and pad_value is None:
        raise TransformationPaddingError(
            f"the new layout of {buffer.name} has padding where {padding}, and block "
            f"{writer.name_hint} writes {buffer.name}: pass pad_value=<number> to fill the "
            "padding (or choose a map whose image is dense)", [block],
        )  # fmt: skip


def _single_writer(state: ScheduleState, func: PrimFunc, buffer: Buffer) -> Block | None:
    """The one block that writes `buffer` (None if none does)."""
    writers = []

    def find(node):
        if isinstance(node, Block) and any(w.buffer is buffer for w in node.writes):
            writers.append(node)

    post_order_visit(func.body, find)
    innermost = [w for w in writers if not any(state.is_ancestor(w, o) for o in writers)]
    if len(innermost) > 1:
        names = ", ".join(w.name_hint for w in innermost)
        raise LayoutError(
            f"padding {buffer.name} needs a single block that writes it; blocks {names} do",
            innermost,
        )
    return innermost[0] if innermost else None


def _pad_constant(pad_value, buffer: Buffer, block: Block) -> E.PrimExpr:
    if isinstance(pad_value, (E.IntImm, E.FloatImm)):
        pad_value = pad_value.value
    if isinstance(pad_value, bool) or not isinstance(pad_value, (int, float)):
        raise LayoutError(
            f"pad_value must be a number, got {type(pad_value).__name__} ({pad_value!r})",
            [block],
        )
    try:
        return const(pad_value, buffer.dtype)
    except (TypeError, ValueError) as err:
        raise LayoutError(f"pad_value {pad_value!r}: {err}", [block]) from None


def _insert_padding(state, writer_uid: int, buffer: Buffer, inputs, padding,
                    value) -> ScheduleState:  # fmt: skip
    """A block `<buffer>_pad` filling the padding, right after the writer's loop nest."""
    anchor = scope_level_stmt(state, state.node(writer_uid))
    dtype = buffer.shape[0].dtype
    iters = [IterVar(E.Var(f"v{k}", dtype), E.Range(E.IntImm(dtype, 0), s))
             for k, s in enumerate(buffer.shape)]  # fmt: skip
    indices = tuple(iv.var for iv in iters)
    cond = substitute(padding, dict(zip(inputs, indices)))
    store = BufferStore(buffer, value, indices)
    region = BufferRegion(buffer, tuple(E.Range(i, E.IntImm(dtype, 1)) for i in indices))
    pad = Block(tuple(iters), (), (region,), f"{buffer.name}_pad", IfThenElse(cond, store))
    nest = realize_nest([iv.dom.extent for iv in iters], "ax", pad)
    return state.replace(anchor, SeqStmt.flatten(anchor, nest))


class LayoutRewriter(Mutator):
    """Every access to `old` becomes an access to `new` through `index_map`."""

    def __init__(self, old: Buffer, new: Buffer, index_map: IndexMap):
        self.old, self.new, self.index_map = old, new, index_map
        self.analyzer = Analyzer()

    def indices(self, indices) -> tuple[E.PrimExpr, ...]:
        if any(i.dtype.is_vector for i in indices):
            raise LayoutError(f"buffer {self.old.name} has a vector access; re-lay it out first")
        return tuple(self.index_map.map_indices(indices, self.analyzer))

    def visit_BufferLoad(self, node: E.BufferLoad):
        node = self.generic_visit(node)
        if node.buffer is not self.old:
            return node
        return E.BufferLoad(self.new, self.indices(node.indices))

    def visit_BufferStore(self, node: BufferStore):
        node = self.generic_visit(node)
        if node.buffer is not self.old:
            return node
        return BufferStore(self.new, node.value, self.indices(node.indices))

    def visit_BufferRegion(self, node: BufferRegion):
        node = self.generic_visit(node)
        if node.buffer is not self.old:
            return node
        return BufferRegion(self.new, tuple(map_region(self.index_map, node.region)))

    def visit_Block(self, node: Block):
        node = self.generic_visit(node)
        if any(b is self.old for b in node.alloc_buffers):
            allocs = tuple(self.new if b is self.old else b for b in node.alloc_buffers)
            node = node.replace(alloc_buffers=allocs)
        return node


def map_region(index_map: IndexMap, region) -> list[E.Range]:
    """The bounding box, in the new layout, of a region of the old one."""
    analyzer = Analyzer()
    if all(_is_one(r.extent) for r in region):
        return [E.Range(i, E.IntImm(i.dtype, 1))
                for i in index_map.map_indices([r.min for r in region], analyzer)]  # fmt: skip
    offsets = {}
    starts = []
    for k, rng in enumerate(region):
        if _is_one(rng.extent):
            starts.append(rng.min)
            continue
        var = E.Var(f"t{k}", rng.min.dtype)
        offsets[var] = E.Range(E.IntImm(rng.min.dtype, 0), rng.extent)
        starts.append(rng.min + var)
    with analyzer.constraint_scope(convert(True)):
        for var, rng in offsets.items():
            analyzer.bind(var, rng, allow_override=True)
        result = []
        for value in index_map.map_indices(starts, analyzer):
            interval = eval_set(value, offsets, analyzer)
            if not interval.is_bounded:
                raise LayoutError(f"cannot bound the region {list(region)} in the new layout")
            result.append(interval.to_range(analyzer))
    return result


# ---------------------------------------------------------------------------------------------
# transform_block_layout
# ---------------------------------------------------------------------------------------------
@primitive("TransformBlockLayout", inputs=("block", "index_map"))
def transform_block_layout(ctx: PrimitiveContext, block: Block, index_map):
    """Re-shape a block's iteration space through `index_map`: new loops and iter vars iterate
    the image of the old iteration domain, and the body reads the old iter vars back through
    the inverse map.

    Preconditions:
    - the block's iter values are exactly the loops above it (one loop per iter var, in
      order), those loops contain nothing but this block, and every domain starts at 0;
    - `index_map` takes one index per iter var and is a bijection of the iteration domain
      onto its image (no padding);
    - each new index depends only on spatial iter vars, or only on reduction ones.

    Parameters:
    - block: the block to transform;
    - index_map: an `IndexMap` or a lambda over the block's iter vars.

    >>> sch = Schedule(workloads.get("transpose", M=4, N=4)[0])
    >>> sch.transform_block_layout(sch.get_block("T_transpose"), lambda i, j: (i * 4 + j,))
    >>> print(sch.func.script(show_header=False))
    @T.prim_func
    def transpose(A: T.Buffer((4, 4), "float32"), T_transpose: T.Buffer((4, 4), "float32")):
        T.func_attr({"global_symbol": "transpose", "tir.noalias": True, "schedlab.num_outputs": 1})
        for ax0 in range(16):
            with T.block("T_transpose"):
                v0 = T.axis.spatial(16, ax0)
                T.reads(A[v0 % 4, v0 // 4])
                T.writes(T_transpose[v0 // 4, v0 % 4])
                T_transpose[v0 // 4, v0 % 4] = A[v0 % 4, v0 // 4]
    """
    expect_block(block)
    state = ctx.state
    loops = check_trivial_binding(state, block, "transform_block_layout", exclusive=True)
    old_vars = [iv.var for iv in block.iter_vars]
    dtype = old_vars[0].dtype
    imap = _guarded(lambda: as_index_map(index_map, len(old_vars), dtype), block)
    extents = [iv.dom.extent for iv in block.iter_vars]
    new_extents = _guarded(lambda: imap.map_shape(extents), block)
    inverse = _guarded(lambda: imap.inverse(extents), block)
    types = _new_iter_types(imap, block)
    new_iters = [IterVar(E.Var(f"v{k}", dtype), E.Range(E.IntImm(dtype, 0), extent), kind)
                 for k, (extent, kind) in enumerate(zip(new_extents, types))]  # fmt: skip
    back = inverse.map_indices([iv.var for iv in new_iters])
    vmap = dict(zip(old_vars, back))
    new_block = _substituted_block(block, vmap, new_iters)
    return state.replace(loops[0], realize_nest(new_extents, "ax", new_block)), None


def _new_iter_types(imap: IndexMap, block: Block) -> list[IterType]:
    kinds = {id(iv.var): iv.iter_type for iv in block.iter_vars}
    names = {id(v): iv.var.name for v, iv in zip(imap.initial_indices, block.iter_vars)}
    by_input = {id(v): kinds[id(iv.var)] for v, iv in zip(imap.initial_indices, block.iter_vars)}
    result = []
    for k, value in enumerate(imap.final_indices):
        used = [v for v in collect_vars(value) if id(v) in by_input]
        found = {by_input[id(v)] for v in used}
        if len(found) > 1:
            mixed = ", ".join(f"{names[id(v)]} ({by_input[id(v)]})" for v in used)
            raise LayoutError(
                f"new index {k} ({value}) mixes iter vars of different kinds: {mixed}; each "
                "new iter var must be all spatial or all reduction", [block],
            )  # fmt: skip
        result.append(found.pop() if found else IterType.SPATIAL)
    return result


def _substituted_block(block: Block, vmap: dict, new_iters) -> Block:
    analyzer = Analyzer()
    for iv in new_iters:
        analyzer.bind(iv.var, iv.dom)

    def rewrite(node):
        return simplify_indices(substitute(node, vmap), analyzer) if node is not None else None

    return block.replace(
        iter_vars=tuple(new_iters),
        reads=tuple(rewrite(r) for r in block.reads),
        writes=tuple(rewrite(w) for w in block.writes),
        body=rewrite(block.body),
        init=rewrite(block.init),
    )


def simplify_indices(node, analyzer: Analyzer):
    """Simplify every buffer index and region bound in `node` (after a substitution)."""

    class _Simplify(Mutator):
        def visit_BufferLoad(self, load):
            load = self.generic_visit(load)
            return E.BufferLoad(load.buffer, tuple(analyzer.simplify(i) for i in load.indices))

        def visit_BufferStore(self, store):
            store = self.generic_visit(store)
            indices = tuple(analyzer.simplify(i) for i in store.indices)
            return BufferStore(store.buffer, store.value, indices)

        def visit_Range(self, rng):
            return E.Range(analyzer.simplify(rng.min), analyzer.simplify(rng.extent))

    return _Simplify().visit(node)


# ---------------------------------------------------------------------------------------------
# pad_einsum
# ---------------------------------------------------------------------------------------------
@primitive("PadEinsum", inputs=("block",))
def pad_einsum(ctx: PrimitiveContext, block: Block, padding: list):
    """Pad an einsum block's iteration domain up to multiples of `padding` (127 -> 128 for a
    factor 32): each buffer whose dimensions grow gets a padded copy `<buffer>_pad`, filled
    with zeros by a new block before the loops (inputs) or copied back by a new block after
    them (the output), so no access goes out of bounds.

    Preconditions:
    - the block's iter values are exactly the loops above it, which contain only this block,
      and every domain starts at 0;
    - the block is an einsum: its body is one store and each buffer dimension is always
      indexed the same way; a padded axis indexes a dimension only by itself (other indices,
      such as a convolution's `h + ry`, may be any expression of the unpadded axes), and a
      padded output is indexed by iter vars or constants;
    - an output that grows is written completely by the block (it has an init, or does not
      read the output);
    - padding a reduction axis needs a sum of products (`C = C + A * B`) in which some
      factor reads a padded input along that axis, so the zeros add nothing.

    Parameters:
    - block: the einsum block;
    - padding: one positive factor per iter var (1 keeps an axis as it is).

    >>> sch = Schedule(workloads.get("gemm", M=3, N=4, K=4)[0])
    >>> sch.pad_einsum(sch.get_block("C"), [4, 1, 1])
    >>> print(sch.func.body.block.body.script(show_header=False))
    A = T.Buffer((3, 4), "float32")
    A_pad = T.Buffer((4, 4), "float32")
    B = T.Buffer((4, 4), "float32")
    C_pad = T.Buffer((4, 4), "float32")
    C = T.Buffer((3, 4), "float32")
    for i0, i1 in T.grid(4, 4):
        with T.block("A_pad"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            T.reads(A[v0, v1])
            T.writes(A_pad[v0, v1])
            A_pad[v0, v1] = T.if_then_else(v0 < 3, A[v0, v1], T.float32(0))
    for i, j, k in T.grid(4, 4, 4):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A_pad[vi, vk], B[vk, vj])
            T.writes(C_pad[vi, vj])
            with T.init():
                C_pad[vi, vj] = T.float32(0)
            C_pad[vi, vj] = C_pad[vi, vj] + A_pad[vi, vk] * B[vk, vj]
    for i0_1, i1_1 in T.grid(3, 4):
        with T.block("C_pad"):
            v0_1, v1_1 = T.axis.remap("SS", [i0_1, i1_1])
            T.reads(C_pad[v0_1, v1_1])
            T.writes(C[v0_1, v1_1])
            C[v0_1, v1_1] = C_pad[v0_1, v1_1]
    """
    from ._einsum import pad_einsum_state

    expect_block(block)
    loops = check_trivial_binding(ctx.state, block, "pad_einsum", exclusive=True)
    return pad_einsum_state(ctx.state, block, loops, padding), None


# ---------------------------------------------------------------------------------------------
# shared helpers (also used by blockize/tensorize)
# ---------------------------------------------------------------------------------------------
def expect_block(value) -> None:
    if not isinstance(value, Block):
        raise ScheduleError(f"expected a block handle, got {type(value).__name__}")


def scope_level_stmt(state: ScheduleState, block: Block):
    """The statement of the block's scope that contains it (its outermost loop, or its
    BlockRealize when no loop is above it in the scope)."""
    chain = [*state.ancestors(block), block]
    scope_index = max(i for i, node in enumerate(chain[:-1]) if isinstance(node, Block))
    for node in chain[scope_index + 1 :]:
        if not isinstance(node, SeqStmt):
            return node
    raise AssertionError("unreachable: a block sits under its realize")  # pragma: no cover


def check_trivial_binding(state: ScheduleState, block: Block, name: str,
                          exclusive: bool) -> list[For]:  # fmt: skip
    """The loops above `block`, when its iter values are exactly those loops' variables (in
    order, with matching domains starting at 0); `exclusive`: the loops hold only the block."""
    realize = state.realize_of(block)
    loops = state.loops_above(block)
    values = realize.iter_values
    trivial = len(loops) == len(values) and all(
        v is loop.loop_var for v, loop in zip(values, loops)
    )
    if not trivial or not _is_true(realize.predicate) or not loops:
        raise NotTrivialBindingError(
            f"{name} needs block {block.name_hint}'s iter values to be exactly the loops above "
            "it, one per iter var in order, with no predicate (undo the split/fuse/reorder "
            "first, or apply it before those)", [block],
        )  # fmt: skip
    for iv, loop in zip(block.iter_vars, loops):
        same = _same_int(iv.dom.extent, loop.extent) and _is_zero(iv.dom.min)
        if not (same and _is_zero(loop.min)):
            raise NotTrivialBindingError(
                f"iter var {iv.var.name} of block {block.name_hint} ranges over "
                f"[{iv.dom.min}, {iv.dom.min} + {iv.dom.extent}) but its loop "
                f"{loop.loop_var.name} over [{loop.min}, {loop.min} + {loop.extent}); both must "
                "start at 0 and match", [block, loop],
            )  # fmt: skip
    if exclusive:
        for outer, inner in zip(loops, [*loops[1:], realize]):
            if outer.body is not inner:
                raise NotTrivialBindingError(
                    f"loop {outer.loop_var.name} holds more than block "
                    f"{block.name_hint}; the loops above the block must contain only it",
                    [outer, block],
                )
    return loops


def substitute_buffers(node, bmap: dict):
    """`node` with buffers replaced by identity (`{old_buffer: new_buffer}`) in loads, stores
    and regions; indices are kept."""
    table = {id(k): v for k, v in bmap.items()}

    class _Buffers(Mutator):
        def visit_BufferLoad(self, load):
            load = self.generic_visit(load)
            new = table.get(id(load.buffer))
            return load if new is None else E.BufferLoad(new, load.indices)

        def visit_BufferStore(self, store):
            store = self.generic_visit(store)
            new = table.get(id(store.buffer))
            return store if new is None else BufferStore(new, store.value, store.indices)

        def visit_BufferRegion(self, region):
            region = self.generic_visit(region)
            new = table.get(id(region.buffer))
            return region if new is None else BufferRegion(new, region.region)

    return _Buffers().visit(node) if table else node


def realize_nest(extents, prefix: str, block: Block) -> For:
    """Loops `<prefix>0, <prefix>1, ...` over `extents`, binding `block`'s iter vars to them."""
    names = [f"{prefix}{k}" for k in range(len(extents))]
    return loop_nest(extents, names, lambda vs: BlockRealize(tuple(vs), const(True), block))


def loop_nest(extents, names, make_body) -> For:
    """Serial loops named `names` over `extents` (outermost first) around
    `make_body(loop_vars)`."""
    loop_vars = [E.Var(name, e.dtype) for name, e in zip(names, extents)]
    body = make_body(loop_vars)
    for var, extent in reversed(list(zip(loop_vars, extents))):
        body = For(var, E.IntImm(extent.dtype, 0), extent, ForKind.SERIAL, body)
    return body


def _is_one(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


def _is_zero(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 0


def _is_true(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.dtype == bool_ and expr.value == 1


def _is_false(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 0


def _same_int(a, b) -> bool:
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        return a.value == b.value
    return Analyzer().can_prove_equal(a, b)


__all__ = [
    "transform_layout", "transform_block_layout", "pad_einsum", "LayoutError",
    "TransformationPaddingError", "NotTrivialBindingError", "LayoutRewriter", "map_region",
    "scope_level_stmt", "check_trivial_binding", "loop_nest", "realize_nest",
    "substitute_buffers", "simplify_indices", "expect_block",
]  # fmt: skip

"""The work behind `pad_einsum` (see layout.py): recognise an einsum block, check that padding
its iteration domain keeps the result, and build the padded buffers with their producer and
consumer blocks."""

from __future__ import annotations

from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer, BufferRegion
from schedlab.ir.functor import collect_vars, post_order_visit
from schedlab.ir.op import const, if_then_else, logical_and
from schedlab.ir.stmt import Block, BlockRealize, BufferStore, For, IterType, IterVar, SeqStmt
from schedlab.ir.structural import structural_equal

from ..errors import ScheduleError
from ..state import ScheduleState


class NotEinsumError(ScheduleError):
    """The block is not an einsum (one store; each buffer dimension always indexed the same
    way, a padded axis only by itself), or padding it would change its result."""


def pad_einsum_state(state: ScheduleState, block: Block, loops: list[For],
                     padding) -> ScheduleState:  # fmt: skip
    """The state after padding `block`'s iteration domain to multiples of `padding`."""
    factors = _check_padding_arg(block, padding)
    store = _single_store(block)
    dims = _buffer_dims(block, store)
    new_extents = _padded_extents(block, factors)
    padded = {id(iv.var) for iv, ext in zip(block.iter_vars, new_extents)
              if ext != iv.dom.extent.value}  # fmt: skip
    if not padded:
        return state  # every extent is already a multiple: nothing to pad
    out = store.buffer
    _check_expression_indices(block, dims, padded, out)
    grown = [b for b, d in dims.values() if any(_is_var(v) and id(v) in padded for v in d)]
    grown = [b for b in grown if b is not out] + [b for b in grown if b is out]  # inputs first
    if any(b is out for b in grown):
        _check_complete_output(block, store)
    _check_reduction(block, store, padded, dims)
    extent_of = {id(iv.var): ext for iv, ext in zip(block.iter_vars, new_extents)}
    pads = {id(b): _padded_buffer(b, dims[id(b)][1], extent_of) for b in grown}
    producers = [_producer(b, pads[id(b)], dims[id(b)][1], block, padded)
                 for b in grown if b is not out]  # fmt: skip
    consumer = _consumer(out, pads[id(out)], dims[id(out)][1], block) if id(out) in pads else None
    nest = _padded_nest(block, loops, new_extents, {b: pads[id(b)] for b in grown})
    scope = state.scope_block(block)
    scope_uid = scope.uid
    state = state.replace(loops[0], SeqStmt.flatten(*producers, nest, consumer))
    scope = state.node(scope_uid)
    allocs = scope.alloc_buffers + tuple(pads[id(b)] for b in grown)
    return state.replace(scope, scope.replace(alloc_buffers=allocs))


def _check_padding_arg(block: Block, padding) -> list[int]:
    count = len(block.iter_vars)
    if not isinstance(padding, (list, tuple)) or len(padding) != count:
        raise NotEinsumError(
            f"padding must be a list of {count} positive ints (one per iter var of "
            f"block {block.name_hint}), got {padding!r}", [block],
        )  # fmt: skip
    for factor in padding:
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
            raise NotEinsumError(f"padding factors must be positive ints, got {padding!r}", [block])
    return list(padding)


def _single_store(block: Block) -> BufferStore:
    body = block.body
    if not isinstance(body, BufferStore):
        raise NotEinsumError(
            f"the body of block {block.name_hint} must be a single store "
            f"(out[...] = expr), got a {type(body).__name__}", [block],
        )  # fmt: skip
    init = block.init
    if init is not None:
        same = isinstance(init, BufferStore) and init.buffer is body.buffer
        if not same or any(a is not b for a, b in zip(init.indices, body.indices)):
            raise NotEinsumError(
                f"the init of block {block.name_hint} must store to the same "
                "element as its body", [block],
            )  # fmt: skip
    return body


def _buffer_dims(block: Block, store: BufferStore) -> dict[int, tuple[Buffer, list]]:
    """For each buffer the block accesses: the index of each dimension (an iter var or a
    constant). Every access of a buffer must agree."""
    iter_ids = {id(iv.var) for iv in block.iter_vars}
    dims: dict[int, tuple[Buffer, list]] = {}

    def record(buffer: Buffer, indices) -> None:
        pattern = []
        for index in indices:
            if isinstance(index, E.Var) and id(index) not in iter_ids:
                raise NotEinsumError(
                    f"block {block.name_hint} indexes {buffer.name} with {index}, which is "
                    "not one of its iter vars", [block],
                )  # fmt: skip
            pattern.append(index)  # an iter var, a constant, or an expression (checked later)
        known = dims.get(id(buffer))
        if known is not None and not _same_pattern(known[1], pattern):
            raise NotEinsumError(
                f"block {block.name_hint} indexes {buffer.name} in two different "
                "ways; an einsum indexes each buffer dimension with one iter var", [block],
            )  # fmt: skip
        dims[id(buffer)] = (buffer, pattern)

    def visit(node):
        if isinstance(node, E.BufferLoad):
            record(node.buffer, node.indices)

    record(store.buffer, store.indices)
    for stmt in (store, block.init):
        if stmt is not None:
            post_order_visit(stmt.value, visit)
    return dims


def _same_pattern(a, b) -> bool:
    return len(a) == len(b) and all(
        _key(x) == _key(y) if _is_var(x) or _is_var(y) else structural_equal(x, y)
        for x, y in zip(a, b)
    )


def _check_expression_indices(block: Block, dims, padded: set, out: Buffer) -> None:
    """An index that is neither an iter var nor a constant (a convolution's `h + ry`) is
    allowed where no padded axis appears in it, and not in a padded output (the crop copies
    the output back by its iter vars)."""
    for buffer, pattern in dims.values():
        for index in pattern:
            if _is_var(index) or isinstance(index, E.IntImm):
                continue
            uses_padded = [v for v in collect_vars(index) if id(v) in padded]
            if uses_padded:
                raise NotEinsumError(
                    f"block {block.name_hint} indexes {buffer.name} with {index}, which "
                    f"uses the padded axis {uses_padded[0].name}; a padded axis may only "
                    "index a dimension by itself", [block],
                )  # fmt: skip
            grows = any(_is_var(v) and id(v) in padded for v in pattern)
            if buffer is out and grows:
                raise NotEinsumError(
                    f"block {block.name_hint} writes {buffer.name} at {index}; a padded "
                    "output must be indexed by iter vars or constants", [block],
                )  # fmt: skip


def _padded_extents(block: Block, factors: list[int]) -> list[int]:
    extents = []
    for iv, factor in zip(block.iter_vars, factors):
        if not isinstance(iv.dom.extent, E.IntImm):
            raise NotEinsumError(
                f"iter var {iv.var.name} of block {block.name_hint} has the "
                f"symbolic extent {iv.dom.extent}; padding needs constant extents", [block],
            )  # fmt: skip
        extent = iv.dom.extent.value
        extents.append(-(-extent // factor) * factor)
    return extents


def _check_complete_output(block: Block, store: BufferStore) -> None:
    reads_out = []

    def visit(node):
        if isinstance(node, E.BufferLoad) and node.buffer is store.buffer:
            reads_out.append(node)

    post_order_visit(store.value, visit)
    if reads_out and block.init is None:
        raise NotEinsumError(
            f"block {block.name_hint} accumulates into {store.buffer.name} without "
            "an init, so a padded copy of it would start from garbage", [block],
        )  # fmt: skip


def _check_reduction(block: Block, store: BufferStore, padded: set, dims) -> None:
    """Padding a reduction axis is exact only for `out = out + product` where some factor is a
    load along that axis (the zero padding makes the product 0) and no factor is a non-linear
    function of padded data (1 / 0 would be inf)."""
    reduce_padded = [iv.var for iv in block.iter_vars
                     if iv.iter_type == IterType.REDUCE and id(iv.var) in padded]  # fmt: skip
    if not reduce_padded:
        return
    factors = _sum_of_products(store)
    if factors is None:
        raise NotEinsumError(
            f"padding reduction axis {reduce_padded[0].name} of block "
            f"{block.name_hint} needs an update out = out + a * b * ...; the padded zeros "
            "would change any other reduction", [block],
        )  # fmt: skip
    direct = [f for f in factors if isinstance(f, E.BufferLoad)]
    for factor in factors:
        if not isinstance(factor, E.BufferLoad) and _reads_axis(factor, padded, dims):
            raise NotEinsumError(
                f"the factor {factor} of block {block.name_hint} is a non-linear "
                "function of padded data; only plain loads may run along a padded reduction "
                "axis", [block],
            )  # fmt: skip
    for var in reduce_padded:
        if not any(_reads_axis(f, {id(var)}, dims) for f in direct):
            raise NotEinsumError(
                f"no factor of block {block.name_hint}'s product loads along the "
                f"padded reduction axis {var.name}, so its padding would add non-zero terms",
                [block],
            )  # fmt: skip


def _sum_of_products(store: BufferStore) -> list[E.PrimExpr] | None:
    value = store.value
    if not isinstance(value, E.Add):
        return None
    for acc, rest in ((value.a, value.b), (value.b, value.a)):
        if _is_self_load(acc, store):
            return _factors(rest)
    return None


def _is_self_load(expr, store: BufferStore) -> bool:
    return (
        isinstance(expr, E.BufferLoad) and expr.buffer is store.buffer
        and all(a is b for a, b in zip(expr.indices, store.indices))
    )  # fmt: skip


def _factors(expr: E.PrimExpr) -> list[E.PrimExpr]:
    while isinstance(expr, E.Cast):
        expr = expr.value
    if isinstance(expr, E.Mul):
        return _factors(expr.a) + _factors(expr.b)
    return [expr]


def _reads_axis(expr: E.PrimExpr, axes: set, dims) -> bool:
    found = []

    def visit(node):
        if isinstance(node, E.BufferLoad):
            pattern = dims[id(node.buffer)][1]
            if any(_is_var(v) and id(v) in axes for v in pattern):
                found.append(node)

    post_order_visit(expr, visit)
    return bool(found)


def _padded_buffer(buffer: Buffer, pattern, extent_of) -> Buffer:
    shape = []
    for dim, var in enumerate(pattern):
        extent = buffer.shape[dim]
        shape.append(E.IntImm(extent.dtype, extent_of[id(var)]) if _is_var(var) else extent)
    return Buffer(
        E.Var(f"{buffer.name}_pad", buffer.data.dtype), buffer.dtype, tuple(shape),
        f"{buffer.name}_pad", scope=buffer.scope,
    )  # fmt: skip


def _producer(buffer: Buffer, pad: Buffer, pattern, block: Block, padded: set):
    """`pad[v] = if_then_else(v < extent, buffer[v], 0)` over the whole padded buffer."""
    extent_of = {id(iv.var): iv.dom.extent for iv in block.iter_vars}

    def body(indices):
        cond = None
        for index, var in zip(indices, pattern):
            if _is_var(var) and id(var) in padded:
                term = index < extent_of[id(var)]
                cond = term if cond is None else logical_and(cond, term)
        value = if_then_else(cond, E.BufferLoad(buffer, indices), const(0, buffer.dtype))
        return BufferStore(pad, value, indices), BufferRegion(buffer, _points(indices))

    return _copy_nest(pad.name, pad, list(pad.shape), body)


def _consumer(out: Buffer, pad: Buffer, pattern, block: Block):
    """`out[v] = pad[v]` over the original iteration domain (constant indices kept)."""
    extent_of = {id(iv.var): iv.dom.extent for iv in block.iter_vars}
    var_dims = [k for k, index in enumerate(pattern) if _is_var(index)]
    extents = [extent_of[id(pattern[k])] for k in var_dims]

    def body(loop_indices):
        indices = list(pattern)
        for k, index in zip(var_dims, loop_indices):
            indices[k] = index
        store = BufferStore(out, E.BufferLoad(pad, tuple(indices)), tuple(indices))
        return store, BufferRegion(pad, _points(indices))

    return _copy_nest(pad.name, out, extents, body)


def _copy_nest(name: str, written: Buffer, extents, make):
    """Loops `i0, i1, ...` over `extents` around a block `name` with iter vars `v0, v1, ...`;
    `make(iter_vars)` gives the store and the region it reads."""
    from .layout import realize_nest

    iters = [IterVar(E.Var(f"v{k}", e.dtype), E.Range(E.IntImm(e.dtype, 0), e))
             for k, e in enumerate(extents)]  # fmt: skip
    store, read = make([iv.var for iv in iters])
    write = BufferRegion(written, _points(store.indices))
    return realize_nest(extents, "i", Block(tuple(iters), (read,), (write,), name, store))


def _is_var(index) -> bool:
    return isinstance(index, E.Var)


def _key(index):
    return ("var", id(index)) if _is_var(index) else ("const", index.value)


def _points(indices) -> tuple[E.Range, ...]:
    return tuple(E.Range(i, E.IntImm(i.dtype, 1)) for i in indices)


def _padded_nest(block: Block, loops: list[For], new_extents, bmap: dict):
    """The block's loops and domains grown to the padded extents, accessing padded buffers."""
    from .layout import substitute_buffers

    iters = tuple(iv.replace(dom=E.Range(iv.dom.min, E.IntImm(iv.dom.extent.dtype, ext)))
                  for iv, ext in zip(block.iter_vars, new_extents))  # fmt: skip
    new_block = block.replace(
        iter_vars=iters,
        reads=tuple(substitute_buffers(r, bmap) for r in block.reads),
        writes=tuple(substitute_buffers(w, bmap) for w in block.writes),
        body=substitute_buffers(block.body, bmap),
        init=substitute_buffers(block.init, bmap) if block.init is not None else None,
    )
    realize = BlockRealize(tuple(loop.loop_var for loop in loops), const(True), new_block)
    body = realize
    for loop, ext in reversed(list(zip(loops, new_extents))):
        body = loop.replace(extent=E.IntImm(loop.extent.dtype, ext), body=body)
    return body

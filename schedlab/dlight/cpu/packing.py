"""Packing: copy the operand a tiled reduction reads as vectors into the order its loops walk
it (what a BLAS does to B before its inner kernel; TVM's RewriteLayout does it to weights).

After tiling, gemm reads B[k, j0*T + j1*V + j2] with k outside the register tile: each k step
loads T contiguous floats, but consecutive steps are a row (4 KiB for N = 1024) apart, so a
panel of B maps to few cache sets and every step touches new pages. Copying B once into
B_packed[j0, k, j1, j2] (the loops that index it, in nest order) makes the inner loop stream
through memory. Measured here (Zen 5, gemm 1024^3, 6x64 register tile): 0.67x numpy unpacked,
1.03x packed, the copy included in every call.

The buffer packed is a read-only parameter whose last dimension is indexed by the block's
innermost loop (the vectorized one), each of whose dimensions is a plain block iter var bound
to a perfect split of loops (a mixed radix); the copy is a separate stage at the top of the
function (`cache_read` + `transform_layout`), its outer loop parallel and inner loop vectorized.
It pays when the packed copy is read many times: the rows that reuse it (the loops that do not
index it) must number at least MIN_REUSE.
"""

from __future__ import annotations

from schedlab.arith.linear import linear_coefficient
from schedlab.ir.expr import BufferLoad, Call, FloatImm, IntImm, Var
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import Block, BufferStore, IterType
from schedlab.schedule.errors import ScheduleError
from schedlab.schedule.index_map import IndexMap

# TVM's attribute: the indices of a kernel's parameters that are constants at every call (set
# by relax's AttachLayoutFreeBuffers), whose packing FoldLayoutRewrite runs at compile time
LAYOUT_FREE_ATTR = "layout_free_buffers"

MIN_PACKED_BYTES = 64 * 1024  # below this, the copy's loop overhead buys nothing
MIN_REUSE = 32  # iterations of the loops that reuse the packed copy (gemm: the rows M)


def packed_layouts(sch) -> list[tuple[str, int, list[tuple[int, int, int]]]]:
    """(block name, read index, [(dim, stride, extent) per new axis, in nest order]) for every
    operand worth packing."""
    found = []
    written = _written_buffers(sch.func)
    params = {buf for buf in sch.func.buffer_map.values()}
    params |= set(padded_params(sch))  # zero-padded copies of parameters (`pad_einsum`)
    free = layout_free(sch)
    for block_rv in _leaf_blocks(sch):
        block = sch.get(block_rv)
        if not any(iv.iter_type == IterType.REDUCE for iv in block.iter_vars):
            continue  # only reductions reuse an operand across a loop that skips its rows
        loops = [sch.get(lp) for lp in sch.get_loops(block_rv)]
        realize = sch.state.realize_of(block)
        binding = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
        for index, region in enumerate(block.reads):
            buffer = region.buffer
            if buffer not in params or (buffer in written and buffer not in padded_params(sch)):
                continue
            axes = _axes(block, buffer, binding, loops)
            if axes is None:
                continue
            if buffer in free:  # a constant weight: the copy runs at compile time
                found.append((block.name_hint, index, axes))
                continue
            if _reuse(loops, axes) < MIN_REUSE:
                continue
            # a vector read across rows (a conv weight read along its output channels) gathers
            # one element per lane unless packed, whatever its size
            strided = axes[-1][0] != len(buffer.shape) - 1
            if strided or nbytes(buffer) >= MIN_PACKED_BYTES:
                found.append((block.name_hint, index, axes))
    return found


def pack_vector_operands(sch) -> bool:
    """Pack every operand `packed_layouts` finds; returns False only when a primitive refuses
    (the schedule is then left as it was)."""
    mark = len(sch.history)
    try:
        for name, index, axes in packed_layouts(sch):
            _pack(sch, name, index, axes)
    except ScheduleError:
        while len(sch.history) > mark:
            sch.undo()
        return False
    return True


def layout_free_params(func) -> set:
    """The buffers of the parameters every call passes a constant (the `layout_free_buffers`
    attribute the graph pipeline sets)."""
    indices = func.attrs.get(LAYOUT_FREE_ATTR, ()) if func.attrs else ()
    return {func.buffer_map[func.params[i]] for i in indices
            if i < len(func.params) and func.params[i] in func.buffer_map}  # fmt: skip


def layout_free(sch) -> set:
    """`layout_free_params` of the scheduled function, with their zero-padded copies."""
    free = layout_free_params(sch.func)
    return free | {pad for pad, (_, source) in _padded_sources(sch).items() if source in free}


def padded_params(sch) -> dict:
    """{buffer: its producer's name} for each buffer one block fills as a zero-padded copy of
    a parameter (`pad[v] = if_then_else(v < n, P[v], 0)`, what `pad_einsum` makes)."""
    return {pad: name for pad, (name, _) in _padded_sources(sch).items()}


def _padded_sources(sch) -> dict:
    """{padded buffer: (its producer's name, the parameter it copies)}."""
    params = set(sch.func.buffer_map.values())
    found, writers = {}, {}
    for block_rv in _leaf_blocks(sch):
        block = sch.get(block_rv)
        for region in block.writes:
            writers.setdefault(region.buffer, []).append(block)
    for buffer, blocks in writers.items():
        if len(blocks) != 1 or buffer in params:
            continue
        body = blocks[0].body
        value = body.value if isinstance(body, BufferStore) else None
        if (isinstance(value, Call) and value.op == "if_then_else"
                and isinstance(value.args[1], BufferLoad) and value.args[1].buffer in params
                and isinstance(value.args[2], (IntImm, FloatImm))):  # fmt: skip
            found[buffer] = (blocks[0].name_hint, value.args[1].buffer)
    return found


def _pack(sch, name: str, index: int, axes) -> None:
    block = sch.get_block(name)
    source = sch.get(block).reads[index].buffer
    producer = padded_params(sch).get(source)
    ndim = len(source.shape)
    copy = sch.cache_read(block, index, "global")
    if producer is not None:  # one stage: the packed copy reads the parameter, zero-padded
        sch.compute_inline(sch.get_block(producer))

    def mapping(*x):
        out = []
        for position, (dim, stride, extent) in enumerate(axes):
            value = x[dim] // stride if stride > 1 else x[dim]
            outermost = all(d != dim for d, _, _ in axes[:position])
            out.append(value if outermost else value % extent)
        return tuple(out)

    sch.transform_layout(copy, ("write", 0), IndexMap.from_func(mapping, ndim=ndim))
    loops = sch.get_loops(copy)
    sch.parallel(loops[0])
    inner = sch.get(loops[-1]).extent
    if isinstance(inner, IntImm) and inner.value <= 64 and len(loops) > 1:
        sch.vectorize(loops[-1])


def _reuse(loops, axes) -> int:
    """Iterations of the loops that do not index the packed buffer (each reads it again)."""
    total = 1
    for loop in loops:
        extent = getattr(loop.extent, "value", 1)
        total *= extent
    for _, _, extent in axes:
        total //= extent
    return total


def _axes(block: Block, buffer, binding: dict, loops) -> list | None:
    """The packed axes of `buffer` as read by `block`, or None when it is not worth it / not
    expressible: every index a plain iter var bound to a mixed radix of loops (unit
    dimensions aside), the innermost loop indexing it, and the new order different from the
    old one."""
    indices = _load_indices(block, buffer)
    if indices is None or not loops:
        return None
    position = {id(loop.loop_var): n for n, loop in enumerate(loops)}
    axes = []  # (nest position, dim, stride, extent)
    for dim, index in enumerate(indices):
        terms = _radix(index, binding, loops, buffer.shape[dim])
        if terms is None:
            return None
        axes += [
            (position[id(loop.loop_var)], dim, stride, extent) for loop, stride, extent in terms
        ]
    axes.sort()
    if not axes or axes[-1][0] != len(loops) - 1:
        return None
    order = [(dim, stride, extent) for _, dim, stride, extent in axes]
    natural = sorted(order, key=lambda a: (a[0], -a[1]))
    return None if order == natural else order


def _radix(index, binding: dict, loops, dim_extent) -> list | None:
    """[(loop, stride, extent)] with index = sum(loop * stride), a perfect mixed radix."""
    if not isinstance(index, Var) or index not in binding:
        return None
    value = binding[index]
    terms = []
    for loop in loops:
        extent = getattr(loop.extent, "value", None)
        coefficient = linear_coefficient(value, loop.loop_var)
        if coefficient is None or extent is None:
            return None
        if coefficient and extent > 1:
            terms.append((loop, coefficient, extent))
    terms.sort(key=lambda t: -t[1])
    expected = getattr(dim_extent, "value", None)
    if expected == 1:
        return []  # a unit dimension (a 1x1 kernel's tap) indexes nothing
    size = 1
    for _, stride, extent in reversed(terms):
        if stride != size:
            return None
        size *= extent
    return terms if terms and size == expected else None


def _load_indices(block: Block, buffer):
    """The indices of the block's one load pattern of `buffer` (None if it loads it in two
    different ways)."""
    seen = []
    post_order_visit(block.body, lambda n: seen.append(n.indices)
                     if isinstance(n, BufferLoad) and n.buffer is buffer else None)  # fmt: skip
    if not seen or any(tuple(map(id, s)) != tuple(map(id, seen[0])) for s in seen):
        return None
    return seen[0]


def _leaf_blocks(sch) -> list:
    names = []

    def visit(node):
        if isinstance(node, Block) and node.name_hint != "root":
            names.append(node.name_hint)

    post_order_visit(sch.func.body, visit)
    return [sch.get_block(name) for name in names]


def _written_buffers(func) -> set:
    written = set()
    post_order_visit(func.body, lambda n: written.add(n.buffer)
                     if isinstance(n, BufferStore) else None)  # fmt: skip
    return written


def nbytes(buffer) -> int:
    """The buffer's size in bytes (0 when a dimension is symbolic)."""
    total = buffer.dtype.bits // 8
    for extent in buffer.shape:
        value = getattr(extent, "value", None)
        if value is None:
            return 0
        total *= value
    return total

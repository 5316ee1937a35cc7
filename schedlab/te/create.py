"""`create_prim_func`: a tensor-expression graph as a PrimFunc in TensorIR form.

The form is the contract of COMMON/DESIGN: handle params bound to buffers, an implicit root
block allocating the intermediates, and per stage (in topological order) a nest of serial loops
(spatial axes, then reduce axes) around one block named after the stage, with iter vars
`v<axis>`, its read/write regions, and for reductions an `init` storing the initial value.
"""

from __future__ import annotations

from collections.abc import Sequence

from schedlab.ir import op
from schedlab.ir.buffer import Buffer, decl_buffer
from schedlab.ir.dtype import handle
from schedlab.ir.expr import BufferLoad, PrimExpr, Range, Var
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator, collect_vars, substitute
from schedlab.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IterVar,
    SeqStmt,
    Stmt,
)  # fmt: skip

from .reduction import Reduce
from .tensor import AxisVar, ComputeOp, PlaceholderOp, Tensor


def create_prim_func(tensors: Sequence[Tensor | Var], name: str = "main") -> PrimFunc:
    """The PrimFunc computing the listed tensors. `tensors` are its parameters in order: inputs
    (placeholders), outputs (computes) and optionally scalar Vars. Compute stages reached from
    the list but not in it become intermediates allocated in the root block.

    Raises ValueError when a placeholder that some stage reads is not listed, or when a stage
    uses a variable that is neither a shape variable nor a listed scalar."""
    items = _check_items(tensors)
    listed = [t for t in items if isinstance(t, Tensor)]
    stages = _topological_order(listed)
    _check_placeholders_listed(stages, listed)
    names = _UniqueNames()
    buffers: dict[int, Buffer] = {}
    params: list[Var] = []
    buffer_map: dict[Var, Buffer] = {}
    for item in items:
        if isinstance(item, Var):
            params.append(item)
            continue
        buffer = _fresh_buffer(item, names)
        buffers[id(item)] = buffer
        param = Var(buffer.name, handle)
        params.append(param)
        buffer_map[param] = buffer
    intermediates = []
    for tensor in stages:
        if id(tensor) not in buffers:
            buffers[id(tensor)] = _fresh_buffer(tensor, names)
            intermediates.append(buffers[id(tensor)])
    defined = {id(v) for v in items if isinstance(v, Var)} | _shape_var_ids(buffers.values())
    bodies = [_stage_stmt(t, buffers, defined) for t in stages if isinstance(t.op, ComputeOp)]
    root = Block((), (), (), "root", SeqStmt.flatten(bodies), alloc_buffers=tuple(intermediates))
    attrs = {"global_symbol": name, "tir.noalias": True}
    return PrimFunc(tuple(params), BlockRealize((), op.const(True), root), buffer_map, attrs)


def _check_items(tensors) -> list[Tensor | Var]:
    if isinstance(tensors, (Tensor, Var)):
        tensors = [tensors]
    items = list(tensors)
    seen: set[int] = set()
    for position, item in enumerate(items):
        if not isinstance(item, (Tensor, Var)):
            raise TypeError(
                f"create_prim_func: tensors[{position}] must be a te.Tensor or a scalar Var, "
                f"got {type(item).__name__}"
            )
        if id(item) in seen:
            raise ValueError(f"create_prim_func: {_label(item)} is listed twice")
        seen.add(id(item))
    return items


def _label(item) -> str:
    return f"tensor {item.name!r}" if isinstance(item, Tensor) else f"variable {item.name!r}"


def _topological_order(listed: list[Tensor]) -> list[Tensor]:
    """Every tensor reached from the list, producers before consumers (iterative post-order DFS;
    tensors are built from existing ones, so the graph has no cycles)."""
    order: list[Tensor] = []
    done: set[int] = set()
    for start in listed:
        stack = [(start, iter(start.op.input_tensors))]
        while stack:
            tensor, pending = stack[-1]
            child = next(pending, None)
            if child is None:
                stack.pop()
                if id(tensor) not in done:
                    done.add(id(tensor))
                    order.append(tensor)
            elif id(child) not in done:
                stack.append((child, iter(child.op.input_tensors)))
    return order


def _check_placeholders_listed(stages: list[Tensor], listed: list[Tensor]) -> None:
    listed_ids = {id(t) for t in listed}
    for tensor in stages:
        if isinstance(tensor.op, PlaceholderOp) and id(tensor) not in listed_ids:
            users = [t.name for t in stages if any(i is tensor for i in t.op.input_tensors)]
            raise ValueError(
                f"create_prim_func: placeholder {tensor.name!r} is read by "
                f"{', '.join(repr(u) for u in users)} but is not in the tensor list; "
                "list every input tensor"
            )


class _UniqueNames:
    """Gives each buffer/block a distinct name: `A`, then `A_1`, `A_2`, ..."""

    def __init__(self):
        self.used: set[str] = set()

    def __call__(self, name: str) -> str:
        candidate, counter = name, 0
        while candidate in self.used:
            counter += 1
            candidate = f"{name}_{counter}"
        self.used.add(candidate)
        return candidate


def _shape_var_ids(buffers) -> set[int]:
    """Variables in buffer shapes: bound from the argument arrays at call time."""
    return {id(v) for buffer in buffers for extent in buffer.shape for v in collect_vars(extent)}


def _fresh_buffer(tensor: Tensor, names: _UniqueNames) -> Buffer:
    return decl_buffer(tensor.shape, tensor.dtype, names(tensor.name))


class _RemapBuffers(Mutator):
    """Loads of the tensors' template buffers become loads of this function's buffers."""

    def __init__(self, mapping: dict[int, Buffer]):
        self.mapping = mapping

    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        target = self.mapping.get(id(node.buffer))
        return node if target is None else BufferLoad(target, node.indices)


def _stage_stmt(tensor: Tensor, buffers: dict[int, Buffer], defined: set[int]) -> Stmt:
    """The loop nest and block of one compute stage."""
    compute: ComputeOp = tensor.op
    body = compute.body
    axes = list(compute.axis) + (list(body.axis) if isinstance(body, Reduce) else [])
    loop_vars = [Var(a.name, a.dtype) for a in axes]
    iter_vars = [
        IterVar(Var("v" + a.name, a.dtype), Range(a.dom.min, a.dom.extent), a.iter_type)
        for a in axes
    ]
    vmap = {a: iv.var for a, iv in zip(axes, iter_vars)}
    remap = _RemapBuffers({id(t.buffer): buffers[id(t)] for t in compute.input_tensors})
    output = buffers[id(tensor)]
    indices = tuple(iv.var for iv in iter_vars[: len(compute.axis)])

    def rewrite(expr: PrimExpr) -> PrimExpr:
        return remap.visit(substitute(expr, vmap))

    init, store = _block_statements(body, output, indices, rewrite)
    _check_free_vars(tensor.name, [init, store], defined, iter_vars)
    block = Block(
        tuple(iter_vars), (), (), output.name, store, init=init,
        annotations=dict(compute.attrs),
    )  # fmt: skip
    block = _with_access_regions(block)
    values = [op.add(lv, a.dom.min) for lv, a in zip(loop_vars, axes)]
    stmt: Stmt = BlockRealize(tuple(values), op.const(True), block)
    for loop_var, axis in reversed(list(zip(loop_vars, axes))):
        stmt = For(loop_var, op.const(0, axis.dtype), axis.dom.extent, ForKind.SERIAL, stmt)
    return stmt


def _block_statements(body, output: Buffer, indices, rewrite) -> tuple[Stmt | None, Stmt]:
    """(init, update) of a reduction, or (None, store) of a plain stage."""
    if not isinstance(body, Reduce):
        return None, BufferStore(output, _cast_to(rewrite(body), output), indices)
    current = BufferLoad(output, indices)
    value = _cast_to(rewrite(body.source), output)
    combined = body.combiner.combine(current, value)
    condition = rewrite(body.condition)
    update = op.select(condition, combined, current)
    init = BufferStore(output, _cast_to(rewrite(body.initial_value()), output), indices)
    return init, BufferStore(output, update, indices)


def _cast_to(value: PrimExpr, buffer: Buffer) -> PrimExpr:
    return value if value.dtype == buffer.dtype else op.cast(value, buffer.dtype)


def _check_free_vars(stage: str, stmts, defined: set[int], iter_vars) -> None:
    """Only iter vars, listed scalars and shape variables (bound from buffers) may appear."""
    allowed = defined | {id(iv.var) for iv in iter_vars}
    for stmt in stmts:
        if stmt is None:
            continue
        for variable in collect_vars(stmt):
            if id(variable) in allowed:
                continue
            if isinstance(variable, AxisVar):
                raise ValueError(
                    f"create_prim_func: stage {stage!r} uses axis {variable.name!r} of another "
                    "stage"
                )
            raise ValueError(
                f"create_prim_func: stage {stage!r} uses variable {variable.name!r}, which is "
                "neither a buffer shape variable nor a listed scalar; add it to the list"
            )


def _with_access_regions(block: Block) -> Block:
    """The block with its read/write regions (schedlab.arith). As TVM does for reduction blocks,
    a buffer the block writes is not also listed as read when the block has an `init`."""
    from schedlab.arith.region import block_access_regions

    reads, writes = block_access_regions(block)
    if block.init is not None:
        written = {id(region.buffer) for region in writes}
        reads = [region for region in reads if id(region.buffer) not in written]
    return block.replace(reads=tuple(reads), writes=tuple(writes))

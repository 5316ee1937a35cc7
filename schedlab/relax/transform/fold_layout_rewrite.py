"""FoldLayoutRewrite: weights re-laid out once, at compile time, instead of at every call.

A scheduled kernel may start with a stage that copies a parameter into a new layout (the
packing `cache_read` + `transform_layout` of `dlight.cpu.packing`, which the Conv and Matmul
rules and the tuner's packed operand make: a conv weight (CO, CI, KH, KW) becomes
(CO/16, CI, KH, KW, 16)). When that parameter is a constant at the call site (a model's
weight), the copy's result is a constant too: this pass splits such a kernel into the copy
(the "preproc") and the rest (reading the packed buffer as a parameter), runs the copy on the
constant now, and calls the rest with the packed constant. TVM does the same with
`SplitLayoutRewritePreproc` followed by `FoldConstant`; here both happen in one pass, so a
call whose parameter is not a constant keeps the original kernel untouched.

Measured on light_resnet50 (Zen 5, 2 cores): the default pipeline copied ~100 MB of weights
per inference before this pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.dlight.cpu.packing import LAYOUT_FREE_ATTR
from schedlab.ir.buffer import Buffer
from schedlab.ir.dtype import handle
from schedlab.ir.expr import BufferLoad, Call, FloatImm, IntImm, Var
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import Block, BlockRealize, BufferStore, SeqStmt, Stmt
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ..functor import ExprMutator
from ..infer import CALL_TIR
from ..struct_info import TensorStructInfo
from ._util import map_functions
from .fold_constant import run_call_tir

SCHEDULED_ATTR = "tir.is_scheduled"


@dataclass(frozen=True)
class LayoutRewrite:
    """`compute` reads, in place of parameter `index` of the original kernel, the buffer that
    `preproc(original parameter, packed)` fills."""

    index: int
    preproc: PrimFunc
    packed: Buffer


@dataclass(frozen=True)
class SplitKernel:
    compute: PrimFunc
    rewrites: tuple[LayoutRewrite, ...]


def split_layout_rewrite(func: PrimFunc) -> SplitKernel | None:
    """The kernel without its layout-rewrite stages, and each stage as its own kernel; None
    when it has none.

    A layout-rewrite stage is a top-level loop nest of the root block holding one block that
    copies a parameter P, element for element, into a buffer Q the root block allocates, where
    no other stage reads P or writes Q."""
    if not isinstance(func.body, BlockRealize):
        return None
    root = func.body.block
    stages = list(root.body.seq) if isinstance(root.body, SeqStmt) else [root.body]
    params = {id(buf): n for n, buf in enumerate(_param_buffers(func))}
    allocated = {id(buf) for buf in root.alloc_buffers}
    found: list[tuple[int, int, Buffer, Buffer]] = []  # (stage, param index, P, Q)
    for position, stage in enumerate(stages):
        copy = _copy_of(stage)
        if copy is None:
            continue
        source, packed = copy
        if id(source) not in params or id(packed) not in allocated:
            continue
        others = [s for n, s in enumerate(stages) if n != position]
        if any(_touches(s, source, packed) for s in others):
            continue
        found.append((position, params[id(source)], source, packed))
    if not found:
        return None
    dropped = {position for position, *_ in found}
    rest = [s for n, s in enumerate(stages) if n not in dropped]
    packed_ids = {id(packed) for *_, packed in found}
    new_root = root.replace(
        body=rest[0] if len(rest) == 1 else SeqStmt(tuple(rest)),
        alloc_buffers=tuple(b for b in root.alloc_buffers if id(b) not in packed_ids),
    )
    param_vars = list(func.params)
    buffer_map = dict(func.buffer_map)
    rewrites = []
    for position, index, source, packed in found:
        var = _param_var_of(func, source)
        new_var = Var(packed.name, handle)
        param_vars[param_vars.index(var)] = new_var
        del buffer_map[var]
        buffer_map[new_var] = packed
        preproc = _preproc(func, root, stages[position], source, packed)
        rewrites.append(LayoutRewrite(index, preproc, packed))
    compute = func.replace(
        params=tuple(param_vars),
        buffer_map=buffer_map,
        body=func.body.replace(block=new_root),
    )
    return SplitKernel(compute, tuple(rewrites))


def _param_buffers(func: PrimFunc) -> list[Buffer]:
    return [func.buffer_map[p] for p in func.params if p in func.buffer_map]


def _param_var_of(func: PrimFunc, buffer: Buffer) -> Var:
    return next(var for var, buf in func.buffer_map.items() if buf is buffer)


def _copy_of(stage: Stmt) -> tuple[Buffer, Buffer] | None:
    """(source, destination) when `stage` holds one block storing a load of one buffer into
    another: a plain load (every element copied), or a load guarded by `if_then_else` with a
    constant elsewhere (a zero-padded copy, as `pad_einsum` makes before packing); else None."""
    blocks: list[Block] = []
    post_order_visit(stage, lambda n: blocks.append(n) if isinstance(n, Block) else None)
    if len(blocks) != 1:
        return None
    block = blocks[0]
    if block.init is not None or len(block.reads) != 1 or len(block.writes) != 1:
        return None
    body = block.body
    if not isinstance(body, BufferStore):
        return None
    load, padded = _guarded_load(body.value)
    if load is None:
        return None
    if padded and not all(isinstance(index, Var) for index in load.indices):
        return None  # a shifted guarded load is a border (conv padding), not a padded copy
    source, packed = load.buffer, body.buffer
    if source is not block.reads[0].buffer or packed is not block.writes[0].buffer:
        return None
    size, packed_size = _size(source), _size(packed)
    if source.dtype != packed.dtype or size is None or packed_size is None:
        return None
    if packed_size < size or (packed_size > size and not padded):
        return None  # a copy of every element: nothing dropped, padding only where guarded
    return source, packed


def _guarded_load(value) -> tuple[BufferLoad | None, bool]:
    """(the load, whether guarded) for `load` or `if_then_else(cond, load, constant)`."""
    if isinstance(value, BufferLoad):
        return value, False
    if (isinstance(value, Call) and value.op == "if_then_else"
            and isinstance(value.args[1], BufferLoad)
            and isinstance(value.args[2], (IntImm, FloatImm))):  # fmt: skip
        return value.args[1], True
    return None, False


def _size(buffer: Buffer) -> int | None:
    total = 1
    for extent in buffer.shape:
        value = getattr(extent, "value", None)
        if value is None:
            return None
        total *= int(value)
    return total


def _touches(stage: Stmt, source: Buffer, packed: Buffer) -> bool:
    """Whether `stage` reads or writes `source`, or writes `packed`."""
    hit = []

    def visit(node):
        if isinstance(node, BufferLoad | BufferStore) and node.buffer is source:
            hit.append(node)
        elif isinstance(node, BufferStore) and node.buffer is packed:
            hit.append(node)
        elif isinstance(node, Block):
            regions = [*node.reads, *node.writes]
            if any(r.buffer is source for r in regions):
                hit.append(node)
            if any(r.buffer is packed for r in node.writes):
                hit.append(node)

    post_order_visit(stage, visit)
    return bool(hit)


def _preproc(func: PrimFunc, root: Block, stage: Stmt, source: Buffer, packed: Buffer):
    source_var, packed_var = Var(source.name, handle), Var(packed.name, handle)
    name = f"{func.attrs.get('global_symbol', 'main')}_{packed.name}"
    body = BlockRealize((), True, root.replace(body=stage, alloc_buffers=()))
    attrs = {"global_symbol": name, "tir.noalias": True, SCHEDULED_ATTR: True,
             "schedlab.num_outputs": 1}  # fmt: skip
    return PrimFunc((source_var, packed_var), body, {source_var: source, packed_var: packed},
                    attrs)  # fmt: skip


class _Folder(ExprMutator):
    def __init__(self, mod: IRModule, added: dict[str, PrimFunc]):
        super().__init__()
        self.mod = mod
        self.added = added  # name -> compute kernel, shared across graph functions
        self.splits: dict[str, SplitKernel | None] = {}

    def visit_Call(self, call: X.Call) -> X.Expr:  # noqa: N802 - dispatch name
        call = self.generic_visit(call)
        if call.op != CALL_TIR or not isinstance(call.args[1], X.Tuple):
            return call
        name = call.args[0].name_hint
        func = self.mod.get(name)
        if not isinstance(func, PrimFunc):
            return call
        if name not in self.splits:
            self.splits[name] = split_layout_rewrite(func)
        split = self.splits[name]
        args = list(call.args[1].fields)
        if split is None or not all(isinstance(args[r.index], X.Constant) for r in split.rewrites):
            return call
        for rewrite in split.rewrites:
            packed = rewrite.packed
            sinfo = TensorStructInfo(tuple(packed.shape), packed.dtype)
            args[rewrite.index] = run_call_tir(rewrite.preproc, [args[rewrite.index].data], sinfo)
        compute_name = f"{name}_packed"
        self.added[compute_name] = split.compute.with_attr("global_symbol", compute_name)
        return call.replace(args=(X.GlobalVar(compute_name), X.Tuple(tuple(args)), *call.args[2:]))


def FoldLayoutRewrite() -> Pass:  # noqa: N802 - a pass factory, named like TVM's passes
    """The FoldLayoutRewrite pass (see the module docstring). Run DeadCodeElimination after it
    to drop kernels no call uses any more."""

    @module_pass(name="FoldLayoutRewrite")
    def fold_layout_rewrite(mod: IRModule) -> IRModule:
        """Pack constant weights at compile time for kernels that start by packing them."""
        added: dict[str, PrimFunc] = {}
        mod = map_functions(mod, lambda func: _Folder(mod, added).visit(func))
        return mod.update(added) if added else mod

    return fold_layout_rewrite


def AttachLayoutFreeBuffers() -> Pass:  # noqa: N802 - TVM's name (AttachAttrLayoutFreeBuffers)
    """Mark each kernel's parameters that every call passes a constant (a model's weights) in
    the `layout_free_buffers` attribute, before the schedules are made: packing such a weight
    costs nothing at run time (FoldLayoutRewrite runs the copy at compile time), so the
    default rules pack it even when a call reuses it little (a 1 x 2048 x 1000 classifier)."""

    @module_pass(name="AttachLayoutFreeBuffers")
    def attach_layout_free_buffers(mod: IRModule) -> IRModule:
        """Set `layout_free_buffers` on kernels whose weight-like parameters are constants."""
        constant: dict[str, list[bool]] = {}

        def visit(node):
            if not (isinstance(node, X.Call) and node.op == CALL_TIR):
                return
            if not isinstance(node.args[0], X.GlobalVar) or not isinstance(node.args[1], X.Tuple):
                return
            flags = [isinstance(a, X.Constant) for a in node.args[1].fields]
            known = constant.setdefault(node.args[0].name_hint, flags)
            constant[node.args[0].name_hint] = [a and b for a, b in zip(known, flags)]

        for func in mod.values():
            if isinstance(func, X.Function):
                post_order_visit(func, visit)
        updated = {}
        for name, flags in constant.items():
            func = mod.get(name)
            indices = tuple(i for i, flag in enumerate(flags) if flag)
            if isinstance(func, PrimFunc) and indices:
                updated[name] = func.with_attr(LAYOUT_FREE_ATTR, indices)
        return mod.update(updated) if updated else mod

    return attach_layout_free_buffers

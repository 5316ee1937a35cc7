"""FuseTIR: turn each call of a "Primitive" graph function (made by FuseOps) into a `call_tir`
of one PrimFunc that runs all of the group's PrimFuncs: their stages in order in one root
block, the group's intermediate values as buffers allocated there. A scheduler can then
compute the stages inline or at each other's loops, so intermediates never reach memory.

The group's inputs and output become the PrimFunc's buffer parameters (fresh symbolic
dimensions for the graph's); each member's buffers and size variables are mapped onto them.
Duplicate block names get a numeric suffix. The Primitive functions are removed; the member
PrimFuncs are left for DeadCodeElimination.
"""

from __future__ import annotations

from schedlab.errors import SchedlabError
from schedlab.ir.buffer import Buffer, BufferRegion, decl_buffer
from schedlab.ir.expr import BufferLoad, SizeVar
from schedlab.ir.expr import Var as TirVar
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import Mutator, collect_vars, substitute
from schedlab.ir.node import fresh_uid
from schedlab.ir.op import const
from schedlab.ir.stmt import Block, BlockRealize, BufferStore, SeqStmt
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ..block_builder import call_tir
from ..infer import CALL_TIR


class FuseTIRError(SchedlabError, TypeError):
    """A Primitive function that FuseTIR cannot merge (not a chain of single-output call_tir
    of TensorIR PrimFuncs)."""


class _Inline(Mutator):
    """Copies a member PrimFunc's root body onto the group's buffers (`bmap`, by identity) with
    fresh definitions: new loop, iter and let variables, new block-local buffers and new uids.
    Two members made from the same PrimFunc (two `add`s) would otherwise share loop variables
    and blocks, which the verifier rejects ("defined twice")."""

    def __init__(self, bmap: dict):
        self.bmap = dict(bmap)
        self.vars: dict = {}

    def define(self, var: TirVar) -> TirVar:
        new = type(var)(var.name, var.dtype)
        self.vars[var] = new
        return new

    def visit_Var(self, var):  # noqa: N802 - dispatch name
        return self.vars.get(var, var)

    def visit_For(self, node):  # noqa: N802
        loop_var = self.define(node.loop_var)
        node = self.generic_visit(node)
        return node.replace(loop_var=loop_var, uid=fresh_uid())

    def visit_LetStmt(self, node):  # noqa: N802
        value = self.visit(node.value)
        var = self.define(node.var)
        return node.replace(var=var, value=value, body=self.visit(node.body))

    def visit_Block(self, node):  # noqa: N802
        iters = tuple(
            iv.replace(var=self.define(iv.var), dom=self.visit(iv.dom)) for iv in node.iter_vars
        )
        for old in node.alloc_buffers:
            self.bmap.setdefault(old, self.copy_buffer(old))
        node = self.generic_visit(node.replace(iter_vars=()))
        allocs = tuple(self.bmap[b] for b in node.alloc_buffers)
        return node.replace(iter_vars=iters, alloc_buffers=allocs, uid=fresh_uid())

    def copy_buffer(self, old: Buffer) -> Buffer:
        shape = tuple(self.visit(d) for d in old.shape)
        return decl_buffer(shape, old.dtype, old.name, old.scope)

    def visit_BufferLoad(self, load):  # noqa: N802
        load = self.generic_visit(load)
        new = self.bmap.get(load.buffer)
        return load if new is None else BufferLoad(new, load.indices)

    def visit_BufferStore(self, store):  # noqa: N802
        store = self.generic_visit(store)
        new = self.bmap.get(store.buffer)
        return store if new is None else BufferStore(new, store.value, store.indices)

    def visit_BufferRegion(self, region):  # noqa: N802
        region = self.generic_visit(region)
        new = self.bmap.get(region.buffer)
        return region if new is None else BufferRegion(new, region.region)


class _UniqueBlocks(Mutator):
    def __init__(self):
        self.seen: dict[str, int] = {}

    def visit_Block(self, block):  # noqa: N802
        block = self.generic_visit(block)
        count = self.seen.get(block.name_hint, 0)
        self.seen[block.name_hint] = count + 1
        return block if count == 0 else block.replace(name_hint=f"{block.name_hint}_{count}")


class _Fuser:
    """Builds the fused PrimFunc of one Primitive function."""

    def __init__(self, mod: IRModule, name: str):
        self.mod, self.name = mod, name
        self.dims: dict = {}  # graph symbolic var -> the PrimFunc's SizeVar
        self.values: dict = {}  # graph var -> buffer
        self.allocs: list[Buffer] = []
        self.stages: list = []

    def buffer(self, var: X.Var) -> Buffer:
        sinfo = var.struct_info_
        for dim in sinfo.shape:
            for v in collect_vars(dim):
                self.dims.setdefault(v, SizeVar(v.name, v.dtype))
        shape = tuple(substitute(d, self.dims) for d in sinfo.shape)
        return decl_buffer(shape, str(sinfo.dtype), var.name_hint)

    def run(self, func: X.Function) -> PrimFunc:
        params = [self.buffer(p) for p in func.params]
        self.values.update(zip(func.params, params))
        bindings = _bindings(func, self.name)
        out = None
        for binding in bindings:
            target = self.buffer(binding.var)
            if binding.var is func.body.body:
                out = target
            else:
                self.allocs.append(target)
            self.stages.append(self.inline(binding, target))
            self.values[binding.var] = target
        if out is None:
            raise FuseTIRError(f"FuseTIR {self.name}: the result is not one of its bindings")
        return self.finish([*params, out], func.attrs.get("op_pattern"))

    def inline(self, binding: X.VarBinding, target: Buffer):
        """The body of the member PrimFunc, on the group's buffers."""
        call = binding.value
        prim = self.mod.get(call.args[0].name_hint)
        args = [self.values.get(a) for a in call.args[1].fields]
        if not isinstance(prim, PrimFunc) or None in args or len(prim.params) != len(args) + 1:
            raise FuseTIRError(f"FuseTIR {self.name}: cannot merge binding {binding.var.name_hint}")
        bmap, vmap = {}, {}
        for param, buf in zip(prim.params, [*args, target]):
            old = prim.buffer_map.get(param)
            if old is None:
                raise FuseTIRError(f"FuseTIR {self.name}: {prim.name} has a non-buffer parameter")
            bmap[old] = buf
            for d_old, d_new in zip(old.shape, buf.shape):
                if isinstance(d_old, TirVar):
                    vmap.setdefault(d_old, d_new)
        root = _root(prim, self.name)
        for old in root.alloc_buffers:
            new = decl_buffer(tuple(substitute(d, vmap) for d in old.shape), old.dtype, old.name)
            bmap[old] = new
            self.allocs.append(new)
        inliner = _Inline(bmap)
        inliner.vars.update(vmap)
        return inliner.visit(root.body)

    def finish(self, buffers: list[Buffer], op_pattern: int | None) -> PrimFunc:
        body = SeqStmt.flatten(*self.stages)
        root = Block((), (), (), "root", body, alloc_buffers=tuple(self.allocs))
        realize = _UniqueBlocks().visit(BlockRealize((), const(True), root))
        params = [TirVar(b.name, "handle") for b in buffers]
        attrs = {"global_symbol": self.name, "tir.noalias": True}
        if op_pattern is not None:
            attrs["op_pattern"] = op_pattern
        return PrimFunc(params, realize, dict(zip(params, buffers)), attrs)


def _bindings(func: X.Function, name: str) -> list[X.VarBinding]:
    body = func.body
    if not isinstance(body, X.SeqExpr):
        raise FuseTIRError(f"FuseTIR {name}: the Primitive function's body is not a SeqExpr")
    bindings = [b for blk in body.blocks for b in blk.bindings]
    for binding in bindings:
        value = getattr(binding, "value", None)
        if not isinstance(binding, X.VarBinding) or not (
            isinstance(value, X.Call) and value.op == CALL_TIR
        ):
            raise FuseTIRError(f"FuseTIR {name}: binding {binding.var.name_hint} is no call_tir")
    return bindings


def _root(prim: PrimFunc, name: str) -> Block:
    body = prim.body
    if not (isinstance(body, BlockRealize) and body.block.name_hint == "root"):
        raise FuseTIRError(f"FuseTIR {name}: {prim.name} is not in TensorIR form (no root block)")
    return body.block


def fuse_primitive(mod: IRModule, func: X.Function, name: str) -> PrimFunc:
    """One PrimFunc computing the Primitive function `func` (named `name`)."""
    return _Fuser(mod, name).run(func)


class _CallRewriter(Mutator):
    def __init__(self, gvars: dict):
        self.gvars = gvars  # Primitive function name -> the fused PrimFunc's GlobalVar

    def visit_Call(self, call):  # noqa: N802
        call = self.generic_visit(call)
        if isinstance(call.op, X.GlobalVar) and call.op.name_hint in self.gvars:
            return call_tir(self.gvars[call.op.name_hint], call.args, call.struct_info)
        return call


def FuseTIR() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """The FuseTIR pass (see the module docstring)."""

    @module_pass(name="FuseTIR")
    def fuse_tir(mod: IRModule) -> IRModule:
        """Replace Primitive graph functions by fused PrimFuncs of the same name."""
        primitive = [n for n, f in mod.items() if isinstance(f, X.Function) and f.attrs.get(
            "Primitive")]  # fmt: skip
        if not primitive:
            return mod
        functions = {n: f for n, f in mod.items() if n not in primitive}
        for name in primitive:
            functions[name] = fuse_primitive(mod, mod[name], name)
        rewriter = _CallRewriter({n: X.GlobalVar(n) for n in primitive})
        for name, func in list(functions.items()):
            if isinstance(func, X.Function):
                functions[name] = rewriter.visit(func)
        return IRModule(functions, mod.attrs)

    return fuse_tir

"""FuseOps: group `call_tir` bindings that can run as one kernel, by their PrimFuncs'
"op_pattern" (AnnotateTIROpPattern), and move each group of two or more into a graph function
with attribute "Primitive" that the binding now calls. FuseTIR then merges each group's
PrimFuncs into one, saving the intermediate tensors' memory traffic.

TVM's rules, on chains inside a dataflow block: a binding joins the group of one of its
arguments when that argument is the group's last value, a DataflowVar used by this binding
only, and
- the group is at most injective and the binding is at most injective (elemwise, broadcast
  and injective chains fuse), or a reduction (injective producers fuse into a comm_reduce);
- the group is out_ewise_fusable (matmul, conv) and the binding is elemwise or broadcast
  (bias add, activation).
Constant arguments become parameters of the group's function (the call passes them), so
`add(lv, const)` fuses like `add(lv, b)`. Opaque PrimFuncs, tuple-valued calls and calls with
other non-variable arguments never fuse. Each
group has one output (its last value), so moving it to the last member's place keeps the order
of the block valid.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import Mutator
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ..infer import CALL_TIR
from ..struct_info import TensorStructInfo
from ._util import used_vars

INJECTIVE, COMM_REDUCE, OUT_EWISE_FUSABLE, OPAQUE = 2, 3, 4, 8
BROADCAST = 1


@dataclass
class _Group:
    members: list = field(default_factory=list)  # VarBindings, in block order
    kind: int = 0

    @property
    def tail(self) -> X.Var:
        return self.members[-1].var


def call_tir_kind(mod: IRModule, value: X.Expr) -> int | None:
    """The op_pattern of a single-output `call_tir` of a module PrimFunc, else None."""
    if not (isinstance(value, X.Call) and value.op == CALL_TIR):
        return None
    if not isinstance(value.sinfo_args[0], TensorStructInfo):
        return None
    func = mod.get(value.args[0].name_hint)
    if not isinstance(func, PrimFunc):
        return None
    return int(func.attrs.get("op_pattern", OPAQUE))


def fused_kind(group_kind: int, kind: int) -> int | None:
    """The kind of a group after `kind` joins it, or None when it may not."""
    if OPAQUE in (group_kind, kind):
        return None
    if group_kind <= INJECTIVE and kind <= COMM_REDUCE:
        return max(group_kind, kind)
    if group_kind == OUT_EWISE_FUSABLE and kind <= BROADCAST:
        return OUT_EWISE_FUSABLE
    return None


def _consumers(func: X.Function) -> dict:
    """How many bindings (and the function result) read each variable."""
    counts: dict = {}
    readers = [b.value for blk in func.body.blocks for b in blk.bindings] + [func.body.body]
    for value in readers:
        for var in used_vars(value):
            counts[var] = counts.get(var, 0) + 1
    return counts


def group_block(mod: IRModule, block: X.BindingBlock, consumers: dict) -> list[_Group]:
    """The fusion groups of one dataflow block (singletons included), in order."""
    groups, group_of = [], {}
    for binding in block.bindings:
        kind = call_tir_kind(mod, binding.value) if isinstance(binding, X.VarBinding) else None
        if kind is None or not all(_is_leaf(a) for a in binding.value.args[1].fields):
            continue
        target = None
        for arg in binding.value.args[1].fields:
            group = group_of.get(arg)
            ok = group is not None and group.tail is arg and isinstance(arg, X.DataflowVar)
            if ok and consumers.get(arg) == 1 and fused_kind(group.kind, kind) is not None:
                target = group
                break
        if target is None:
            target = _Group(kind=kind)
            groups.append(target)
        else:
            target.kind = fused_kind(target.kind, kind)
        target.members.append(binding)
        group_of[binding.var] = target
    return groups


def _is_leaf(arg: X.Expr) -> bool:
    """Whether a call_tir argument may enter a group: a variable or a constant."""
    return isinstance(arg, (X.Var, X.Constant))


class _Rename(Mutator):
    def __init__(self, vmap: dict):
        self.vmap = vmap
        self.by_id = {id(k): v for k, v in vmap.items()}

    def visit_Var(self, var):  # noqa: N802 - dispatch name (graph and loop variables)
        return self.vmap.get(var, var)

    def visit_Constant(self, const):  # noqa: N802 - a group input: the function's parameter
        return self.by_id.get(id(const), const)


def _group_inputs(group: _Group) -> list[X.Expr]:
    """The outer variables and the constants the group reads, each once, in order."""
    inside = {id(b.var) for b in group.members}
    inputs: list[X.Expr] = []
    for binding in group.members:
        for arg in binding.value.args[1].fields:
            if id(arg) not in inside and all(arg is not a for a in inputs):
                inputs.append(arg)
    return inputs


def _param_name(arg: X.Expr, k: int) -> str:
    return arg.name_hint if isinstance(arg, X.Var) else f"const{k}"


def make_primitive(group: _Group) -> tuple[X.Function, list[X.Expr]]:
    """The "Primitive" function computing `group`, and the outer variables and constants it
    takes."""
    inputs = _group_inputs(group)
    vmap = {v: X.Var(_param_name(v, k), v.struct_info) for k, v in enumerate(inputs)}
    for binding in group.members:
        kind = X.Var if binding.var is group.tail else X.DataflowVar
        vmap[binding.var] = kind(binding.var.name_hint, binding.var.struct_info_)
    bindings = tuple(_Rename(vmap).visit(b) for b in group.members)
    body = X.SeqExpr((X.DataflowBlock(bindings),), vmap[group.tail])
    attrs = {"Primitive": True, "op_pattern": group.kind}
    func = X.Function(tuple(vmap[v] for v in inputs), body, group.tail.struct_info_, attrs)
    return func, inputs


def _unique(name: str, taken) -> str:
    unique, k = name, 0
    while unique in taken:
        k += 1
        unique = f"{name}{k}"
    return unique


def _fuse_function(mod: IRModule, func: X.Function, new_funcs: dict) -> X.Function:
    if not isinstance(func.body, X.SeqExpr) or func.attrs.get("Primitive"):
        return func
    consumers, blocks = _consumers(func), []
    for block in func.body.blocks:
        if not isinstance(block, X.DataflowBlock):
            blocks.append(block)
            continue
        replaced = {}
        for group in group_block(mod, block, consumers):
            if len(group.members) > 1:
                replaced.update(_lift(mod, group, new_funcs))
        bindings = [replaced.get(b, b) for b in block.bindings]
        blocks.append(X.DataflowBlock(tuple(b for b in bindings if b is not None)))
    if all(len(a.bindings) == len(b.bindings) for a, b in zip(blocks, func.body.blocks)):
        return func
    return func.replace(body=X.SeqExpr(tuple(blocks), func.body.body))


def _lift(mod: IRModule, group: _Group, new_funcs: dict) -> dict:
    """Binding replacements for `group`: its tail calls the new function, others go."""
    prim, inputs = make_primitive(group)
    names = [b.value.args[0].name_hint for b in group.members]
    name = _unique("fused_" + "_".join(names), set(mod) | set(new_funcs))
    new_funcs[name] = prim
    sinfo = group.tail.struct_info_
    call = X.Call(X.GlobalVar(name), tuple(inputs), {}, (sinfo,))
    replaced = {b: None for b in group.members[:-1]}
    replaced[group.members[-1]] = X.VarBinding(group.tail, call)
    return replaced


def FuseOps() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """The FuseOps pass (see the module docstring)."""

    @module_pass(name="FuseOps")
    def fuse_ops(mod: IRModule) -> IRModule:
        """Lift fusable call_tir chains of every graph function into Primitive functions."""
        new_funcs: dict = {}
        updated = {}
        for name, func in mod.items():
            if isinstance(func, X.Function):
                new = _fuse_function(mod, func, new_funcs)
                if new is not func:
                    updated[name] = new
        return mod.update({**updated, **new_funcs}) if updated else mod

    return fuse_ops

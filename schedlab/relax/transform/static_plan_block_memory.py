"""StaticPlanBlockMemory: let intermediate tensors of static shape share storage (TVM's pass of
the same name). Runs on the destination-passing form made by CallTIRRewrite.

Each `R.builtin.alloc_tensor` whose tensor does not escape the function (is not part of its
result) and whose shape is static gets a storage token. Walking the bindings in order, a
token is free once every tensor placed in it is dead (no later binding reads it or a variable
aliasing it); a new tensor takes the smallest free token big enough, else the largest free
token (grown), else a new token. The rewrite:

    storage0 = R.memory.alloc_storage(R.shape([nbytes]), dtype="uint8")   # at function start
    lv_out = R.memory.alloc_tensor(storage0, R.prim_value(0), R.shape([4, 5]), dtype="float32")

A tensor is never placed in a token that one of the same kernel call's inputs still uses: its
allocation binding comes before the call, where the inputs are still live.

Function attrs: "planned_peak_bytes" (sum of token sizes) and "unplanned_bytes" (what the
planned tensors would take each on its own). Tensors of symbolic shape keep their own
allocation and count in neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from schedlab.ir.function import IRModule
from schedlab.ir.op import convert
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ..struct_info import ObjectStructInfo, TensorStructInfo
from ._util import map_functions, used_vars
from .call_tir_rewrite import ALLOC_TENSOR, MEMORY_VIEW, typed

ALLOC_STORAGE = "relax.memory.alloc_storage"  # args: (ShapeExpr([nbytes]),); attrs: dtype
MEMORY_ALLOC_TENSOR = "relax.memory.alloc_tensor"  # args: (storage, offset, ShapeExpr)
PEAK_ATTR = "planned_peak_bytes"
UNPLANNED_ATTR = "unplanned_bytes"


@dataclass
class _Token:
    index: int
    nbytes: int
    holders: list = field(default_factory=list)  # alloc vars placed here


def _static_bytes(sinfo) -> int | None:
    if not isinstance(sinfo, TensorStructInfo):
        return None
    shape = sinfo.static_shape()
    if shape is None:
        return None
    return int(np.prod(shape, dtype=np.int64)) * sinfo.dtype.bits * sinfo.dtype.lanes // 8


def _flat_bindings(func: X.Function) -> list[X.Binding]:
    return [b for block in func.body.blocks for b in block.bindings]


def aliases(bindings, allocs: set) -> dict:
    """var -> the alloc vars whose tensors it may refer to (itself, tuples, items, copies,
    views: PlanConcatInPlace's parts of a concatenation)."""
    alias = {var: {var} for var in allocs}
    for binding in bindings:
        value = binding.value
        if isinstance(value, X.Call) and value.op == MEMORY_VIEW:  # a part of its base tensor
            value = value.args[0]
        if isinstance(value, (X.Var, X.Tuple, X.TupleGetItem)):
            found = set()
            for var in used_vars(value):
                found |= alias.get(var, set())
            if found:
                alias[binding.var] = found
    return alias


def _last_uses(bindings, alias: dict) -> dict:
    """alloc var -> index of the last binding reading it (through any alias)."""
    last: dict = {}
    for k, binding in enumerate(bindings):
        for var in used_vars(binding.value):
            for target in alias.get(var, ()):
                last[target] = k
    return last


def plan(func: X.Function) -> tuple[dict, list[_Token]]:
    """alloc var -> token for each plannable allocation of `func`, and the tokens."""
    bindings = _flat_bindings(func)
    allocs = {b.var for b in bindings if _is_alloc(b)}
    alias = aliases(bindings, allocs)
    escaping = set()
    for var in used_vars(func.body.body):
        escaping |= alias.get(var, set())
    last = _last_uses(bindings, alias)
    tokens: list[_Token] = []
    placed: dict = {}
    for k, binding in enumerate(bindings):
        nbytes = _static_bytes(binding.var.struct_info_)
        if binding.var not in allocs or binding.var in escaping or nbytes is None:
            continue
        free = [t for t in tokens if all(last.get(h, -1) < k for h in t.holders)]
        token = _choose(free, nbytes) or _Token(len(tokens), 0)
        if token.index == len(tokens):
            tokens.append(token)
        token.nbytes = max(token.nbytes, nbytes)
        token.holders.append(binding.var)
        placed[binding.var] = token
    return placed, tokens


def _choose(free: list[_Token], nbytes: int) -> _Token | None:
    fitting = [t for t in free if t.nbytes >= nbytes]
    if fitting:
        return min(fitting, key=lambda t: t.nbytes)
    return max(free, key=lambda t: t.nbytes) if free else None


def _is_alloc(binding: X.Binding) -> bool:
    value = binding.value
    return isinstance(value, X.Call) and value.op == ALLOC_TENSOR


def _storage_binding(token: _Token) -> X.VarBinding:
    call = X.Call(ALLOC_STORAGE, (X.ShapeExpr((token.nbytes,)),), {"dtype": "uint8"})
    var = X.Var(f"storage{token.index}", ObjectStructInfo())
    return X.VarBinding(var, typed(call, ObjectStructInfo()))


def _rewrite(func: X.Function, placed: dict, tokens: list[_Token]) -> X.Function:
    storages = [_storage_binding(t) for t in tokens]
    blocks = [X.BindingBlock(tuple(storages))] if storages else []
    for block in func.body.blocks:
        bindings = []
        for binding in block.bindings:
            token = placed.get(binding.var)
            if token is not None:
                old = binding.value
                args = (storages[token.index].var, X.PrimValue(convert(0)), old.args[0])
                new = X.Call(MEMORY_ALLOC_TENSOR, args, dict(old.attrs))
                binding = binding.replace(value=typed(new, binding.var.struct_info_))
            bindings.append(binding)
        blocks.append(type(block)(tuple(bindings)))
    unplanned = sum(_static_bytes(var.struct_info_) for var in placed)
    attrs = {**func.attrs, PEAK_ATTR: sum(t.nbytes for t in tokens), UNPLANNED_ATTR: unplanned}
    return func.replace(body=X.SeqExpr(tuple(blocks), func.body.body), attrs=attrs)


def plan_function(func: X.Function) -> X.Function:
    """`func` with its static intermediates placed in shared storage (see module docstring)."""
    if not isinstance(func.body, X.SeqExpr):
        return func
    placed, tokens = plan(func)
    if not placed:
        return func
    return _rewrite(func, placed, tokens)


def StaticPlanBlockMemory() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """The StaticPlanBlockMemory pass (see the module docstring)."""

    @module_pass(name="StaticPlanBlockMemory")
    def static_plan_block_memory(mod: IRModule) -> IRModule:
        """Share storage between the static-shape intermediates of every graph function."""
        return map_functions(mod, plan_function)

    return static_plan_block_memory

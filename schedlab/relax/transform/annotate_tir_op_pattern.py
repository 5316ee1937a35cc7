"""AnnotateTIROpPattern: give every PrimFunc the attribute "op_pattern", TVM's OpPatternKind
number (elemwise=0, broadcast=1, injective=2, comm_reduce=3, out_ewise_fusable=4, opaque=8).
FuseOps decides what may be fused from it.

PrimFuncs made by LegalizeOps already carry the operator's registered pattern and are kept as
they are. Others (from `emit_te`, parsed text) are analysed block by block:
- a block with scan/opaque iter vars is opaque;
- a reduction block reading two or more inputs (matmul, conv) is out_ewise_fusable, one input
  (sum, max) is comm_reduce;
- a spatial block is elemwise when every load uses the store's indices, broadcast when each
  load's indices are a subsequence of the store's iter vars, injective otherwise.
The function's kind is the largest of its blocks' kinds; a function without blocks (already
lowered) is opaque.
"""

from __future__ import annotations

from schedlab.ir.expr import BufferLoad, Var
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import Block, BufferStore, IterType
from schedlab.ir.structural import structural_equal
from schedlab.ir.transform import Pass, module_pass

from ._util import OP_PATTERN_KINDS

ELEMWISE, BROADCAST, INJECTIVE = 0, 1, 2
COMM_REDUCE, OUT_EWISE_FUSABLE, OPAQUE = 3, 4, 8


def _collect(node, cls) -> list:
    found = []
    post_order_visit(node, lambda n: found.append(n) if isinstance(n, cls) else None)
    return found


def _load_kind(load: BufferLoad, store: BufferStore) -> int:
    if len(load.indices) == len(store.indices) and all(
        structural_equal(a, b, map_free_vars=False) for a, b in zip(load.indices, store.indices)
    ):
        return ELEMWISE
    positions = [_position(index, store.indices) for index in load.indices]
    if all(p is not None for p in positions) and positions == sorted(set(positions)):
        return BROADCAST
    return INJECTIVE


def _position(index, indices) -> int | None:
    if not isinstance(index, Var):
        return None
    for k, other in enumerate(indices):
        if other is index:
            return k
    return None


def block_kind(block: Block) -> int:
    """The OpPatternKind of one block (see the module docstring)."""
    types = {iv.iter_type for iv in block.iter_vars}
    if types & {IterType.SCAN, IterType.OPAQUE}:
        return OPAQUE
    stores = _collect(block.body, BufferStore)
    if len(stores) != 1:
        return OPAQUE
    (store,) = stores
    loads = [ld for ld in _collect(block.body, BufferLoad) if ld.buffer is not store.buffer]
    if IterType.REDUCE in types:
        inputs = {id(ld.buffer) for ld in loads}
        return OUT_EWISE_FUSABLE if len(inputs) >= 2 else COMM_REDUCE
    return max((_load_kind(ld, store) for ld in loads), default=INJECTIVE)


def analyze_op_pattern(func: PrimFunc) -> int:
    """The OpPatternKind of a PrimFunc in TensorIR form (see the module docstring)."""
    blocks = [b for b in _collect(func.body, Block) if b.name_hint != "root" or b.iter_vars]
    if not blocks:
        return OPAQUE
    return max(block_kind(b) for b in blocks)


def AnnotateTIROpPattern() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """The AnnotateTIROpPattern pass (see the module docstring)."""

    @module_pass(name="AnnotateTIROpPattern")
    def annotate_tir_op_pattern(mod: IRModule) -> IRModule:
        """Add "op_pattern" to every PrimFunc that lacks it."""
        updated = {}
        for name, func in mod.items():
            if isinstance(func, PrimFunc) and "op_pattern" not in func.attrs:
                updated[name] = func.with_attr("op_pattern", analyze_op_pattern(func))
        return mod.update(updated) if updated else mod

    return annotate_tir_op_pattern


__all__ = ["AnnotateTIROpPattern", "analyze_op_pattern", "block_kind", "OP_PATTERN_KINDS"]

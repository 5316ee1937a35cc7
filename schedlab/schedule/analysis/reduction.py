"""Reduction blocks: recognise `init` + `C[idx] = C[idx] op f(...)` and the reducer `op`.

A reduction block (TVM's IsReductionBlock) has an `init` statement, affine bindings, only
spatial and reduce iter vars, is the only writer of its outputs in its scope, and indexes its
outputs with spatial iter vars only. Its update is recognised against `REDUCERS`, a table of
commutative, associative reducers (sum, product, max, min) each given by the expression node of
its combiner and its identity value; `rfactor` needs the reducer to build the partial and the
final reduction, other primitives use `check_reduction_block` as a legality fact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from schedlab.ir import expr as E
from schedlab.ir import op
from schedlab.ir.buffer import Buffer
from schedlab.ir.dtype import DataType
from schedlab.ir.functor import collect_vars, post_order_visit
from schedlab.ir.stmt import Block, BufferStore, IterType
from schedlab.ir.structural import structural_equal

from ..errors import NotReductionBlockError
from ..state import ScheduleState
from .loop_kind import has_affine_binding


@dataclass(frozen=True)
class Reducer:
    """A commutative reducer: `node_type` is its combiner's expression class (E.Add for sum)
    and `identities(dtype)` the values accepted as its identity (the first is canonical)."""

    name: str
    node_type: type
    combiner: Callable[[E.PrimExpr, E.PrimExpr], E.PrimExpr]
    identities: Callable[[DataType], tuple[float, ...]]

    def combine(self, lhs: E.PrimExpr, rhs: E.PrimExpr) -> E.PrimExpr:
        return self.combiner(lhs, rhs)

    def identity(self, dtype) -> E.PrimExpr:
        return op.const(self.identities(DataType(dtype))[0], dtype)

    def is_identity(self, value: E.PrimExpr) -> bool:
        """Whether `value` is a constant equal to one of this reducer's identities."""
        if not isinstance(value, (E.IntImm, E.FloatImm)):
            return False
        return any(value.value == v for v in self.identities(value.dtype))


def _lowest(dtype: DataType) -> tuple[float, ...]:
    if dtype.is_float:
        return (_finfo(dtype).min, -math.inf)
    return (dtype.min_value(),)


def _highest(dtype: DataType) -> tuple[float, ...]:
    if dtype.is_float:
        return (_finfo(dtype).max, math.inf)
    return (dtype.max_value(),)


def _finfo(dtype: DataType):
    import numpy as np

    return np.finfo(dtype.numpy)


REDUCERS: tuple[Reducer, ...] = (
    Reducer("sum", E.Add, op.add, lambda t: (0,)),
    Reducer("product", E.Mul, op.mul, lambda t: (1,)),
    Reducer("max", E.Max, op.max, _lowest),
    Reducer("min", E.Min, op.min, _highest),
)


@dataclass(frozen=True)
class ReductionUpdate:
    """The recognised parts of a reduction block: `buffer[indices] = init_value` in its init,
    `buffer[indices] = reducer.combine(buffer[indices], rhs)` in its body (either operand
    order is accepted; `rhs` does not read `buffer`)."""

    reducer: Reducer
    buffer: Buffer
    indices: tuple[E.PrimExpr, ...]
    init_value: E.PrimExpr
    rhs: E.PrimExpr


def match_reduction(block: Block) -> ReductionUpdate:
    """Recognise the reducer of `block` from its init and update; raises NotReductionBlockError
    saying which part does not fit."""
    name = block.name_hint
    init, body = block.init, block.body
    if not isinstance(init, BufferStore):
        what = "no init (T.init())" if init is None else "an init that is not a single store"
        raise NotReductionBlockError(f"block {name!r} has {what}; expected `C[...] = identity`",
                                     [block])  # fmt: skip
    if not isinstance(body, BufferStore) or body.buffer is not init.buffer:
        raise NotReductionBlockError(
            f"block {name!r}: the body must be one store to {init.buffer.name}, the buffer its "
            f"init writes (`{init.buffer.name}[...] = {init.buffer.name}[...] op f(...)`)", [block]
        )  # fmt: skip
    if not structural_equal(init.indices, body.indices):
        raise NotReductionBlockError(
            f"block {name!r}: the init and the update store to different elements of "
            f"{init.buffer.name}", [block]
        )  # fmt: skip
    for reducer in REDUCERS:
        rhs = _combiner_rhs(reducer, body)
        if rhs is not None and reducer.is_identity(init.value):
            return ReductionUpdate(reducer, body.buffer, body.indices, init.value, rhs)
    known = ", ".join(r.name for r in REDUCERS)
    raise NotReductionBlockError(
        f"block {name!r}: its init value {init.value} and update "
        f"`{body.buffer.name}[...] = {body.value}` do not match a known reducer ({known}: "
        "`C = C op f(...)` with init the identity of op)", [block]
    )  # fmt: skip


def find_reduction(block: Block) -> ReductionUpdate | None:
    """`match_reduction`, or None when the block is not a recognised reduction."""
    try:
        return match_reduction(block)
    except NotReductionBlockError:
        return None


def _combiner_rhs(reducer: Reducer, store: BufferStore) -> E.PrimExpr | None:
    value = store.value
    if type(value) is not reducer.node_type:
        return None
    for lhs, rhs in ((value.a, value.b), (value.b, value.a)):
        if _is_self_load(lhs, store) and not _reads_buffer(rhs, store.buffer):
            return rhs
    return None


def _is_self_load(expr: E.PrimExpr, store: BufferStore) -> bool:
    return (
        isinstance(expr, E.BufferLoad)
        and expr.buffer is store.buffer
        and structural_equal(expr.indices, store.indices)
    )


def _reads_buffer(expr: E.PrimExpr, buffer: Buffer) -> bool:
    found = []
    post_order_visit(expr, lambda n: found.append(n) if _is_load_of(n, buffer) else None)
    return bool(found)


def _is_load_of(node, buffer: Buffer) -> bool:
    return isinstance(node, E.BufferLoad) and node.buffer is buffer


# -- the reduction-block legality fact ---------------------------------------------------------
def check_reduction_block(state: ScheduleState, block: Block) -> None:
    """Raise NotReductionBlockError unless `block` is a reduction block (TVM's conditions):
    it has an init, affine bindings, only spatial/reduce iter vars, it is the only block of its
    scope writing its outputs, and its reduce iter vars do not index its outputs."""
    name = block.name_hint
    if block.init is None:
        raise NotReductionBlockError(
            f"block {name!r} has no init (T.init()), so it is not a reduction block", [block]
        )
    if not has_affine_binding(state, block):
        raise NotReductionBlockError(
            f"block {name!r}: its iter values are not an affine map of the loops above it",
            [block],
        )
    odd = [iv.var.name for iv in block.iter_vars if iv.iter_type not in _SPATIAL_OR_REDUCE]
    if odd:
        raise NotReductionBlockError(
            f"block {name!r}: iter vars {odd} are neither spatial nor reduce", [block]
        )
    _check_dominant_writer(state, block)
    indexed = reduce_vars_in_output(block)
    if indexed:
        raise NotReductionBlockError(
            f"block {name!r}: reduce iter vars {indexed} index the buffer it writes; a "
            "reduction's output may depend on spatial iter vars only", [block]
        )  # fmt: skip


_SPATIAL_OR_REDUCE = (IterType.SPATIAL, IterType.REDUCE)


def is_reduction_block(state: ScheduleState, block: Block) -> bool:
    try:
        check_reduction_block(state, block)
    except NotReductionBlockError:
        return False
    return True


def _check_dominant_writer(state: ScheduleState, block: Block) -> None:
    scope = state.scope_block(block)
    if scope is None:
        return
    written = {id(r.buffer): r.buffer for r in block.writes}
    for other in state.child_blocks(scope):
        if other is block:
            continue
        shared = [written[id(r.buffer)].name for r in other.writes if id(r.buffer) in written]
        if shared:
            raise NotReductionBlockError(
                f"block {block.name_hint!r} is not the only writer of {shared[0]}: block "
                f"{other.name_hint!r} writes it too", [block, other]
            )  # fmt: skip


def reduce_vars_in_output(block: Block) -> list[str]:
    """Names of the reduce iter vars used in the indices of what `block` writes (its write
    regions and the stores of its body and init)."""
    reduce_vars = {id(iv.var): iv.var.name for iv in block.iter_vars
                   if iv.iter_type == IterType.REDUCE}  # fmt: skip
    if not reduce_vars:
        return []
    indexes: list = [region.region for region in block.writes]

    def collect(node):
        if isinstance(node, BufferStore):
            indexes.append(node.indices)

    for stmt in (block.init, block.body):
        if stmt is not None:
            post_order_visit(stmt, collect)
    used = {id(v) for idx in indexes for v in _vars_in(idx) if id(v) in reduce_vars}
    return [reduce_vars[k] for k in reduce_vars if k in used]


def _vars_in(items) -> list[E.Var]:
    return [var for item in items for var in collect_vars(item)]

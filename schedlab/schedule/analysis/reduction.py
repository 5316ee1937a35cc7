"""Reduction blocks: recognise `init` + `C[idx] = C[idx] op f(...)` and the reducer `op`.

A reduction block's update is recognised against `REDUCERS`, a table of commutative,
associative reducers (sum, product, max, min), each given by the expression node of its combiner
and its identity value: `match_reduction(block)` gives the reducer, the output element, the
identity and the combined value (`rfactor` builds the partial and the final reduction from
them). `check_reduction_block` raises the structural fact (TVM's IsReductionBlock, computed in
stage_pipeline.py) as a NotReductionBlockError; `reduce_vars_in_output` is one of its parts that
the parallelization checks reuse. `check_runs_once_under` is decompose_reduction's condition for
hoisting an init above a loop.
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
from schedlab.ir.stmt import Block, BufferStore, For, IterType
from schedlab.ir.structural import structural_equal

from ..errors import LocationError, NotReductionBlockError
from ..state import ScheduleState
from .affine import injective_binding_map
from .stage_pipeline import reduction_block_violation


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
        return (-_largest_finite(dtype), -math.inf)
    return (dtype.min_value(),)


def _highest(dtype: DataType) -> tuple[float, ...]:
    if dtype.is_float:
        return (_largest_finite(dtype), math.inf)
    return (dtype.max_value(),)


def _largest_finite(dtype: DataType) -> float:
    """The largest finite value of a float type (te's max/min reducers start from it)."""
    import numpy as np

    try:
        return float(np.finfo(dtype.numpy).max)
    except (TypeError, ValueError):  # numpy does not know ml_dtypes' types (bfloat16)
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype.numpy).max)


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
    """Raise NotReductionBlockError unless `block` is a reduction block (TVM's conditions, see
    `stage_pipeline.reduction_block_violation`): it has an init, affine bindings, only spatial
    and reduce iter vars, it is the only block of its scope writing its outputs, and its reduce
    iter vars do not index its outputs."""
    reason = reduction_block_violation(state, block)
    if reason is not None:
        raise NotReductionBlockError(f"{reason}, so it is not a reduction block", [block])


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


# -- hoisting an init ----------------------------------------------------------------------------
class RepeatedReductionError(LocationError):
    """Under the loop, the block runs its reduction more than once for the same output element
    (a loop it does not depend on repeats it), so an init hoisted above would run too rarely."""


def check_runs_once_under(state: ScheduleState, block: Block, loop: For, primitive: str) -> None:
    """Raise RepeatedReductionError unless each instance of `block` runs at most once per
    execution of `loop` (its iter values are a one-to-one map of the loops from `loop` down).

    An init hoisted before `loop` runs once per iteration of the loops above it, where the
    block's own init ran whenever its reduce iter vars were at their minimum: the two agree
    only then. A loop under `loop` that the bindings do not use (extent > 1) repeats the whole
    reduction, re-initialising it every time; a hoisted init would run once and the repeats
    would accumulate into each other."""
    result = injective_binding_map(state, block, loop)
    if result:
        return
    loops = state.loops_above(block)
    below = loops[next(i for i, x in enumerate(loops) if x is loop) :]
    used = {id(v) for value in state.realize_of(block).iter_values for v in collect_vars(value)}
    repeating = [x for x in below if id(x.loop_var) not in used and not _is_one(x.extent)]
    name, where = block.name_hint, loop.loop_var.name
    if repeating:
        culprit = repeating[-1]
        under = "" if culprit is loop else f" (under loop {where})"
        why = (f"block {name!r} does not depend on loop {culprit.loop_var.name} of extent "
               f"{culprit.extent}{under}: every iteration of {culprit.loop_var.name} repeats the "
               f"whole reduction, starting with its init, so an init placed before {where} "
               f"would run once where it ran {culprit.extent} times")  # fmt: skip
    else:
        why = (f"the iter values of block {name!r} may reach the same element more than once "
               f"within one iteration of loop {where} ({'; '.join(result.errors)}), and each "
               f"repeat of the reduction starts with its init; an init placed before {where} "
               "would run only once")  # fmt: skip
        culprit = loop
    raise RepeatedReductionError(f"{primitive}: {why}; {_lower_loop_hint(state, block, below)}",
                                 [loop, culprit, block])  # fmt: skip


def _lower_loop_hint(state: ScheduleState, block: Block, below: list[For]) -> str:
    """Where the init can go instead: the outermost loop under `below[0]` above which the
    reduction runs once per iteration and which is not inside a loop of the reduction."""
    realize = state.realize_of(block)
    reduce_vars = {id(v) for iv, value in zip(block.iter_vars, realize.iter_values)
                   if iv.iter_type == IterType.REDUCE for v in collect_vars(value)}  # fmt: skip
    for loop in below[1:]:
        if injective_binding_map(state, block, loop):
            return f"place the init lower: loop {loop.loop_var.name} is the outermost loop " \
                "where it can go"  # fmt: skip
        if id(loop.loop_var) in reduce_vars:
            break  # an init inside a loop of the reduction would run in every iteration
    return "no loop above the block fits: the reduction repeats inside every one of them"


def _is_one(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1

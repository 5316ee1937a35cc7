"""Inlining: substitute a producer's expression into its consumers (`compute_inline`), or fold a
consumer into its only producer (`reverse_compute_inline`). The inlined block, the loops only it
used and the intermediate buffer's allocation disappear; blocks whose bodies change get their
read/write regions recomputed (as TVM does).
"""

from __future__ import annotations

from schedlab.arith import Analyzer, eval_set
from schedlab.ir import expr as E
from schedlab.ir.buffer import BufferRegion, MatchBufferRegion
from schedlab.ir.functor import Mutator, collect_vars, post_order_visit, substitute
from schedlab.ir.op import all as all_of
from schedlab.ir.stmt import Block, BufferStore
from schedlab.ir.structural import structural_equal

from ..analysis.dependence import scope_dependences
from ..analysis.stage_pipeline import (
    check_complete_block,
    check_not_output_block,
    check_stage_pipeline,
    complete_block_violation,
    writers_in_scope,
)
from ..errors import ScheduleError
from ..instruction import PrimitiveContext, primitive
from ..state import ScheduleState
from ._compute_common import (
    NotStagePipelineError,
    OnlyLeafError,
    OutputBlockError,
    expect_block,
    plan_leaf_removal,
    with_inferred_signature,
)

__all__ = [
    "compute_inline", "reverse_compute_inline", "compute_inline_impl",
    "reverse_compute_inline_impl", "HasInitError", "NotSingleBufferError", "BodyPatternError",
    "OpaqueAccessError", "NonSingleProducerError", "ProducerPredicateError", "OnlyLeafError",
    "OutputBlockError", "NotStagePipelineError",
]  # fmt: skip


class HasInitError(ScheduleError):
    """The block is a reduction (it has an init), which cannot be inlined."""


class NotSingleBufferError(ScheduleError):
    """compute_inline needs a block writing one buffer; reverse_compute_inline a block reading
    exactly one buffer produced in its scope."""


class BodyPatternError(ScheduleError):
    """The block's body is not of the form inlining can substitute."""


class OpaqueAccessError(ScheduleError):
    """The buffer to inline is used other than by element loads (e.g. matched into a block)."""


class NonSingleProducerError(ScheduleError):
    """reverse_compute_inline needs one complete producer whose only consumer is the block."""


class ProducerPredicateError(ScheduleError):
    """The producer's predicate is not implied by the one inlining would give it."""


# -- compute_inline ---------------------------------------------------------------------------
@primitive("ComputeInline", inputs=("block",))
def compute_inline(ctx: PrimitiveContext, block: Block):
    """Inline a producer into its consumers: every load `B[e0, e1, ...]` of the buffer it writes
    becomes its expression `f(e0, e1, ...)`; the block, its loops and the buffer disappear.

    Preconditions:
      - the block has no init (it is not a reduction) and writes a single buffer;
      - its scope is a stage pipeline; it is a complete block and not an output block;
      - its body is one store `B[v0, v1, ...] = f(...)` whose indices are distinct iter vars and
        whose value uses no other iter var;
      - the buffer is used only through element loads (not matched into another block).

    Parameters:
      block: the producer block to inline.

    >>> A = te.placeholder((6,), name="A")
    >>> B = te.compute((6,), lambda i: A[i] * 2.0, name="B")
    >>> C = te.compute((6,), lambda i: B[i] + 1.0, name="C")
    >>> sch = Schedule(te.create_prim_func([A, C]))
    >>> sch.compute_inline(sch.get_block("B"))
    >>> print(sch.func.script(show_header=False))
    @T.prim_func
    def main(A: T.Buffer((6,), "float32"), C: T.Buffer((6,), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i in range(6):
            with T.block("C"):
                vi = T.axis.spatial(6, i)
                T.reads(A[vi])
                T.writes(C[vi])
                C[vi] = A[vi] * T.float32(2) + T.float32(1)
    """
    block = expect_block(block, "block")
    return compute_inline_impl(ctx.state, block), None


def compute_inline_impl(state: ScheduleState, block: Block) -> ScheduleState:
    """The state after compute_inline(block); raises a ScheduleError when it is illegal."""
    _check_no_init(block)
    if len(block.writes) != 1:
        raise NotSingleBufferError(
            f"compute_inline needs a block that writes one buffer, but {block.name_hint!r} "
            f"writes {len(block.writes)}: {', '.join(r.buffer.name for r in block.writes)}",
            [block],
        )
    buffer = block.writes[0].buffer
    scope = check_stage_pipeline(state, block)
    check_not_output_block(state, block, scope)
    check_complete_block(state, block, scope)
    store, index_vars = _inlinable_store(block, buffer)
    old, new = plan_leaf_removal(state, block)
    removed = state.replace(old, new)
    scope_now = removed.node(scope.uid)
    rewritten = _ComputeInliner(buffer, index_vars, store.value).visit(scope_now)
    rewritten = _drop_allocation(rewritten, buffer, scope)
    return removed.replace(scope_now, rewritten)


def _check_no_init(block: Block) -> None:
    if block.init is not None:
        raise HasInitError(
            f"block {block.name_hint!r} has an init statement (it is a reduction), which "
            f"cannot be inlined; use compute_at to move it instead",
            [block],
        )


def _inlinable_store(block: Block, buffer) -> tuple[BufferStore, list[E.Var]]:
    body = block.body
    pattern = "`B[v0, v1, ...] = f(v0, v1, ...)` with distinct iter vars as indices"
    if not isinstance(body, BufferStore) or body.buffer is not buffer:
        raise BodyPatternError(
            f"the body of block {block.name_hint!r} must be a single store {pattern}", [block]
        )
    iter_ids = {id(iv.var) for iv in block.iter_vars}
    indices = list(body.indices)
    distinct = {id(i) for i in indices}
    plain = all(isinstance(i, E.Var) and id(i) in iter_ids for i in indices)
    if not plain or len(distinct) != len(indices):
        raise BodyPatternError(
            f"block {block.name_hint!r} stores to {buffer.name}[{', '.join(map(str, indices))}]; "
            f"inlining needs {pattern}",
            [block],
        )
    extra = [v for v in collect_vars(body.value) if id(v) in iter_ids and id(v) not in distinct]
    if extra:
        raise BodyPatternError(
            f"the value stored by block {block.name_hint!r} uses iter var {extra[0].name}, which "
            f"does not index {buffer.name}; inlining needs {pattern}",
            [block],
        )
    return body, indices


class _ComputeInliner(Mutator):
    """Replaces loads of `buffer` by the producer's value and refreshes touched signatures."""

    def __init__(self, buffer, index_vars, value):
        self.buffer = buffer
        self.index_vars = index_vars
        self.value = value

    def visit_BufferLoad(self, node: E.BufferLoad):
        node = self.generic_visit(node)
        if node.buffer is not self.buffer:
            return node
        return substitute(self.value, dict(zip(self.index_vars, node.indices)))

    def visit_Block(self, node: Block):
        new = self.generic_visit(node)
        regions = (*node.reads, *node.writes)
        if new is not node and any(r.buffer is self.buffer for r in regions):
            new = with_inferred_signature(new)
        return new


def _drop_allocation(scope: Block, buffer, original_scope: Block) -> Block:
    """The scope without `buffer` among its allocations; raises OpaqueAccessError when the
    buffer is still used somewhere in it."""
    uses = _buffer_uses(scope.body, buffer)
    if uses:
        raise OpaqueAccessError(
            f"buffer {buffer.name} is still used after inlining ({uses[0]}); a buffer matched "
            f"into a block or used by address cannot be inlined",
            [original_scope],
        )
    kept = tuple(b for b in scope.alloc_buffers if b is not buffer)
    return scope if len(kept) == len(scope.alloc_buffers) else scope.replace(alloc_buffers=kept)


def _buffer_uses(stmt, buffer) -> list[str]:
    found: list[str] = []

    def visit(node):
        if isinstance(node, (E.BufferLoad, BufferStore)) and node.buffer is buffer:
            found.append(f"an access {buffer.name}[...]")
        elif isinstance(node, BufferRegion) and node.buffer is buffer:
            found.append(f"a region of {buffer.name} in a block signature")
        elif isinstance(node, MatchBufferRegion) and node.source.buffer is buffer:
            found.append(f"{buffer.name} matched into {node.buffer.name}")
        elif isinstance(node, E.Var) and node is buffer.data:
            found.append(f"its address {buffer.data.name}")

    post_order_visit(stmt, visit)
    return found


# -- reverse_compute_inline -------------------------------------------------------------------
@primitive("ReverseComputeInline", inputs=("block",))
def reverse_compute_inline(ctx: PrimitiveContext, block: Block):
    """Fold a consumer into its only producer: the producer stores the consumer's result
    directly (`C[...] = g(f(...))`); the consumer, its loops and the intermediate buffer
    disappear.

    Preconditions:
      - the block has no init, its scope is a stage pipeline and it is a complete block;
      - it reads exactly one buffer written in its scope, produced by one complete block whose
        only consumer it is, and that buffer is allocated in the scope (not an output);
      - its body is one store `C[...] = g(..., B[v0 + c0, v1 + c1, ...], ...)` with no
        predicate, where all loads of B use the same indices: distinct iter vars plus
        constants, covering every non-unit iter var (a one-to-one map);
      - the producer's body is one store, its domain covers the consumer's, and its predicate
        is implied by the one inlining gives it.

    Parameters:
      block: the consumer block to fold into its producer.

    >>> A = te.placeholder((6,), name="A")
    >>> B = te.compute((6,), lambda i: A[i] * 2.0, name="B")
    >>> C = te.compute((6,), lambda i: B[i] + 1.0, name="C")
    >>> sch = Schedule(te.create_prim_func([A, C]))
    >>> sch.reverse_compute_inline(sch.get_block("C"))
    >>> print(sch.func.script(show_header=False))
    @T.prim_func
    def main(A: T.Buffer((6,), "float32"), C: T.Buffer((6,), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i in range(6):
            with T.block("B"):
                vi = T.axis.spatial(6, i)
                T.reads(A[vi])
                T.writes(C[vi])
                C[vi] = A[vi] * T.float32(2) + T.float32(1)
    """
    block = expect_block(block, "block")
    return reverse_compute_inline_impl(ctx.state, block), None


def reverse_compute_inline_impl(state: ScheduleState, block: Block) -> ScheduleState:
    """The state after reverse_compute_inline(block); raises a ScheduleError when illegal."""
    _check_no_init(block)
    scope = check_stage_pipeline(state, block)
    buffer = _single_read_buffer(state, block, scope)
    check_complete_block(state, block, scope)
    producer = _single_producer(state, block, scope)
    if not any(b is buffer for b in scope.alloc_buffers):
        raise OutputBlockError(
            f"producer {producer.name_hint!r} writes {buffer.name}, which is not allocated in "
            f"its scope (an output of the function); folding {block.name_hint!r} into it would "
            f"leave {buffer.name} unwritten",
            [producer],
        )
    analyzer = Analyzer()
    inverse = _inverse_indices(state, block, buffer, producer, analyzer)
    producer_realize = state.realize_of(producer)
    predicate = _inlined_predicate(block, producer, producer_realize, inverse, analyzer)
    new_store = _folded_store(block.body, buffer, producer.body.value, inverse)
    new_producer = with_inferred_signature(producer.replace(body=new_store))
    old, new = plan_leaf_removal(state, block)
    removed = state.replace(old, new)
    realize_now = removed.realize_of(removed.node(producer.uid))
    folded = removed.replace(
        realize_now, realize_now.replace(predicate=predicate, block=new_producer)
    )
    scope_now = folded.node(scope.uid)
    return folded.replace(scope_now, _drop_allocation(scope_now, buffer, scope))


def _single_read_buffer(state, block: Block, scope: Block):
    produced = []
    for region in block.reads:
        known = any(b is region.buffer for b in produced)
        if not known and writers_in_scope(state, scope, region.buffer):
            produced.append(region.buffer)
    if len(produced) != 1:
        names = ", ".join(b.name for b in produced) or "none"
        raise NotSingleBufferError(
            f"reverse_compute_inline needs a block that reads exactly one buffer produced in its "
            f"scope, but {block.name_hint!r} reads {len(produced)} ({names})",
            [block],
        )
    return produced[0]


def _single_producer(state, block: Block, scope: Block) -> Block:
    deps = scope_dependences(state, scope)
    incoming = [d for d in deps if d.dst is block]
    reason = None
    if len(incoming) != 1 or incoming[0].kind != "RAW":
        reason = f"it depends on {len(incoming)} blocks/dependences, not one producer"
    else:
        producer = incoming[0].src
        complete = complete_block_violation(state, producer, scope)
        outgoing = [d for d in deps if d.src is producer]
        if complete is not None:
            reason = f"its producer is not complete: {complete}"
        elif len(outgoing) != 1:
            reason = f"its producer {producer.name_hint!r} has other consumers or dependences"
        else:
            return producer
    raise NonSingleProducerError(
        f"reverse_compute_inline needs block {block.name_hint!r} to have a single complete "
        f"producer whose only consumer it is, but {reason}",
        [block],
    )


def _inverse_indices(state, block: Block, buffer, producer: Block, analyzer) -> dict:
    """{consumer iter var: expression in the producer's iter vars} from inverting the indices
    the consumer reads `buffer` at (each `v + c`) against the producer's store indices."""
    store = block.body
    if not isinstance(store, BufferStore) or not _is_true(state.realize_of(block).predicate):
        raise _reverse_pattern_error(block, "its body must be one store and it has no predicate")
    indices = _load_indices(store, buffer, block)
    producer_store = producer.body
    if not isinstance(producer_store, BufferStore) or producer_store.buffer is not buffer:
        raise _reverse_pattern_error(block, f"producer {producer.name_hint!r} must be one store")
    inverse = {}
    for iv in block.iter_vars:
        if isinstance(iv.dom.extent, E.IntImm) and iv.dom.extent.value == 1:
            inverse[iv.var] = iv.dom.min
    by_id = {id(iv.var): iv for iv in block.iter_vars}
    seen: set[int] = set()
    for index, target in zip(indices, producer_store.indices):
        var, offset = _var_plus_offset(index, by_id, analyzer)
        if var is None or id(var) in seen:
            raise _reverse_pattern_error(block, f"index {index} is not a distinct `v + c`")
        seen.add(id(var))
        inverse[var] = analyzer.simplify(target - offset)
    missing = [iv.var.name for iv in block.iter_vars if iv.var not in inverse]
    if missing:
        raise _reverse_pattern_error(block, f"iter var {missing[0]} does not index {buffer.name}")
    _check_covered(block, producer, inverse, analyzer)
    return inverse


def _load_indices(store: BufferStore, buffer, block: Block) -> tuple:
    loads: list[E.BufferLoad] = []

    def visit(node):
        if isinstance(node, E.BufferLoad) and node.buffer is buffer:
            loads.append(node)

    post_order_visit(store, visit)
    if not loads:
        raise _reverse_pattern_error(block, f"its store does not read {buffer.name}")
    first = loads[0].indices
    if any(not structural_equal(tuple(load.indices), tuple(first)) for load in loads[1:]):
        raise _reverse_pattern_error(block, f"it reads {buffer.name} at different indices")
    return first


def _var_plus_offset(index, iter_vars: dict, analyzer):
    used = [v for v in collect_vars(index) if id(v) in iter_vars]
    if len(used) != 1:
        return None, None
    var = used[0]
    offset = analyzer.simplify(index - var)
    if any(id(v) in iter_vars for v in collect_vars(offset)):
        return None, None
    return var, offset


def _is_true(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


def _reverse_pattern_error(block: Block, why: str) -> BodyPatternError:
    return BodyPatternError(
        f"block {block.name_hint!r} cannot be folded into its producer: {why}; the body must be "
        f"`C[...] = g(B[v0 + c0, v1 + c1, ...])` reading B at distinct iter vars (plus constants) "
        f"that cover every iter var, with no predicate",
        [block],
    )


def _check_covered(block: Block, producer: Block, inverse: dict, analyzer) -> None:
    """Every instance of the consumer must come from some instance of the producer."""
    dom = {iv.var: iv.dom for iv in producer.iter_vars}
    for iv in block.iter_vars:
        values = eval_set(inverse[iv.var], dom, analyzer)
        low, high = iv.dom.min, iv.dom.min + iv.dom.extent - 1
        if not (
            values.is_bounded
            and analyzer.can_prove(values.min <= low)
            and analyzer.can_prove(high <= values.max)
        ):
            raise NonSingleProducerError(
                f"block {block.name_hint!r} iterates {iv.var.name} over [{low}, {high}] but its "
                f"producer {producer.name_hint!r} only yields {values.min}..{values.max}",
                [block, producer],
            )


def _inlined_predicate(block, producer, realize, inverse, analyzer):
    """The consumer's in-range condition in the producer's terms (TVM's
    BuildInlinedConsumerPredicate); it must imply the producer's old predicate."""
    in_range = all_of(*[
        E.And(iv.var >= iv.dom.min, iv.var < iv.dom.min + iv.dom.extent) for iv in block.iter_vars
    ])  # fmt: skip
    with analyzer.constraint_scope(E.IntImm(in_range.dtype, 1)):
        for iv in producer.iter_vars:
            analyzer.bind(iv.var, iv.dom, allow_override=True)
        condition = analyzer.simplify(substitute(in_range, inverse))
    binding = {iv.var: value for iv, value in zip(producer.iter_vars, realize.iter_values)}
    predicate = substitute(condition, binding)
    with analyzer.constraint_scope(predicate):
        if not analyzer.can_prove(realize.predicate):
            raise ProducerPredicateError(
                f"producer {producer.name_hint!r} has predicate {realize.predicate}, which the "
                f"folded block's predicate {predicate} does not imply",
                [producer],
            )
    return predicate


def _folded_store(store: BufferStore, buffer, producer_value, inverse) -> BufferStore:
    class _Fold(Mutator):
        def visit_BufferLoad(self, node):
            node = self.generic_visit(node)
            return producer_value if node.buffer is buffer else node

    folded = _Fold().visit(store)
    return substitute(folded, inverse)

"""LowerInitBlock (TVM: `tir.transform.LowerInitBlock`): remove every block's `init`.

A reduction block's `init` runs when all of its REDUCE iter vars are at their domain minimum,
before the body. After this pass no block has an `init`; its effect is spelled out in one of
two ways:

- **Hoisted** (preferred). When the reduce iter vars are bound to loops of a perfect loop nest
  around the block, and those loops visit the reduce domain's minimum exactly once, on their
  first iteration, the init runs *before* the outermost of them, as its own block
  `<name>_init`: under the loops outside, and under copies of the spatial loops that sit among
  or inside the reduction loops (a register tile `k_0 i_1 j_1 k_1` gets an init nest over
  `i_1 j_1`). The reduction's loops then have no branch: this is what makes the unscheduled
  gemm as fast as a hand-written triple loop, and keeps gcc free to vectorize and keep sums
  in registers inside a tiled one. (TVM gets the same shape from the `decompose_reduction`
  schedule primitive.)
- **Conditional** (always correct). Otherwise the body becomes
  `if (all reduce iter vars == their min): init` followed by the old body.

One difference remains for an *empty* reduction (a symbolic extent that is 0 at run time): the
hoisted init still writes the identity value, the conditional one leaves the output untouched.
Loops with a constant extent <= 0 are never hoisted.
"""

from __future__ import annotations

from schedlab.arith import block_access_regions, detect_iter_map
from schedlab.ir import op
from schedlab.ir.expr import PrimExpr, Range, Var
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator, collect_vars, substitute, uses_var
from schedlab.ir.stmt import (
    Block,
    BlockRealize,
    For,
    ForKind,
    IfThenElse,
    IterType,
    IterVar,
    SeqStmt,
    Stmt,
)  # fmt: skip
from schedlab.ir.transform import Pass, prim_func_pass

from ._util import analyzer, as_int, with_doc


def lower_init_block(func: PrimFunc) -> PrimFunc:
    """`func` with every block init hoisted before its reduction loops or made conditional."""
    body = _InitLowerer().visit(func.body)
    return func if body is func.body else func.with_body(body)


def LowerInitBlock() -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `lower_init_block`."""
    return with_doc(prim_func_pass(lower_init_block, name="LowerInitBlock"), __doc__)


class _InitLowerer(Mutator):
    def visit_For(self, loop: For) -> Stmt:
        chain, realize = _perfect_nest(loop)
        if realize is not None and realize.block.init is not None:
            first = _reduction_loops_start(chain, realize)
            if first is not None:
                hoisted = self._hoist(chain, first, realize)
                if hoisted is not None:
                    return hoisted
        return self.generic_visit(loop)

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        realize = self.generic_visit(realize)
        if realize.block.init is None:
            return realize
        return realize.replace(block=conditional_init(realize.block))

    def _hoist(self, chain: list[For], first: int, realize: BlockRealize) -> Stmt | None:
        init_realize = _init_block_realize(realize)
        if init_realize is None:
            return None
        init = _init_nest(init_realize, chain[first:], realize)
        block = realize.block
        body = self.visit(block.body)
        inner: Stmt = realize.replace(block=block.replace(init=None, body=body))
        for loop in reversed(chain[first:]):
            inner = loop.replace(body=inner)
        inner = SeqStmt.flatten(init, inner)
        for loop in reversed(chain[:first]):
            inner = loop.replace(body=inner)
        return inner


def conditional_init(block: Block) -> Block:
    """`block` with its init turned into `if (reduce vars == min): init` before the body."""
    condition: PrimExpr = op.const(True)
    for iter_var in block.iter_vars:
        if iter_var.iter_type == IterType.REDUCE:
            condition = op.logical_and(condition, op.eq(iter_var.var, iter_var.dom.min))
    if _is_true(condition):
        init: Stmt = block.init
    else:
        init = IfThenElse(condition, block.init)
    return block.replace(init=None, body=SeqStmt.flatten(init, block.body))


def _is_true(expr: PrimExpr) -> bool:
    value = as_int(expr)
    return value is not None and value != 0


def _perfect_nest(loop: For) -> tuple[list[For], BlockRealize | None]:
    """The loops of the perfect nest starting at `loop` and the block realize at its bottom."""
    chain: list[For] = []
    node: Stmt = loop
    while isinstance(node, For):
        chain.append(node)
        node = node.body
    return chain, node if isinstance(node, BlockRealize) else None


def _reduction_loops_start(chain: list[For], realize: BlockRealize) -> int | None:
    """Index in `chain` of the outermost reduction loop when the init can be hoisted there.

    Spatial loops may sit among and inside the reduction loops (a tile `k_0 i_1 j_1 k_1`): the
    init then runs before the outermost reduction loop over those spatial loops, once per
    output element, as TVM's `decompose_reduction` at that loop would place it."""
    reduce, others = _split_bindings(realize)
    used = _loops_used([value for _, value in reduce], chain)
    if not used:
        return None  # bound to no loop, or to something that is not a loop of this nest
    first = min(used)
    suffix = chain[first:]
    spatial = _loops_touched(others, chain) - used
    if used | spatial != set(range(first, len(chain))):
        return None  # a loop binding nothing sits among the reduction loops: it repeats them
    reduce_vars = {id(chain[n].loop_var) for n in used}
    if any(uses_var(v, lambda var: id(var) in reduce_vars) for v in (*others, realize.predicate)):
        return None
    if any(chain[n].kind == ForKind.THREAD_BINDING for n in spatial):
        return None  # a GPU thread loop cannot be repeated for the init
    if any(as_int(loop.extent) is not None and as_int(loop.extent) <= 0 for loop in suffix):
        return None
    return first if _min_first_and_once([chain[n] for n in sorted(used)], reduce) else None


def _loops_touched(values: list[PrimExpr], chain: list[For]) -> set[int]:
    """Positions in `chain` of the loops `values` use (other variables are ignored)."""
    position = {id(loop.loop_var): n for n, loop in enumerate(chain)}
    return {position[id(v)] for value in values for v in collect_vars(value) if id(v) in position}


def _init_nest(init_realize: BlockRealize, suffix: list[For], realize: BlockRealize) -> Stmt:
    """The init block under copies (fresh variables, fresh loops) of the spatial loops among
    the reduction loops `suffix`; just the block when there are none."""
    reduce, _ = _split_bindings(realize)
    reduce_loops = {id(v) for _, value in reduce for v in collect_vars(value)}
    spatial = [loop for loop in suffix if id(loop.loop_var) not in reduce_loops]
    if not spatial:
        return init_realize
    fresh = {loop.loop_var: Var(loop.loop_var.name, loop.loop_var.dtype) for loop in spatial}
    body: Stmt = init_realize.replace(
        iter_values=tuple(substitute(v, fresh) for v in init_realize.iter_values),
        predicate=substitute(init_realize.predicate, fresh),
    )
    for loop in reversed(spatial):
        body = For(fresh[loop.loop_var], loop.min, loop.extent, loop.kind, body,
                   loop.thread_tag, dict(loop.annotations))  # fmt: skip
    return body


def _split_bindings(realize: BlockRealize):
    """(reduce (iter var, value) pairs, values bound to the other iter vars)."""
    reduce, others = [], []
    for iter_var, value in zip(realize.block.iter_vars, realize.iter_values):
        if iter_var.iter_type == IterType.REDUCE:
            reduce.append((iter_var, value))
        else:
            others.append(value)
    return reduce, others


def _loops_used(values: list[PrimExpr], chain: list[For]) -> set[int]:
    """Positions in `chain` of the loops `values` use; empty if they use any other variable."""
    loop_vars = {id(loop.loop_var) for loop in chain}
    if any(id(v) not in loop_vars for value in values for v in collect_vars(value)):
        return set()
    return _loops_touched(values, chain)


def _min_first_and_once(suffix: list[For], reduce: list[tuple[IterVar, PrimExpr]]) -> bool:
    """Whether the reduce bindings take the domain minimum exactly once over the reduction
    loops, on their first iteration (all loops at their min): then the hoisted init runs at
    the same point of the computation as the conditional one."""
    ana = analyzer()
    at_first = {loop.loop_var: loop.min for loop in suffix}
    for iter_var, value in reduce:
        if not ana.can_prove_equal(substitute(value, at_first), iter_var.dom.min):
            return False
    if _one_loop_per_var(suffix, reduce):
        return True
    ranges = {loop.loop_var: Range(loop.min, loop.extent) for loop in suffix}
    result = detect_iter_map([v for _, v in reduce], ranges, check_level="bijective", analyzer=ana)
    return not result.errors and result.indices is not None


def _one_loop_per_var(suffix: list[For], reduce: list[tuple[IterVar, PrimExpr]]) -> bool:
    """Each reduce var bound to a distinct reduction loop var, every loop used: a bijection."""
    loop_vars = [loop.loop_var for loop in suffix]
    values = [value for _, value in reduce]
    if len(values) != len(loop_vars) or not all(isinstance(v, Var) for v in values):
        return False
    return {id(v) for v in values} == {id(v) for v in loop_vars}


def _init_block_realize(realize: BlockRealize) -> BlockRealize | None:
    """A block running the init of `realize`'s block over its non-reduce iter vars."""
    block = realize.block
    reduce_vars = {id(iv.var) for iv in block.iter_vars if iv.iter_type == IterType.REDUCE}
    if uses_var(block.init, lambda var: id(var) in reduce_vars):
        return None  # the init depends on where the reduction starts: keep it in place
    kept = [
        (iv, value)
        for iv, value in zip(block.iter_vars, realize.iter_values)
        if iv.iter_type != IterType.REDUCE
    ]
    fresh = {iv.var: Var(iv.var.name, iv.var.dtype) for iv, _ in kept}
    iter_vars = tuple(IterVar(fresh[iv.var], iv.dom, iv.iter_type) for iv, _ in kept)
    body = substitute(block.init, fresh)
    init_block = Block(iter_vars, (), (), f"{block.name_hint}_init", body)
    reads, writes = block_access_regions(init_block)
    init_block = init_block.replace(reads=tuple(reads), writes=tuple(writes))
    return BlockRealize(tuple(value for _, value in kept), realize.predicate, init_block)

"""reorder: permute the loops of one chain."""

from __future__ import annotations

from schedlab.arith import Analyzer
from schedlab.ir import expr as E
from schedlab.ir.functor import collect_vars, substitute, uses_var
from schedlab.ir.stmt import Block, For, IterType

from ...analysis.affine import check_affine_binding
from ...analysis.loops import block_accesses, iteration_conflict
from ...errors import DependencyError, NonAffineBindingError
from ...instruction import PrimitiveContext, primitive
from ...state import ScheduleState
from ._common import check_distinct, loop_list
from .errors import BlockIterTypeError, DependentLoopError, LoopsNotAChainError


@primitive("Reorder", inputs=("loops",))
def reorder(ctx: PrimitiveContext, *loops: For):
    """Reorder loops of one chain: the given loops take the given order, every other loop of
    the chain between them stays where it is.

    Preconditions:
        - the loops lie on one chain of nested loops in one block scope (they need not be
          adjacent), and every loop between the outermost and innermost of them has exactly one
          child, the next loop;
        - each loop is given once;
        - the blocks under the loops have only spatial and reduction iter vars and affine
          bindings; a block with an init must keep running it first for each element: its
          binding is one-to-one, no loop feeds both a spatial and a reduction iter var, and the
          reduction iter vars start at their minimum;
        - no loop's range depends on a loop that would end up inside it;
        - when several blocks are under the loops, whatever one writes and another accesses is
          touched by both only within the same iteration of the reordered loops.

    Parameters:
        loops: the loops in their new order, outermost first (`sch.reorder(k, i, j)`).

    >>> func = workloads.get("gemm", M=4, N=6, K=8)[0]
    >>> sch = Schedule(func)
    >>> print(sch.func.script(show_header=False))  # doctest: +NORMALIZE_WHITESPACE
    @T.prim_func
    def gemm(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 6), "float32"),
             C: T.Buffer((4, 6), "float32")):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i, j, k in T.grid(4, 6, 8):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> sch.reorder(k, i)
    >>> print(sch.func.script(show_header=False))  # doctest: +NORMALIZE_WHITESPACE
    @T.prim_func
    def gemm(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 6), "float32"),
             C: T.Buffer((4, 6), "float32")):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for k, j, i in T.grid(8, 6, 4):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    """
    loops = loop_list(loops, "reorder")
    state = ctx.state
    if len(loops) <= 1:
        return state, None
    check_distinct(loops, "reorder")
    chain = _chain(state, loops)
    new_top = _rebuild(chain, loops)
    _check_blocks(state, chain)
    return state.replace(chain[0], new_top), None


def _chain(state: ScheduleState, loops: list[For]) -> list[For]:
    """Every loop from the outermost given loop down to the innermost one."""
    scope = state.scope_block(loops[0])
    for loop in loops[1:]:
        if state.scope_block(loop) is not scope:
            raise LoopsNotAChainError(
                f"loops {loops[0].loop_var.name} and {loop.loop_var.name} are not in the same "
                "block scope; reorder works on the loops of one scope",
                [loops[0], loop],
            )
    by_depth = sorted(loops, key=lambda loop: len(state.ancestors(loop)))
    for outer, inner in zip(by_depth, by_depth[1:]):
        if not state.is_ancestor(outer, inner):
            raise LoopsNotAChainError(
                f"loops {outer.loop_var.name} and {inner.loop_var.name} are in different "
                "branches of the loop nest, not on one chain",
                [outer, inner],
            )
    chain = [by_depth[0]]
    while chain[-1] is not by_depth[-1]:
        body = chain[-1].body
        if not isinstance(body, For):
            raise LoopsNotAChainError(
                f"loop {chain[-1].loop_var.name} has more than one child (or a non-loop child) "
                "between the loops to reorder; reorder needs a single chain of loops",
                [chain[-1]],
            )
        chain.append(body)
    return chain


def _check_blocks(state: ScheduleState, chain: list[For]) -> None:
    top, bottom = chain[0], chain[-1]
    for block in state.child_blocks(bottom):
        _check_block(state, block, top)
    accesses = block_accesses(bottom.body)
    if len(accesses) < 2:
        return
    domains = {loop.loop_var: E.Range(loop.min, loop.extent) for loop in chain}
    for index, first in enumerate(accesses):
        for second in accesses[index + 1 :]:
            buffer = iteration_conflict(first, second, domains)
            if buffer is not None:
                nodes = [a.block for a in (first, second) if a.block is not None]
                raise DependencyError(
                    f"{first.name} and {second.name} both access buffer {buffer.name} (one of "
                    "them writing it) in different iterations of the loops to reorder; "
                    "reordering them could change which value is read. Reorder the loops "
                    "before compute_at/merge put these blocks together",
                    nodes,
                )


def _check_block(state: ScheduleState, block: Block, top: For) -> None:
    for iv in block.iter_vars:
        if iv.iter_type not in (IterType.SPATIAL, IterType.REDUCE):
            raise BlockIterTypeError(
                f"block {block.name_hint!r} has a {iv.iter_type} iter var {iv.var.name}; "
                "reorder needs blocks whose iter vars are all spatial or reduction",
                [block],
            )
    check_affine_binding(state, block, top, why=" (loops above it are reordered)")
    if block.init is not None:
        _check_init_runs_first(state, block)


def _check_init_runs_first(state: ScheduleState, block: Block) -> None:
    """A reduction's init runs at the instance whose reduction iter vars are all at their
    domain minimum; it must stay the first instance of each output element in any loop order.
    That holds when the binding is one-to-one, no loop feeds both a spatial and a reduction iter
    var, and the reduction iter vars are at their minimum when their loops are."""
    why = (
        " (it is a reduction with an init, which must keep running before the first update of "
        "each element)"
    )
    check_affine_binding(state, block, bijective=True, why=why)
    realize = state.realize_of(block)
    loops = {id(loop.loop_var): loop for loop in state.loops_above(block)}
    reduce_loops: dict[int, For] = {}
    spatial_loops: dict[int, For] = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        table = reduce_loops if iv.iter_type == IterType.REDUCE else spatial_loops
        table.update({id(v): loops[id(v)] for v in collect_vars(value) if id(v) in loops})
    shared = [loops[key] for key in reduce_loops if key in spatial_loops]
    if shared:
        raise NonAffineBindingError(
            f"loop {shared[0].loop_var.name} feeds both a spatial and a reduction iter var of "
            f"block {block.name_hint!r}{why}; reordering could run an update of an element "
            "before its init",
            [block, shared[0]],
        )
    starts = {loop.loop_var: loop.min for loop in reduce_loops.values()}
    analyzer = Analyzer()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        first = substitute(value, starts)
        if iv.iter_type == IterType.REDUCE and not analyzer.can_prove_equal(first, iv.dom.min):
            raise NonAffineBindingError(
                f"reduction iter var {iv.var.name} of block {block.name_hint!r} is {first}, not "
                f"its minimum {iv.dom.min}, when its loops start{why}",
                [block],
            )


def _rebuild(chain: list[For], order: list[For]) -> For:
    """The chain with the given loops' positions taken by `order`; loops keep their uids."""
    given = {loop.uid for loop in order}
    replacement = iter(order)
    sequence = [next(replacement) if loop.uid in given else loop for loop in chain]
    inner_vars: set[int] = set()
    body = chain[-1].body
    for loop in reversed(sequence):
        if uses_var(loop.min, lambda v: id(v) in inner_vars) or uses_var(
            loop.extent, lambda v: id(v) in inner_vars
        ):
            raise DependentLoopError(
                f"the range of loop {loop.loop_var.name} ({loop.min}, extent {loop.extent}) "
                "depends on a loop that would be inside it after the reorder",
                [loop],
            )
        inner_vars.add(id(loop.loop_var))
        body = loop.replace(body=body)
    return body

"""merge: sibling loop nests of the same shape become one nest running their bodies in turn."""

from __future__ import annotations

from schedlab.arith import Analyzer
from schedlab.ir import expr as E
from schedlab.ir.functor import substitute
from schedlab.ir.stmt import For, SeqStmt

from ...analysis.loops import block_accesses, iteration_conflict, shared_written_buffer
from ...errors import DependencyError, ScheduleError
from ...instruction import PrimitiveContext, primitive
from ...state import ScheduleState
from ._common import (
    check_distinct,
    check_no_annotation,
    check_starts_at_zero,
    loop_list,
    nest_of,
    serial,
)
from .errors import LoopNestMismatchError, LoopsNotAChainError


@primitive("Merge", inputs=("loops",), outputs="loop")
def merge(ctx: PrimitiveContext, *loops: For):
    """Merge sibling loop nests into one: `for i: A; for i: B` becomes `for i_m: A; B`.

    Each given loop names a nest: the loops from it up to the lowest common ancestor of all the
    given loops. The nests are merged level by level (the new loops are named `<loop>_m` after
    the first nest), and in each iteration the nests' bodies run in the order the loops are
    given.

    Preconditions:
        - the nests are adjacent statements of one block scope, each a chain of single-child
          loops that start at 0 and carry no annotation or thread binding;
        - the nests have the same depth and the same extents level by level;
        - the merge keeps every dependence: data one nest writes and another accesses is
          touched by both only within the same merged iteration, and nests whose order changes
          (loops given out of program order) share no written data.

    Parameters:
        loops: one loop per nest (at least two), in the order their bodies should run.

    Returns the innermost merged loop.

    >>> @T.prim_func
    ... def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
    ...          C: T.Buffer((8,), "float32")):
    ...     for i in range(8):
    ...         with T.block("B"):
    ...             vi = T.axis.spatial(8, i)
    ...             B[vi] = A[vi] * T.float32(2)
    ...     for i in range(8):
    ...         with T.block("C"):
    ...             vi = T.axis.spatial(8, i)
    ...             C[vi] = B[vi] + T.float32(1)
    >>> sch = Schedule(main)
    >>> (i1,), (i2,) = sch.get_loops(sch.get_block("B")), sch.get_loops(sch.get_block("C"))
    >>> i = sch.merge(i1, i2)
    >>> print(sch.func.script(show_header=False))  # doctest: +NORMALIZE_WHITESPACE
    @T.prim_func
    def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
             C: T.Buffer((8,), "float32")):
        for i_m in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i_m)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] * T.float32(2)
            with T.block("C"):
                vi_1 = T.axis.spatial(8, i_m)
                T.reads(B[vi_1])
                T.writes(C[vi_1])
                C[vi_1] = B[vi_1] + T.float32(1)
    """
    loops = loop_list(loops, "merge")
    if len(loops) < 2:
        raise ScheduleError(f"merge needs at least two loops, got {len(loops)}", loops)
    check_distinct(loops, "merge")
    state = ctx.state
    seq, nests = _nests(state, loops)
    _check_shapes(nests, Analyzer())
    positions = _positions(seq, nests)
    merged = [E.Var(f"{loop.loop_var.name}_m", loop.loop_var.dtype) for loop in nests[0]]
    bodies = [
        substitute(nest[-1].body, {loop.loop_var: var for loop, var in zip(nest, merged)})
        for nest in nests
    ]
    domains = {var: E.Range(loop.min, loop.extent) for var, loop in zip(merged, nests[0])}
    _check_dependences(bodies, positions, domains)
    body = SeqStmt.flatten(*bodies)
    for var, loop in reversed(list(zip(merged, nests[0]))):
        body = serial(var, 0, loop.extent, body)
    items = list(seq.seq)
    first = min(positions)
    items[first : first + len(positions)] = [body]
    state = state.replace(seq, SeqStmt.flatten(*items))
    return state, state.node(nest_of(body, len(merged))[-1].uid)


def _nests(state: ScheduleState, loops: list[For]) -> tuple[SeqStmt, list[list[For]]]:
    """The sequence holding the nests, and each nest's loops, outermost first."""
    for outer in loops:
        inner = next((loop for loop in loops if state.is_ancestor(outer, loop)), None)
        if inner is not None:
            raise LoopsNotAChainError(
                f"loop {outer.loop_var.name} contains loop {inner.loop_var.name}, another of the "
                "loops to merge; merge needs loops of separate, sibling loop nests",
                [outer, inner],
            )
    paths = [state.ancestors(loop) + [loop] for loop in loops]
    common = 0
    while all(len(p) > common for p in paths) and all(p[common] is paths[0][common] for p in paths):
        common += 1
    seq = paths[0][common - 1] if common else None
    if not isinstance(seq, SeqStmt):
        raise LoopsNotAChainError(
            "the loops to merge are not in sibling loop nests of one statement sequence",
            loops,
        )
    nests = [path[common:] for path in paths]
    for loop, nest in zip(loops, nests):
        other = next((s for s in nest if not isinstance(s, For)), None)
        if other is not None:
            raise LoopsNotAChainError(
                f"between loop {loop.loop_var.name} and the other loops' common ancestor there "
                f"is a {type(other).__name__}; merge needs nests of single-child loops in one "
                "block scope",
                [loop],
            )
    return seq, nests


def _check_shapes(nests: list[list[For]], analyzer: Analyzer) -> None:
    for nest in nests:
        for loop in nest:
            check_no_annotation(loop, "merge")
            check_starts_at_zero(loop, analyzer, "merge")
    first = nests[0]
    for nest in nests[1:]:
        if len(nest) != len(first):
            raise LoopNestMismatchError(
                f"the nest of loop {first[-1].loop_var.name} is {len(first)} loops deep, the nest "
                f"of loop {nest[-1].loop_var.name} {len(nest)}; merge needs nests of equal depth",
                [first[0], nest[0]],
            )
        for a, b in zip(first, nest):
            if not analyzer.can_prove_equal(a.extent, b.extent):
                raise LoopNestMismatchError(
                    f"loops {a.loop_var.name} (extent {a.extent}) and {b.loop_var.name} (extent "
                    f"{b.extent}) are at the same level but differ in extent",
                    [a, b],
                )


def _positions(seq: SeqStmt, nests: list[list[For]]) -> list[int]:
    index = {id(stmt): i for i, stmt in enumerate(seq.seq)}
    missing = [nest[0] for nest in nests if id(nest[0]) not in index]
    if missing:  # the IR's paths say otherwise; refuse instead of guessing a position
        raise LoopsNotAChainError(
            f"loop {missing[0].loop_var.name} is not a direct statement of the sequence that "
            "holds the other nests; merge needs sibling loop nests of one statement sequence",
            missing,
        )
    positions = [index[id(nest[0])] for nest in nests]
    if sorted(positions) != list(range(min(positions), min(positions) + len(positions))):
        raise LoopsNotAChainError(
            "other statements stand between the loop nests to merge; merge needs adjacent "
            "nests (move or merge the statements in between first)",
            [nest[0] for nest in nests],
        )
    return positions


def _check_dependences(bodies, positions: list[int], domains: dict) -> None:
    accesses = [block_accesses(body) for body in bodies]
    for p in range(len(bodies)):
        for q in range(p + 1, len(bodies)):
            swapped = positions[p] > positions[q]
            for a in accesses[p]:
                for b in accesses[q]:
                    _check_pair(a, b, swapped, domains)


def _check_pair(a, b, swapped: bool, domains: dict) -> None:
    if swapped:
        buffer = shared_written_buffer(b, a)
        how = "and the loops are given out of program order, which would swap them"
    else:
        buffer = iteration_conflict(a, b, domains)
        how = "in different iterations of the merged loops"
    if buffer is not None:
        nodes = [x.block for x in (a, b) if x.block is not None]
        raise DependencyError(
            f"{a.name} and {b.name} both access buffer {buffer.name} (one of them writing it) "
            f"{how}; merging would change the result",
            nodes,
        )

"""Which loops gcc -O3 unrolls completely before its vectorizer runs (the `cunrolli` pass), from
gcc's own size estimate of the loop body in GIMPLE.

gcc sees one copy of a block's statement as: per buffer access, the flattened index in Horner
form (((i0*32 + i1)*4 + i2)*16 + j0: a multiply and an add per term past the first, the prefixes
two accesses share computed once; a copy of an unrolled loop repeats only the adds of its
variable and what follows them), a scale to bytes and a pointer add, the load or store; then
the arithmetic. It unrolls the innermost loop when it has at most `MAX_PEEL_TIMES` trips and
trips x body x 2/3 (the loop control folds away) stays within `MAX_PEELED_INSNS`; then it looks
at the loop around the copies, whose body holds one copy of each statement per trip of the
unrolled loops the statement depends on (the rest was shared). The walk stops at the first loop
it keeps: a loop holding a loop is not unrolled when code would grow. The function's outermost
loop is never unrolled either (gcc keeps outermost loops unless told to unroll them)."""

from __future__ import annotations

import math

from schedlab.ir.stmt import ForKind

# gcc's --param defaults (gcc 12; unchanged for many releases)
MAX_PEEL_TIMES = 16  # max-completely-peel-times
MAX_PEELED_INSNS = 200  # max-completely-peeled-insns


def body_statements(nest, shapes) -> list[tuple[int, frozenset[int]]]:
    """GIMPLE statements of one copy of the block's body: (count, loops whose variables they
    depend on) per distinct computation (see the module doc)."""
    nodes: dict[tuple, tuple[int, frozenset[int]]] = {}
    every: set[int] = set()
    n = len(nest.loops)
    for sh in shapes:
        terms = sorted(((sh.linear_stride[j], j) for j in range(n) if sh.linear_stride[j]),
                       key=lambda t: (-t[0], t[1]))  # fmt: skip
        deps: frozenset[int] = frozenset()
        for k, (coef, j) in enumerate(terms):
            if k:  # Horner step: the prefix times the ratio of coefficients (shared by the
                # copies of loops it does not depend on), plus the next variable
                key = tuple((jj, cc / coef) for cc, jj in terms[: k + 1])
                nodes[("times", key)] = (1, deps)
                nodes[("plus", key)] = (1, deps | {j})
            deps = deps | {j}
        address = (id(sh.access.buffer), tuple(terms))
        nodes[("address", address)] = (2, deps)  # scaled to bytes, added to the base pointer
        nodes[("memory", address, sh.access.write)] = (1, deps)
        every |= deps
    arith = max(1, nest.flops_per_iter)
    nodes[("arith",)] = (arith, frozenset(every))
    return list(nodes.values())


def unrolled_before_vectorizing(nest, shapes) -> set[int]:
    """Indices of the loops of `nest` that are straight-line code when gcc's vectorizer runs:
    those the schedule unrolled (the C back end writes out the copies) and those gcc's early
    complete unrolling removes, walking out from the innermost loop."""
    statements = body_statements(nest, shapes)
    unrolled: set[int] = set()
    for j in range(len(nest.loops) - 1, -1, -1):
        loop = nest.loops[j]
        if loop.kind == ForKind.UNROLLED:
            unrolled.add(j)
            continue
        if loop.kind != ForKind.SERIAL or loop.extent > MAX_PEEL_TIMES or j == 0:
            break
        size = sum(
            count * math.prod(nest.loops[d].extent for d in deps & unrolled)
            for count, deps in statements
        )
        if loop.extent * size * 2 / 3 > MAX_PEELED_INSNS:
            break
        unrolled.add(j)
    return unrolled

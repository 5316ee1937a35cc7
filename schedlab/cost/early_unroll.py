"""Which loops gcc -O3 unrolls completely before its vectorizer runs (the `cunrolli` pass), from
gcc's own size estimate of the loop body in GIMPLE.

gcc sees one copy of a block's statement as: per buffer access, the flattened index as its fold
leaves it (Horner form ((i0*32 + i1)*4 + i2)*16 + j0 across power-of-two row pitches, a product
per term otherwise; a multiply and an add per term past the first, subexpressions two accesses
share computed once; a copy of an unrolled loop repeats only what depends on its variable, and
what depends on unrolled variables alone folds to constants), a scale to bytes and a pointer
add, the load or store; then the arithmetic. It unrolls the innermost loop when it has at
most `MAX_PEEL_TIMES` trips and trips x body x 2/3 (the loop control folds away) stays within
`MAX_PEELED_INSNS`; then it looks at the loop around the copies, whose body holds one copy of
each statement per trip of the unrolled loops the statement depends on (the rest is shared).
The walk stops at the first loop it keeps: a loop holding a loop is not unrolled when code
would grow. The function's outermost loop is never unrolled either (gcc keeps outermost loops
unless told to unroll them)."""

from __future__ import annotations

import math

from schedlab.ir.stmt import ForKind

from .model import eval_int

# gcc's --param defaults (gcc 12; unchanged for many releases)
MAX_PEEL_TIMES = 16  # max-completely-peel-times
MAX_PEELED_INSNS = 200  # max-completely-peeled-insns


def body_statements(nest, shapes, offsets=frozenset()) -> list[tuple[int, frozenset[int]]]:
    """GIMPLE statements of one copy of the block's body: (count, loops whose variables they
    depend on) per distinct computation (see the module doc). A loop in `offsets` is written
    out as vector statements: each copy adds a constant to the index of the first (one add,
    then its own scaling, pointer and memory access)."""
    nodes: dict[tuple, tuple[int, frozenset[int]]] = {}
    every: set[int] = set()
    n = len(nest.loops)
    for sh in shapes:
        terms = sorted(((sh.linear_stride[j], j) for j in range(n)
                        if sh.linear_stride[j] and j not in offsets),
                       key=lambda t: (-t[0], t[1]))  # fmt: skip
        expr = _flattened_index(terms, nodes)
        deps = frozenset(j for _, j in terms)
        if _constant_offset(sh):
            expr = ("plus", expr, "offset")
            nodes[expr] = (1, deps)
        moved = frozenset(j for j in offsets if sh.linear_stride[j])
        if moved:  # the first copy adds no offset
            nodes[("first copy", expr)] = (-1, deps)
            expr, deps = ("plus", expr, ("copy", moved)), deps | moved
            nodes[expr] = (1, deps)
        address = (id(sh.access.buffer), expr)
        nodes[("address", address)] = (2, deps)  # scaled to bytes, added to the base pointer
        nodes[("memory", address, sh.access.write)] = (1, deps)
        every |= deps
    arith = max(1, nest.flops_per_iter)
    nodes[("arith",)] = (arith, frozenset(every))
    return list(nodes.values())


def _flattened_index(terms, nodes: dict):
    """The index sum(var * coef) as gcc folds it, left to right (the order the C back end
    writes it: largest coefficient first): `x*c1 + y*c2` becomes `(x*(c1/c2) + y)*c2` when c2
    is a power of two above 1 that divides c1 (Horner form for power-of-two row pitches);
    otherwise each product stays a statement of its own. Each new subexpression (shared by
    all accesses that contain it) is entered into `nodes` with its dependences."""

    def product(expr, deps, coef):
        if coef == 1:
            return expr
        node = ("times", expr, coef)
        nodes.setdefault(node, (1, deps))
        return node

    expr, factor, deps = None, 1, frozenset()
    for coef, j in terms:
        if expr is None:
            expr, factor, deps = ("var", j), coef, frozenset({j})
            continue
        small, large = min(factor, coef), max(factor, coef)
        if small > 1 and small & (small - 1) == 0 and large % small == 0:
            if factor >= coef:  # (expr*(factor/coef) + var) * coef
                left, right = product(expr, deps, factor // coef), ("var", j)
            else:  # (expr + var*(coef/factor)) * factor
                left, right = expr, product(("var", j), frozenset({j}), coef // factor)
                coef = factor
        else:  # expr*factor + var*coef
            left = product(expr, deps, factor)
            right = product(("var", j), frozenset({j}), coef)
            coef = 1
        deps = deps | {j}
        expr, factor = ("plus", left, right), coef
        nodes.setdefault(expr, (1, deps))
    if expr is None:
        return ("constant",)
    return product(expr, deps, factor)


def _constant_offset(sh) -> bool:
    """Whether the flattened index has a constant term (a window offset): one more add."""
    base = [eval_int(i, {}) for i in sh.access.indices]
    rows = [math.prod(sh.shape[d + 1 :]) for d in range(len(sh.shape))]
    return sum(b * r for b, r in zip(base, rows, strict=True)) != 0


def unrolled_before_vectorizing(nest, shapes) -> set[int]:
    """Indices of the loops of `nest` that are straight-line code when gcc's vectorizer runs:
    those the schedule unrolled (the C back end writes out the copies) and those gcc's early
    complete unrolling removes, walking out from the innermost loop."""
    written = {j: lp.extent for j, lp in enumerate(nest.loops) if lp.kind == ForKind.UNROLLED}
    return straight_line(nest, shapes, written)


def straight_line(nest, shapes, written: dict[int, int], offsets=frozenset()) -> set[int]:
    """Indices of the loops that are straight-line code: `written` (loop -> copies the C back
    end writes out: a loop the schedule unrolled, its extent; a vectorized loop turned into
    vector statements, their number) and those gcc unrolls completely walking out from the
    innermost loop, by its size model; `offsets` are the written loops whose copies differ
    by a constant offset (vector statements)."""
    statements = body_statements(nest, shapes, offsets)
    unrolled: set[int] = set()
    for j in range(len(nest.loops) - 1, -1, -1):
        loop = nest.loops[j]
        if j in written:
            unrolled.add(j)
            continue
        if loop.kind != ForKind.SERIAL or loop.extent > MAX_PEEL_TIMES or j == 0:
            break
        # statements of this loop's variable and unrolled ones alone fold to constants (the
        # loops written out are constants in every copy, inside this loop or not)
        constant = unrolled | set(written) | {j}
        size = sum(
            count * math.prod(written.get(d, nest.loops[d].extent) for d in deps & unrolled)
            for count, deps in statements
            if not deps <= constant
        )
        if loop.extent * size * 2 / 3 > MAX_PEELED_INSNS:
            break
        unrolled.add(j)
    return unrolled

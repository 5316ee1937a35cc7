"""split and fuse: one loop into a nest of loops, and a chain of loops into one."""

from __future__ import annotations

from schedlab.arith import Analyzer
from schedlab.errors import short_int, short_repr
from schedlab.ir import expr as E
from schedlab.ir.functor import substitute, uses_var
from schedlab.ir.op import convert, floordiv, floormod
from schedlab.ir.stmt import For

from ...errors import NotSingleChildError, ScheduleError
from ...instruction import PrimitiveContext, primitive
from ._common import (
    append_predicate,
    check_no_annotation,
    check_starts_at_zero,
    expect_loop,
    factor_values,
    is_one,
    loop_domains_above,
    loop_list,
    nest_of,
    serial,
    simplify_bindings,
)
from .errors import DependentLoopError, FactorError, LoopsNotAChainError


@primitive("Split", inputs=("loop", "factors"), outputs="loops")
def split(ctx: PrimitiveContext, loop: For, factors: list, preserve_unit_iters: bool = True,
          disable_predication: bool = False):  # fmt: skip
    """Split a loop into a nest of loops whose extents are `factors`, outermost first.

    The original loop variable becomes `l_0 * f1 * f2 + l_1 * f2 + l_2` in the blocks' bindings.
    One factor may be None: it is inferred as ceil(extent / product of the others). When the
    product exceeds the extent, the blocks under the loop get the predicate
    `T.where(l_0 * f1 + l_1 < extent)` so every iteration still runs exactly once.

    Preconditions:
        - the loop starts at 0 and has no annotation or thread binding;
        - factors are positive ints (or ExprRVs from `sample_perfect_tile`), at most one None;
          without a None their product must be at least the extent.

    Parameters:
        loop: the loop to split.
        factors: the extents of the new loops, outermost first.
        preserve_unit_iters: keep loops of extent 1 in the block bindings (else they become 0).
        disable_predication: do not add the `T.where` guard (only when the extra iterations are
            known to be harmless, e.g. on a padded buffer).

    Returns the new loops, outermost first.

    >>> func = workloads.get("gemm", M=10, N=16, K=16)[0]
    >>> sch = Schedule(func)
    >>> print(sch.func.script(show_header=False))  # doctest: +NORMALIZE_WHITESPACE
    @T.prim_func
    def gemm(A: T.Buffer((10, 16), "float32"), B: T.Buffer((16, 16), "float32"),
             C: T.Buffer((10, 16), "float32")):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i, j, k in T.grid(10, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> i0, i1 = sch.split(i, [None, 4])
    >>> print(sch.func.script(show_header=False))  # doctest: +NORMALIZE_WHITESPACE
    @T.prim_func
    def gemm(A: T.Buffer((10, 16), "float32"), B: T.Buffer((16, 16), "float32"),
             C: T.Buffer((10, 16), "float32")):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i_0, i_1, j, k in T.grid(3, 4, 16, 16):
            with T.block("C"):
                vi = T.axis.spatial(10, i_0 * 4 + i_1)
                vj, vk = T.axis.remap("SR", [j, k])
                T.where(i_0 * 4 + i_1 < 10)
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    """
    expect_loop(loop, "split")
    check_no_annotation(loop, "split")
    analyzer = Analyzer()
    check_starts_at_zero(loop, analyzer, "split")
    extents = _split_extents(loop, factors, analyzer)
    dtype = loop.loop_var.dtype
    new_vars = [E.Var(f"{loop.loop_var.name}_{i}", dtype) for i in range(len(extents))]
    value = convert(0)
    for var, extent in zip(new_vars, extents):
        value = value * extent + var
    body = substitute(loop.body, {loop.loop_var: value})
    if not disable_predication and not _provably_below(value, new_vars, extents, loop, analyzer):
        body = append_predicate(body, value < loop.extent, loop, "split")
    for var, extent in reversed(list(zip(new_vars, extents))):
        body = serial(var, 0, extent, body)
    body = simplify_bindings(body, loop_domains_above(ctx.state, loop), preserve_unit_iters,
                             tuple(new_vars))  # fmt: skip
    state = ctx.state.replace(loop, body)
    return state, [state.node(new.uid) for new in nest_of(body, len(extents))]


def _split_extents(loop: For, factors, analyzer: Analyzer) -> list[E.PrimExpr]:
    values, infer = factor_values(loop, factors, "split")
    dtype = loop.loop_var.dtype
    product = 1
    for value in values:
        product *= value if value is not None else 1
    if product > dtype.max_value():  # the new loops' iteration count would not fit the dtype
        raise FactorError(
            f"split: the factors {short_repr(list(factors))} multiply to {short_int(product)}, "
            f"more than the loop variable's dtype {dtype} holds ({dtype.max_value()})",
            [loop],
        )
    if infer is not None and isinstance(loop.extent, E.IntImm):
        # ceil(extent / product) in Python ints: extent + product - 1 may not fit the dtype
        values[infer] = -(-loop.extent.value // product)
    elif infer is not None:
        values[infer] = analyzer.simplify(floordiv(loop.extent + (product - 1), product))
    elif not analyzer.can_prove(E.IntImm(dtype, product) >= loop.extent):
        raise FactorError(
            f"split: the factors {short_repr(list(factors))} multiply to {product}, less than "
            f"the extent {loop.extent} of loop {loop.loop_var.name}; make one factor None to "
            "infer it",
            [loop],
        )
    return [v if isinstance(v, E.PrimExpr) else E.IntImm(dtype, v) for v in values]


def _provably_below(value, new_vars, extents, loop: For, analyzer: Analyzer) -> bool:
    with analyzer.constraint_scope(convert(True)):
        for var, extent in zip(new_vars, extents):
            analyzer.bind(var, E.Range(convert(0), extent), allow_override=True)
        return analyzer.can_prove(value < loop.extent)


@primitive("Fuse", inputs=("loops",), outputs="loop")
def fuse(ctx: PrimitiveContext, *loops: For, preserve_unit_iters: bool = True):
    """Fuse a chain of nested loops into one loop over the product of their extents.

    Each fused loop variable becomes `fused // inner_extents % extent` in the blocks' bindings;
    the fused loop is named `<outer>_<inner>..._fused`. The execution order does not change.

    Preconditions:
        - the loops are consecutive: each is the only child of the one before it (outermost
          first);
        - they start at 0 and have no annotation or thread binding;
        - no loop's extent depends on another of the fused loops.

    Parameters:
        loops: the loops to fuse, outermost first (`sch.fuse(i, j)`).
        preserve_unit_iters: keep a fused loop of extent 1 in the block bindings.

    Returns the fused loop.

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
    >>> ij = sch.fuse(i, j)
    >>> print(sch.func.script(show_header=False))  # doctest: +NORMALIZE_WHITESPACE
    @T.prim_func
    def gemm(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 6), "float32"),
             C: T.Buffer((4, 6), "float32")):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i_j_fused, k in T.grid(24, 8):
            with T.block("C"):
                vi = T.axis.spatial(4, i_j_fused // 6)
                vj = T.axis.spatial(6, i_j_fused % 6)
                vk = T.axis.reduce(8, k)
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    """
    loops = loop_list(loops, "fuse")
    if not loops:
        raise ScheduleError("fuse needs at least one loop")
    analyzer = Analyzer()
    _check_fusible(ctx.state, loops, analyzer)
    fused = E.Var(_fused_name(loops), _widest(loops))
    mapping = _fused_substitution(fused, loops, analyzer)
    body = substitute(loops[-1].body, mapping)
    extent = convert(1)
    for loop in loops:
        extent = extent * loop.extent
    new_loop = serial(fused, 0, analyzer.simplify(extent), body)
    new_loop = simplify_bindings(new_loop, loop_domains_above(ctx.state, loops[0]),
                                 preserve_unit_iters, (fused,))  # fmt: skip
    state = ctx.state.replace(loops[0], new_loop)
    return state, state.node(new_loop.uid)


def _check_fusible(state, loops: list[For], analyzer: Analyzer) -> None:
    outer_vars: set[int] = set()
    for index, loop in enumerate(loops):
        check_no_annotation(loop, "fuse")
        if index:
            outer = loops[index - 1]
            if state.sref_parent(loop) is not outer:
                raise LoopsNotAChainError(
                    f"loop {loop.loop_var.name} is not directly inside loop "
                    f"{outer.loop_var.name}: fuse needs consecutive nested loops, outermost first",
                    [outer, loop],
                )
            if outer.body is not loop:
                raise NotSingleChildError(
                    f"loop {loop.loop_var.name} is not the only statement in loop "
                    f"{outer.loop_var.name}, so they cannot be fused",
                    [outer, loop],
                )
        check_starts_at_zero(loop, analyzer, "fuse")
        if uses_var(loop.extent, lambda v: id(v) in outer_vars):
            raise DependentLoopError(
                f"the extent {loop.extent} of loop {loop.loop_var.name} depends on a loop it "
                "would be fused with",
                [loop],
            )
        outer_vars.add(id(loop.loop_var))


def _fused_name(loops: list[For]) -> str:
    return "_".join(loop.loop_var.name for loop in loops) + "_fused"


def _widest(loops: list[For]):
    return max((loop.loop_var.dtype for loop in loops), key=lambda d: d.bits)


def _fused_substitution(fused: E.Var, loops: list[For], analyzer: Analyzer) -> dict:
    mapping = {}
    lower = convert(1)
    for index in range(len(loops) - 1, -1, -1):
        loop = loops[index]
        if is_one(loop.extent):
            mapping[loop.loop_var] = E.IntImm(loop.loop_var.dtype, 0)
            continue
        if index == 0:
            mapping[loop.loop_var] = floordiv(fused, lower)
        else:
            span = analyzer.simplify(lower * loop.extent)
            mapping[loop.loop_var] = floordiv(floormod(fused, span), lower)
        lower = analyzer.simplify(lower * loop.extent)
    return mapping

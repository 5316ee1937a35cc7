"""loop_partition (a loop's range cut into consecutive loops) and add_unit_loop."""

from __future__ import annotations

from schedlab.arith import Analyzer
from schedlab.ir import expr as E
from schedlab.ir.functor import ir_transform, pre_order_visit, substitute
from schedlab.ir.node import fresh_uid
from schedlab.ir.stmt import Allocate, Block, BlockRealize, For, IterType, LetStmt, SeqStmt, Stmt

from ...errors import ScheduleError
from ...instruction import PrimitiveContext, primitive
from ._common import (
    check_no_annotation,
    expect_loop,
    factor_values,
    loop_domains_above,
    map_realizes,
    serial,
)
from .errors import FactorError, SymbolicExtentError


@primitive("LoopPartition", inputs=("loop", "factors"), outputs="loops")
def loop_partition(ctx: PrimitiveContext, loop: For, factors: list,
                   preserve_unit_iters: bool = True):  # fmt: skip
    """Cut a loop's range into consecutive loops of the given lengths, each with its own copy
    of the loop body: `for i in range(10)` with factors [2, 5] becomes `for i0 in range(2)`,
    `for i1 in range(2, 7)` and `for i2 in range(7, 10)`.

    One factor may be None: it takes what the others leave. Without a None, a last loop takes
    the rest of the range. The copied blocks are named `<block>_<new loop>` (`C_i0`, `C_i1`,
    ...); a spatial iter var bound to the loop gets the partition's range as its domain, and a
    copy whose reduction can never start in its range loses its init. Unlike TVM, the loops
    are not wrapped in opaque `_partition`/`_common` blocks.

    Preconditions:
        - the loop has a constant start and extent, and no annotation or thread binding;
        - factors are positive ints (at most one None) adding up to less than the extent, or
          exactly to it when one is None;
        - no block under the loop allocates or matches buffers (they cannot be duplicated).

    Parameters:
        loop: the loop to partition.
        factors: the lengths of the leading parts.
        preserve_unit_iters: accepted for TVM compatibility (bindings are not rewritten).

    Returns the new loops, in order.

    >>> func = workloads.get("gemm", M=4, N=3, K=2)[0]
    >>> sch = Schedule(func)
    >>> print(sch.func.script(show_header=False))  # doctest: +NORMALIZE_WHITESPACE
    @T.prim_func
    def gemm(A: T.Buffer((4, 2), "float32"), B: T.Buffer((2, 3), "float32"),
             C: T.Buffer((4, 3), "float32")):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i, j, k in T.grid(4, 3, 2):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> i0, i1 = sch.loop_partition(i, [1, None])
    >>> print(sch.func.script(show_header=False))  # doctest: +NORMALIZE_WHITESPACE
    @T.prim_func
    def gemm(A: T.Buffer((4, 2), "float32"), B: T.Buffer((2, 3), "float32"),
             C: T.Buffer((4, 3), "float32")):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i0, j, k in T.grid(1, 3, 2):
            with T.block("C_i0"):
                vi, vj, vk = T.axis.remap("SSR", [i0, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
        for i1 in range(1, 4):
            for j_1, k_1 in T.grid(3, 2):
                with T.block("C_i1"):
                    vi_1, vj_1, vk_1 = T.axis.remap("SSR", [i1, j_1, k_1])
                    T.reads(A[vi_1, vk_1], B[vk_1, vj_1])
                    T.writes(C[vi_1, vj_1])
                    with T.init():
                        C[vi_1, vj_1] = T.float32(0)
                    C[vi_1, vj_1] = C[vi_1, vj_1] + A[vi_1, vk_1] * B[vk_1, vj_1]
    """
    expect_loop(loop, "loop_partition")
    check_no_annotation(loop, "loop_partition")
    if not isinstance(loop.min, E.IntImm) or not isinstance(loop.extent, E.IntImm):
        raise SymbolicExtentError(
            f"loop_partition needs a loop with a constant start and extent; loop "
            f"{loop.loop_var.name} runs from {loop.min} for {loop.extent} iterations",
            [loop],
        )
    _check_copyable(loop)
    bounds = _partition_bounds(loop, factors)
    outer = loop_domains_above(ctx.state, loop)
    parts = [_partition(loop, index, lo, hi, outer) for index, (lo, hi) in enumerate(bounds)]
    state = ctx.state.replace(loop, SeqStmt.flatten(*parts))
    return state, [state.node(part.uid) for part in parts]


def _partition_bounds(loop: For, factors) -> list[tuple[int, int]]:
    values, infer = factor_values(loop, factors, "loop_partition")
    extent = loop.extent.value
    given = sum(v for v in values if v is not None)
    if given >= extent:
        raise FactorError(
            f"loop_partition: the factors {list(factors)} add up to {given}, but must add up to "
            f"less than the extent {extent} of loop {loop.loop_var.name} (the rest forms the last "
            "part)",
            [loop],
        )
    if infer is not None:
        values[infer] = extent - given
    else:
        values.append(extent - given)
    bounds, start = [], loop.min.value
    for value in values:
        bounds.append((start, start + value))
        start += value
    return bounds


def _check_copyable(loop: For) -> None:
    def check(node):
        owned = isinstance(node, Block) and (node.alloc_buffers or node.match_buffers)
        if owned or isinstance(node, Allocate):
            raise ScheduleError(
                f"loop_partition: loop {loop.loop_var.name} contains a block that allocates or "
                "matches buffers, which cannot be duplicated into each part",
                [loop, node] if isinstance(node, Block) else [loop],
            )

    pre_order_visit(loop.body, check)


def _partition(loop: For, index: int, lo: int, hi: int, outer: dict) -> For:
    name = f"{loop.loop_var.name}{index}"
    var = E.Var(name, loop.loop_var.dtype)
    body = _fresh_copy(loop.body, {loop.loop_var: var}, f"_{name}")
    dtype = loop.loop_var.dtype
    dom = E.Range(E.IntImm(dtype, lo), E.IntImm(dtype, hi - lo))
    analyzer = Analyzer()
    body = map_realizes(body, lambda r, d: _narrow(r, var, dom, d, analyzer), {**outer, var: dom})
    return serial(var, lo, hi - lo, body)


def _fresh_copy(stmt: Stmt, var_map: dict, suffix: str) -> Stmt:
    """A copy of `stmt` with fresh variables, loops and blocks (blocks renamed with `suffix`)."""
    defined: list[E.Var] = []

    def record(node):
        if isinstance(node, For):
            defined.append(node.loop_var)
        elif isinstance(node, Block):
            defined.extend(iv.var for iv in node.iter_vars)
        elif isinstance(node, (LetStmt, E.Let)):
            defined.append(node.var)

    pre_order_visit(stmt, record)
    mapping = dict(var_map)
    mapping.update({v: type(v)(v.name, v.dtype) for v in defined})
    copied = substitute(stmt, mapping)

    def renew(node):
        if isinstance(node, Block):
            return node.replace(uid=fresh_uid(), name_hint=node.name_hint + suffix)
        return node.replace(uid=fresh_uid())

    return ir_transform(copied, postorder=renew, only_types=(For, Block))


def _narrow(realize: BlockRealize, var: E.Var, dom: E.Range, loops: dict,
            analyzer: Analyzer) -> BlockRealize:  # fmt: skip
    """Give spatial iter vars bound to the partition loop its range, and drop an init that can
    never run in this part (the reduction started in an earlier part)."""
    block = realize.block
    iter_vars = tuple(
        iv.replace(dom=dom) if value is var and iv.iter_type == IterType.SPATIAL else iv
        for iv, value in zip(block.iter_vars, realize.iter_values)
    )
    init = block.init
    if init is not None and _reduction_started(block, realize, loops, analyzer):
        init = None
    if init is block.init and all(a is b for a, b in zip(iter_vars, block.iter_vars)):
        return realize
    return realize.replace(block=block.replace(iter_vars=iter_vars, init=init))


def _reduction_started(block: Block, realize: BlockRealize, loops: dict, analyzer) -> bool:
    with analyzer.constraint_scope(E.IntImm("bool", 1)):
        for loop_var, rng in loops.items():
            analyzer.bind(loop_var, rng, allow_override=True)
        return any(
            iv.iter_type == IterType.REDUCE and analyzer.can_prove(value > iv.dom.min)
            for iv, value in zip(block.iter_vars, realize.iter_values)
        )


@primitive("AddUnitLoop", inputs=("block_or_loop",), outputs="loop")
def add_unit_loop(ctx: PrimitiveContext, block_or_loop: Block | For):
    """Wrap a block or a loop in a new loop of extent 1 (named `u`).

    Preconditions: the block is not a function's root block.

    Parameters:
        block_or_loop: the block or loop to wrap.

    Returns the new loop.

    >>> func = workloads.get("gemm", M=2, N=2, K=2)[0]
    >>> sch = Schedule(func)
    >>> print(sch.func.script(show_header=False))  # doctest: +NORMALIZE_WHITESPACE
    @T.prim_func
    def gemm(A: T.Buffer((2, 2), "float32"), B: T.Buffer((2, 2), "float32"),
             C: T.Buffer((2, 2), "float32")):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i, j, k in T.grid(2, 2, 2):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    >>> u = sch.add_unit_loop(sch.get_block("C"))
    >>> print(sch.func.script(show_header=False))  # doctest: +NORMALIZE_WHITESPACE
    @T.prim_func
    def gemm(A: T.Buffer((2, 2), "float32"), B: T.Buffer((2, 2), "float32"),
             C: T.Buffer((2, 2), "float32")):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True, "schedlab.num_outputs": 1})
        for i, j, k, u in T.grid(2, 2, 2, 1):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    """
    state = ctx.state
    if isinstance(block_or_loop, For):
        target = block_or_loop
    elif isinstance(block_or_loop, Block):
        if state.scope_block(block_or_loop) is None:
            raise ScheduleError(
                f"add_unit_loop: block {block_or_loop.name_hint!r} is a function's root block; "
                "no loop can go above it",
                [block_or_loop],
            )
        target = state.realize_of(block_or_loop)
    else:
        raise ScheduleError(
            "add_unit_loop: block_or_loop must be a block or loop handle, got "
            f"{type(block_or_loop).__name__}"
        )
    new_loop = serial(E.Var("u", "int32"), 0, 1, target)
    state = state.replace(target, new_loop)
    return state, state.node(new_loop.uid)

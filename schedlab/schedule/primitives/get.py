"""Retrieval: find blocks and loops (pure; they never change the IR)."""

from __future__ import annotations

from schedlab.ir.stmt import Block, For

from ..analysis.dependence import consumers, producers
from ..errors import BlockNotFoundError, ScheduleError
from ..instruction import PrimitiveContext, primitive


@primitive("GetBlock", inputs=(), outputs="block", pure=True)
def get_block(ctx: PrimitiveContext, name: str, func_name: str | None = None):
    """Find the block named `name` (in function `func_name`, or in any function).

    Preconditions: exactly one block has that name (in that function, when given).

    As in TVM, a module holding a single function answers to `func_name="main"` whatever the
    function's own name, so traces recorded by TVM replay here.

    Raises BlockNotFoundError when no block, or more than one, has that name.

    >>> sch = Schedule(workloads.get("gemm", M=4, N=4, K=4)[0])
    >>> sch.get(sch.get_block("C")).name_hint
    'C'
    """
    if not isinstance(name, str):
        raise TypeError(f"get_block: name must be a str, got {type(name).__name__}")
    state = ctx.state
    if func_name == "main" and "main" not in state.mod and len(state.mod) == 1:
        func_name = None  # TVM names a lone function "main": traces recorded there say so
    if func_name is not None and func_name not in state.mod:
        known = ", ".join(state.mod.get_global_vars())
        raise BlockNotFoundError(f"there is no function {func_name!r} (functions: {known})")
    found = state.blocks_named(name, func_name)
    if len(found) != 1:
        known = sorted({b.name_hint for b in _all_blocks(state) if b.name_hint != "root"})
        what = "no block" if not found else f"{len(found)} blocks"
        raise BlockNotFoundError(
            f"{what} named {name!r}; blocks: {', '.join(known) or 'none'}", found
        )
    return state, found[0]


def _all_blocks(state):
    return [state.node(uid) for uid in state.uids() if isinstance(state.node(uid), Block)]


@primitive("GetLoops", inputs=("block",), outputs="loops", pure=True)
def get_loops(ctx: PrimitiveContext, block: Block):
    """The loops above `block` inside its scope, outermost first.

    Preconditions: `block` is a block handle.

    >>> sch = Schedule(workloads.get("gemm", M=4, N=4, K=4)[0])
    >>> [sch.get(l).loop_var.name for l in sch.get_loops(sch.get_block("C"))]
    ['i', 'j', 'k']
    """
    _expect(block, Block, "block", "get_loops")
    return ctx.state, ctx.state.loops_above(block)


@primitive("GetChildBlocks", inputs=("block_or_loop",), outputs="blocks", pure=True)
def get_child_blocks(ctx: PrimitiveContext, block_or_loop: Block | For):
    """The blocks under a block or loop that are not nested inside other blocks, in order.

    Preconditions: `block_or_loop` is a block or loop handle.

    >>> sch = Schedule(workloads.get("matmul_bias_relu", M=4, N=4, K=4)[0])
    >>> root = sch.get_child_blocks(sch.get_block("root"))
    >>> [sch.get(b).name_hint for b in root]
    ['matmul', 'T_relu']
    """
    _expect(block_or_loop, (Block, For), "block_or_loop", "get_child_blocks")
    return ctx.state, ctx.state.child_blocks(block_or_loop)


@primitive("GetProducers", inputs=("block",), outputs="blocks", pure=True)
def get_producers(ctx: PrimitiveContext, block: Block):
    """The blocks of the same scope that write what `block` reads (its producers).

    Preconditions: `block` is a block handle.

    >>> sch = Schedule(workloads.get("matmul_bias_relu", M=4, N=4, K=4)[0])
    >>> [sch.get(b).name_hint for b in sch.get_producers(sch.get_block("T_relu"))]
    ['matmul']
    """
    _expect(block, Block, "block", "get_producers")
    return ctx.state, producers(ctx.state, block)


@primitive("GetConsumers", inputs=("block",), outputs="blocks", pure=True)
def get_consumers(ctx: PrimitiveContext, block: Block):
    """The blocks of the same scope that read what `block` writes (its consumers).

    Preconditions: `block` is a block handle.

    >>> sch = Schedule(workloads.get("matmul_bias_relu", M=4, N=4, K=4)[0])
    >>> [sch.get(b).name_hint for b in sch.get_consumers(sch.get_block("matmul"))]
    ['T_relu']
    """
    _expect(block, Block, "block", "get_consumers")
    return ctx.state, consumers(ctx.state, block)


def _expect(value, types, name: str, primitive_name: str) -> None:
    if not isinstance(value, types):
        expected = " or ".join(
            t.__name__ for t in (types if isinstance(types, tuple) else (types,))
        )
        raise ScheduleError(
            f"{primitive_name}: {name} must be a {expected} handle, got {type(value).__name__}"
        )

"""LowerCrossThreadReduction (TVM: same name, with LowerThreadAllreduce folded in): a reduction
whose reduction loop is bound to threadIdx.* becomes threads that cooperate.

In TensorIR a reduction loop bound to a thread axis means "the threads of the block split this
reduction" (TVM's dlight Reduction and GEMV rules write it so). Read sequentially, as the
interpreter does, it is an ordinary reduction; on a GPU each thread must first reduce its own
part and the partial results must then be combined across the threads. This pass (the first of
the GPU lowering, on blocks) rewrites

    for tx in T.thread_binding(T, "threadIdx.x"):     # reduce-only, the "top" loop
        for ko in range(...):                          # more reduce-only loops (serial)
            block B: B[s] = B[s] op f(..)  (init: B[s] = identity)

into three phases, each its own loop over the same thread axis:

1. in-thread: `red[0] = identity`, then the serial loops accumulate `red[0] = red[0] op f(..)`
   (red is one "local" scalar per thread);
2. cross-thread, either a shared-memory tree (every dialect: each thread stores its partial,
   then log2(T) halving steps `if t < s: buf[t] = buf[t] op buf[t + s]`, each a phase of its
   own, so InjectThreadSync puts a barrier between them), or, where the target has warp
   shuffles (cuda, rocm) and T is a multiple of the warp size: `__shfl_down_sync` steps inside
   each warp, the warps' results through shared memory, and one more shuffle round in the
   first warp;
3. write-back: thread 0 stores `B[s] = result` (`B[s] op result` for a block without init).

Spatial loops above the top loop (blockIdx, a threadIdx.y over GEMV rows, serial) keep their
meaning: each group of threads with the same other thread indices reduces separately (one row
of the shared buffer per group). What this does not handle is refused with the loop named: a
spatial loop or a second thread loop below the top loop, a symbolic thread count, a block that
is not a recognised reduction (sum, product, max, min).
"""

from __future__ import annotations

from schedlab.errors import LoweringError
from schedlab.ir import expr as E
from schedlab.ir import op
from schedlab.ir.buffer import Buffer, decl_buffer
from schedlab.ir.dtype import int32
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator, collect_vars, substitute
from schedlab.ir.intrin import register_intrinsic
from schedlab.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    IterType,
    SeqStmt,
    Stmt,
)  # fmt: skip
from schedlab.ir.transform import Pass, prim_func_pass
from schedlab.schedule.analysis.reduction import REDUCERS, Reducer, _combiner_rhs, find_reduction

from ._util import with_doc

SHUFFLE_DOWN = "gpu_shuffle_down"  # (value, offset, width): `value` of lane + offset in the warp
register_intrinsic(SHUFFLE_DOWN, 3, result="same")
SHUFFLE_KINDS = ("cuda", "rocm")  # dialects with warp shuffles (CUDA, HIP)


def lower_cross_thread_reduction(func: PrimFunc, target=None) -> PrimFunc:
    """`func` with each thread-bound reduction rewritten as cooperating threads."""
    from schedlab.target import Target

    target = Target(target) if target is not None else None
    rewriter = _Rewriter(target)
    body = rewriter.visit(func.body)
    if not rewriter.buffers:
        return func
    if not isinstance(body, BlockRealize):
        raise LoweringError("cross-thread reduction in a function without a root block")
    root = body.block.replace(alloc_buffers=(*body.block.alloc_buffers, *rewriter.buffers))
    return func.with_body(body.replace(block=root))


def LowerCrossThreadReduction(target=None) -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `lower_cross_thread_reduction` (shuffles when `target` has them)."""
    return with_doc(
        prim_func_pass(
            lambda f: lower_cross_thread_reduction(f, target), name="LowerCrossThreadReduction"
        ),
        __doc__,
    )


def _is_thread(loop: For) -> bool:
    return (loop.thread_tag or "").startswith("threadIdx")


class _Rewriter(Mutator):
    def __init__(self, target):
        self.target = target
        self.loops: list[For] = []
        self.buffers: list[Buffer] = []
        self.count = 0  # fresh thread loops made so far (their names)

    def visit_For(self, node: For) -> Stmt:
        if _is_thread(node):
            chain = _chain(node)
            if chain is not None and _reduce_only(node, *chain):
                return self._rewrite(node, *chain)
        self.loops.append(node)
        try:
            return self.generic_visit(node)
        finally:
            self.loops.pop()

    def _rewrite(self, top: For, loops: list[For], realize: BlockRealize) -> Stmt:
        block = realize.block
        inner = loops[1:]
        for loop in inner:
            if loop.thread_tag is not None or not _reduce_only(loop, loops, realize):
                raise LoweringError(
                    f"block {block.name_hint}: loop {loop.loop_var.name} is inside the "
                    f"reduction loop {top.loop_var.name} bound to {top.thread_tag}; only serial "
                    "reduction loops may be (reorder the spatial and thread loops outside it)"
                )
        if not isinstance(top.extent, E.IntImm):
            raise LoweringError(
                f"loop {top.loop_var.name} is bound to {top.thread_tag} with the symbolic "
                f"extent {top.extent}: thread counts must be constants"
            )
        reducer, store, rhs, has_init = _reduction(block)
        dtype = store.buffer.dtype
        local = decl_buffer((1,), dtype, f"{block.name_hint}_in_thread", scope="local")
        plan = _Plan(self, top, reducer, dtype, local)
        phases = [self._in_thread(top, loops, realize, reducer, local, rhs)]
        phases += plan.cross_thread()
        phases.append(plan.write_back(realize, loops, store, has_init))
        self.buffers.append(local)
        return SeqStmt.flatten(*phases)

    def _in_thread(self, top, loops, realize, reducer: Reducer, local, rhs) -> Stmt:
        block = realize.block
        zero = op.const(0, int32)
        update = BufferStore(local, reducer.combine(E.BufferLoad(local, (zero,)), rhs), (zero,))
        region = _point(local)
        reads = tuple(r for r in block.reads if r.buffer is not block.writes[0].buffer)
        new_block = block.replace(
            name_hint=f"{block.name_hint}_in_thread", init=None, body=update,
            reads=(*reads, region), writes=(region,),
        )  # fmt: skip
        stmt: Stmt = realize.replace(block=new_block)
        for loop in reversed(loops[1:]):
            stmt = loop.replace(body=stmt)
        init = BufferStore(local, reducer.identity(local.dtype), (zero,))
        return top.replace(body=SeqStmt.flatten(init, stmt))


class _Plan:
    """The cross-thread phases of one reduction (see the module docstring)."""

    def __init__(self, rewriter: _Rewriter, top: For, reducer: Reducer, dtype, local: Buffer):
        self.rewriter = rewriter
        self.top, self.reducer, self.dtype, self.local = top, reducer, dtype, local
        self.threads = top.extent.value
        self.name = local.name.removesuffix("_in_thread")
        groups = [loop for loop in rewriter.loops if _is_thread(loop)]
        self.group_extent = 1
        self.group: E.PrimExpr = op.const(0, int32)
        for loop in groups:  # the other thread indices: one reduction per combination
            if not isinstance(loop.extent, E.IntImm):
                return
            index = op.sub(loop.loop_var, loop.min)
            self.group = op.add(op.mul(self.group, loop.extent), index)
            self.group_extent *= loop.extent.value
        target = rewriter.target
        self.warp = int(target.attrs.get("warp_size", 1) or 1) if target is not None else 1
        self.shuffle = (
            target is not None
            and target.kind in SHUFFLE_KINDS
            and top.thread_tag == "threadIdx.x"
            and self.warp > 1
            and self.threads % self.warp == 0
            and all(loop.thread_tag != "threadIdx.x" for loop in groups)
        )
        self.result: E.PrimExpr | None = None

    def _loop(self, body_of) -> For:
        """A fresh loop over the top loop's thread axis; `body_of(t)` gives its body."""
        self.rewriter.count += 1
        var = E.Var(f"{self.top.loop_var.name}_r{self.rewriter.count}", self.top.loop_var.dtype)
        t = var if self.top.loop_var.dtype == int32 else op.cast(var, int32)
        return For(var, self.top.min, self.top.extent, ForKind.THREAD_BINDING, body_of(t),
                   self.top.thread_tag)  # fmt: skip

    def _shared(self, width: int) -> Buffer:
        shape = (self.group_extent, width)
        buffer = decl_buffer(shape, self.dtype, f"{self.name}_cross_thread", scope="shared")
        self.rewriter.buffers.append(buffer)
        return buffer

    def _red(self) -> E.BufferLoad:
        return E.BufferLoad(self.local, (op.const(0, int32),))

    def _set_red(self, value) -> Stmt:
        return BufferStore(self.local, value, (op.const(0, int32),))

    def cross_thread(self) -> list[Stmt]:
        return self._warp_phases() if self.shuffle else self._tree_phases()

    def _tree_phases(self) -> list[Stmt]:
        buf = self._shared(self.threads)
        g = self.group
        phases = [self._loop(lambda t: BufferStore(buf, self._red(), (g, t)))]
        step = _pow2_at_least(self.threads) // 2
        while step >= 1:

            def halve(t, s=step):
                value = self.reducer.combine(E.BufferLoad(buf, (g, t)),
                                             E.BufferLoad(buf, (g, op.add(t, s))))  # fmt: skip
                cond = op.lt(t, s)
                if s * 2 > self.threads:
                    cond = op.logical_and(cond, op.lt(op.add(t, s), self.threads))
                return IfThenElse(cond, BufferStore(buf, value, (g, t)))

            phases.append(self._loop(halve))
            step //= 2
        self.result = E.BufferLoad(buf, (g, op.const(0, int32)))
        return phases

    def _shuffles(self, count: int) -> list[Stmt]:
        steps, offset = [], _pow2_at_least(count) // 2
        while offset >= 1:
            moved = E.Call(
                self.dtype,
                SHUFFLE_DOWN,
                (self._red(), op.const(offset, int32), op.const(self.warp, int32)),
            )
            steps.append(self._set_red(self.reducer.combine(self._red(), moved)))
            offset //= 2
        return steps

    def _warp_phases(self) -> list[Stmt]:
        warps = self.threads // self.warp
        phases = [self._loop(lambda t: SeqStmt.flatten(*self._shuffles(self.warp)))]
        self.result = self._red()
        if warps == 1:
            return phases
        buf, g, w = self._shared(warps), self.group, self.warp
        phases.append(self._loop(lambda t: IfThenElse(
            op.eq(op.floormod(t, w), 0),
            BufferStore(buf, self._red(), (g, op.floordiv(t, w))),
        )))  # fmt: skip

        def first_warp(t):
            load = IfThenElse(op.lt(t, warps), self._set_red(E.BufferLoad(buf, (g, t))),
                              self._set_red(self.reducer.identity(self.dtype)))  # fmt: skip
            return IfThenElse(op.lt(t, w), SeqStmt.flatten(load, *self._shuffles(warps)))

        phases.append(self._loop(first_warp))
        return phases

    def write_back(self, realize, loops, store: BufferStore, has_init: bool) -> Stmt:
        inner = {id(v) for loop in loops for v in (loop.loop_var,)}
        block = realize.block
        vmap = {}
        for iv, value in zip(block.iter_vars, realize.iter_values):
            if not any(id(v) in inner for v in collect_vars(value)):
                vmap[iv.var] = value
        indices = tuple(substitute(i, vmap) for i in store.indices)
        result = self.result
        if not has_init:
            result = self.reducer.combine(E.BufferLoad(store.buffer, indices), result)
        stmt: Stmt = BufferStore(store.buffer, result, indices)
        outer = [c for c in _conjuncts(realize.predicate)
                 if not any(id(v) in inner for v in collect_vars(c))]  # fmt: skip

        def body(t):
            cond = op.eq(t, 0)
            for term in outer:
                cond = op.logical_and(cond, substitute(term, vmap))
            return IfThenElse(cond, stmt)

        return self._loop(body)


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _chain(top: For) -> tuple[list[For], BlockRealize] | None:
    """The loops from `top` down to the one block they enclose, or None when the subtree is
    not a single loop chain ending in a block."""
    loops, node = [], top
    while isinstance(node, For):
        loops.append(node)
        node = node.body
    if not isinstance(node, BlockRealize) or not node.block.is_reduction:
        return None
    return loops, node


def _reduce_only(loop: For, loops, realize: BlockRealize) -> bool:
    """Whether `loop`'s var is used by the block's reduce iter var bindings only."""
    used_reduce = used_spatial = False
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if any(v is loop.loop_var for v in collect_vars(value)):
            if iv.iter_type == IterType.REDUCE:
                used_reduce = True
            else:
                used_spatial = True
    return used_reduce and not used_spatial


def _reduction(block: Block):
    """(reducer, update store, combined value, has init) of a thread-bound reduction block."""
    body = block.body
    if block.init is not None:
        update = find_reduction(block)
        if update is not None and isinstance(body, BufferStore):
            return update.reducer, body, update.rhs, True
    elif isinstance(body, BufferStore):
        for reducer in REDUCERS:
            rhs = _combiner_rhs(reducer, body)
            if rhs is not None:
                return reducer, body, rhs, False
    raise LoweringError(
        f"block {block.name_hint} has a reduction loop bound to a thread axis but is not a "
        "recognised reduction (`C = C op f(...)`, op one of sum, product, max, min): its "
        "threads cannot combine their parts"
    )


def _point(buffer: Buffer):
    from schedlab.ir.buffer import BufferRegion
    from schedlab.ir.expr import Range

    return BufferRegion(buffer, (Range(op.const(0, int32), op.const(1, int32)),))


def _conjuncts(cond: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(cond, E.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    if isinstance(cond, E.IntImm) and cond.value:
        return []
    return [cond]


__all__ = ["SHUFFLE_DOWN", "LowerCrossThreadReduction", "lower_cross_thread_reduction"]

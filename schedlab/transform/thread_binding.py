"""GPU thread-binding lowering: loops bound to blockIdx/threadIdx -> kernels with launch sizes.

Two passes of the GPU pipeline (schedlab.transform.gpu_pipeline):

`LiftSharedAllocation` (before CompactBufferAllocation): a "shared" buffer is one per thread
block, so its allocation moves up to the block's scope: just inside the innermost blockIdx loop
above it (TVM's buffer LCA detector does the same), shrunk to what one execution of its
original scope touches with the thread loops around it relaxed (all threads' parts of one
tile, not one thread's part, and not every tile of the serial loops around it).

`LowerThreadBinding` (TVM's SplitHostDevice + thread-axis lowering), on flat lowered IR:
- each top-level statement of a function that is not a global allocation becomes one kernel
  (a PrimFunc `<name>_kernel` or `<name>_kernel<i>`), launched in program order; a global
  allocation between them is workspace the runtime allocates (`gpu.workspace` attr);
- in a kernel, a loop bound to a thread tag becomes `let v = min + thread_index(tag)`; the
  launch size of a tag is the largest constant extent bound to it (blockIdx extents may be
  symbolic when equal), and a loop with a smaller extent runs under `if index < extent`;
- vthread loops run as serial loops inside each thread (their iterations are one thread's);
- a store to a shared or global buffer outside some launched tag's loops would be run by every
  thread of that axis: it is guarded by `index == 0` for those tags (one writer);
- shared allocations move to the top of the kernel (constant sizes required).
Attrs of each kernel: "gpu.launch" {tag: extent}, "gpu.thread_loops" {tag: "i_1, ax1"},
"gpu.host" (the function it came from), "gpu.order", "gpu.workspace" (param names).
"""

from __future__ import annotations

from schedlab.errors import LoweringError
from schedlab.ir import expr as E
from schedlab.ir import op
from schedlab.ir.buffer import Buffer
from schedlab.ir.dtype import int32
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import Mutator, Visitor, collect_vars
from schedlab.ir.intrin import register_intrinsic
from schedlab.ir.stmt import (
    Allocate,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)  # fmt: skip
from schedlab.ir.structural import structural_equal
from schedlab.ir.transform import Pass, module_pass, prim_func_pass

from ._util import with_doc

THREAD_INDEX = "thread_index"  # thread_index("threadIdx.x") -> int32: this thread's index
BARRIER = "tvm_storage_sync"  # tvm_storage_sync("shared"): a barrier of the thread block
register_intrinsic(THREAD_INDEX, 1, result="same")
register_intrinsic(BARRIER, 1, result="same", pure=False)

LAUNCH_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z")  # fmt: skip
PER_THREAD_SCOPES = ("local",)  # each thread has its own copy
BLOCK_SCOPES = ("shared", "shared.dyn")


def thread_index(tag: str) -> E.Call:
    return E.Call(int32, THREAD_INDEX, (E.StringImm(tag),))


def barrier(scope: str = "shared") -> Stmt:
    from schedlab.ir.stmt import Evaluate

    return Evaluate(E.Call(int32, BARRIER, (E.StringImm(scope),)))


def is_launch_tag(tag: str | None) -> bool:
    return tag in LAUNCH_TAGS


def scope_of(buffer: Buffer) -> str:
    return buffer.scope or "global"


# ---------------------------------------------------------------------------------------------
# LiftSharedAllocation
# ---------------------------------------------------------------------------------------------
def lift_shared_allocation(func: PrimFunc) -> PrimFunc:
    """`func` with each shared allocation moved to just inside its innermost blockIdx loop."""
    body = _LiftShared().visit(func.body)
    return func if body is func.body else func.with_body(body)


def LiftSharedAllocation() -> Pass:  # noqa: N802 - a pass factory
    """The pass form of `lift_shared_allocation`."""
    return with_doc(prim_func_pass(lift_shared_allocation, name="LiftSharedAllocation"), __doc__)


class _LiftShared(Mutator):
    def __init__(self):
        self.pending: list[list[Buffer]] = [[]]  # one list per blockIdx loop (and the root)
        self.loops: list[For] = []

    def visit_For(self, node: For) -> Stmt:
        self.loops.append(node)
        try:
            if not (node.thread_tag or "").startswith("blockIdx"):
                return self.generic_visit(node)
            self.pending.append([])
            body = self.visit(node.body)
            lifted = self.pending.pop()
        finally:
            self.loops.pop()
        for buffer in reversed(lifted):
            body = Allocate(buffer, body)
        return node.replace(body=body) if body is not node.body else node

    def visit_Allocate(self, node: Allocate) -> Stmt:
        if scope_of(node.buffer) not in BLOCK_SCOPES or len(self.pending) == 1:
            return self.generic_visit(node)
        used = {id(v) for extent in node.buffer.shape for v in collect_vars(extent)}
        if used or node.annotations:  # a size that depends on loop variables cannot move up
            return self.generic_visit(node)
        body = self.visit(node.body)
        buffer, body = self._compact(node.buffer, body)
        self.pending[-1].append(buffer)
        return body

    def _compact(self, buffer: Buffer, body: Stmt) -> tuple[Buffer, Stmt]:
        """The buffer shrunk to what the whole block touches: the region of `body` with the
        thread loops around the allocation relaxed too (CompactBufferAllocation relaxes only
        the loops inside it, which would give one thread's part)."""
        from .compact_buffer import _Reindex, accessed_region

        start = max(i for i, loop in enumerate(self.loops) if (loop.thread_tag or "")[:3] == "blo")
        threads = [loop for loop in self.loops[start + 1 :] if loop.thread_tag is not None]
        probe = body
        for loop in reversed(threads):
            probe = For(loop.loop_var, loop.min, loop.extent, ForKind.SERIAL, probe)
        outer = [loop for loop in self.loops if loop not in threads]
        region = accessed_region(buffer, probe, outer)
        if region is None:
            return buffer, body
        compact = buffer.replace(shape=tuple(r.extent for r in region))
        return compact, _Reindex(buffer, compact, tuple(r.min for r in region)).visit(body)


# ---------------------------------------------------------------------------------------------
# LowerThreadBinding
# ---------------------------------------------------------------------------------------------
def lower_thread_binding(mod: IRModule) -> IRModule:
    """Every PrimFunc of `mod` split into its kernels (see the module docstring)."""
    functions = {}
    for name, func in mod.items():
        if not isinstance(func, PrimFunc):
            functions[name] = func
            continue
        for kernel in split_kernels(func, name):
            functions[kernel.attrs["global_symbol"]] = kernel
    return IRModule(functions)


def LowerThreadBinding() -> Pass:  # noqa: N802 - a pass factory
    """The pass form of `lower_thread_binding`."""
    return with_doc(module_pass(lower_thread_binding, name="LowerThreadBinding"), __doc__)


def split_kernels(func: PrimFunc, name: str) -> list[PrimFunc]:
    """The kernels of one lowered function, in launch order."""
    workspace: list[Buffer] = []
    roots = _kernel_roots(func.body, workspace)
    kernels = []
    for order, root in enumerate(roots):
        symbol = f"{name}_kernel" if len(roots) == 1 else f"{name}_kernel{order}"
        kernels.append(_make_kernel(func, name, symbol, order, root, workspace))
    return kernels


def _kernel_roots(stmt: Stmt, workspace: list[Buffer]) -> list[Stmt]:
    if isinstance(stmt, SeqStmt):
        return [root for item in stmt.seq for root in _kernel_roots(item, workspace)]
    if isinstance(stmt, Allocate) and scope_of(stmt.buffer) == "global":
        workspace.append(stmt.buffer)
        return _kernel_roots(stmt.body, workspace)
    return [stmt]


def _make_kernel(func, name, symbol, order, root, workspace) -> PrimFunc:
    launch, loops = _launch_extents(root)
    body = _ThreadLowering(launch).visit(root)
    body = _hoist_shared(body)
    used = _used_buffers(body)
    params, buffer_map, spaces = [], {}, []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None or id(buffer.data) in used:
            params.append(param)
            if buffer is not None:
                buffer_map[param] = buffer
    for buffer in workspace:
        if id(buffer.data) in used:
            params.append(buffer.data)
            buffer_map[buffer.data] = buffer
            spaces.append(buffer.name)
    attrs = {
        **func.attrs,
        "global_symbol": symbol,
        "gpu.host": name,
        "gpu.order": order,
        "gpu.launch": launch,
        "gpu.thread_loops": loops,
        "gpu.workspace": tuple(spaces),
    }
    return PrimFunc(tuple(params), body, buffer_map, attrs=attrs)  # fmt: skip


def _launch_extents(root: Stmt) -> tuple[dict, dict]:
    """{tag: launch extent} and {tag: "loop names"} of one kernel; checks where loops are."""
    finder = _ThreadLoops()
    finder.visit(root)
    launch, names = {}, {}
    for tag in LAUNCH_TAGS:
        loops = finder.by_tag.get(tag)
        if not loops:
            continue
        names[tag] = ", ".join(loop.loop_var.name for loop in loops)
        launch[tag] = _launch_extent(tag, loops)
    return launch, names


def _launch_extent(tag: str, loops: list[For]) -> E.PrimExpr:
    extents = [loop.extent for loop in loops]
    if all(isinstance(e, E.IntImm) for e in extents):
        return op.const(max(e.value for e in extents), int32)
    first = extents[0]
    if all(structural_equal(first, e) for e in extents[1:]) and tag.startswith("blockIdx"):
        return first if first.dtype == int32 else op.cast(first, int32)
    symbolic = next(loop for loop in loops if not isinstance(loop.extent, E.IntImm))
    raise LoweringError(
        f"loop {symbolic.loop_var.name} is bound to {tag} with the symbolic extent "
        f"{symbolic.extent}: thread counts must be constants (split the loop by a constant "
        "factor and bind the inner loop)"
    )


class _ThreadLoops(Visitor):
    """Collects thread-bound loops by tag and refuses blockIdx loops that are not outermost."""

    def __init__(self):
        self.by_tag: dict[str, list[For]] = {}
        self.outer: list[For] = []  # enclosing loops

    def visit_For(self, node: For) -> None:
        tag = node.thread_tag
        if tag is not None and tag.startswith("blockIdx"):
            inner = [loop for loop in self.outer if not (loop.thread_tag or "").startswith("blo")]
            if inner:
                raise LoweringError(
                    f"loop {node.loop_var.name} is bound to {tag} inside loop "
                    f"{inner[-1].loop_var.name}: thread blocks cannot wait for each other, so "
                    "blockIdx loops must be the outermost loops of their kernel (reorder them "
                    "outward)"
                )
        if is_launch_tag(tag):
            self.by_tag.setdefault(tag, []).append(node)
        self.outer.append(node)
        try:
            self.generic_visit(node)
        finally:
            self.outer.pop()


class _ThreadLowering(Mutator):
    def __init__(self, launch: dict[str, E.PrimExpr]):
        self.launch = launch
        self.bound: list[str] = []

    def visit_For(self, node: For) -> Stmt:
        tag = node.thread_tag
        if tag is not None and tag.startswith("vthread"):
            body = self.visit(node.body)
            notes = {**node.annotations, "gpu.vthread": tag}
            return For(node.loop_var, node.min, node.extent, ForKind.SERIAL, body, None, notes)
        if not is_launch_tag(tag):
            return self.generic_visit(node)
        self.bound.append(tag)
        try:
            body = self.visit(node.body)
        finally:
            self.bound.pop()
        index = thread_index(tag)
        value = index if node.loop_var.dtype == int32 else op.cast(index, node.loop_var.dtype)
        if not (isinstance(node.min, E.IntImm) and node.min.value == 0):
            value = op.add(node.min, value)
        stmt: Stmt = LetStmt(node.loop_var, value, body)
        if not _provably_equal(node.extent, self.launch[tag]):
            stmt = IfThenElse(op.lt(index, op.cast(node.extent, int32)), stmt)
        return stmt

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        if scope_of(node.buffer) in PER_THREAD_SCOPES:
            return node
        missing = [tag for tag in self.launch if tag not in self.bound]
        if not missing:
            return node
        condition = op.all(*(op.eq(thread_index(tag), op.const(0, int32)) for tag in missing))
        return IfThenElse(condition, node)


def _provably_equal(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        return a.value == b.value
    return structural_equal(a, b) or structural_equal(op.cast(a, int32), b)


def _hoist_shared(body: Stmt) -> Stmt:
    """Shared allocations at the top of the kernel (OpenCL wants `__local` there)."""
    found: list[Allocate] = []

    class _Remove(Mutator):
        def visit_Allocate(self, node: Allocate) -> Stmt:
            inner = self.visit(node.body)
            if scope_of(node.buffer) in BLOCK_SCOPES:
                if not all(isinstance(e, E.IntImm) for e in node.buffer.shape):
                    raise LoweringError(
                        f"shared buffer {node.buffer.name} has the non-constant size "
                        f"{tuple(node.buffer.shape)}: shared memory needs a size known at "
                        "compile time (cache a constant-sized tile)"
                    )
                found.append(node)
                return inner
            return node.replace(body=inner) if inner is not node.body else node

    body = _Remove().visit(body)
    for node in reversed(found):
        body = Allocate(node.buffer, body, dict(node.annotations))
    return body


def _used_buffers(body: Stmt) -> set[int]:
    used: set[int] = set()

    class _Use(Visitor):
        def visit_BufferLoad(self, node):
            used.add(id(node.buffer.data))
            self.generic_visit(node)

        def visit_BufferStore(self, node):
            used.add(id(node.buffer.data))
            self.generic_visit(node)

    _Use().visit(body)
    return used


__all__ = [
    "THREAD_INDEX", "BARRIER", "LAUNCH_TAGS", "thread_index", "barrier", "scope_of",
    "lift_shared_allocation", "LiftSharedAllocation", "lower_thread_binding",
    "LowerThreadBinding", "split_kernels",
]  # fmt: skip

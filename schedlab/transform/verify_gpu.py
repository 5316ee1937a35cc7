"""VerifyGPUCode (TVM: same name): a kernel fits its target's limits, or a LoweringError says
which loop or buffer breaks which limit.

Checked on kernels from LowerThreadBinding (attrs "gpu.launch", "gpu.thread_loops"):
- threads per block (the product of the threadIdx extents) <= `max_threads_per_block`, and each
  threadIdx extent <= the per-axis limit (x, y: max_threads_per_block; z: 64 on CUDA/ROCm);
- grid sizes: blockIdx.y/z <= 65535 when constant (x may be 2**31 - 1);
- shared memory (the sum of the shared allocations) <= `max_shared_memory_per_block`;
- registers per thread, estimated as 16 for indices and addresses plus one per 4 bytes of
  per-thread ("local") arrays, <= min(`max_registers_per_thread`, `registers_per_sm` / threads):
  a larger local tile would spill to slow memory or not launch at all.
"""

from __future__ import annotations

from schedlab.errors import LoweringError
from schedlab.ir import expr as E
from schedlab.ir import mma
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Visitor
from schedlab.ir.transform import Pass, prim_func_pass

from ._util import with_doc
from .thread_binding import BLOCK_SCOPES, scope_of

BASE_REGISTERS = 16  # indices, addresses and temporaries of a simple kernel (an estimate)
_AXIS_LIMITS = {"threadIdx.z": 64}
_GRID_LIMITS = {"blockIdx.y": 65535, "blockIdx.z": 65535, "blockIdx.x": 2**31 - 1}


def verify_gpu_code(func: PrimFunc, target) -> PrimFunc:
    """`func` unchanged when it fits `target`; LoweringError naming the loop and the limit."""
    launch = func.attrs.get("gpu.launch")
    if launch is None:
        return func
    loops = func.attrs.get("gpu.thread_loops", {})
    attrs = target.attrs
    where = f"kernel {func.name} for {target.kind} target {attrs.get('arch', '')}".rstrip()
    threads = _check_threads(launch, loops, attrs, where)
    _check_grid(launch, loops, where)
    usage = _Usage()
    usage.visit(func.body)
    limit = attrs.get("max_shared_memory_per_block", 0)
    if usage.shared_bytes > limit:
        listed = ", ".join(f"{name} {size} B" for name, size in usage.shared)
        raise LoweringError(
            f"{where}: {usage.shared_bytes} bytes of shared memory ({listed}); at most {limit} "
            "per block (max_shared_memory_per_block): use smaller tiles"
        )
    registers = BASE_REGISTERS + usage.local_bytes // 4
    per_thread = min(
        attrs.get("max_registers_per_thread", 255), attrs.get("registers_per_sm", 65536) // threads
    )
    if registers > per_thread:
        listed = ", ".join(f"{name} {size} B" for name, size in usage.local)
        raise LoweringError(
            f"{where}: about {registers} registers per thread (local arrays: {listed}); at most "
            f"{per_thread} with {threads} threads per block (max_registers_per_thread, "
            "registers_per_sm / threads): use a smaller per-thread tile or fewer threads"
        )
    return func


def VerifyGPUCode(target) -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `verify_gpu_code` for `target`."""
    from schedlab.target import Target

    target = Target(target)
    pass_ = prim_func_pass(lambda func: verify_gpu_code(func, target), name="VerifyGPUCode")
    return with_doc(pass_, __doc__)


def _check_threads(launch, loops, attrs, where: str) -> int:
    limit = attrs.get("max_threads_per_block", 1024)
    total = 1
    for tag, extent in launch.items():
        if not tag.startswith("threadIdx"):
            continue
        value = extent.value
        axis_limit = min(limit, _AXIS_LIMITS.get(tag, limit))
        if value > axis_limit:
            raise LoweringError(
                f"{where}: loop {loops.get(tag, '?')} is bound to {tag} with {value} threads; "
                f"at most {axis_limit} on that axis (max_threads_per_block {limit}): split it "
                f"and bind a part of at most {axis_limit}"
            )
        total *= value
    if total > limit:
        bound = ", ".join(f"{tag} {launch[tag].value} ({loops.get(tag, '?')})"
                          for tag in launch if tag.startswith("threadIdx"))  # fmt: skip
        raise LoweringError(
            f"{where}: {total} threads per block ({bound}); at most {limit} "
            "(max_threads_per_block): bind smaller loops to the threadIdx axes"
        )
    return total


def _check_grid(launch, loops, where: str) -> None:
    for tag, limit in _GRID_LIMITS.items():
        extent = launch.get(tag)
        if isinstance(extent, E.IntImm) and extent.value > limit:
            raise LoweringError(
                f"{where}: loop {loops.get(tag, '?')} is bound to {tag} with {extent.value} "
                f"blocks; at most {limit} on that axis: fuse it into blockIdx.x or split it"
            )


class _Usage(Visitor):
    def __init__(self):
        self.shared: list[tuple[str, int]] = []
        self.local: list[tuple[str, int]] = []

    @property
    def shared_bytes(self) -> int:
        return sum(size for _, size in self.shared)

    @property
    def local_bytes(self) -> int:
        return sum(size for _, size in self.local)

    def visit_Allocate(self, node):
        buffer = node.buffer
        count = 1
        for extent in buffer.shape:
            count *= extent.value if isinstance(extent, E.IntImm) else 0
        size = count * buffer.dtype.bytes
        if mma.is_fragment(buffer):  # one per warp, spread over its 32 lanes (fp32 storage)
            size = count * mma.storage_dtype(buffer).bytes // mma.WARP_LANES
        if scope_of(buffer) in BLOCK_SCOPES:
            self.shared.append((buffer.name, size))
        else:
            self.local.append((buffer.name, size))
        self.generic_visit(node)


__all__ = ["verify_gpu_code", "VerifyGPUCode", "BASE_REGISTERS"]

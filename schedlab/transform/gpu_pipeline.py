"""The GPU lowering pipeline: TensorIR with thread bindings -> kernels the GPU renderers consume.

The CPU list (schedlab.transform.pipeline) with the GPU passes in it, in TVM's order: shared
allocations are lifted to the thread block before compaction, vectorized loops become vector
loads and stores (float4, half2, vloadN; float16 vectors too), and after the loop passes the
functions are split
into kernels with launch sizes, barriers go between shared-memory phases, and each kernel is
checked against the target's limits.
"""

from __future__ import annotations

from schedlab.ir.transform import Pass

from .compact_buffer import CompactBufferAllocation
from .cross_thread_reduction import LowerCrossThreadReduction
from .flatten_buffer import FlattenBuffer
from .lower_init_block import LowerInitBlock
from .lower_opaque_block import ConvertBlocksToOpaque, LowerOpaqueBlock
from .plan_buffer_location import PlanAndUpdateBufferAllocationLocation
from .remove_no_op import RemoveNoOp
from .simplify import Simplify
from .thread_binding import LiftSharedAllocation, LowerThreadBinding
from .thread_sync import InjectThreadSync
from .unroll_loop import UnrollLoop
from .vectorize_loop import VectorizeLoop
from .verify_gpu import VerifyGPUCode

GPU_KINDS = ("cuda", "rocm", "opencl", "adreno")


def gpu_lower_passes(target) -> list[Pass]:
    """The passes that lower a GPU-scheduled PrimFunc for `target` (a GPU Target or kind)."""
    return [
        # reductions split over threads -> in-thread parts, then a shared-memory tree or warp
        # shuffles (cuda, rocm) to combine them, then one thread's write-back
        LowerCrossThreadReduction(target),
        # reduction inits: hoisted before the reduction loops where legal, else `if k == 0`
        LowerInitBlock(),
        # allocate each intermediate at the deepest loop/block enclosing all of its uses
        PlanAndUpdateBufferAllocationLocation(),
        # block iter vars -> their loop bindings
        ConvertBlocksToOpaque(),
        # blocks disappear: predicates -> if, alloc_buffers -> Allocate
        LowerOpaqueBlock(),
        # shared buffers are one per thread block: allocate them at the block's scope
        LiftSharedAllocation(),
        # shrink each allocation to the region one execution of its scope touches
        CompactBufferAllocation(),
        # N-d buffers -> 1-D
        FlattenBuffer(),
        # fold the index arithmetic the passes above produced, drop proven branches
        Simplify(),
        # vectorized loops -> Ramp-indexed vector stores (the renderers' vector loads/stores)
        VectorizeLoop(float16=True),
        # unrolled loops -> straight-line code
        UnrollLoop(),
        # remove empty loops, `Evaluate(0)`, constant branches
        RemoveNoOp(),
        # thread-bound loops -> kernels with launch sizes and thread indices
        LowerThreadBinding(),
        # barriers between shared-memory writes and the reads of other threads
        InjectThreadSync(),
        # threads per block, shared memory and registers within the target's limits
        VerifyGPUCode(target),
    ]


__all__ = ["GPU_KINDS", "gpu_lower_passes"]

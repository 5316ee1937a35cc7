"""The lowering pipeline: TensorIR form -> lowered form (what code generators consume).

One flat, commented list of named passes (DESIGN.md "Lowering order matters"; TVM's TIR
pipeline is the map). `lower` runs them as one `Sequential` under the current PassContext, so
instruments (PassRecorder, the explorer) see every pass with its IR before and after.
"""

from __future__ import annotations

from schedlab.errors import LoweringError
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.transform import Pass, Sequential
from schedlab.ir.verify import verify

from .compact_buffer import CompactBufferAllocation
from .flatten_buffer import FlattenBuffer
from .gpu_pipeline import GPU_KINDS, gpu_lower_passes
from .lower_init_block import LowerInitBlock
from .lower_opaque_block import ConvertBlocksToOpaque, LowerOpaqueBlock
from .plan_buffer_location import PlanAndUpdateBufferAllocationLocation
from .promote_scratch import PromoteInvariantScratch
from .remove_no_op import RemoveNoOp
from .simplify import Simplify
from .unroll_loop import UnrollLoop
from .vectorize_loop import VectorizeLoop
from .verify import verify_lowered

# target kinds with the CPU lowering pipeline (GPU kinds: gpu_pipeline.py)
_CPU_KINDS = ("cpu", "c", "llvm")


def lower_passes(target="cpu") -> list[Pass]:
    """The passes that lower a TensorIR PrimFunc for `target` (a kind name or a Target)."""
    kind = _target_kind(target)
    if kind in GPU_KINDS:
        return gpu_lower_passes(target)
    if kind not in _CPU_KINDS:
        raise LoweringError(
            f"lower: no lowering pipeline for target kind {kind!r} yet "
            f"(available: {', '.join(_CPU_KINDS + GPU_KINDS)})"
        )
    return [
        # reduction inits: hoisted before the reduction loops where legal, else `if k == 0`
        LowerInitBlock(),
        # allocate each intermediate at the deepest loop/block enclosing all of its uses
        PlanAndUpdateBufferAllocationLocation(),
        # block iter vars -> their loop bindings
        ConvertBlocksToOpaque(),
        # blocks disappear: predicates -> if, alloc_buffers -> Allocate, match_buffer inlined
        LowerOpaqueBlock(),
        # shrink each allocation to the region one execution of its scope touches
        CompactBufferAllocation(),
        # N-d buffers -> 1-D (parameters too; logical shapes kept in attrs["param_shapes"])
        FlattenBuffer(),
        # fold the index arithmetic the passes above produced, drop proven branches
        Simplify(),
        # vectorized loops -> Ramp/Broadcast vector code where straight-line and affine
        VectorizeLoop(),
        # unrolled loops (and pragma_auto_unroll_max_step regions) -> straight-line code
        UnrollLoop(),
        # scratch a loop touches only at invariant places -> a register tile around the loop
        PromoteInvariantScratch(),
        # remove empty loops, `Evaluate(0)`, constant branches
        RemoveNoOp(),
    ]


def lower(func_or_mod: PrimFunc | IRModule, target="cpu") -> IRModule:
    """Lower a PrimFunc (or every PrimFunc of a module) for `target`; returns an IRModule of
    lowered PrimFuncs, checked with `verify_lowered`."""
    if isinstance(func_or_mod, PrimFunc):
        mod = IRModule.from_expr(func_or_mod)
    elif isinstance(func_or_mod, IRModule):
        mod = func_or_mod
    else:
        raise TypeError(
            f"lower: func_or_mod must be a PrimFunc or IRModule, got {type(func_or_mod).__name__}"
        )
    verify(mod)
    lowered = Sequential(lower_passes(target), name="lower")(mod)
    verify_lowered(lowered)
    return lowered


def _target_kind(target) -> str:
    if isinstance(target, str):
        return target.split()[0].lower()
    kind = getattr(target, "kind", None)
    if kind is None:
        raise TypeError(f"lower: target must be a kind name or a Target, got {target!r}")
    return str(getattr(kind, "name", kind)).lower()

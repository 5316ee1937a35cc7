"""TIR lowering passes: TensorIR form (blocks, N-d buffers) -> lowered form (plain loops, flat
buffers, Allocate), the form code generators consume. `lower(func, target)` runs the pipeline
(`lower_passes(target)`); each pass is also usable on its own, by TVM's name."""

from .compact_buffer import CompactBufferAllocation, compact_buffer_allocation
from .flatten_buffer import PARAM_SHAPES_ATTR, FlattenBuffer, flatten_buffer
from .lower_init_block import LowerInitBlock, lower_init_block
from .lower_opaque_block import (
    ConvertBlocksToOpaque,
    LowerOpaqueBlock,
    convert_blocks_to_opaque,
    lower_opaque_block,
)  # fmt: skip
from .pipeline import lower, lower_passes
from .plan_buffer_location import (
    PlanAndUpdateBufferAllocationLocation,
    plan_and_update_buffer_allocation_location,
)  # fmt: skip
from .remove_no_op import RemoveNoOp, remove_no_op
from .simplify import Simplify, simplify
from .unroll_loop import UnrollLoop, unroll_loop
from .vectorize_loop import VectorizeLoop, vectorize_loop
from .verify import verify_lowered

__all__ = [
    "lower", "lower_passes", "verify_lowered", "PARAM_SHAPES_ATTR",
    "LowerInitBlock", "PlanAndUpdateBufferAllocationLocation", "ConvertBlocksToOpaque",
    "LowerOpaqueBlock", "CompactBufferAllocation", "FlattenBuffer", "Simplify", "VectorizeLoop",
    "UnrollLoop", "RemoveNoOp",
    "lower_init_block", "plan_and_update_buffer_allocation_location", "convert_blocks_to_opaque",
    "lower_opaque_block", "compact_buffer_allocation", "flatten_buffer", "simplify",
    "vectorize_loop", "unroll_loop", "remove_no_op",
]  # fmt: skip

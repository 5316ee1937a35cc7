"""The design space of the tuner, in the shape of TVM's MetaSchedule space.

    from schedlab.tune.space import PostOrderApply
    space = PostOrderApply()                              # the target's rules/postprocs/mutators
    designs = space.generate_design_space(func, "cpu")    # [Schedule], traces with samplings
    sch = space.sample_candidate(func, "cpu", designs[0].trace, seed=1)   # Schedule | None
    sch = space.apply_trace(func, "cpu", stored_trace)                    # Schedule | None
    mutators = space.mutators("cpu")                      # {Mutator: probability}

Pieces: schedule rules (auto_inline, rfactor, multi_level_tiling, parallel_vectorize_unroll,
compute_location), postprocessors (postproc, rewrite_parallel), mutators (mutator,
mutate_replay), the generator (post_order_apply) and the per-target sets (registry).
"""

from .analysis import needs_multi_level_tiling, read_write_pattern
from .auto_inline import AutoInline
from .compute_location import RandomComputeLocation
from .multi_level_tiling import MultiLevelTiling, ReuseConfig
from .mutate_replay import MutateComputeLocation, MutateParallel
from .mutator import MutateTileSize, MutateUnroll, Mutator
from .parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from .post_order_apply import PostOrderApply, apply_trace, generate_design_space, sample_candidate
from .postproc import DisallowDynamicLoop, Postproc, RewriteReductionBlock, run_postprocs
from .registry import (
    cpu_mutators,
    cpu_postprocs,
    cpu_rules,
    default_mutators,
    default_postprocs,
    default_rules,
    register_space,
    tvm_llvm_rules,
)  # fmt: skip
from .rewrite_parallel import RewriteParallelVectorizeUnroll
from .rfactor import AddRFactor
from .rule import ScheduleRule

__all__ = [
    "PostOrderApply", "generate_design_space", "sample_candidate", "apply_trace",
    "ScheduleRule", "AutoInline", "AddRFactor", "MultiLevelTiling", "ReuseConfig",
    "ParallelizeVectorizeUnroll", "RandomComputeLocation",
    "Postproc", "DisallowDynamicLoop", "RewriteParallelVectorizeUnroll", "RewriteReductionBlock",
    "run_postprocs", "Mutator", "MutateTileSize", "MutateUnroll", "MutateParallel",
    "MutateComputeLocation", "register_space", "default_rules", "default_postprocs",
    "default_mutators", "cpu_rules", "cpu_postprocs", "cpu_mutators", "tvm_llvm_rules",
    "needs_multi_level_tiling", "read_write_pattern",
]  # fmt: skip

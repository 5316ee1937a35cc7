"""Which rules, postprocessors and mutators a target gets (TVM's `ScheduleRule.create(kind)`).

    register_space("cuda", rules=cuda_rules, postprocs=cuda_postprocs, mutators=cuda_mutators)

Each entry is a function of the Target (rules read sizes from it). A target uses the entry of
its kind, else the first of its keys that has one (a "rocm" target falls back to "gpu").

The "cpu" set is TVM's llvm set (AutoInline, AddRFactor(16, 64), MultiLevelTiling SSRSRS with a
may-write-cache at levels 1 and 2, ParallelizeVectorizeUnroll(16, 64, [0, 16, 64, 512]),
RandomComputeLocation) with two CPU extensions in MultiLevelTiling: the vector operand may be
packed at tile level 1 (`reuse_read`), and the innermost spatial tile is a multiple of the
vector lanes (`innermost_lanes`). `tvm_llvm_rules()` is the set without them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from schedlab.target import Target

from .auto_inline import AutoInline
from .blocked_conv_tiling import BlockedConvTiling
from .compute_location import RandomComputeLocation
from .conv_tiling import ConvTiling
from .multi_level_tiling import MultiLevelTiling
from .mutate_replay import MutateComputeLocation, MutateParallel
from .mutator import MutateTileSize, MutateUnroll, Mutator
from .parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from .postproc import DisallowDynamicLoop, Postproc, RewriteReductionBlock
from .rewrite_parallel import RewriteParallelVectorizeUnroll
from .rfactor import AddRFactor
from .rule import ScheduleRule


@dataclass(frozen=True)
class SpaceKind:
    rules: Callable[[Target], list[ScheduleRule]]
    postprocs: Callable[[Target], list[Postproc]]
    mutators: Callable[[Target], dict[Mutator, float]]


_SPACES: dict[str, SpaceKind] = {}


def register_space(kind: str, *, rules: Callable, postprocs: Callable, mutators: Callable,
                   override: bool = False) -> None:  # fmt: skip
    """Register the space of a target kind (or key, e.g. "gpu")."""
    if kind in _SPACES and not override:
        raise ValueError(f"register_space: {kind!r} is registered already (override=True)")
    _SPACES[kind] = SpaceKind(rules, postprocs, mutators)


def space_of(target) -> SpaceKind:
    target = Target(target)
    for key in (target.kind, *target.keys):
        if key in _SPACES:
            return _SPACES[key]
    known = ", ".join(sorted(_SPACES))
    raise ValueError(
        f"no tuning space for target kind {target.kind!r}; registered: {known} "
        "(see schedlab.tune.space.register_space)"
    )


def default_rules(target) -> list[ScheduleRule]:
    return space_of(target).rules(Target(target))


def default_postprocs(target) -> list[Postproc]:
    return space_of(target).postprocs(Target(target))


def default_mutators(target) -> dict[Mutator, float]:
    return space_of(target).mutators(Target(target))


def tvm_llvm_rules(target: Target | None = None) -> list[ScheduleRule]:
    """TVM's llvm rule set, as it is (no CPU extensions)."""
    return _cpu_rules(extended=False)


def cpu_rules(target: Target | None = None) -> list[ScheduleRule]:
    return _cpu_rules(extended=True)


def _cpu_rules(extended: bool) -> list[ScheduleRule]:
    pack = {"req": "may", "levels": [1], "scope": "global", "buffers": "vector_operand"}
    return [
        AutoInline(into_producer=False, into_consumer=True, inline_const_tensor=True,
                   disallow_if_then_else=True, require_injective=True, require_ordered=True,
                   disallow_op=("exp",)),
        AddRFactor(max_jobs_per_core=16, max_innermost_factor=64),
        *([ConvTiling(), BlockedConvTiling()] if extended else []),
        MultiLevelTiling(structure="SSRSRS", max_innermost_factor=64,
                         reuse_write={"req": "may", "levels": [1, 2], "scope": "global"},
                         reuse_read=pack if extended else None, innermost_lanes=extended),
        ParallelizeVectorizeUnroll(max_jobs_per_core=16, max_vectorize_extent=64,
                                   unroll_max_steps=[0, 16, 64, 512], unroll_explicit=True),
        RandomComputeLocation(),
    ]  # fmt: skip


def cpu_postprocs(target: Target | None = None) -> list[Postproc]:
    return [DisallowDynamicLoop(), RewriteParallelVectorizeUnroll(), RewriteReductionBlock()]


def cpu_mutators(target: Target | None = None) -> dict[Mutator, float]:
    return {MutateTileSize(): 0.9, MutateComputeLocation(): 0.05, MutateUnroll(): 0.03,
            MutateParallel(max_jobs_per_core=16): 0.02}  # fmt: skip


register_space("cpu", rules=cpu_rules, postprocs=cpu_postprocs, mutators=cpu_mutators)

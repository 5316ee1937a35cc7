"""The GPU graph pipeline (`schedlab.relax.get_default_pipeline("cuda")`, and rocm, opencl,
adreno): the CPU pipeline's phases with the dlight GPU rules as the default schedule (TVM's
cuda/rocm/gpu_generic legalize phase ends with ApplyDefaultSchedule(gpu rules) too)."""

from __future__ import annotations

from schedlab.ir.transform import Pass
from schedlab.target import Target

from ..cpu import pipeline as cpu_pipeline


def library_dispatch_passes(target: Target) -> list[Pass]:
    """Vendor-library offload (cuBLAS, CLML in TVM): none yet."""
    return []


def legalize_passes(target: Target) -> list[Pass]:
    """Operators -> fused kernels (the CPU pipeline's fusion passes), each scheduled by the
    dlight GPU rules."""
    return [
        *cpu_pipeline.fusion_passes(),
        default_schedule(target),  # dlight GPU rules on every PrimFunc not yet scheduled
    ]


def default_schedule(target: Target) -> Pass:
    """`dlight.ApplyDefaultSchedule(*dlight.gpu.default_rules())` for `target`."""
    from schedlab import dlight
    from schedlab.dlight import gpu

    return dlight.ApplyDefaultSchedule(*gpu.default_rules(), target=target)


# the graph's VM form and last touches are the CPU pipeline's: nothing about them is GPU-specific
dataflow_lower_passes = cpu_pipeline.dataflow_lower_passes
finalize_passes = cpu_pipeline.finalize_passes

__all__ = [
    "library_dispatch_passes", "legalize_passes", "default_schedule", "dataflow_lower_passes",
    "finalize_passes",
]  # fmt: skip

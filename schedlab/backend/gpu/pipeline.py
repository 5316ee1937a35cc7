"""The GPU graph pipeline (`schedlab.relax.get_default_pipeline("cuda")`, and rocm, opencl,
adreno): the CPU pipeline's phases with the dlight GPU rules as the default schedule (TVM's
cuda/rocm/gpu_generic legalize phase ends with ApplyDefaultSchedule(gpu rules) too)."""

from __future__ import annotations

from schedlab.ir.transform import Pass
from schedlab.target import Target


def library_dispatch_passes(target: Target) -> list[Pass]:
    """Vendor-library offload (cuBLAS, CLML in TVM): none yet."""
    return []


def legalize_passes(target: Target) -> list[Pass]:
    """Operators -> fused kernels (the CPU pipeline's fusion passes), each scheduled by the
    dlight GPU rules."""
    from ..cpu.pipeline import fusion_passes

    return [
        *fusion_passes(),
        default_schedule(target),  # dlight GPU rules on every PrimFunc not yet scheduled
    ]


def default_schedule(target: Target) -> Pass:
    """`dlight.ApplyDefaultSchedule(*dlight.gpu.default_rules())` for `target`."""
    from schedlab import dlight
    from schedlab.dlight import gpu

    return dlight.ApplyDefaultSchedule(*gpu.default_rules(), target=target)


def dataflow_lower_passes(target: Target) -> list[Pass]:
    """The graph in the form the VM runs."""
    from schedlab.relax import transform as T

    return [
        T.ToNonDataflow(),  # one kind of block and variable from here on
        T.CallTIRRewrite(),  # call_tir -> alloc_tensor + kernel call writing it
        T.StaticPlanBlockMemory(),  # intermediates of static shape share storage
    ]


def finalize_passes(target: Target) -> list[Pass]:
    """Last touches before code generation."""
    from schedlab.relax.pipeline import AttachGlobalSymbol

    return [AttachGlobalSymbol()]  # every function named by its "global_symbol" attr

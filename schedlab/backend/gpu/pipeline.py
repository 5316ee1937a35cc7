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
    """Operators -> fused kernels, each scheduled by the dlight GPU rules."""
    from schedlab.relax import transform as T

    return [
        T.LegalizeOps(),  # every registered operator call -> call_tir of a PrimFunc
        T.AnnotateTIROpPattern(),  # op_pattern attr on each PrimFunc, for FuseOps
        T.FoldConstant(),  # run kernels whose inputs are all constants at compile time
        T.DeadCodeElimination(),  # drop unused bindings and PrimFuncs before fusing
        T.CanonicalizeBindings(),  # x = y aliases removed, so fusion sees real producers
        T.FuseOps(),  # group producer/consumer chains into fused graph functions
        T.FuseTIR(),  # each group -> one PrimFunc
        T.DeadCodeElimination(),  # drop the now-unused originals
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

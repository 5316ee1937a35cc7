"""The CPU graph pipeline (`schedlab.relax.get_default_pipeline("cpu")`), as four phases of
pass lists in the order TVM's relax backend pipelines use. Each function returns a fresh,
flat list; `schedlab.relax.pipeline` runs them one after another in one Sequential, so a
PassRecorder sees every pass."""

from __future__ import annotations

from schedlab.ir.transform import Pass
from schedlab.target import Target


def library_dispatch_passes(target: Target) -> list[Pass]:
    """Offload to vendor libraries (cuBLAS, DNNL in TVM). The CPU backend has none: empty."""
    return []


def fusion_passes() -> list[Pass]:
    """Operators -> fused, unscheduled kernels: the part of the legalize phase every backend
    shares (the GPU pipeline uses it too)."""
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
        T.AttachLayoutFreeBuffers(),  # constant weights marked: their packing is free
    ]


def layout_passes(target: Target) -> list[Pass]:
    """Convolution networks into NCHW{b}c, b = the target's float32 vector lanes (none
    without vectors, or with `Target("cpu", blocked_layout=False)`)."""
    from schedlab.dlight.cpu._common import vector_lanes
    from schedlab.ir.dtype import DataType
    from schedlab.relax import transform as T

    lanes = vector_lanes(target, DataType("float32"))
    wanted = lanes >= 2 and target.attrs.get("blocked_layout", True)
    return [T.ConvertToBlockedLayout(lanes)] if wanted else []


def legalize_passes(target: Target) -> list[Pass]:
    """Operators -> scheduled loop-IR kernels."""
    from schedlab.relax import transform as T

    return [
        *layout_passes(target),
        *fusion_passes(),
        # tuning hooks in here: extract_tasks stops before this pass, ApplyDatabase goes in
        # just before it (schedlab.relax.pipeline.SCHEDULE_PASS names it)
        default_schedule(target),  # dlight CPU rules on every PrimFunc not yet scheduled
        T.FoldLayoutRewrite(),  # constant weights packed now, not at every call
        T.DeadCodeElimination(),  # drop the kernels that packed them
    ]


def default_schedule(target: Target) -> Pass:
    """`dlight.ApplyDefaultSchedule(*dlight.cpu.default_rules())` for `target`."""
    from schedlab import dlight

    return dlight.ApplyDefaultSchedule(*dlight.cpu.default_rules(), target=target)


def dataflow_lower_passes(target: Target) -> list[Pass]:
    """The graph in the form the VM runs."""
    from schedlab.relax import transform as T

    return [
        T.ToNonDataflow(),  # one kind of block and variable from here on
        T.CallTIRRewrite(),  # call_tir -> alloc_tensor + kernel call writing it
        T.PlanConcatInPlace(),  # concatenated parts written into the result: no copy
        T.StaticPlanBlockMemory(),  # intermediates of static shape share storage
    ]


def finalize_passes(target: Target) -> list[Pass]:
    """Last touches before code generation."""
    from schedlab.relax.pipeline import AttachGlobalSymbol

    return [
        AttachGlobalSymbol(),  # every function named by its "global_symbol" attr
    ]

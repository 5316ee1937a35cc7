"""Graph pipelines (TVM's relax.get_pipeline / relax.get_default_pipeline).

    mod = schedlab.relax.get_pipeline("zero")(mod)        # legalize, fuse, no schedules
    seq = schedlab.relax.get_default_pipeline("cpu")     # the target's four phases

`get_default_pipeline(target)` reads `schedlab/backend/<kind>/pipeline.py`, which defines
library_dispatch_passes, legalize_passes, dataflow_lower_passes and finalize_passes (each
`target -> list[Pass]`). Everything is one Sequential: instruments (PassRecorder) see each pass.
"""

from __future__ import annotations

import importlib

from schedlab.errors import LoweringError
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.transform import Pass, Sequential, module_pass
from schedlab.target import Target

from . import expr as X

PHASES = ("library_dispatch_passes", "legalize_passes", "dataflow_lower_passes", "finalize_passes")


def AttachGlobalSymbol() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """Set each function's "global_symbol" attr to its name in the module when missing."""

    @module_pass(name="AttachGlobalSymbol")
    def attach_global_symbol(mod: IRModule) -> IRModule:
        """Name every function by its key in the module."""
        updated = {}
        for name, func in mod.items():
            if func.attrs.get("global_symbol") == name:
                continue
            if isinstance(func, PrimFunc):
                updated[name] = func.with_attr("global_symbol", name)
            elif isinstance(func, X.Function):
                updated[name] = func.replace(attrs={**func.attrs, "global_symbol": name})
        return mod.update(updated) if updated else mod

    return attach_global_symbol


def _zero() -> list[Pass]:
    from . import transform as T

    return [
        T.LegalizeOps(),
        T.AnnotateTIROpPattern(),
        T.FoldConstant(),
        T.FuseOps(),
        T.FuseTIR(),
        T.DeadCodeElimination(),
    ]


def _default_build() -> list[Pass]:
    from . import transform as T

    return [*_zero(), T.ToNonDataflow(), T.CallTIRRewrite(), T.StaticPlanBlockMemory()]


_PIPELINES = {"zero": _zero, "default_build": _default_build}


def get_pipeline(name: str = "zero") -> Sequential:
    """The named pipeline: "zero" (LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps,
    FuseTIR, DeadCodeElimination) or "default_build" (zero, then ToNonDataflow, CallTIRRewrite,
    StaticPlanBlockMemory: the VM form, kernels unscheduled)."""
    if name not in _PIPELINES:
        raise ValueError(f"get_pipeline: unknown pipeline {name!r}; known: {', '.join(_PIPELINES)}")
    return Sequential(_PIPELINES[name](), name=name)


def backend_pipeline_module(target: Target):
    """The module `schedlab.backend.<kind>.pipeline` of `target`."""
    kind = Target(target).kind
    try:
        return importlib.import_module(f"schedlab.backend.{kind}.pipeline")
    except ModuleNotFoundError as err:
        raise LoweringError(
            f"get_default_pipeline: no graph pipeline for target kind {kind!r} "
            f"(schedlab/backend/{kind}/pipeline.py is missing: {err})"
        ) from None


def get_default_pipeline(target: str | Target = "cpu") -> Sequential:
    """The target's pipeline: its four phases, in order, as one Sequential."""
    target = Target(target)
    module = backend_pipeline_module(target)
    passes = []
    for phase in PHASES:
        passes.extend(getattr(module, phase)(target))
    return Sequential(passes, name=f"default_pipeline[{target.kind}]")

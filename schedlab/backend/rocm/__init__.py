"""The ROCm backend: HIP C++ from `HipRenderer`. Compiling needs hipcc (ROCm), which this
project does not install; building reports that clearly, rendering works everywhere."""

from __future__ import annotations

import shutil

from schedlab.errors import ToolchainMissingError
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.target import Target

from ..gpu.codegen import HipRenderer

INSTALL_HINT = "install ROCm (hipcc) on a machine with an AMD GPU to build HIP kernels"


def build_module(lowered: IRModule | PrimFunc, target: Target | str = "rocm"):
    """Render every kernel of a LOWERED module as HIP; compiling it needs hipcc (not wired)."""
    target = Target(target)
    if isinstance(lowered, PrimFunc):
        lowered = IRModule.from_expr(lowered)
    rendered = HipRenderer(target).render(lowered)
    found = shutil.which("hipcc")
    raise ToolchainMissingError(
        f"the ROCm backend renders HIP ({len(rendered.functions)} kernels) but does not build "
        f"it yet ({'hipcc found at ' + found if found else 'hipcc not found'}); {INSTALL_HINT}"
    )


__all__ = ["build_module", "HipRenderer"]

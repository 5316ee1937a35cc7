"""The CUDA backend: CUDA C from `CudaRenderer`, compiled to PTX by NVRTC (`schedlab[cuda]`,
no GPU needed), run through cupy on a machine with an NVIDIA GPU (runtime.py)."""

from __future__ import annotations

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.target import Target

from ..gpu.codegen import CudaRenderer
from ..gpu.launch import GpuKernel, GpuLibrary
from . import nvrtc
from .runtime import CupyDevice


class CudaLibrary(GpuLibrary):
    """The PTX of a lowered module; `kernel(name)` is a callable `Kernel` (cupy runs it)."""

    def __init__(self, rendered, lowered: IRModule, target: Target, ptx: str):
        super().__init__(rendered, lowered, target, CupyDevice(ptx))
        self.ptx = ptx

    def kernel(self, name: str, original: PrimFunc | None = None) -> GpuKernel:
        kernel = super().kernel(name, original)
        kernel.ptx = self.ptx
        return kernel


def build_module(lowered: IRModule | PrimFunc, target: Target | str = "cuda") -> CudaLibrary:
    """Render every kernel of a LOWERED module as CUDA C and compile it to PTX with NVRTC."""
    target = Target(target)
    if isinstance(lowered, PrimFunc):
        lowered = IRModule.from_expr(lowered)
    rendered = CudaRenderer(target).render(lowered)
    ptx = nvrtc.compile_to_ptx(rendered.source, target.attrs.get("arch", "sm_80"))
    return CudaLibrary(rendered, lowered, target, ptx)


__all__ = ["CudaLibrary", "build_module", "CudaRenderer", "nvrtc"]

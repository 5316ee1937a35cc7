"""The OpenCL backend (kinds "opencl" and "adreno"): OpenCL C from `OpenCLRenderer`, built and
run by an OpenCL driver through pyopencl (PoCL runs the kernels on the CPU, so they are
checked against numpy on any machine)."""

from __future__ import annotations

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.target import Target

from ..gpu.codegen import OpenCLRenderer
from ..gpu.launch import GpuLibrary
from .runtime import OpenCLDevice


class OpenCLLibrary(GpuLibrary):
    """The OpenCL program of a lowered module; `kernel(name)` is a callable `Kernel`."""

    def __init__(self, rendered, lowered: IRModule, target: Target):
        # builds the program now, so build errors show at build time
        super().__init__(rendered, lowered, target, OpenCLDevice(rendered.source))


def build_module(lowered: IRModule | PrimFunc, target: Target | str = "opencl") -> OpenCLLibrary:
    """Render every kernel of a LOWERED module as OpenCL C and build it with the driver."""
    target = Target(target)
    if isinstance(lowered, PrimFunc):
        lowered = IRModule.from_expr(lowered)
    rendered = OpenCLRenderer(target).render(lowered)
    return OpenCLLibrary(rendered, lowered, target)


__all__ = ["OpenCLLibrary", "build_module", "OpenCLRenderer"]

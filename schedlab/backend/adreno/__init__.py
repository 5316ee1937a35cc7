"""The Adreno backend: OpenCL C (schedlab.backend.opencl) with the Adreno target's limits;
texture memory and the Adreno-specific rules come later."""

from ..opencl import build_module

__all__ = ["build_module"]

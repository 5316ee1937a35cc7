"""What the GPU backends share: the CUDA/HIP/OpenCL dialects of the C-family renderer and the
host-side launch logic (workspace, arguments, launch sizes)."""

from .codegen import CudaRenderer, GpuRenderer, HipRenderer, OpenCLRenderer, launch_dims

__all__ = ["CudaRenderer", "GpuRenderer", "HipRenderer", "OpenCLRenderer", "launch_dims"]

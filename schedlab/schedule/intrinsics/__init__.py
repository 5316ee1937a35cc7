"""Built-in tensor intrinsics (TVM's `tir.tensor_intrin`), registered on import.

`cpu`: fp32 micro-kernels whose implementations are plain vector expressions (Ramp/Broadcast),
so they compile with the C back end on any CPU: see `cpu.py` for the names.
"""

from . import cpu

__all__ = ["cpu"]

"""Built-in tensor intrinsics (TVM's `tir.tensor_intrin`), registered on import.

`cpu`: fp32 micro-kernels whose implementations are plain vector expressions (Ramp/Broadcast),
so they compile with the C back end on any CPU: see `cpu.py` for the names.

`cuda`: fp16 tensor-core tiles (ldmatrix, mma.sync m16n8k16, fp32 accumulation) for sm_80+,
whose implementations are warp-level calls the interpreter emulates: see `cuda.py`.
"""

from . import cpu, cuda

__all__ = ["cpu", "cuda"]

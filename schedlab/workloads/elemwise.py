"""Element-wise and data-movement workloads."""

from __future__ import annotations

import numpy as np

from schedlab import te
from schedlab.ir.function import PrimFunc

from .registry import register


def _transpose_ref(A) -> np.ndarray:
    return np.ascontiguousarray(A.T)


@register(
    "transpose",
    defaults={"M": 256, "N": 256},
    reference=_transpose_ref,
    flops=lambda M, N: 0,  # pure data movement
    scale=("M", "N"),
)
def transpose(M: int, N: int, dtype: str = "float32") -> PrimFunc:
    """B = A^T with A: (M, N), B: (N, M)."""
    A = te.placeholder((M, N), dtype, name="A")
    B = te.compute((N, M), lambda i, j: A[j, i], name="T_transpose")
    return te.create_prim_func([A, B])

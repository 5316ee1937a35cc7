"""Reductions over the last axis (sum, max) and the L2 norm of a matrix (a 0-d output)."""

from __future__ import annotations

import numpy as np

from schedlab import te
from schedlab.ir.function import PrimFunc

from ._common import wide
from .norm import FLOAT_TYPES
from .registry import register


def _reduce_sum_ref(A) -> np.ndarray:
    return wide(A).sum(axis=-1).astype(A.dtype)


@register(
    "reduce_sum",
    defaults={"M": 256, "N": 256},
    reference=_reduce_sum_ref,
    flops=lambda M, N: M * N,
    baseline=lambda A: A.sum(axis=-1),
    scale=("M", "N"),
)
def reduce_sum(M: int, N: int, dtype: str = "float32") -> PrimFunc:
    """B[i] = sum over j of A[i, j]."""
    A = te.placeholder((M, N), dtype, name="A")
    k = te.reduce_axis((0, N), name="k")
    B = te.compute((M,), lambda i: te.sum(A[i, k], axis=k), name="A_red")
    return te.create_prim_func([A, B])


def _reduce_max_ref(A) -> np.ndarray:
    return A.max(axis=-1)


@register(
    "reduce_max",
    defaults={"M": 256, "N": 256},
    reference=_reduce_max_ref,
    flops=lambda M, N: M * N,  # one comparison per element
    scale=("M", "N"),
)
def reduce_max(M: int, N: int, dtype: str = "float32") -> PrimFunc:
    """B[i] = max over j of A[i, j]."""
    A = te.placeholder((M, N), dtype, name="A")
    k = te.reduce_axis((0, N), name="k")
    B = te.compute((M,), lambda i: te.max(A[i, k], axis=k), name="A_red")
    return te.create_prim_func([A, B])


def _norm_ref(A) -> np.ndarray:
    x = wide(A)
    return np.asarray(np.sqrt((x * x).sum()), dtype=A.dtype)


@register(
    "norm",
    defaults={"M": 256, "N": 256},
    reference=_norm_ref,
    flops=lambda M, N: 2 * M * N + 1,
    dtypes=FLOAT_TYPES,
    baseline=lambda A: np.sqrt(np.vdot(A, A)),
    scale=("M", "N"),
)
def norm(M: int, N: int, dtype: str = "float32") -> PrimFunc:
    """The L2 (Frobenius) norm of A: (M, N), sqrt(sum(A * A)), as a 0-d output."""
    A = te.placeholder((M, N), dtype, name="A")
    i = te.reduce_axis((0, M), name="i")
    j = te.reduce_axis((0, N), name="j")
    squares = te.compute((), lambda: te.sum(A[i, j] * A[i, j], axis=[i, j]), name="T_sq_sum")
    out = te.compute((), lambda: te.sqrt(squares[()]), name="T_norm")
    return te.create_prim_func([A, out])

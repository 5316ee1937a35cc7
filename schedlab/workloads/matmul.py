"""Matrix products: gemm, batch_matmul, gemv, matmul_bias_relu."""

from __future__ import annotations

import numpy as np

from schedlab import te
from schedlab.ir import op
from schedlab.ir.function import PrimFunc

from .registry import register


def _product(*arrays: np.ndarray, spec: str) -> np.ndarray:
    """An exact einsum: float inputs in float64, integers in int64; cast back to the input type
    (integers wrap like the kernel's own arithmetic)."""
    dtype = arrays[0].dtype
    wide = np.float64 if np.issubdtype(dtype, np.floating) or dtype.kind == "V" else np.int64
    return np.einsum(spec, *(a.astype(wide) for a in arrays)).astype(dtype)


def _gemm_ref(A, B):
    return _product(A, B, spec="mk,kn->mn")


def _matmul_baseline(A, B):
    return np.matmul(A, B)


@register(
    "gemm",
    defaults={"M": 128, "N": 128, "K": 128},
    reference=_gemm_ref,
    flops=lambda M, N, K: 2 * M * N * K,
    baseline=_matmul_baseline,
    scale=("M", "N", "K"),
)
def gemm(M: int, N: int, K: int, dtype: str = "float32") -> PrimFunc:
    """C = A @ B with A: (M, K), B: (K, N)."""
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def _batch_matmul_ref(A, B):
    return _product(A, B, spec="bmk,bkn->bmn")


@register(
    "batch_matmul",
    defaults={"batch": 4, "M": 64, "N": 64, "K": 64},
    reference=_batch_matmul_ref,
    flops=lambda batch, M, N, K: 2 * batch * M * N * K,
    baseline=_matmul_baseline,
    scale=("M", "N", "K"),
)
def batch_matmul(batch: int, M: int, N: int, K: int, dtype: str = "float32") -> PrimFunc:
    """C[b] = A[b] @ B[b] with A: (batch, M, K), B: (batch, K, N)."""
    A = te.placeholder((batch, M, K), dtype, name="A")
    B = te.placeholder((batch, K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((batch, M, N), lambda b, i, j: te.sum(A[b, i, k] * B[b, k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def _gemv_ref(A, x):
    return _product(A, x, spec="mk,k->m")


@register(
    "gemv",
    defaults={"M": 256, "K": 256},
    reference=_gemv_ref,
    flops=lambda M, K: 2 * M * K,
    baseline=_matmul_baseline,
    scale=("M", "K"),
)
def gemv(M: int, K: int, dtype: str = "float32") -> PrimFunc:
    """y = A @ x with A: (M, K), x: (K,)."""
    A = te.placeholder((M, K), dtype, name="A")
    x = te.placeholder((K,), dtype, name="x")
    k = te.reduce_axis((0, K), name="k")
    y = te.compute((M,), lambda i: te.sum(A[i, k] * x[k], axis=k), name="y")
    return te.create_prim_func([A, x, y])


def _matmul_bias_relu_ref(A, B, bias):
    product = _product(A, B, spec="mk,kn->mn")
    return np.maximum(product + bias[None, :], np.zeros((), product.dtype)).astype(A.dtype)


@register(
    "matmul_bias_relu",
    defaults={"M": 128, "N": 128, "K": 128},
    reference=_matmul_bias_relu_ref,
    flops=lambda M, N, K: 2 * M * N * K + 2 * M * N,
    baseline=lambda A, B, bias: np.maximum(A @ B + bias, 0),
    scale=("M", "N", "K"),
)
def matmul_bias_relu(M: int, N: int, K: int, dtype: str = "float32") -> PrimFunc:
    """D = relu(A @ B + bias) with bias: (N,), in two stages (matmul, then bias + relu)."""
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    bias = te.placeholder((N,), dtype, name="bias")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")
    D = te.compute(
        (M, N), lambda i, j: op.max(C[i, j] + bias[j], op.const(0, dtype)), name="T_relu"
    )
    return te.create_prim_func([A, B, bias, D])

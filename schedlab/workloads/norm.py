"""Row-wise normalizations: softmax, layer_norm, rms_norm (several stages each)."""

from __future__ import annotations

import numpy as np

from schedlab import te
from schedlab.ir.function import PrimFunc

from ._common import wide
from .registry import register

FLOAT_TYPES = ("float16", "bfloat16", "float32", "float64")


def _softmax_baseline(A) -> np.ndarray:
    e = np.exp(A - A.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_ref(A) -> np.ndarray:
    x = wide(A)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(A.dtype)


@register(
    "softmax",
    defaults={"M": 128, "N": 256},
    reference=_softmax_ref,
    flops=lambda M, N: 5 * M * N,  # max, subtract, exp, sum, divide
    dtypes=FLOAT_TYPES,
    baseline=_softmax_baseline,
    scale=("M", "N"),
)
def softmax(M: int, N: int, dtype: str = "float32") -> PrimFunc:
    """Numerically stable softmax of each row of A: (M, N), in TVM topi's four stages: row max,
    exp(x - max), row sum of the exponentials, divide."""
    A = te.placeholder((M, N), dtype, name="A")
    k = te.reduce_axis((0, N), name="k")
    maxelem = te.compute((M,), lambda i: te.max(A[i, k], axis=k), name="T_softmax_maxelem")
    exp = te.compute((M, N), lambda i, j: te.exp(A[i, j] - maxelem[i]), name="T_softmax_exp")
    k2 = te.reduce_axis((0, N), name="k")
    expsum = te.compute((M,), lambda i: te.sum(exp[i, k2], axis=k2), name="T_softmax_expsum")
    norm = te.compute((M, N), lambda i, j: exp[i, j] / expsum[i], name="T_softmax_norm")
    return te.create_prim_func([A, norm])


def _layer_norm_baseline(A, gamma, beta, eps=1e-5) -> np.ndarray:
    mean = A.mean(axis=-1, keepdims=True)
    centred = A - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + A.dtype.type(eps)) * gamma + beta


def _layer_norm_ref(A, gamma, beta, eps=1e-5) -> np.ndarray:
    x = wide(A)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps) * wide(gamma) + wide(beta)).astype(A.dtype)


@register(
    "layer_norm",
    defaults={"M": 128, "N": 256, "eps": 1e-5},
    reference=_layer_norm_ref,
    flops=lambda M, N, eps: 8 * M * N,  # sum; subtract, square, sum; subtract, scale, affine
    dtypes=FLOAT_TYPES,
    baseline=_layer_norm_baseline,
    scale=("M", "N"),
)
def layer_norm(M: int, N: int, eps: float = 1e-5, dtype: str = "float32") -> PrimFunc:
    """Layer normalization over the last axis of A: (M, N) with gamma, beta: (N,). Two-pass
    (mean, then variance of the centred values) for accuracy."""
    A = te.placeholder((M, N), dtype, name="A")
    gamma = te.placeholder((N,), dtype, name="gamma")
    beta = te.placeholder((N,), dtype, name="beta")
    k = te.reduce_axis((0, N), name="k")
    total = te.compute((M,), lambda i: te.sum(A[i, k], axis=k), name="T_sum")

    def centred(i, j):
        return A[i, j] - total[i] / float(N)

    k2 = te.reduce_axis((0, N), name="k")
    squares = te.compute(
        (M,), lambda i: te.sum(centred(i, k2) * centred(i, k2), axis=k2), name="T_var_sum"
    )
    out = te.compute(
        (M, N),
        lambda i, j: centred(i, j) * te.rsqrt(squares[i] / float(N) + eps) * gamma[j] + beta[j],
        name="T_layer_norm",
    )
    return te.create_prim_func([A, gamma, beta, out])


def _rms_norm_ref(A, weight, eps=1e-5) -> np.ndarray:
    x = wide(A)
    scale = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return (x * scale * wide(weight)).astype(A.dtype)


@register(
    "rms_norm",
    defaults={"M": 128, "N": 256, "eps": 1e-5},
    reference=_rms_norm_ref,
    flops=lambda M, N, eps: 4 * M * N,  # square, sum, scale, weight
    dtypes=FLOAT_TYPES,
    baseline=lambda A, weight, eps=1e-5: (
        A / np.sqrt((A * A).mean(axis=-1, keepdims=True) + A.dtype.type(eps)) * weight
    ),
    scale=("M", "N"),
)
def rms_norm(M: int, N: int, eps: float = 1e-5, dtype: str = "float32") -> PrimFunc:
    """RMS normalization over the last axis: A * rsqrt(mean(A^2) + eps) * weight."""
    A = te.placeholder((M, N), dtype, name="A")
    weight = te.placeholder((N,), dtype, name="weight")
    k = te.reduce_axis((0, N), name="k")
    squares = te.compute((M,), lambda i: te.sum(A[i, k] * A[i, k], axis=k), name="T_sq_sum")
    out = te.compute(
        (M, N),
        lambda i, j: A[i, j] * te.rsqrt(squares[i] / float(N) + eps) * weight[j],
        name="T_rms_norm",
    )
    return te.create_prim_func([A, weight, out])

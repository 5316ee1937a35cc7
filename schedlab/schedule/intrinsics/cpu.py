"""fp32 CPU tensor intrinsics with extern-free implementations.

Each is a description (the scalar loops it replaces) and an implementation in vector form
(Ramp/Broadcast loads and stores, unrolled loops), which the C back end renders as GCC vector
code:

- `cpu_f32_fma_16`: `C[j] += A[0] * B[j]` for 16 `j` (the inner loop of a gemm row, a
  broadcast multiply-accumulate);
- `cpu_f32_gemm_4x4x4`: `C[i, j] += A[i, k] * B[k, j]` on a 4x4x4 tile (a register-tile
  micro-kernel: 16 vector multiply-adds of width 4);
- `cpu_f32_dot_4`: `C[0] += A[k] * B[k]` for 4 `k` (a short dot product, e.g. a gemv row);
- `cpu_f32_zero_16`: `C[j] = 0` for 16 `j` (a reduction's init after decompose_reduction).
"""

from __future__ import annotations

from schedlab.script import tir as T

from ..tensor_intrin import TensorIntrin

F32_FMA_16 = "cpu_f32_fma_16"
F32_GEMM_4X4X4 = "cpu_f32_gemm_4x4x4"
F32_DOT_4 = "cpu_f32_dot_4"
F32_ZERO_16 = "cpu_f32_zero_16"


# fmt: off
@T.prim_func
def fma_16_desc(A: T.Buffer((1,), "float32"), B: T.Buffer((16,), "float32"),
                C: T.Buffer((16,), "float32")):
    for j in range(16):
        with T.block("update"):
            vj = T.axis.spatial(16, j)
            C[vj] = C[vj] + A[0] * B[vj]


@T.prim_func
def fma_16_impl(A: T.Buffer((1,), "float32"), B: T.Buffer((16,), "float32"),
                C: T.Buffer((16,), "float32")):
    C[T.Ramp(0, 1, 16)] = C[T.Ramp(0, 1, 16)] + T.Broadcast(A[0], 16) * B[T.Ramp(0, 1, 16)]


@T.prim_func
def gemm_4x4x4_desc(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"),
                    C: T.Buffer((4, 4), "float32")):
    for i, j, k in T.grid(4, 4, 4):
        with T.block("update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def gemm_4x4x4_impl(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"),
                    C: T.Buffer((4, 4), "float32")):
    for k in T.unroll(4):
        for i in T.unroll(4):
            C[i, T.Ramp(0, 1, 4)] = (
                C[i, T.Ramp(0, 1, 4)] + T.Broadcast(A[i, k], 4) * B[k, T.Ramp(0, 1, 4)]
            )


@T.prim_func
def dot_4_desc(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
               C: T.Buffer((1,), "float32")):
    for k in range(4):
        with T.block("update"):
            vk = T.axis.reduce(4, k)
            C[0] = C[0] + A[vk] * B[vk]


@T.prim_func
def dot_4_impl(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
               C: T.Buffer((1,), "float32")):
    C[0] = C[0] + ((A[0] * B[0] + A[1] * B[1]) + (A[2] * B[2] + A[3] * B[3]))


@T.prim_func
def zero_16_desc(C: T.Buffer((16,), "float32")):
    for j in range(16):
        with T.block("init"):
            vj = T.axis.spatial(16, j)
            C[vj] = T.float32(0)


@T.prim_func
def zero_16_impl(C: T.Buffer((16,), "float32")):
    C[T.Ramp(0, 1, 16)] = T.Broadcast(T.float32(0), 16)
# fmt: on


TensorIntrin.register(F32_FMA_16, fma_16_desc, fma_16_impl)
TensorIntrin.register(F32_GEMM_4X4X4, gemm_4x4x4_desc, gemm_4x4x4_impl)
TensorIntrin.register(F32_DOT_4, dot_4_desc, dot_4_impl)
TensorIntrin.register(F32_ZERO_16, zero_16_desc, zero_16_impl)

__all__ = ["F32_FMA_16", "F32_GEMM_4X4X4", "F32_DOT_4", "F32_ZERO_16"]

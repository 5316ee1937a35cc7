"""CUDA tensor-core intrinsics (sm_80+): fp16 inputs, mma.sync m16n8k16, fp32 accumulation.

Each description is plain TIR on one 16 x 16 tile (16 x 16 x 16 for the product), made from
one TVMScript template per kind (a tile copy, the product, the fill) for each layout and
dtype; each implementation is one warp-level call of `schedlab.ir.mma` on whole tiles, which
the interpreter runs by its numpy emulation and the CUDA renderer as ldmatrix / mma.sync PTX:

- `cuda_mma_load_a_f16`: A fragment (scope "mma.matrix_a") <- a 16 x 16 [m, k] tile of shared
  memory (ldmatrix.x4);
- `cuda_mma_load_b_kn_f16` / `cuda_mma_load_b_nk_f16`: B fragment ("mma.matrix_b") <- a tile
  stored [k, n] (ldmatrix.x4.trans: gemm NN) or [n, k] (ldmatrix.x4: gemm NT);
- `cuda_mma_sync_{kn,nk}_{f16,f32}`: C[i, j] += A[i, k] * B[k, j] (kn) or B[j, k] (nk) on a
  16 x 16 x 16 tile, two `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`; `f16` is the
  fp16-output gemm (products and sums in fp16 in the description; the fragment accumulates in
  fp32 on the device and in the interpreter), `f32` the fp16-input, fp32-output one (casts);
- `cuda_mma_fill_{f16,f32}`: C fragment ("mma.accumulator") = 0 (the reduction's init);
- `cuda_mma_store_{f16,f32}`: a 16 x 16 tile of any buffer <- the C fragment (from registers,
  two neighbouring elements per lane and row).
"""

from __future__ import annotations

from schedlab.ir import mma
from schedlab.ir import stmt as S
from schedlab.ir.function import PrimFunc
from schedlab.script import from_source

from ..tensor_intrin import TensorIntrin

LOAD_A = "cuda_mma_load_a_f16"
LOAD_B = {"kn": "cuda_mma_load_b_kn_f16", "nk": "cuda_mma_load_b_nk_f16"}
SYNC = {(layout, acc): f"cuda_mma_sync_{layout}_{acc}" for layout in ("kn", "nk")
        for acc in ("f16", "f32")}  # fmt: skip
FILL = {"f16": "cuda_mma_fill_f16", "f32": "cuda_mma_fill_f32"}
STORE = {"f16": "cuda_mma_store_f16", "f32": "cuda_mma_store_f32"}


DTYPES = {"f16": "float16", "f32": "float32"}


def _tile_copy_desc(
    dtype: str, source: tuple[str, str], target: tuple[str, str], block: str
) -> PrimFunc:
    """target[i, j] = source[i, j] on a 16 x 16 tile; `source` and `target` are (buffer
    name, scope)."""
    (src, src_scope), (dst, dst_scope) = source, target
    return from_source(f"""
@T.prim_func
def {block}_desc({src}: T.Buffer((16, 16), "{dtype}", scope="{src_scope}"),
                 {dst}: T.Buffer((16, 16), "{dtype}", scope="{dst_scope}")):
    for i, j in T.grid(16, 16):
        with T.block("{block}"):
            vi, vj = T.axis.remap("SS", [i, j])
            {dst}[vi, vj] = {src}[vi, vj]
""")


def _sync_desc(layout: str, acc: str) -> PrimFunc:
    """C[i, j] += A[i, k] * B[k, j] (layout "kn") or B[j, k] ("nk") on a 16 x 16 x 16 tile;
    an "f32" accumulator multiplies the fp16 inputs cast to fp32."""
    b = "B[vk, vj]" if layout == "kn" else "B[vj, vk]"
    product = (f"A[vi, vk] * {b}" if acc == "f16"
               else f'T.Cast("float32", A[vi, vk]) * T.Cast("float32", {b})')  # fmt: skip
    return from_source(f"""
@T.prim_func
def sync_{layout}_{acc}_desc(A: T.Buffer((16, 16), "float16", scope="{mma.MATRIX_A}"),
                             B: T.Buffer((16, 16), "float16", scope="{mma.MATRIX_B}"),
                             C: T.Buffer((16, 16), "{DTYPES[acc]}", scope="{mma.ACCUMULATOR}")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = C[vi, vj] + {product}
""")


def _fill_desc(acc: str) -> PrimFunc:
    """C = 0 on a 16 x 16 accumulator tile."""
    dtype = DTYPES[acc]
    return from_source(f"""
@T.prim_func
def fill_{acc}_desc(C: T.Buffer((16, 16), "{dtype}", scope="{mma.ACCUMULATOR}")):
    for i, j in T.grid(16, 16):
        with T.block("init"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.{dtype}(0)
""")


def _impl(desc: PrimFunc, name: str, order: tuple[int, ...], *extra: int) -> PrimFunc:
    """An implementation over the description's buffers: one Evaluate of mma `name` whose
    tile operands are the desc's buffers in `order` (positions in its parameter list)."""
    buffers = desc.buffers
    args = [address for index in order for address in mma.tile(buffers[index])]
    body = S.Evaluate(mma.call(name, *args, *extra))
    return PrimFunc(desc.params, body, desc.buffer_map, attrs=dict(desc.attrs))


load_a_desc = _tile_copy_desc("float16", ("S_", "shared"), ("F", mma.MATRIX_A), "load")
TensorIntrin.register(LOAD_A, load_a_desc, _impl(load_a_desc, mma.LOAD_A, (1, 0)))
load_b_desc = _tile_copy_desc("float16", ("S_", "shared"), ("F", mma.MATRIX_B), "load")
for _layout, _kn in (("kn", 1), ("nk", 0)):
    TensorIntrin.register(LOAD_B[_layout], load_b_desc,
                          _impl(load_b_desc, mma.LOAD_B, (1, 0), _kn))  # fmt: skip
for _layout, _acc in SYNC:
    _desc = _sync_desc(_layout, _acc)
    _kn = 1 if _layout == "kn" else 0
    TensorIntrin.register(SYNC[_layout, _acc], _desc, _impl(_desc, mma.SYNC, (2, 0, 1), _kn))
for _acc in DTYPES:
    _desc = _fill_desc(_acc)
    TensorIntrin.register(FILL[_acc], _desc, _impl(_desc, mma.FILL, (0,), 0))
    _desc = _tile_copy_desc(DTYPES[_acc], ("C", mma.ACCUMULATOR), ("D", "global"), "store")
    TensorIntrin.register(STORE[_acc], _desc, _impl(_desc, mma.STORE, (1, 0)))

__all__ = ["LOAD_A", "LOAD_B", "SYNC", "FILL", "STORE"]

"""`MatmulTensorization`: fp16 GEMM and batch matmul on tensor cores (sm_80+; TVM's dlight
gpu.MatmulTensorization), with the intrinsics of `schedlab.schedule.intrinsics.cuda`.

Takes C[b, i, j] += A[b, i, k] * B[b, k, j] (B may be stored [b, j, k]: "NT") with fp16 A and
B, and C fp16 (or fp32 with the products cast to fp32), when M, N and K divide into whole tiles
(M and N by 32, K by 16); every other block falls through to `Matmul`. A thread block of 2 x 2
warps (threadIdx.y, threadIdx.z; threadIdx.x is the warp's 32 lanes) computes a
`block_tile` of C:

- per K step of `tile_k`, all 128 threads copy the A and B tiles to shared memory (the copy's
  fused loop over threadIdx.z/y/x, 8 consecutive fp16 per thread per pass: 16-byte loads);
- per 16-wide slice of the step, each warp loads its A fragments (ldmatrix.x4) and B
  fragments (ldmatrix.x4, .trans for NN) and multiplies every pair (mma.sync m16n8k16, fp32
  accumulation) into its accumulator fragments, which stay in registers for the whole K loop;
- the accumulators start at 0 (decompose_reduction + the fill intrinsic) and are stored to C
  from registers at the end.

No cp.async double buffering yet: the copy of the next K step waits for the product of this
one (the barriers InjectThreadSync puts around the shared tiles).
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.ir import expr as E
from schedlab.schedule.intrinsics import cuda as intrin

from ..analysis import BlockInfo, gemm_axes
from ..base import ScheduleRule

WARPS = (2, 2)  # warps along M (threadIdx.y) and N (threadIdx.z)
LANES = 32
VECTOR = 8  # fp16 elements per thread per pass of a shared-memory copy (16 bytes), at most


@dataclass(frozen=True)
class TensorCoreConfig:
    """A thread block's tile of C and the K step staged in shared memory."""

    block_tile: tuple[int, int]
    tile_k: int

    @property
    def warp_tile(self) -> tuple[int, int]:
        return self.block_tile[0] // WARPS[0], self.block_tile[1] // WARPS[1]


def min_sm(target) -> int | None:
    """The compute capability of a CUDA target as a number (sm_90 -> 90), else None."""
    if target.kind != "cuda":
        return None
    digits = "".join(ch for ch in str(target.attrs.get("arch", "")) if ch.isdigit())
    return int(digits) if digits else None


def config_for(m: int, n: int, k: int) -> TensorCoreConfig | None:
    """128 x 128 tiles (64 x 64 per warp: 16 accumulator fragments) where M and N allow, else
    64 or 32; K steps of 32, else 16. None when a side is not a multiple of the smallest."""

    def largest(extent: int, choices) -> int | None:
        return next((c for c in choices if extent % c == 0), None)

    tm, tn, tk = largest(m, (128, 64, 32)), largest(n, (128, 64, 32)), largest(k, (32, 16))
    if tm is None or tn is None or tk is None:
        return None
    return TensorCoreConfig((tm, tn), tk)


class MatmulTensorization(ScheduleRule):
    """fp16 GEMM / batch matmul on tensor cores for CUDA sm_80 and newer (see the module
    docstring); declines other targets, dtypes, layouts (A must be stored [.., M, K], C
    [.., M, N]) and sizes that are not whole tiles."""

    name = "MatmulTensorization"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        sm = min_sm(target)
        if sm is None or sm < 80 or target.attrs.get("max_threads_per_block", 0) < 128:
            return False
        axes = gemm_axes(info)
        if axes is None:
            return False
        roles = _roles(info, axes)
        if roles is None:
            return False
        a_buf, b_buf, layout, acc = roles
        extents = {li.var: li.loop.extent for li in info.loops}
        sizes = [extents[v] for v in (axes.m, axes.n, axes.k)]
        if not all(isinstance(s, E.IntImm) for s in sizes):
            return False
        config = config_for(*(s.value for s in sizes))
        if config is None:
            return False
        self._schedule(sch, block, info, axes, a_buf, b_buf, layout, acc, config)
        return True

    @staticmethod
    def _schedule(sch, block, info, axes, a_buf, b_buf, layout, acc, config) -> None:
        (wm, wn), (fm, fn) = WARPS, (t // 16 for t in config.warp_tile)
        loops = dict(zip((li.var for li in info.loops), sch.get_loops(block)))
        batch = [loops[v] for v in axes.batch]
        i0, i1, i2, i3 = sch.split(loops[axes.m], [None, wm, fm, 16])
        j0, j1, j2, j3 = sch.split(loops[axes.n], [None, wn, fn, 16])
        k0, k1, k2 = sch.split(loops[axes.k], [None, config.tile_k // 16, 16])
        sch.reorder(*batch, i0, j0, i1, j1, k0, k1, i2, j2, i3, j3, k2)
        if batch:
            sch.bind(sch.fuse(*batch) if len(batch) > 1 else batch[0], "blockIdx.z")
        sch.bind(i0, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
        sch.bind(i1, "threadIdx.y")
        sch.bind(j1, "threadIdx.z")

        # accumulators: fragments in registers, stored to C tile by tile after the K loop
        store = sch.cache_write(block, 0, intrin.mma.ACCUMULATOR)
        sch.reverse_compute_at(store, j1)
        rows, cols = sch.get_loops(store)[-2:]
        r0, r1 = sch.split(rows, [None, 16])
        c0, c1 = sch.split(cols, [None, 16])
        sch.reorder(r0, c0, r1, c1)
        sch.unroll(r0)
        sch.unroll(c0)
        sch.tensorize(r1, intrin.STORE[acc])

        # A and B: global -> shared (per K step, all threads) -> fragments (per 16-wide slice)
        a_shared = sch.cache_read(block, _read_index(sch, block, a_buf), "shared")
        b_shared = sch.cache_read(block, _read_index(sch, block, b_buf), "shared")
        a_frag = sch.cache_read(block, _read_index(sch, block, sch.get(a_shared).writes[0].buffer),
                                intrin.mma.MATRIX_A)  # fmt: skip
        b_frag = sch.cache_read(block, _read_index(sch, block, sch.get(b_shared).writes[0].buffer),
                                intrin.mma.MATRIX_B)  # fmt: skip
        loads = ((a_frag, intrin.LOAD_A, True), (b_frag, intrin.LOAD_B[layout], layout == "nk"))
        for frag, name, tiled_rows in loads:
            sch.compute_at(frag, k1)
            rows, cols = sch.get_loops(frag)[-2:]
            if tiled_rows:  # [fragments x 16, 16]: one tile per 16 rows
                outer, inner = sch.split(rows, [None, 16])
            else:  # [16, fragments x 16] (B stored [k, n]): one tile per 16 columns
                outer, inner = sch.split(cols, [None, 16])
                sch.reorder(outer, rows, inner)
                inner = rows
            sch.unroll(outer)
            sch.tensorize(inner, name)
        for shared in (a_shared, b_shared):
            sch.compute_at(shared, k0)
            fused = sch.fuse(*sch.get_loops(shared)[-2:])
            elements = sch.get(fused).extent.value
            width = next(v for v in (VECTOR, 4, 2, 1) if elements % (wm * wn * LANES * v) == 0)
            _, tz, ty, tx, vec = sch.split(fused, [None, wn, wm, LANES, width])
            sch.bind(tz, "threadIdx.z")
            sch.bind(ty, "threadIdx.y")
            sch.bind(tx, "threadIdx.x")
            sch.vectorize(vec)

        # the product: zeroed fragments, then 16 x 16 x 16 mma per pair of fragments
        init = sch.decompose_reduction(block, k0)
        fi2, fj2, fi3, _ = sch.get_loops(init)[-4:]
        sch.unroll(fi2)
        sch.unroll(fj2)
        sch.tensorize(fi3, intrin.FILL[acc])
        sch.tensorize(i3, intrin.SYNC[layout, acc])
        sch.unroll(i2)
        sch.unroll(j2)


def _read_index(sch, block, buffer) -> int:
    for index, region in enumerate(sch.get(block).reads):
        if region.buffer is buffer:
            return index
    raise ValueError(f"block reads no buffer {buffer.name}")  # pragma: no cover


def _last_two(region, first, second) -> bool:
    """Whether the region's last two dimensions are indexed by `first` and `second`."""
    dims = region.region
    return len(dims) >= 2 and dims[-2].min is first and dims[-1].min is second


def _roles(info: BlockInfo, axes):
    """(A buffer, B buffer, "kn" or "nk", "f16" or "f32") when the block is an fp16 gemm whose
    A is stored [.., M, K] and C [.., M, N], else None."""
    block = info.block
    out = block.writes[0]
    if not _last_two(out, axes.m, axes.n):
        return None
    a = b = None
    layout = None
    for region in block.reads:
        if region.buffer is out.buffer:
            continue
        if _last_two(region, axes.m, axes.k):
            a = region.buffer
        elif _last_two(region, axes.k, axes.n):
            b, layout = region.buffer, "kn"
        elif _last_two(region, axes.n, axes.k):
            b, layout = region.buffer, "nk"
    if a is None or b is None or str(a.dtype) != "float16" or str(b.dtype) != "float16":
        return None
    acc = {"float16": "f16", "float32": "f32"}.get(str(out.buffer.dtype))
    if acc is None:
        return None
    return a, b, layout, acc


__all__ = ["MatmulTensorization", "TensorCoreConfig", "config_for", "min_sm"]

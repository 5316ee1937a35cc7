"""`Matmul`: GEMM-like reductions as a shared-memory tiled kernel (a simpler form of TVM's dlight
gpu.Matmul: no vthreads, vector loads or tensor cores yet)."""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis import BlockInfo, gemm_axes
from ..base import ScheduleRule


@dataclass(frozen=True)
class MatmulConfig:
    """Threads per block (rows = threadIdx.y, columns = threadIdx.x), outputs per thread (a
    "local" accumulator tile) and the K step staged in shared memory per iteration."""

    threads: tuple[int, int] = (16, 16)
    per_thread: tuple[int, int] = (2, 2)
    tile_k: int = 16

    @property
    def tile(self) -> tuple[int, int]:
        return self.threads[0] * self.per_thread[0], self.threads[1] * self.per_thread[1]


DEFAULT = MatmulConfig()  # 32 x 32 tiles: generic OpenCL, older CUDA archs
# sm_80 / sm_90 and CDNA: 64 x 64 tiles (a 4 x 4 register tile per thread, 16 accumulators;
# shared A 64 x 16 + B 16 x 64 floats = 8 KiB): four times the reuse of each shared load
LARGE = MatmulConfig(per_thread=(4, 4))
# Adreno: 128 threads, K step 8 (small local memory and register file)
SMALL = MatmulConfig(threads=(8, 16), per_thread=(2, 2), tile_k=8)


def config_for(target) -> MatmulConfig:
    """The tile configuration for `target` (TVM's get_configs, by kind and arch)."""
    if target.kind == "adreno":
        return SMALL
    arch = str(target.attrs.get("arch", ""))
    digits = "".join(ch for ch in arch if ch.isdigit())
    if target.kind == "cuda" and digits and int(digits) >= 80:
        return LARGE
    if target.kind == "rocm" and arch.startswith("gfx9"):
        return LARGE
    return DEFAULT


class Matmul(ScheduleRule):
    """C[b, i, j] += A[b, i, k] * B[b, k, j] (any index order, see `gemm_axes`):

    - a block of threads (`config_for(target)`: 16 x 16 on most targets) computes a tile of C
      (blockIdx.y/x; batch -> blockIdx.z), each thread a small accumulator tile in "local"
      memory (cache_write + reverse_compute_at) written back once; the accumulator is zeroed
      before the K loop (decompose_reduction), not by a test inside it;
    - K runs in steps of `tile_k`; per step the A and B tiles are copied to "shared" memory by
      all threads together (cache_read + compute_at; the copy's inner dimension, contiguous in
      memory, over threadIdx.x, its outer over threadIdx.y), and each thread reads its rows and
      columns from there (the lowering puts barriers between the copies and the reads).
    Odd sizes give predicated tiles. Declines targets with fewer threads per block."""

    name = "Matmul"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        axes = gemm_axes(info)
        config = config_for(target)
        threads = config.threads[0] * config.threads[1]
        if axes is None or target.attrs.get("max_threads_per_block", 0) < threads:
            return False
        loops = dict(zip((li.var for li in info.loops), sch.get_loops(block)))
        batch = [loops[v] for v in axes.batch]
        (ty, tx), (ri, rj) = config.threads, config.per_thread
        i0, i1, i2 = sch.split(loops[axes.m], [None, ty, ri])
        j0, j1, j2 = sch.split(loops[axes.n], [None, tx, rj])
        k0, k1 = sch.split(loops[axes.k], [None, config.tile_k])
        sch.reorder(*batch, i0, j0, i1, j1, k0, k1, i2, j2)
        sch.unroll(i2)  # the accumulator tile indexed by constants: registers, not memory
        sch.unroll(j2)
        if batch:
            sch.bind(sch.fuse(*batch) if len(batch) > 1 else batch[0], "blockIdx.z")
        sch.bind(i0, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
        sch.bind(i1, "threadIdx.y")
        sch.bind(j1, "threadIdx.x")
        local = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(local, j1)
        for index in range(2):
            self._stage(sch, block, index, k0, config)
        sch.decompose_reduction(block, k0)
        return True

    @staticmethod
    def _stage(sch, block, index: int, k0, config: MatmulConfig) -> None:
        """Copy input `index`'s tile to shared memory at `k0`: the inner copy loop split over
        threadIdx.x, the outer over threadIdx.y (each split affine, whatever the tile's
        extent at the matrix's edge)."""
        shared = sch.cache_read(block, index, "shared")
        sch.compute_at(shared, k0)
        outer, inner = sch.get_loops(shared)[-2:]
        o0, o1 = sch.split(outer, [None, config.threads[0]])
        i0, i1 = sch.split(inner, [None, config.threads[1]])
        sch.reorder(o0, i0, o1, i1)
        sch.bind(o1, "threadIdx.y")
        sch.bind(i1, "threadIdx.x")

"""`Matmul`: GEMM-like reductions as a shared-memory tiled kernel (the first, simple version
of TVM's dlight gpu.Matmul: no vthreads, vectors or tensor cores yet)."""

from __future__ import annotations

from ..analysis import BlockInfo, gemm_axes
from ..base import ScheduleRule

TILE_THREADS = (16, 16)  # threadIdx.y x threadIdx.x
PER_THREAD = (2, 2)  # outputs per thread: rows x columns (a "local" accumulator tile)
TILE_K = 16


class Matmul(ScheduleRule):
    """C[b, i, j] += A[b, i, k] * B[b, k, j] (any index order, see `gemm_axes`):

    - a block of 16 x 16 threads computes a 32 x 32 tile of C (blockIdx.y/x; batch ->
      blockIdx.z), each thread a 2 x 2 accumulator in "local" memory (cache_write +
      reverse_compute_at) written back once;
    - K runs in steps of 16; per step the A (32 x 16) and B (16 x 32) tiles are copied to
      "shared" memory by all threads together (cache_read + compute_at, the copy loop fused,
      split over the block's threads), and each thread reads its rows and columns from there
      (the lowering puts barriers between the copies and the reads).
    Odd sizes give predicated tiles. Needs 16 x 16 threads (declines smaller targets)."""

    name = "Matmul"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        axes = gemm_axes(info)
        threads = TILE_THREADS[0] * TILE_THREADS[1]
        if axes is None or target.attrs.get("max_threads_per_block", 0) < threads:
            return False
        loops = dict(zip((li.var for li in info.loops), sch.get_loops(block)))
        batch = [loops[v] for v in axes.batch]
        (ty, tx), (ri, rj) = TILE_THREADS, PER_THREAD
        i0, i1, i2 = sch.split(loops[axes.m], [None, ty, ri])
        j0, j1, j2 = sch.split(loops[axes.n], [None, tx, rj])
        k0, k1 = sch.split(loops[axes.k], [None, TILE_K])
        sch.reorder(*batch, i0, j0, i1, j1, k0, k1, i2, j2)
        if batch:
            sch.bind(sch.fuse(*batch) if len(batch) > 1 else batch[0], "blockIdx.z")
        sch.bind(i0, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
        sch.bind(i1, "threadIdx.y")
        sch.bind(j1, "threadIdx.x")
        local = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(local, j1)
        for index in range(2):
            self._stage(sch, block, index, k0)
        return True

    @staticmethod
    def _stage(sch, block, index: int, k0) -> None:
        """Copy input `index`'s tile to shared memory at `k0`, split over the threads."""
        shared = sch.cache_read(block, index, "shared")
        sch.compute_at(shared, k0)
        copy = sch.get_loops(shared)[-2:]
        fused = sch.fuse(*copy)
        _, ty, tx = sch.split(fused, [None, *TILE_THREADS])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")

"""`Matmul`: GEMM-like reductions (batch x M x N x K), register-tiled as
schedlab/examples/gemm_cpu.py does by hand."""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.target import Target

from ..analysis import BlockInfo, GemmAxes, gemm_axes
from ..base import ScheduleRule, attempt
from ._common import (
    constant_loops,
    extent_of,
    inline_epilogue,
    output_dtype,
    parallelize,
    register_tile,
    vector_lanes,
    vector_registers,
)
from .packing import pack_vector_operands


@dataclass(frozen=True)
class GemmTile:
    """A register tile: `rows` x (`vectors` x `lanes`) accumulators."""

    rows: int
    vectors: int
    lanes: int


class Matmul(ScheduleRule):
    """Register-tiled GEMM: for each (batch, column panel) in parallel, for each row tile, a
    `rows x vectors*lanes` accumulator in "local" scope (cache_write + reverse_compute_at) is
    zeroed (decompose_reduction), updated over K with unrolled rows/vectors and vectorized
    lanes, and written back vectorized; B is packed panel by panel first when enough rows reuse
    it (`packing.pack_vector_operands`: 0.67x -> 0.86x numpy on gemm 1024, AVX-512); a single
    elementwise consumer of the output (a bias/ReLU epilogue) is folded into that write-back
    when reverse_compute_inline allows.

    The tile comes from the target: `lanes` = SIMD width / dtype bits, rows x vectors = 16
    accumulators with 32 vector registers (AVX-512: 8 x 2 vectors), 12 with 16 (AVX2: 6 x 2,
    measured on Zen 5 as AVX2 code, gemm 1024: 167 GFLOP/s with 4 x 2, 247 with 6 x 2).
    Non-divisible extents give predicated tiles; if a primitive refuses,
    the rule retries with one-vector tiles, then with only the outer loops parallel.

    Matches a reduction block whose accesses are C[batch.., M, N] and two inputs
    A[batch.., M, K], B[batch.., K, N] (any index order, see `gemm_axes`)."""

    name = "Matmul"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        axes = gemm_axes(info)
        if axes is None:
            return False
        loops = constant_loops(sch, block)
        if loops is None:
            return False
        for tile in candidate_tiles(sch, loops, info, axes, target):
            if attempt(sch, lambda t=tile: _padded_plan(sch, block, info, axes, t)):
                return True
        return attempt(sch, lambda: _simple_plan(sch, block, info, axes))


def candidate_tiles(sch, loops, info: BlockInfo, axes: GemmAxes, target: Target):
    """Register tiles to try, best first, fitted to the M and N extents."""
    lanes = vector_lanes(target, output_dtype(info.block))
    m_extent = extent_of(sch, loops[info.position(axes.m)])
    n_extent = extent_of(sch, loops[info.position(axes.n)])
    lanes = min(lanes, n_extent)
    vectors = max(min(2, n_extent // lanes), 1)
    # 16 accumulators with 32 registers (AVX-512), 12 with 16 (AVX2: the classic 6 x 16)
    accumulators = min(16, vector_registers(target) - 4)
    rows = max(min(accumulators // vectors, m_extent), 1)
    tiles = [GemmTile(rows, vectors, lanes)]
    if vectors > 1:
        tiles.append(GemmTile(rows, 1, lanes))
    return tiles


def _padded_plan(sch, block, info: BlockInfo, axes: GemmAxes, tile: GemmTile) -> bool:
    """The tiled plan, with N first padded to a whole number of panels when no panel divides
    it (`pad_einsum`: B read through a zero-padded copy, which packing folds into its own
    copy, and C through a padded accumulator whose write-back stores only the real columns).
    A predicated panel would keep the vector loops scalar: gemm 192x169x48 ran at 4 GFLOP/s,
    padded to 192 columns at 76 (Zen 5, one thread; 1000x169x512: 5 -> 196)."""
    panel = tile.vectors * tile.lanes
    n_extent = extent_of(sch, sch.get_loops(block)[info.position(axes.n)])
    if n_extent % panel and n_extent > tile.lanes:
        padding = [panel if iv.var is axes.n else 1 for iv in info.block.iter_vars]
        sch.pad_einsum(block, padding)
    return _tiled_plan(sch, block, info, axes, tile)


def _tiled_plan(sch, block, info: BlockInfo, axes: GemmAxes, tile: GemmTile) -> bool:
    loops = sch.get_loops(block)
    batch = [loops[info.position(v)] for v in axes.batch]
    i, j, k = (loops[info.position(v)] for v in (axes.m, axes.n, axes.k))
    sch.reorder(*batch, i, j, k)
    i0, i1 = sch.split(i, [None, tile.rows])
    j0, j1, j2 = sch.split(j, [None, tile.vectors, tile.lanes])
    sch.reorder(j0, i0, k, i1, j1, j2)
    write_back = sch.cache_write(block, 0, "local")
    # the epilogue (and a padded output's crop, then the epilogue) before the predicates appear
    while attempt(sch, lambda: inline_epilogue(sch, write_back)):
        pass
    sch.reverse_compute_at(write_back, i0)
    init = sch.decompose_reduction(block, k)
    parallelize(sch, [*batch, j0], info)
    register_tile(sch, [i1, j1, j2])
    register_tile(sch, sch.get_loops(init)[-3:])
    *_, rows, cols = sch.get_loops(write_back)
    cols_outer, cols_inner = sch.split(cols, [None, tile.lanes])
    register_tile(sch, [rows, cols_outer, cols_inner])
    pack_vector_operands(sch)  # B copied panel by panel, as a BLAS packs it (or left as is)
    return True


def _simple_plan(sch, block, info: BlockInfo, axes: GemmAxes) -> bool:
    """Batch and M outermost and parallel, then K, then N innermost (a contiguous row of C
    and of B per k), the init decomposed out of K."""
    loops = sch.get_loops(block)
    batch = [loops[info.position(v)] for v in axes.batch]
    i, j, k = (loops[info.position(v)] for v in (axes.m, axes.n, axes.k))
    sch.reorder(*batch, i, k, j)
    sch.decompose_reduction(block, k)
    parallelize(sch, [*batch, i], info)
    return True

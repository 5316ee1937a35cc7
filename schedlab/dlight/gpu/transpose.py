"""`Transpose`: a layout change through a shared-memory tile (TVM's dlight gpu.Transpose)."""

from __future__ import annotations

from schedlab.ir.expr import Var

from ..analysis import BlockInfo
from ..base import ScheduleRule

TILE = 32  # a 32 x 32 tile per thread block
ROWS = 8  # threadIdx.y: each thread moves TILE / ROWS elements each way


class Transpose(ScheduleRule):
    """An injective block whose output's last index is not its input's last index (B[i, j] =
    A[j, i]): reading A and writing B directly would make one of the two strided. Each thread
    block copies a 32 x 32 tile of A into shared memory with consecutive threads reading
    consecutive elements of A's rows, then writes the tile of B with consecutive threads writing
    consecutive elements of B's rows (32 x 8 threads, 4 elements each way). The shared tile's
    rows are padded by one element (storage_align) so the column reads hit 32 different banks.
    Leading loops (a batch) go to blockIdx.z. Odd sizes give predicated tiles."""

    name = "Transpose"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        if not info.is_injective or len(info.loops) < 2:
            return False
        roles = _roles(info)
        if roles is None or target.attrs.get("max_threads_per_block", 0) < TILE * ROWS:
            return False
        out_var, in_var, index = roles
        loops = dict(zip((li.var for li in info.loops), sch.get_loops(block)))
        batch = [loops[li.var] for li in info.loops if li.var not in (out_var, in_var)]
        io, ii = sch.split(loops[in_var], [None, TILE])
        jo, ji = sch.split(loops[out_var], [None, TILE])
        sch.reorder(*batch, io, jo, ii, ji)
        if batch:
            sch.bind(sch.fuse(*batch) if len(batch) > 1 else batch[0], "blockIdx.z")
        sch.bind(io, "blockIdx.y")
        sch.bind(jo, "blockIdx.x")
        shared = sch.cache_read(block, index, "shared")
        sch.compute_at(shared, jo)
        self._threads(sch, sch.get_loops(shared)[-2:])
        self._threads(sch, [ii, ji])
        ndim = len(sch.get(shared).writes[0].buffer.shape)
        sch.storage_align(shared, 0, ndim - 2, TILE, 1)
        return True

    @staticmethod
    def _threads(sch, loops) -> None:
        _, ty, tx = sch.split(sch.fuse(*loops), [None, ROWS, TILE])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")


def _roles(info: BlockInfo):
    """(output's last var, input's last var, read index) when the block copies one input
    indexed by plain loop vars, and the two last vars differ; else None."""
    block = info.block
    if len(block.writes) != 1 or len(block.reads) != 1:
        return None
    out_last = block.writes[0].region[-1].min if block.writes[0].region else None
    region = block.reads[0].region
    if not region or any(not isinstance(r.min, Var) for r in region):
        return None
    in_last = region[-1].min
    vars_ = {li.var for li in info.loops}
    if out_last not in vars_ or in_last not in vars_ or out_last is in_last:
        return None
    return out_last, in_last, 0

"""`Reduction` and `GEMV`: reductions whose threads cooperate on each output (TVM's dlight
gpu.Reduction, gpu.GEMV and gpu.LowBatchGEMV).

Both write the reduction the TensorIR way: the (fused) reduction loop is split as
`[outer, threads]`, the thread part bound to threadIdx.x and moved outside the serial part, so
consecutive threads read consecutive elements and each thread accumulates a strided share of
the row. The GPU lowering (LowerCrossThreadReduction) then combines the threads' partial
results: warp shuffles on CUDA/HIP, a shared-memory tree on OpenCL. Read sequentially (the
interpreter), the schedule is the unscheduled reduction with its loops reordered.
"""

from __future__ import annotations

from schedlab.ir.stmt import IterType

from ..analysis import BlockInfo, conv_axes, gemm_axes, region_vars
from ..base import ScheduleRule
from ._common import max_threads

# Reductions shorter than this stay serial in one thread (Fallback): a 3x3 pooling window or a
# small convolution has far more outputs than a thread block could usefully share.
MIN_REDUCTION = 16
BUSY_BLOCKS_PER_SM, LONG_REDUCTION = 4, 4096  # see `_busy`
GEMV_ROWS = 8  # outputs per thread block (threadIdx.y): one warp's worth of K per output
LOW_BATCH = 4  # LowBatchGEMV: a GEMM with at most this many rows on one side


def reduction_threads(length: int, target, limit: int | None = None) -> int:
    """Threads for a reduction of `length`: the power of two covering it, at least one warp,
    at most `limit` (default: the rules' thread count, see `max_threads`)."""
    warp = int(target.attrs.get("warp_size", 1) or 1)
    cap = limit if limit is not None else max_threads(target)
    threads = max(1, warp)
    while threads < length and threads * 2 <= cap:
        threads *= 2
    return min(threads, cap)


def _extents(sch, loops) -> list[int] | None:
    values = [getattr(sch.get(loop).extent, "value", None) for loop in loops]
    return None if any(v is None for v in values) else values


def _split_kinds(sch, block, info: BlockInfo):
    loops = sch.get_loops(block)
    spatial = [h for h, li in zip(loops, info.loops) if li.kind == IterType.SPATIAL]
    reduce = [h for h, li in zip(loops, info.loops) if li.kind == IterType.REDUCE]
    return spatial, reduce


def bind_reduction(sch, reduce, threads: int):
    """Fuse the reduce loops, split `[outer, threads]`, put the thread loop outside (coalesced:
    thread t reads elements t, t + threads, ...) and bind it to threadIdx.x."""
    fused = sch.fuse(*reduce) if len(reduce) > 1 else reduce[0]
    outer, thread = sch.split(fused, [None, threads])
    sch.reorder(thread, outer)
    sch.bind(thread, "threadIdx.x")
    return thread


class Reduction(ScheduleRule):
    """One thread block per output (the fused spatial loops -> blockIdx.x), its threads split
    the reduction (softmax's row max and sum, layer_norm's mean and variance, rms_norm's sum of
    squares, a row sum, a full reduction to one value: one block). Threads: a power of two
    covering the row, from one warp up to 256. Declines short reductions (< 16 elements, such
    as pooling windows), NCHW convolutions, and reductions shorter than 4096 with outputs
    enough to fill every SM four times with one per thread: Fallback gives those one output
    per thread."""

    name = "Reduction"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        if not info.is_reduction or conv_axes(info) is not None:
            return False
        spatial, reduce = _split_kinds(sch, block, info)
        lengths = _extents(sch, reduce)
        if lengths is None or _product(lengths) < MIN_REDUCTION:
            return False
        outputs = _extents(sch, spatial)
        if outputs is not None and _busy(_product(outputs), _product(lengths), target):
            return False
        if spatial and sch.get_loops(block)[: len(spatial)] != spatial:
            sch.reorder(*spatial, *reduce)
        threads = reduction_threads(_product(lengths), target)
        bind_reduction(sch, reduce, threads)
        if spatial:
            sch.bind(sch.fuse(*spatial) if len(spatial) > 1 else spatial[0], "blockIdx.x")
        return True


class GEMV(ScheduleRule):
    """y[i] = sum_k A[i, k] x[k] (and LowBatchGEMV: Y[b, n] = sum_k X[b, k] W[n, k] with at
    most 4 rows b): a thread block computes a tile of `GEMV_ROWS` outputs (threadIdx.y), and
    for each output a warp's worth of threads splits K (threadIdx.x, coalesced reads of the
    matrix row), combined by warp shuffles or a shared-memory tree. Each output's row of the
    matrix is read once, by one warp: the kernel is bandwidth-bound, as a GEMV should be."""

    name = "GEMV"

    def schedule_block(self, sch, block, info: BlockInfo, target) -> bool:
        if not _is_gemv(info):
            return False
        spatial, reduce = _split_kinds(sch, block, info)
        lengths = _extents(sch, reduce)
        rows = _extents(sch, spatial)
        if lengths is None or rows is None or _product(lengths) < MIN_REDUCTION:
            return False
        warp = int(target.attrs.get("warp_size", 1) or 1)
        threads = reduction_threads(_product(lengths), target, limit=max(warp, 32))
        if spatial and sch.get_loops(block)[: len(spatial)] != spatial:
            sch.reorder(*spatial, *reduce)
        per_block = max(1, min(GEMV_ROWS, max_threads(target) // threads, _product(rows)))
        bind_reduction(sch, reduce, threads)
        fused = sch.fuse(*spatial) if len(spatial) > 1 else spatial[0]
        outer, inner = sch.split(fused, [None, per_block])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.y")
        return True


def _busy(outputs: int, length: int, target) -> bool:
    """Whether one output per thread already fills the GPU several times over while each
    reduction is short (a convolution layer): a thread block per output would then spend more
    on combining than on work."""
    sms = int(target.attrs.get("num_sms", 1) or 1)
    return outputs >= BUSY_BLOCKS_PER_SM * sms * max_threads(target) and length < LONG_REDUCTION


def _is_gemv(info: BlockInfo) -> bool:
    """A one-K reduction reading a matrix and a vector (both along K, the matrix's last
    index), or a GEMM whose M or N is at most `LOW_BATCH`."""
    if not info.is_reduction or len(info.reduce()) != 1 or not info.spatial():
        return False
    axes = gemm_axes(info)
    if axes is not None:
        extents = {li.var: getattr(li.loop.extent, "value", None) for li in info.loops}
        small = [v for v in (axes.m, axes.n) if extents[v] is not None and extents[v] <= LOW_BATCH]
        return bool(small) and not axes.batch
    k = info.reduce()[0].var
    out = info.block.writes[0].buffer
    inputs = [r for r in info.block.reads if r.buffer is not out]
    if len(inputs) != 2 or not all(k in region_vars(r) for r in inputs):
        return False
    spatial = {li.var for li in info.spatial()}
    matrix = [r for r in inputs if region_vars(r) & spatial]
    vector = [r for r in inputs if not region_vars(r) & spatial]
    return len(matrix) == 1 and len(vector) == 1 and k in region_vars(matrix[0], last=True)


def _product(values) -> int:
    total = 1
    for v in values:
        total *= v
    return total

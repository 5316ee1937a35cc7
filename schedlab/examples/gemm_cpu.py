"""A hand-written CPU schedule of fp32 gemm (C = A @ B) from the primitives alone.

The loop nest it makes (for 1024^3, tile 8 x 32):

    for k in T.parallel(1024):                # B packed: B_global[j0, k, 0:32] = B[k, panel j0]
        ...
    for j0 in T.parallel(32):                 # column panels of B, one per thread at a time
        for i0 in range(128):                 # row tiles of A
            C_local[8, 32] = 0                # the register tile (init, unrolled + vectorized)
            for k in range(1024):
                for i1 in T.unroll(8):
                    for j1 in T.unroll(2):
                        for j2 in T.vectorized(16):   # one 512-bit register
                            C_local[i1, j1 * 16 + j2] += A[i, k] * B_global[j0, k, j1 * 16 + j2]
            C[tile] = C_local                 # write-back, vectorized

`cache_write(C, 0, "local")` makes the accumulator; `reverse_compute_at` moves its write-back
under the tile loop, so the lowering compacts the buffer to 8 x 32 floats that gcc keeps in
registers (16 zmm); `decompose_reduction` moves the zero-init out of the k loop. B's 32-column
panel (128 KiB) stays in L2 while the row tiles of A stream past it; packed, it is contiguous
(`cache_read` + `transform_layout`: 0.67x -> 0.86x numpy on an AVX-512 Zen 5).
"""

from __future__ import annotations

import json

from schedlab import workloads
from schedlab.schedule import Schedule, Trace


def schedule_gemm_cpu(sch: Schedule, tile_i: int = 8, tile_j: int = 32, vector: int = 16) -> None:
    """Schedule gemm's block "C" as above: a `tile_i x tile_j` register tile whose columns are
    `tile_j // vector` vectors of `vector` lanes."""
    if tile_j % vector:
        raise ValueError(f"tile_j ({tile_j}) must be a multiple of vector ({vector})")
    block = sch.get_block("C")
    # B, copied panel by panel into B_global[j0, k, j] before the product (as a BLAS packs it):
    # the tile loop then streams through one contiguous panel instead of rows 4 KiB apart
    packed = sch.cache_read(block, 1, "global")
    columns = sch.get(block).reads[1].buffer.shape[1].value
    pad = None if columns % tile_j == 0 else 0.0  # a last, partial panel is padded with zeros
    sch.transform_layout(
        packed, ("write", 0), lambda k, j: (j // tile_j, k, j % tile_j), pad_value=pad
    )
    sch.parallel(sch.get_loops(packed)[0])
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, tile_i])
    j0, j1, j2 = sch.split(j, [None, tile_j // vector, vector])
    sch.reorder(j0, i0, k, i1, j1, j2)
    write_back = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(write_back, i0)
    init = sch.decompose_reduction(block, k)
    sch.parallel(j0)
    _register_tile(sch, [i1, j1, j2])
    _register_tile(sch, sch.get_loops(init)[-3:])
    *_, rows, cols = sch.get_loops(write_back)
    cols_outer, cols_inner = sch.split(cols, [None, vector])
    _register_tile(sch, [rows, cols_outer, cols_inner])


def _register_tile(sch: Schedule, loops) -> None:
    """Rows and vector groups unrolled, the innermost loop vectorized."""
    *unrolled, lanes = loops
    for loop in unrolled:
        sch.unroll(loop)
    sch.vectorize(lanes)


def record_gemm_cpu(size: int = 1024, **tiles) -> Trace:
    """The trace of `schedule_gemm_cpu` on fp32 gemm size^3, for target "cpu"."""
    func, _ = workloads.get("gemm", M=size, N=size, K=size)
    sch = Schedule(func, target="cpu")
    schedule_gemm_cpu(sch, **tiles)
    return sch.trace


def trace_text(trace: Trace) -> str:
    """The trace's JSON, one instruction per line (readable diffs of shipped traces)."""
    data = trace.as_json()
    head = {k: v for k, v in data.items() if k not in ("insts", "decisions")}
    lines = [json.dumps(head)[:-1] + ","]
    insts = [json.dumps(inst) for inst in data["insts"]]
    lines.append(' "insts": [\n  ' + ",\n  ".join(insts) + "\n ],")
    lines.append(f' "decisions": {json.dumps(data["decisions"])}}}')
    return "\n".join(lines) + "\n"

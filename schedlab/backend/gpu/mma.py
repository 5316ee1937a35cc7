"""Tensor cores in CUDA C (a mixin of `GpuRenderer`): the warp-level calls of
`schedlab.ir.mma` as ldmatrix and `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` inline
PTX (sm_80+).

A fragment buffer (scope "mma.matrix_a", "mma.matrix_b", "mma.accumulator") holds one warp's
16 x 16 tiles; each lane keeps its eighth of every tile in registers: a per-thread array of
`uint32_t` (two fp16 per register, 4 per A/B tile) or `float` (8 per accumulator tile, fp32
whatever the buffer's dtype). Tile `t` of the buffer (tiles numbered row-major over its
16 x 16 grid) starts at element `t * 4` / `t * 8` of that array.

A tile operand arrives as the addresses of its first and last element (see schedlab.ir.mma);
the row stride is (last - first - 15) / 15. In a fragment buffer the tile must start at a
multiple of 16 in both dimensions, at an offset the renderer can fold to a constant (the
rules unroll the loops over fragments: registers cannot be indexed at run time).

The fragment layouts are PTX's for m16n8k16 (A row, B col, f32 accumulators):
  A regs {a0..a3}: (row g, k 2t..2t+1), (row g + 8, ...), (row g, k 2t + 8..), (row g + 8, ...)
  B regs {b0, b1} per n8 half: (k 2t..2t+1, col g), (k 2t + 8.., col g)
  C {c0..c3} per n8 half: (row g, col 2t..2t+1), (row g + 8, col 2t..2t+1)
with g = lane / 4 and t = lane % 4; ldmatrix.x4 (.trans for B stored [k, n]) loads them.
"""

from __future__ import annotations

from schedlab.arith import Analyzer
from schedlab.errors import LoweringError
from schedlab.ir import expr as E
from schedlab.ir import mma
from schedlab.ir import stmt as S

from ..c_expr import ATOM, MUL

# helpers for one translation unit; `static inline` becomes `static __device__ inline` (GpuRenderer)
MMA_HELPERS = r"""
// tensor cores (sm_80+): a warp's 16 x 16 fragments, an eighth of each in every lane's registers
static inline unsigned sl_mma_lane() {
  unsigned lane; asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane)); return lane;
}
static inline void sl_mma_ldmatrix(uint32_t* r, const __half* p, int trans) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  if (trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
// A: a [m, k] tile of shared memory, rows `ld` apart; lane l gives row l % 16 at k (l / 16) * 8
static inline void sl_mma_load_a(uint32_t* frag, const __half* s, int ld) {
  unsigned lane = sl_mma_lane();
  sl_mma_ldmatrix(frag, s + (lane % 16) * ld + (lane / 16) * 8, 0);
}
// B: a tile stored [k, n] (kn: ldmatrix .trans) or [n, k]; registers {n 0-7: k 0-7, k 8-15;
// n 8-15: k 0-7, k 8-15}
static inline void sl_mma_load_b(uint32_t* frag, const __half* s, int ld, int kn) {
  unsigned lane = sl_mma_lane(), q = lane / 8, r = lane % 8;
  if (kn)
    sl_mma_ldmatrix(frag, s + ((q % 2) * 8 + r) * ld + (q / 2) * 8, 1);
  else
    sl_mma_ldmatrix(frag, s + ((q / 2) * 8 + r) * ld + (q % 2) * 8, 0);
}
// C += A B on a 16 x 16 x 16 tile: two m16n8k16 (columns 0-7, 8-15), fp32 accumulation
static inline void sl_mma_sync(float* c, const uint32_t* a, const uint32_t* b) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[4 * h]), "+f"(c[4 * h + 1]), "+f"(c[4 * h + 2]), "+f"(c[4 * h + 3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[2 * h]), "r"(b[2 * h + 1]));
}
static inline void sl_mma_fill(float* c, float value) {
#pragma unroll
  for (int i = 0; i < 8; ++i) c[i] = value;
}
static inline void sl_mma_store_f32(float* d, int ld, const float* c) {
  unsigned lane = sl_mma_lane(), g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int col = h * 8 + t * 2;
    d[g * ld + col] = c[4 * h];
    d[g * ld + col + 1] = c[4 * h + 1];
    d[(g + 8) * ld + col] = c[4 * h + 2];
    d[(g + 8) * ld + col + 1] = c[4 * h + 3];
  }
}
static inline void sl_mma_store_f16(__half* d, int ld, const float* c) {
  unsigned lane = sl_mma_lane(), g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int col = h * 8 + t * 2;
    d[g * ld + col] = __float2half_rn(c[4 * h]);
    d[g * ld + col + 1] = __float2half_rn(c[4 * h + 1]);
    d[(g + 8) * ld + col] = __float2half_rn(c[4 * h + 2]);
    d[(g + 8) * ld + col + 1] = __float2half_rn(c[4 * h + 3]);
  }
}
"""

# per lane: (C type, fragment elements per array entry, array entries per 16 x 16 tile)
_PER_LANE = {
    mma.MATRIX_A: ("uint32_t", 64, 4),
    mma.MATRIX_B: ("uint32_t", 64, 4),
    mma.ACCUMULATOR: ("float", 32, 8),
}


class MmaMixin:
    """Fragment allocations and the mma calls for the CUDA dialect (`supports_mma`); other
    dialects get an error that names the call."""

    supports_mma = False

    def _allocate(self, node: S.Allocate) -> None:
        buffer = node.buffer
        if not mma.is_fragment(buffer):
            super()._allocate(node)
            return
        self._check_mma(f"the fragment buffer {buffer.name} ({buffer.scope})")
        ctype, per_entry, _ = _PER_LANE[buffer.scope]
        count = self._constant_count(buffer, f"fragment buffer {buffer.name}",
                                     "; fragments need constant sizes")  # fmt: skip
        if count % (mma.TILE * mma.TILE):
            raise LoweringError(f"fragment buffer {buffer.name} holds {count} elements, not whole "
                                "16 x 16 tiles")  # fmt: skip
        name = self.names.declare(buffer.data, buffer.name)
        self._ptr_types[id(buffer.data)] = ctype
        self.emit(f"{ctype} {name}[{count // per_entry}];  // {buffer.scope}: this lane's part")
        self.stmt(node.body)

    def _e_Call(self, node):
        if node.op in mma.OPS:
            return self._mma_call(node), ATOM
        if node.op == mma.ADDRESS_OF:
            raise LoweringError("address_of outside a tensor-core call is not supported")
        return super()._e_Call(node)

    def _check_mma(self, what: str) -> None:
        if not self.supports_mma:
            raise LoweringError(
                f"{what}: tensor-core fragments (mma.sync) exist only in CUDA for sm_80+, not "
                f"in {self.dialect}; schedule this function without MatmulTensorization"
            )

    def _mma_call(self, node: E.Call) -> str:
        self._check_mma(f"the call {node.op}")
        if MMA_HELPERS not in self.prelude.preamble:
            self.note_half()
            self.prelude.preamble += MMA_HELPERS
        count = mma.TILE_OPERANDS[node.op]
        tiles = [self._tile(node.args[2 * i], node.args[2 * i + 1], node.op) for i in range(count)]
        rest = [self.expr(arg) for arg in node.args[2 * count :]]
        if node.op == mma.FILL:
            return f"sl_mma_fill({tiles[0][0]}, {rest[0]})"
        if node.op == mma.LOAD_A:
            (frag, _, _), (src, ld, _) = tiles
            return f"sl_mma_load_a({frag}, {src}, {ld})"
        if node.op == mma.LOAD_B:
            (frag, _, _), (src, ld, _) = tiles
            return f"sl_mma_load_b({frag}, {src}, {ld}, {rest[0]})"
        if node.op == mma.SYNC:  # the B fragment's registers are the same for both layouts
            return f"sl_mma_sync({tiles[0][0]}, {tiles[1][0]}, {tiles[2][0]})"
        (dst, ld, dtype), (acc, _, _) = tiles  # STORE
        if dtype not in ("float16", "float32"):
            raise LoweringError(f"mma_store into {dtype}: only float16 and float32 are supported")
        return f"sl_mma_store_{'f16' if dtype == 'float16' else 'f32'}({dst}, {ld}, {acc})"

    def _tile(self, first: E.PrimExpr, last: E.PrimExpr, op: str) -> tuple[str, str, str]:
        """(pointer text, row stride text, dtype) of one tile operand."""
        loads = []
        for arg in (first, last):
            if not (isinstance(arg, E.Call) and arg.op == mma.ADDRESS_OF
                    and isinstance(arg.args[0], E.BufferLoad)):  # fmt: skip
                raise LoweringError(f"{op}: a tile operand must be address_of(a buffer element)")
            loads.append(arg.args[0])
        if loads[0].buffer.data is not loads[1].buffer.data:
            raise LoweringError(f"{op}: a tile's first and last element are in different buffers")
        buffer = loads[0].buffer
        ana = Analyzer()
        start = ana.simplify(self.buffer_index(loads[0]))
        end = ana.simplify(self.buffer_index(loads[1]))
        stride = ana.simplify((end - start - (mma.TILE - 1)) // (mma.TILE - 1))
        if not mma.is_fragment(buffer):
            ref = self.buffer_ref(buffer)
            return f"({ref} + {self._sub(start, MUL)})", self.expr(stride), str(buffer.dtype)
        if not (isinstance(start, E.IntImm) and isinstance(stride, E.IntImm)):
            raise LoweringError(
                f"{op}: the tile of fragment {buffer.name} starts at the run-time offset {start}; "
                "unroll the loops over fragments (registers cannot be indexed at run time)"
            )
        row, col, width = start.value // stride.value, start.value % stride.value, stride.value
        if row % mma.TILE or col % mma.TILE or width % mma.TILE:
            raise LoweringError(
                f"{op}: the tile of fragment {buffer.name} at row {row}, column {col} (row "
                f"length {width}) is not on the 16 x 16 grid"
            )
        index = (row // mma.TILE) * (width // mma.TILE) + col // mma.TILE
        per_tile = _PER_LANE[buffer.scope][2]
        ref = self.names.lookup(buffer.data)
        return f"({ref} + {index * per_tile})", str(width), str(buffer.dtype)


__all__ = ["MmaMixin", "MMA_HELPERS"]

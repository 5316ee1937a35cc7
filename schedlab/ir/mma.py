"""Warp-level tensor-core operations on 16 x 16 tiles (the calls behind the CUDA mma.sync
tensor intrinsics of `schedlab.schedule.intrinsics.cuda`), and their reference semantics.

A warp of 32 threads holds each tile as a *fragment* spread over its lanes' registers. In the
loop IR a fragment is a plain 2-D region of a buffer in one of the `FRAGMENT_SCOPES` (one
buffer per warp, whole tiles at multiples of 16), and each operation is one `Evaluate` of a
call on whole tiles:

    mma_fill(C..., value)                 C = value
    mma_load_a(F..., S...)                F = S           (S: a 16 x 16 [m, k] tile in shared)
    mma_load_b(F..., S..., kn)            F = S           (S: [k, n] when kn is 1, else [n, k])
    mma_sync(C..., A..., B..., kn)        C += A @ B      (B^T when kn is 0; fp32 accumulation)
    mma_store(D..., C...)                 D = C           (rounded to D's dtype)

Each tile operand `X...` is two arguments: `address_of(X[r, c])` and `address_of(X[r + 15,
c + 15])`, the addresses of its first and last element. Every pass that re-indexes, shrinks
(CompactBufferAllocation) or flattens buffers therefore sees the whole tile, and after
flattening the row stride follows from the two offsets: (last - first - 15) / 15.

`emulate` runs an operation on numpy arrays the way the warp does (the interpreter calls it);
the CUDA renderer (schedlab/backend/gpu/mma.py) turns the same calls into ldmatrix and
`mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` instructions. An accumulator fragment
holds fp32 whatever its buffer's dtype (mma.sync's .f32 accumulation): `storage_dtype`.
"""

from __future__ import annotations

import numpy as np

from . import expr as E
from .buffer import Buffer
from .dtype import handle, int32
from .intrin import register_intrinsic

TILE = 16  # every fragment is a 16 x 16 tile
WARP_LANES = 32  # a fragment buffer is one per warp, its elements spread over 32 lanes
MATRIX_A, MATRIX_B, ACCUMULATOR = "mma.matrix_a", "mma.matrix_b", "mma.accumulator"
FRAGMENT_SCOPES = (MATRIX_A, MATRIX_B, ACCUMULATOR)

ADDRESS_OF = "address_of"
FILL, LOAD_A, LOAD_B, SYNC, STORE = "mma_fill", "mma_load_a", "mma_load_b", "mma_sync", "mma_store"
OPS = (FILL, LOAD_A, LOAD_B, SYNC, STORE)
TILE_OPERANDS = {FILL: 1, LOAD_A: 2, LOAD_B: 2, SYNC: 3, STORE: 2}  # leading tile operands

register_intrinsic(ADDRESS_OF, 1, result="same")
for _name in OPS:
    register_intrinsic(_name, None, result="same", pure=False)


def address_of(load: E.BufferLoad) -> E.Call:
    """`&X[indices]` (TVM's T.address_of)."""
    return E.Call(handle, ADDRESS_OF, (load,))


def tile(buffer: Buffer) -> tuple[E.Call, E.Call]:
    """The two arguments of a tile operand: the addresses of `buffer[0, 0]` and
    `buffer[15, 15]` (a 16 x 16 buffer: a matched view inside a tensor intrinsic)."""
    zero, last = E.IntImm(int32, 0), E.IntImm(int32, TILE - 1)
    return address_of(E.BufferLoad(buffer, (zero, zero))), address_of(
        E.BufferLoad(buffer, (last, last))
    )


def call(name: str, *args) -> E.Call:
    """One warp-level operation (`name` in OPS) as a call to Evaluate."""
    if name not in OPS:
        raise ValueError(f"unknown mma operation {name!r}; known: {', '.join(OPS)}")
    converted = tuple(E.IntImm(int32, a) if isinstance(a, int) else a for a in args)
    return E.Call(int32, name, converted)


def is_fragment(buffer: Buffer) -> bool:
    return buffer.scope in FRAGMENT_SCOPES


def storage_dtype(buffer: Buffer):
    """The dtype a buffer's elements are stored in: fp32 for an accumulator fragment (the
    hardware accumulates in fp32 whatever the output's dtype), else the buffer's own."""
    if buffer.scope == ACCUMULATOR and buffer.dtype.is_float:
        from .dtype import float32

        return float32
    return buffer.dtype


# -- reference semantics ------------------------------------------------------------------------
def _tile(operand, name: str) -> np.ndarray:
    """The 16 x 16 view of one tile operand: ((array, first index), (array, last index))."""
    (array, first), (same, last) = operand
    if same is not array or len(first) != len(last) or len(first) < 2:
        raise ValueError(f"{name}: a tile operand is the first and last element of one buffer")
    lead = [int(i) for i in first[:-2]]
    if lead != [int(i) for i in last[:-2]]:
        raise ValueError(f"{name}: a tile spans several leading indices {first} .. {last}")
    (r, c), (r1, c1) = (int(i) for i in first[-2:]), (int(i) for i in last[-2:])
    if (r1 - r, c1 - c) != (TILE - 1, TILE - 1):
        raise ValueError(f"{name}: a tile runs from {first} to {last}, not over 16 x 16 elements")
    view = array[(*lead, slice(r, r + TILE), slice(c, c + TILE))]
    if view.shape != (TILE, TILE):
        raise ValueError(f"{name}: the tile at {first} leaves the buffer (shape {array.shape})")
    return view


def emulate(name: str, *args) -> None:
    """Run the warp-level operation `name` on numpy arrays: each tile operand is given as two
    (array, index tuple) pairs (its first and last element), other arguments as numbers."""
    count = TILE_OPERANDS[name]
    tiles = [_tile(args[2 * i : 2 * i + 2], name) for i in range(count)]
    rest = args[2 * count :]
    if name == FILL:
        tiles[0][...] = rest[0]
    elif name in (LOAD_A, LOAD_B):
        tiles[0][...] = tiles[1]
    elif name == SYNC:
        c, a, b = tiles
        b = b if int(rest[0]) else b.T
        product = a.astype(np.float32) @ b.astype(np.float32)
        c[...] = (c.astype(np.float32) + product).astype(c.dtype)
    elif name == STORE:
        tiles[0][...] = tiles[1].astype(tiles[0].dtype)


__all__ = [
    "TILE", "WARP_LANES", "MATRIX_A", "MATRIX_B", "ACCUMULATOR", "FRAGMENT_SCOPES", "ADDRESS_OF",
    "FILL", "LOAD_A", "LOAD_B", "SYNC", "STORE", "OPS", "address_of", "tile", "call", "is_fragment",
    "storage_dtype", "emulate",
]  # fmt: skip

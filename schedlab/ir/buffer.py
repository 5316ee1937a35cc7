"""Buffers: typed, shaped views of memory in a storage scope."""

from __future__ import annotations

from .dtype import DataType, handle, int32
from .expr import BufferLoad, PrimExpr, Range, Var
from .node import Node, ir_node, meta
from .op import const, convert

SCOPES = (
    "global", "shared", "shared.dyn", "local", "warp", "global.texture", "global.texture-nhwc",
    "global.texture-weight", "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator",
    "mma.matrix_a", "mma.matrix_b", "mma.accumulator",  # tensor-core fragments (ir/mma.py)
)  # fmt: skip


@ir_node
class Buffer(Node):
    """A multi-dimensional array: `data` (the pointer var), `dtype`, `shape`, optional `strides`
    (empty: compact row-major), `elem_offset`, `scope` ("global", "shared", "local", ...) and
    `axis_separators` (where a flattened buffer keeps separate physical axes).

    Buffers are compared by identity; structural equality maps them like variables.
    """

    data: Var
    dtype: DataType
    shape: tuple[PrimExpr, ...]
    name: str = "buffer"
    strides: tuple[PrimExpr, ...] = ()
    elem_offset: PrimExpr = meta(factory=lambda: const(0))
    scope: str = "global"
    axis_separators: tuple[int, ...] = ()
    data_alignment: int = 64
    offset_factor: int = 1

    def __post_init__(self):
        object.__setattr__(self, "dtype", DataType(self.dtype))
        object.__setattr__(self, "shape", tuple(convert(s) for s in self.shape))
        object.__setattr__(self, "strides", tuple(convert(s) for s in self.strides))
        object.__setattr__(self, "elem_offset", convert(self.elem_offset))
        object.__setattr__(self, "axis_separators", tuple(int(a) for a in self.axis_separators))
        if self.strides and len(self.strides) != len(self.shape):
            raise ValueError(
                f"Buffer {self.name}: {len(self.strides)} strides for {len(self.shape)} dimensions"
            )
        for extent in self.shape:
            if not extent.dtype.is_integer:
                raise TypeError(f"Buffer {self.name}: shape entries must be integers, got {extent}")

    def __repr__(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        scope = "" if self.scope == "global" else f", scope={self.scope!r}"
        return f"Buffer({self.name}, ({dims}), {self.dtype}{scope})"

    __str__ = __repr__

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if any(isinstance(i, slice) for i in indices):
            raise TypeError(f"Buffer {self.name}: use buffer.region(...) for slices")
        return BufferLoad(self, tuple(convert(i) for i in indices))

    def vload(self, indices) -> BufferLoad:
        return self[tuple(indices)]

    def full_region(self) -> BufferRegion:
        return BufferRegion(self, tuple(Range(const(0, s.dtype), s) for s in self.shape))

    def region(self, *ranges) -> BufferRegion:
        """A BufferRegion from (min, extent) pairs, Ranges or single indices."""
        return BufferRegion(self, tuple(_as_range(r) for r in ranges))

    def with_scope(self, scope: str) -> Buffer:
        return self.replace(scope=scope, data=Var(self.data.name, handle))

    def elem_strides(self) -> tuple[PrimExpr, ...]:
        """Strides in elements (computed row-major when `strides` is empty)."""
        if self.strides:
            return self.strides
        strides: list[PrimExpr] = []
        running: PrimExpr = const(1, self.shape[-1].dtype if self.shape else int32)
        for extent in reversed(self.shape):
            strides.append(running)
            running = running * extent
        return tuple(reversed(strides))


def _as_range(value) -> Range:
    if isinstance(value, Range):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return Range(convert(value[0]), convert(value[1]))
    if isinstance(value, slice):
        if value.step not in (None, 1):
            raise ValueError("buffer regions have unit stride")
        start = convert(value.start if value.start is not None else 0)
        return Range(start, convert(value.stop) - start)
    return Range(convert(value), const(1, convert(value).dtype))


def decl_buffer(
    shape,
    dtype="float32",
    name: str = "buffer",
    scope: str = "global",
    strides=(),
    elem_offset=0,
    axis_separators=(),
) -> Buffer:
    """Declare a buffer with a fresh data pointer variable."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    return Buffer(
        data=Var(name, handle),
        dtype=DataType(dtype),
        shape=tuple(convert(s) for s in shape),
        name=name,
        strides=tuple(strides),
        elem_offset=convert(elem_offset),
        scope=scope,
        axis_separators=tuple(axis_separators),
    )


@ir_node
class BufferRegion(Node):
    """A rectangular region of a buffer: one Range per dimension."""

    buffer: Buffer = meta(child=False)
    region: tuple[Range, ...]

    def __post_init__(self):
        object.__setattr__(self, "region", tuple(self.region))
        if len(self.region) != self.buffer.ndim:
            raise ValueError(
                f"BufferRegion: buffer {self.buffer.name} has {self.buffer.ndim} dimensions, "
                f"got {len(self.region)} ranges"
            )

    def __repr__(self) -> str:
        return f"BufferRegion({self.buffer.name}, {list(self.region)})"

    @staticmethod
    def full(buffer: Buffer) -> BufferRegion:
        return buffer.full_region()


@ir_node
class MatchBufferRegion(Node):
    """Binds `buffer` to a region of another buffer inside a block."""

    buffer: Buffer = meta(child=False)
    source: BufferRegion

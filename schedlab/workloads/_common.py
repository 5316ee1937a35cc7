"""Helpers shared by the workload families: the padding stage and numpy reference pieces."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from schedlab import te
from schedlab.ir import op


def pad(data: te.Tensor, before: Sequence[int], after: Sequence[int] | None = None,
        name: str = "pad_temp", value=0) -> te.Tensor:  # fmt: skip
    """A zero-padding stage as TVM's topi.nn.pad: an `if_then_else` guards the load on every
    padded dimension; unpadded dimensions are copied straight."""
    after = before if after is None else after
    shape = tuple(int(s) + b + a for s, b, a in zip(data.shape, before, after))
    fill = op.const(value, data.dtype)

    def element(*indices):
        guards, source = [], []
        for index, extent, lo, hi in zip(indices, data.shape, before, after):
            if lo == 0 and hi == 0:
                source.append(index)
                continue
            source.append(index - lo)
            guards.append(index >= lo)
            guards.append(index < int(extent) + lo)
        if not guards:
            return data[tuple(source)]
        return op.if_then_else(op.all(*guards), data[tuple(source)], fill)

    return te.compute(shape, element, name=name)


def out_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    """Output extent of a convolution along one axis."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def check_conv_sizes(name: str, **sizes: int) -> None:
    """Readable errors for sizes that make an empty or invalid convolution."""
    for key in ("stride", "dilation", "groups", "kernel"):
        if key in sizes and sizes[key] < 1:
            raise ValueError(f"{name}: {key} must be >= 1, got {sizes[key]}")
    if sizes.get("padding", 0) < 0:
        raise ValueError(f"{name}: padding must be >= 0, got {sizes['padding']}")


def wide(array: np.ndarray) -> np.ndarray:
    """The array in float64 (floats) or int64 (integers) for an exact reference."""
    kind = array.dtype.kind
    return array.astype(np.int64 if kind in "iub" else np.float64)


def pad_spatial(data: np.ndarray, padding: int, first_axis: int) -> np.ndarray:
    """Zero padding on every axis from `first_axis` to the end."""
    widths = [(0, 0)] * first_axis + [(padding, padding)] * (data.ndim - first_axis)
    return np.pad(data, widths)


def tap(data: np.ndarray, axes: Sequence[int], offsets, stride: int, counts) -> np.ndarray:
    """The strided window `data[..., o : o + stride * (n - 1) + 1 : stride, ...]` on `axes`."""
    index: list = [slice(None)] * data.ndim
    for axis, offset, count in zip(axes, offsets, counts):
        index[axis] = slice(offset, offset + stride * (count - 1) + 1, stride)
    return data[tuple(index)]

"""Resize / Upsample (nearest and linear) as separable per-axis gathers: for each resized axis
the source coordinates are computed at import time (static shapes), nearest takes one index,
linear blends the two neighbours with constant weights."""

from __future__ import annotations

import numpy as np

from .registry import converter

_NEAREST = {
    "round_prefer_floor": lambda x: np.where(x - np.floor(x) == 0.5, np.floor(x), np.round(x)),
    "round_prefer_ceil": lambda x: np.where(x - np.floor(x) == 0.5, np.ceil(x), np.round(x)),
    "floor": np.floor,
    "ceil": np.ceil,
}


def source_coords(mode: str, out_len: int, in_len: int, scale: float) -> np.ndarray:
    """ONNX coordinate_transformation_mode: input coordinates of each output index."""
    x = np.arange(out_len, dtype=np.float64)
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_len > 1 else np.zeros_like(x)
    if mode == "align_corners":
        return x * (in_len - 1) / (out_len - 1) if out_len > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x / scale
    if mode == "half_pixel_symmetric":
        adjust = out_len / (scale * in_len)
        return in_len / 2 * (1 - adjust) + (x + 0.5) / scale - 0.5
    raise ValueError(f"coordinate_transformation_mode {mode!r} is not supported")


@converter("Resize", "Upsample")
def _resize(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    shape = ctx.static_shape(x, "the input of Resize")
    scales, sizes = _scales_and_sizes(ctx, node, inputs, attrs, opset, len(shape))
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise ctx.error(f"mode {mode!r} is not supported (nearest, linear)")
    if attrs.get("antialias"):
        raise ctx.error("antialias=1 is not supported")
    default = "half_pixel" if node.op_type == "Resize" and opset >= 11 else "asymmetric"
    coord_mode = attrs.get("coordinate_transformation_mode", default)
    legacy = node.op_type == "Upsample" or opset < 11  # floor when upsampling, else ceil
    nearest = _NEAREST.get(attrs.get("nearest_mode", "round_prefer_floor"))
    if nearest is None:
        raise ctx.error(f"nearest_mode {attrs['nearest_mode']!r} is not supported")
    for axis, (in_len, out_len, scale) in enumerate(zip(shape, sizes, scales)):
        if out_len == in_len and scale == 1.0:
            continue
        coords = source_coords(coord_mode, out_len, in_len, scale)
        if mode == "nearest":
            rounding = (np.ceil if scale < 1 else np.floor) if legacy else nearest
            index = np.clip(rounding(coords), 0, in_len - 1).astype(np.int64)
            x = ctx.emit("relax.take", x, ctx.const(index), axis=axis)
        else:
            x = _linear_axis(ctx, x, axis, np.clip(coords, 0, in_len - 1), in_len)
    return x


def _scales_and_sizes(ctx, node, inputs, attrs, opset, rank: int):
    """Per-axis (scales, output sizes) from the attribute (Upsample-7) or the inputs."""
    shape = ctx.static_shape(inputs[0], "the input of Resize")
    if node.op_type == "Upsample" and opset < 9:
        scales = [float(s) for s in attrs["scales"]]
        return scales, [int(np.floor(n * s)) for n, s in zip(shape, scales)]
    scale_in = 1 if node.op_type == "Upsample" or opset < 11 else 2
    scale_t = inputs[scale_in] if len(inputs) > scale_in else None
    size_t = inputs[3] if scale_in == 2 and len(inputs) > 3 else None
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    if size_t is not None:
        if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            raise ctx.error("keep_aspect_ratio_policy other than 'stretch' is not supported")
        sizes = list(shape)
        for axis, size in zip(axes, ctx.value(size_t, "sizes").reshape(-1)):
            sizes[axis] = int(size)
        return [o / n for o, n in zip(sizes, shape)], sizes
    if scale_t is None:
        raise ctx.error("needs scales or sizes")
    scales = [1.0] * rank
    for axis, scale in zip(axes, ctx.value(scale_t, "scales").reshape(-1)):
        scales[axis] = float(scale)
    return scales, [int(np.floor(n * s)) for n, s in zip(shape, scales)]


def _linear_axis(ctx, x, axis: int, coords: np.ndarray, in_len: int):
    low = np.floor(coords).astype(np.int64)
    high = np.minimum(low + 1, in_len - 1)
    weight_shape = [1] * ctx.ndim(x)
    weight_shape[axis] = len(coords)
    weight = (coords - low).astype(ctx.dtype(x)).reshape(weight_shape)
    a = ctx.emit("relax.take", x, ctx.const(low), axis=axis)
    b = ctx.emit("relax.take", x, ctx.const(high), axis=axis)
    step = ctx.emit("relax.multiply", ctx.emit("relax.subtract", b, a), ctx.const(weight))
    return ctx.emit("relax.add", a, step)

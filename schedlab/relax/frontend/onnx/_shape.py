"""Converters of shape, indexing and constant ONNX ops."""

from __future__ import annotations

import numpy as np

from .registry import converter


def _ints(ctx, expr, what: str) -> list[int]:
    return [int(v) for v in ctx.value(expr, what).reshape(-1)]


def _axes_from(ctx, inputs, attrs, opset: int, since: int, k: int = 1):
    """`axes` as an attribute before opset `since`, as the optional input k from it on."""
    if opset < since:
        axes = attrs.get("axes")
        return None if axes is None else [int(a) for a in axes]
    if len(inputs) <= k or inputs[k] is None:
        return None
    return _ints(ctx, inputs[k], "axes")


@converter("Reshape")
def _reshape(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    shape = attrs["shape"] if opset < 5 else _ints(ctx, inputs[1], "shape")
    shape = list(shape)
    if attrs.get("allowzero") and 0 in shape:
        if -1 in shape:
            raise ctx.error("allowzero with both 0 and -1 in the shape is invalid")
        return ctx.emit("relax.reshape", x, shape=tuple(shape))  # zero-size: dims copied below
    in_shape = ctx.shape(x)
    shape = [in_shape[k] if d == 0 else d for k, d in enumerate(shape)]
    return ctx.emit("relax.reshape", x, shape=tuple(shape))


@converter("Flatten")
def _flatten(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    shape = ctx.shape(x)
    axis = int(attrs.get("axis", 1)) % (len(shape) + 1) if shape else 0
    head = 1
    for dim in shape[:axis]:
        head = head * dim
    return ctx.emit("relax.reshape", x, shape=(head, -1) if shape[axis:] else (head, 1))


@converter("Squeeze")
def _squeeze(ctx, node, inputs, attrs, opset):
    axes = _axes_from(ctx, inputs, attrs, opset, 13)
    return ctx.emit("relax.squeeze", inputs[0], axis=axes)


@converter("Unsqueeze")
def _unsqueeze(ctx, node, inputs, attrs, opset):
    axes = _axes_from(ctx, inputs, attrs, opset, 13)
    if axes is None:
        raise ctx.error("axes are required")
    rank = ctx.ndim(inputs[0]) + len(axes)
    return ctx.emit("relax.expand_dims", inputs[0], axis=sorted(a % rank for a in axes))


@converter("Transpose")
def _transpose(ctx, node, inputs, attrs, opset):
    perm = attrs.get("perm")
    perm = list(reversed(range(ctx.ndim(inputs[0])))) if perm is None else [int(p) for p in perm]
    return ctx.emit("relax.permute_dims", inputs[0], axes=perm)


@converter("Concat")
def _concat(ctx, node, inputs, attrs, opset):
    axis = int(attrs.get("axis", 1 if opset < 4 else 0))
    return ctx.emit("relax.concat", *[x for x in inputs if x is not None], axis=axis)


@converter("Split")
def _split(ctx, node, inputs, attrs, opset):
    x, axis = inputs[0], int(attrs.get("axis", 0))
    if opset < 13:
        sizes = attrs.get("split")
        if sizes is None and len(inputs) > 1 and inputs[1] is not None:
            sizes = _ints(ctx, inputs[1], "split")
    else:
        sizes = _ints(ctx, inputs[1], "split") if len(inputs) > 1 and inputs[1] else None
    count = len(node.output)
    if sizes is None:
        extent = ctx.shape(x)[axis]
        if isinstance(extent, int) and extent % count:  # opset 18 num_outputs: last is smaller
            step = -(-extent // count)
            sizes = [step] * (count - 1) + [extent - step * (count - 1)]
        else:
            out = ctx.emit("relax.split", x, indices_or_sections=count, axis=axis)
            return out if isinstance(out, tuple) else (out,)
    bounds = list(np.cumsum([int(s) for s in sizes])[:-1])
    if not bounds:
        return (x,)
    return ctx.emit("relax.split", x, indices_or_sections=[int(b) for b in bounds], axis=axis)


@converter("Slice")
def _slice(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    if opset < 10:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = _ints(ctx, inputs[1], "starts"), _ints(ctx, inputs[2], "ends")
        axes = _axes_from(ctx, inputs, attrs, opset, 0, k=3)
        steps = _ints(ctx, inputs[4], "steps") if len(inputs) > 4 and inputs[4] else None
    axes = list(range(len(starts))) if axes is None else [int(a) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    return ctx.emit(
        "relax.strided_slice", x, axes=axes, begin=[int(s) for s in starts],
        end=[int(e) for e in ends], strides=[int(s) for s in steps],
    )  # fmt: skip


@converter("Gather")
def _gather(ctx, node, inputs, attrs, opset):
    x, indices = inputs
    axis = int(attrs.get("axis", 0))
    return ctx.emit("relax.take", x, indices, axis=axis)


@converter("GatherElements")
def _gather_elements(ctx, node, inputs, attrs, opset):
    x, indices = inputs
    return ctx.emit("relax.gather_elements", x, indices, axis=int(attrs.get("axis", 0)))


@converter("Pad")
def _pad(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise ctx.error(f"Pad mode {mode!r} is not supported (constant, reflect, edge)")
    if opset < 11:
        pads, value = list(attrs.get("pads", attrs.get("paddings"))), attrs.get("value", 0.0)
    else:
        pads = _ints(ctx, inputs[1], "pads")
        has_value = len(inputs) > 2 and inputs[2] is not None
        value = ctx.value(inputs[2], "constant_value").reshape(-1)[0] if has_value else 0.0
        axes = _axes_from(ctx, inputs, attrs, opset, 0, k=3)
        if axes is not None:
            pads = _full_pads(ctx.ndim(x), axes, pads)
    rank = ctx.ndim(x)
    width = [(int(pads[k]), int(pads[k + rank])) for k in range(rank)]
    if mode != "constant":
        return _pad_by_copies(ctx, x, width, mode)
    return ctx.emit("relax.nn.pad", x, pad_width=width, pad_value=float(value))


def _pad_by_copies(ctx, x, width, mode: str):
    """reflect / edge padding: per axis, concatenate slices of the input around it."""
    for axis, (before, after) in enumerate(width):
        if before < 0 or after < 0:
            raise ctx.error(f"negative pads {width} are not supported with mode {mode!r}")
        if before == after == 0:
            continue
        n = ctx.static_shape(x, f"the input (Pad mode {mode!r})")[axis]
        parts = [_pad_side(ctx, x, axis, n, before, mode, left=True), x,
                 _pad_side(ctx, x, axis, n, after, mode, left=False)]  # fmt: skip
        x = ctx.emit("relax.concat", *[p for p in parts if p is not None], axis=axis)
    return x


def _pad_side(ctx, x, axis: int, n: int, count: int, mode: str, left: bool):
    if count == 0:
        return None
    if mode == "edge":
        edge = _slice1(ctx, x, axis, 0 if left else n - 1, 1 if left else n, 1)
        shape = list(ctx.shape(x))
        shape[axis] = count
        return ctx.emit("relax.broadcast_to", edge, shape=tuple(shape))
    if count >= n:
        raise ctx.error(f"reflect padding {count} needs an axis longer than {n}")
    if left:  # x[count], ..., x[1]
        return _slice1(ctx, x, axis, count, 0, -1)
    end = n - 2 - count
    return _slice1(ctx, x, axis, n - 2, end if end >= 0 else -(n + 1), -1)  # x[n-2] .. down


def _slice1(ctx, x, axis: int, begin: int, end: int, step: int):
    return ctx.emit("relax.strided_slice", x, axes=[axis], begin=[begin], end=[end], strides=[step])


def _full_pads(rank: int, axes, pads) -> list[int]:
    full = [0] * (2 * rank)
    for k, axis in enumerate(axes):
        full[axis % rank] = pads[k]
        full[axis % rank + rank] = pads[k + len(axes)]
    return full


@converter("Tile")
def _tile(ctx, node, inputs, attrs, opset):
    return ctx.emit("relax.tile", inputs[0], repeats=_ints(ctx, inputs[1], "repeats"))


@converter("Expand")
def _expand(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    target = _ints(ctx, inputs[1], "shape")
    shape = list(ctx.shape(x))
    rank = max(len(shape), len(target))
    shape = [1] * (rank - len(shape)) + shape
    target = [1] * (rank - len(target)) + target
    out = [s if t == 1 else t for s, t in zip(shape, target)]  # bidirectional broadcast
    return ctx.emit("relax.broadcast_to", x, shape=tuple(out))


@converter("Where")
def _where(ctx, node, inputs, attrs, opset):
    return ctx.emit("relax.where", *inputs)


# -- constants ------------------------------------------------------------------------------------
@converter("Constant")
def _constant(ctx, node, inputs, attrs, opset):
    for key, dtype in (("value", None), ("value_float", "float32"), ("value_floats", "float32"),
                       ("value_int", "int64"), ("value_ints", "int64")):  # fmt: skip
        if key in attrs:
            return ctx.const(attrs[key], dtype)
    raise ctx.error(f"unsupported Constant attribute(s): {sorted(attrs)}")


@converter("ConstantOfShape")
def _constant_of_shape(ctx, node, inputs, attrs, opset):
    shape = _ints(ctx, inputs[0], "shape")
    value = attrs.get("value", np.zeros(1, np.float32))
    return ctx.const(np.full(shape, value.reshape(-1)[0], value.dtype))


@converter("Shape")
def _shape(ctx, node, inputs, attrs, opset):
    shape = ctx.static_shape(inputs[0], "the input of Shape (static shapes only)")
    start, end = attrs.get("start", 0), attrs.get("end", None)
    return ctx.const(np.array(shape[start:end], np.int64))


@converter("Size")
def _size(ctx, node, inputs, attrs, opset):
    shape = ctx.static_shape(inputs[0], "the input of Size (static shapes only)")
    return ctx.const(np.array(int(np.prod(shape)), np.int64))


@converter("Range")
def _range(ctx, node, inputs, attrs, opset):
    start, limit, delta = (ctx.value(v, "Range input").reshape(()) for v in inputs)
    return ctx.const(np.arange(start, limit, delta, dtype=start.dtype))


@converter("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx, node, inputs, attrs, opset):
    """Reshape -> Transpose -> Reshape, as the ONNX definitions spell them."""
    x, b = inputs[0], int(attrs["blocksize"])
    n, c, h, w = ctx.shape(x)
    if node.op_type == "SpaceToDepth":
        tmp = ctx.emit("relax.reshape", x, shape=(n, c, h // b, b, w // b, b))
        tmp = ctx.emit("relax.permute_dims", tmp, axes=[0, 3, 5, 1, 2, 4])
        return ctx.emit("relax.reshape", tmp, shape=(n, c * b * b, h // b, w // b))
    if attrs.get("mode", "DCR") == "DCR":
        tmp = ctx.emit("relax.reshape", x, shape=(n, b, b, c // (b * b), h, w))
        tmp = ctx.emit("relax.permute_dims", tmp, axes=[0, 3, 4, 1, 5, 2])
    else:
        tmp = ctx.emit("relax.reshape", x, shape=(n, c // (b * b), b, b, h, w))
        tmp = ctx.emit("relax.permute_dims", tmp, axes=[0, 1, 4, 2, 5, 3])
    return ctx.emit("relax.reshape", tmp, shape=(n, c // (b * b), h * b, w * b))

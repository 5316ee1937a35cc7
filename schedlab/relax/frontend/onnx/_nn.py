"""Converters of neural-network ONNX ops: convolution, pooling, normalization, softmax."""

from __future__ import annotations

import numpy as np

from ._math import scalar
from .registry import converter


# -- convolution and pooling --------------------------------------------------------------------
def spatial_pads(ctx, attrs, x, kernel, strides, dilations) -> list[int]:
    """ONNX pads ([begins..., ends...]) with auto_pad resolved from the static input shape."""
    rank = len(kernel)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", "") and "pads" in attrs:
        return [int(p) for p in attrs["pads"]]
    if auto in ("NOTSET", "", "VALID"):
        return [0] * (2 * rank)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"auto_pad {auto!r} is not supported")
    sizes = ctx.static_shape(x, "the input (auto_pad SAME)")[2:]
    before, after = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        before.append(small if auto == "SAME_UPPER" else big)
        after.append(big if auto == "SAME_UPPER" else small)
    return before + after


def _window(ctx, attrs, x, kernel):
    rank = len(kernel)
    strides = [int(s) for s in attrs.get("strides", [1] * rank)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * rank)]
    pads = spatial_pads(ctx, attrs, x, kernel, strides, dilations)
    return strides, dilations, pads


def _check_rank(ctx, rank: int, what: str) -> None:
    if rank not in (1, 2, 3):
        raise ctx.error(f"{what} over {rank} spatial axes is not supported (1, 2 or 3)")


@converter("Conv")
def _conv(ctx, node, inputs, attrs, opset):
    x, w = inputs[0], inputs[1]
    kernel = attrs.get("kernel_shape") or ctx.shape(w)[2:]
    rank = len(kernel)
    _check_rank(ctx, rank, "Conv")
    strides, dilations, pads = _window(ctx, attrs, x, kernel)
    out = ctx.emit(
        f"relax.nn.conv{rank}d", x, w, strides=strides, padding=pads, dilation=dilations,
        groups=int(attrs.get("group", 1)),
    )  # fmt: skip
    return _add_channel_bias(ctx, out, inputs[2] if len(inputs) > 2 else None)


def _add_channel_bias(ctx, out, bias):
    if bias is None:
        return out
    shape = (ctx.shape(bias)[0], *([1] * (ctx.ndim(out) - 2)))
    return ctx.emit("relax.add", out, ctx.emit("relax.reshape", bias, shape=shape))


@converter("ConvTranspose")
def _conv_transpose(ctx, node, inputs, attrs, opset):
    x, w = inputs[0], inputs[1]
    kernel = attrs.get("kernel_shape") or ctx.shape(w)[2:]
    rank = len(kernel)
    _check_rank(ctx, rank, "ConvTranspose")
    strides = [int(s) for s in attrs.get("strides", [1] * rank)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * rank)]
    out_pad = [int(p) for p in attrs.get("output_padding", [0] * rank)]
    if "output_shape" in attrs or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "", "VALID"):
        pads = _transpose_pads(ctx, attrs, x, kernel, strides, dilations, out_pad)
    else:
        pads = [int(p) for p in attrs.get("pads", [0] * (2 * rank))]
    out = ctx.emit(
        f"relax.nn.conv{rank}d_transpose", x, w, strides=strides, padding=pads,
        dilation=dilations, output_padding=out_pad, groups=int(attrs.get("group", 1)),
    )  # fmt: skip
    return _add_channel_bias(ctx, out, inputs[2] if len(inputs) > 2 else None)


def _transpose_pads(ctx, attrs, x, kernel, strides, dilations, out_pad):
    """Pads that give the requested output_shape (or SAME: input * stride)."""
    sizes = ctx.static_shape(x, "the input (output_shape / auto_pad)")[2:]
    wanted = attrs.get("output_shape") or [s * st for s, st in zip(sizes, strides)]
    wanted = list(wanted)[-len(kernel) :]
    before, after = [], []
    for size, k, s, d, op, want in zip(sizes, kernel, strides, dilations, out_pad, wanted):
        total = max(0, s * (size - 1) + op + (k - 1) * d + 1 - want)
        small, big = total // 2, total - total // 2
        upper = attrs.get("auto_pad", "NOTSET") != "SAME_LOWER"
        before.append(small if upper else big)
        after.append(big if upper else small)
    return before + after


@converter("MaxPool", "AveragePool")
def _pool(ctx, node, inputs, attrs, opset):
    if len([o for o in node.output if o]) > 1:
        raise ctx.error("the Indices output of MaxPool is not supported")
    x, kernel = inputs[0], [int(k) for k in attrs["kernel_shape"]]
    rank = len(kernel)
    _check_rank(ctx, rank, node.op_type)
    strides, dilations, pads = _window(ctx, attrs, x, kernel)
    kind = "max" if node.op_type == "MaxPool" else "avg"
    return ctx.emit(
        f"relax.nn.{kind}_pool{rank}d", x, pool_size=kernel, strides=strides, padding=pads,
        dilation=dilations, ceil_mode=bool(attrs.get("ceil_mode", 0)),
        count_include_pad=bool(attrs.get("count_include_pad", 0)),
    )  # fmt: skip


@converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    axes = list(range(2, ctx.ndim(x)))
    op = "relax.mean" if node.op_type == "GlobalAveragePool" else "relax.max"
    return ctx.emit(op, x, axis=axes, keepdims=True)


# -- softmax --------------------------------------------------------------------------------------
@converter("Softmax", "LogSoftmax")
def _softmax(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    op = "relax.nn.softmax" if node.op_type == "Softmax" else "relax.nn.log_softmax"
    if opset >= 13:
        return ctx.emit(op, x, axis=int(attrs.get("axis", -1)))
    # before opset 13: softmax over the input flattened to 2-D at `axis`
    shape = ctx.shape(x)
    axis = int(attrs.get("axis", 1)) % len(shape)
    if axis == len(shape) - 1:
        return ctx.emit(op, x, axis=-1)
    flat = ctx.emit("relax.reshape", x, shape=(*shape[:axis], -1))
    return ctx.emit("relax.reshape", ctx.emit(op, flat, axis=-1), shape=shape)


# -- normalization --------------------------------------------------------------------------------
@converter("BatchNormalization")
def _batch_norm(ctx, node, inputs, attrs, opset):
    if len([o for o in node.output if o]) > 1 or attrs.get("training_mode"):
        raise ctx.error("training mode (running mean/var outputs) is not supported")
    x, gamma, beta, mean, var = inputs
    out = ctx.emit(
        "relax.nn.batch_norm", x, gamma, beta, mean, var,
        epsilon=float(attrs.get("epsilon", 1e-5)), axis=1,
    )  # fmt: skip
    return out[0] if isinstance(out, tuple) else out


@converter("InstanceNormalization")
def _instance_norm(ctx, node, inputs, attrs, opset):
    x, gamma, beta = inputs
    eps = float(attrs.get("epsilon", 1e-5))
    return ctx.emit("relax.nn.instance_norm", x, gamma, beta, epsilon=eps)


@converter("LayerNormalization")
def _layer_norm(ctx, node, inputs, attrs, opset):
    if len([o for o in node.output if o]) > 1:
        raise ctx.error("the Mean / InvStdDev outputs are not supported")
    x, gamma = inputs[0], inputs[1]
    ndim = ctx.ndim(x)
    axis = int(attrs.get("axis", -1)) % ndim
    norm_shape = ctx.shape(x)[axis:]
    beta = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    if beta is None:
        beta = ctx.const(np.zeros(ctx.static_shape(gamma, "scale"), ctx.dtype(x)))
    gamma, beta = (_to_shape(ctx, t, norm_shape) for t in (gamma, beta))
    eps = float(attrs.get("epsilon", 1e-5))
    return ctx.emit(
        "relax.nn.layer_norm", x, gamma, beta, axes=list(range(axis, ndim)), epsilon=eps
    )


def _to_shape(ctx, tensor, shape):
    """Broadcast a scale/bias to the normalized shape when it is given smaller."""
    if tuple(ctx.shape(tensor)) == tuple(shape):
        return tensor
    return ctx.emit("relax.broadcast_to", tensor, shape=tuple(shape))


@converter("GroupNormalization")
def _group_norm(ctx, node, inputs, attrs, opset):
    x, gamma, beta = inputs
    groups = int(attrs["num_groups"])
    channels = ctx.shape(x)[1]
    if ctx.shape(gamma)[0] != channels:  # opset 18: one scale per group
        repeat = channels // groups
        gamma = ctx.const(np.repeat(ctx.value(gamma, "scale"), repeat))
        beta = ctx.const(np.repeat(ctx.value(beta, "bias"), repeat))
    eps = float(attrs.get("epsilon", 1e-5))
    return ctx.emit("relax.nn.group_norm", x, gamma, beta, num_groups=groups, epsilon=eps)


@converter("LRN")
def _lrn(ctx, node, inputs, attrs, opset):
    return ctx.emit(
        "relax.nn.local_response_norm", inputs[0], size=int(attrs["size"]),
        alpha=float(attrs.get("alpha", 1e-4)), beta=float(attrs.get("beta", 0.75)),
        bias=float(attrs.get("bias", 1.0)),
    )  # fmt: skip


@converter("Dropout")
def _dropout(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    if len([o for o in node.output if o]) > 1:
        mask = ctx.const(np.ones(ctx.static_shape(x, "the input (Dropout mask)"), bool))
        return x, mask
    return x


@converter("Identity")
def _identity(ctx, node, inputs, attrs, opset):
    return inputs[0]


@converter("Shrink")
def _shrink(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    lambd, bias = float(attrs.get("lambd", 0.5)), float(attrs.get("bias", 0.0))
    upper = ctx.emit("relax.greater", x, scalar(ctx, lambd, x))
    lower = ctx.emit("relax.less", x, scalar(ctx, -lambd, x))
    zero = scalar(ctx, 0, x)
    low_value = ctx.emit("relax.add", x, scalar(ctx, bias, x))
    high_value = ctx.emit("relax.subtract", x, scalar(ctx, bias, x))
    inner = ctx.emit("relax.where", lower, low_value, zero)
    return ctx.emit("relax.where", upper, high_value, inner)

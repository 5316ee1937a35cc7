"""Converters of element-wise, matrix and reduction ONNX ops."""

from __future__ import annotations

import numpy as np

from .registry import converter

_BINARY = {
    "Add": "relax.add", "Sub": "relax.subtract", "Mul": "relax.multiply",
    "Div": "relax.divide", "Pow": "relax.power", "Equal": "relax.equal",
    "Greater": "relax.greater", "Less": "relax.less", "GreaterOrEqual": "relax.greater_equal",
    "LessOrEqual": "relax.less_equal",
}  # fmt: skip
_UNARY = {
    "Relu": "relax.nn.relu", "Sigmoid": "relax.sigmoid", "Tanh": "relax.tanh",
    "Exp": "relax.exp", "Log": "relax.log", "Sqrt": "relax.sqrt", "Erf": "relax.erf",
    "Neg": "relax.negative", "Abs": "relax.abs", "Sign": "relax.sign",
}  # fmt: skip
_VARIADIC = {"Max": "relax.maximum", "Min": "relax.minimum", "Sum": "relax.add"}
_REDUCE = {
    "ReduceSum": "relax.sum", "ReduceMean": "relax.mean", "ReduceMax": "relax.max",
    "ReduceMin": "relax.min", "ReduceProd": "relax.prod",
}  # fmt: skip


def scalar(ctx, value, like) -> object:
    """A scalar constant of `like`'s dtype."""
    return ctx.const(np.asarray(value, dtype=ctx.dtype(like)))


@converter(*_BINARY)
def _binary(ctx, node, inputs, attrs, opset):
    a, b = inputs
    if opset < 7 and attrs.get("broadcast") and "axis" in attrs:
        b = _legacy_broadcast(ctx, a, b, attrs["axis"])
    if node.op_type == "Div" and np.dtype(ctx.dtype(a)).kind in "iu":
        raise ctx.error("integer Div (truncating) is not supported")
    return ctx.emit(_BINARY[node.op_type], a, b)


def _legacy_broadcast(ctx, a, b, axis: int):
    """Opset < 7 broadcasting: `b` is aligned with `a` starting at `axis`."""
    trailing = ctx.ndim(a) - (axis % ctx.ndim(a)) - ctx.ndim(b)
    shape = (*ctx.shape(b), *([1] * trailing))
    return ctx.emit("relax.reshape", b, shape=shape) if trailing else b


@converter(*_UNARY)
def _unary(ctx, node, inputs, attrs, opset):
    return ctx.emit(_UNARY[node.op_type], inputs[0])


@converter(*_VARIADIC)
def _variadic(ctx, node, inputs, attrs, opset):
    out = inputs[0]
    for other in inputs[1:]:
        out = ctx.emit(_VARIADIC[node.op_type], out, other)
    return out


@converter("Mean")
def _mean(ctx, node, inputs, attrs, opset):
    total = inputs[0]
    for other in inputs[1:]:
        total = ctx.emit("relax.add", total, other)
    return ctx.emit("relax.divide", total, scalar(ctx, len(inputs), total))


@converter("Reciprocal")
def _reciprocal(ctx, node, inputs, attrs, opset):
    return ctx.emit("relax.divide", scalar(ctx, 1, inputs[0]), inputs[0])


@converter("LeakyRelu")
def _leaky_relu(ctx, node, inputs, attrs, opset):
    return ctx.emit("relax.nn.leakyrelu", inputs[0], alpha=float(attrs.get("alpha", 0.01)))


@converter("Elu")
def _elu(ctx, node, inputs, attrs, opset):
    return ctx.emit("relax.nn.elu", inputs[0], alpha=float(attrs.get("alpha", 1.0)))


@converter("Selu")
def _selu(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    alpha = float(attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(attrs.get("gamma", 1.05070102214813232421875))
    # gamma * (relu(x) + alpha * (exp(min(x, 0)) - 1))
    neg = ctx.emit("relax.minimum", x, scalar(ctx, 0, x))
    expm1 = ctx.emit("relax.subtract", ctx.emit("relax.exp", neg), scalar(ctx, 1, x))
    inner = ctx.emit("relax.multiply", expm1, scalar(ctx, alpha, x))
    total = ctx.emit("relax.add", ctx.emit("relax.nn.relu", x), inner)
    return ctx.emit("relax.multiply", total, scalar(ctx, gamma, x))


@converter("PRelu")
def _prelu(ctx, node, inputs, attrs, opset):
    x, slope = inputs
    if opset < 7 or ctx.ndim(slope) < ctx.ndim(x) and ctx.ndim(slope) == 1 and ctx.ndim(x) > 1:
        slope = _channel_slope(ctx, x, slope)
    neg = ctx.emit("relax.minimum", x, scalar(ctx, 0, x))
    return ctx.emit(
        "relax.add", ctx.emit("relax.nn.relu", x), ctx.emit("relax.multiply", neg, slope)
    )


def _channel_slope(ctx, x, slope):
    """A 1-D slope of C values broadcasts along axis 1 (numpy rules would use the last)."""
    count = ctx.shape(slope)[0]
    if count == 1 or ctx.shape(x)[-1] == count and ctx.shape(x)[1] != count:
        return slope
    shape = (count, *([1] * (ctx.ndim(x) - 2)))
    return ctx.emit("relax.reshape", slope, shape=shape)


@converter("Gelu")
def _gelu(ctx, node, inputs, attrs, opset):
    approximate = attrs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ctx.error(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    op = "relax.nn.gelu" if approximate == "none" else "relax.nn.gelu_tanh"
    return ctx.emit(op, inputs[0])


@converter("Softplus")
def _softplus(ctx, node, inputs, attrs, opset):
    return ctx.emit("relax.nn.softplus", inputs[0])


@converter("Softsign")
def _softsign(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    denom = ctx.emit("relax.add", ctx.emit("relax.abs", x), scalar(ctx, 1, x))
    return ctx.emit("relax.divide", x, denom)


@converter("HardSigmoid")
def _hard_sigmoid(ctx, node, inputs, attrs, opset):
    return _hard_sigmoid_of(ctx, inputs[0], attrs.get("alpha", 0.2), attrs.get("beta", 0.5))


def _hard_sigmoid_of(ctx, x, alpha: float, beta: float):
    line = ctx.emit(
        "relax.add", ctx.emit("relax.multiply", x, scalar(ctx, alpha, x)), scalar(ctx, beta, x)
    )
    return ctx.emit("relax.clip", line, min=0.0, max=1.0)


@converter("HardSwish")
def _hard_swish(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    return ctx.emit("relax.multiply", x, _hard_sigmoid_of(ctx, x, 1.0 / 6, 0.5))


@converter("Clip")
def _clip(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    if opset < 11:
        low, high = attrs.get("min"), attrs.get("max")
    else:
        low = _optional_scalar(ctx, inputs, 1, "min")
        high = _optional_scalar(ctx, inputs, 2, "max")
    out = x
    if low is not None:
        out = ctx.emit("relax.maximum", out, scalar(ctx, low, x))
    if high is not None:
        out = ctx.emit("relax.minimum", out, scalar(ctx, high, x))
    return out


def _optional_scalar(ctx, inputs, k: int, what: str):
    if len(inputs) <= k or inputs[k] is None:
        return None
    return ctx.value(inputs[k], what).reshape(()).item()


@converter("Cast")
def _cast(ctx, node, inputs, attrs, opset):
    from onnx import helper

    to = attrs["to"]
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(to)) if isinstance(to, int) else to.lower()
    return ctx.emit("relax.astype", inputs[0], dtype=str(np.dtype(dtype)))


@converter("MatMul")
def _matmul(ctx, node, inputs, attrs, opset):
    return ctx.emit("relax.matmul", inputs[0], inputs[1])


@converter("Gemm")
def _gemm(ctx, node, inputs, attrs, opset):
    a, b = inputs[0], inputs[1]
    if attrs.get("transA"):
        a = ctx.emit("relax.permute_dims", a, axes=[1, 0])
    if attrs.get("transB"):
        b = ctx.emit("relax.permute_dims", b, axes=[1, 0])
    out = ctx.emit("relax.matmul", a, b)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        out = ctx.emit("relax.multiply", out, scalar(ctx, alpha, out))
    c = inputs[2] if len(inputs) > 2 else None
    if c is not None:
        if beta != 1.0:
            c = ctx.emit("relax.multiply", c, scalar(ctx, beta, c))
        out = ctx.emit("relax.add", out, c)
    return out


# -- reductions ---------------------------------------------------------------------------------
def reduce_axes(ctx, node, inputs, attrs, opset, input_from: int):
    """The reduced axes: the attribute before opset `input_from`, else the optional input.
    None means all axes (or no reduction when noop_with_empty_axes is set: returns ())."""
    if opset < input_from:
        axes = attrs.get("axes")
    else:
        axes = inputs[1] if len(inputs) > 1 else None
        axes = None if axes is None else [int(v) for v in ctx.value(axes, "axes").reshape(-1)]
    if not axes:
        return () if attrs.get("noop_with_empty_axes") else None
    return [int(a) for a in axes]


@converter(*_REDUCE)
def _reduce(ctx, node, inputs, attrs, opset):
    input_from = 13 if node.op_type == "ReduceSum" else 18
    axes = reduce_axes(ctx, node, inputs, attrs, opset, input_from)
    if axes == ():
        return inputs[0]
    keep = bool(attrs.get("keepdims", 1))
    return ctx.emit(_REDUCE[node.op_type], inputs[0], axis=axes, keepdims=keep)


@converter("ReduceSumSquare", "ReduceL2", "ReduceL1", "ReduceLogSumExp", "ReduceLogSum")
def _reduce_composite(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    axes = reduce_axes(ctx, node, inputs, attrs, opset, 18)
    keep = bool(attrs.get("keepdims", 1))
    kind = node.op_type
    if kind == "ReduceLogSumExp":
        return _logsumexp(ctx, x, axes, keep)
    if kind in ("ReduceSumSquare", "ReduceL2"):
        x = ctx.emit("relax.multiply", x, x)
    elif kind == "ReduceL1":
        x = ctx.emit("relax.abs", x)
    out = x if axes == () else ctx.emit("relax.sum", x, axis=axes, keepdims=keep)
    if kind == "ReduceL2":
        return ctx.emit("relax.sqrt", out)
    return ctx.emit("relax.log", out) if kind == "ReduceLogSum" else out


def _logsumexp(ctx, x, axes, keep: bool):
    if axes == ():
        return x
    axes = list(range(ctx.ndim(x))) if axes is None else axes
    peak = ctx.emit("relax.max", x, axis=axes, keepdims=True)
    shifted = ctx.emit("relax.exp", ctx.emit("relax.subtract", x, peak))
    total = ctx.emit("relax.log", ctx.emit("relax.sum", shifted, axis=axes, keepdims=True))
    out = ctx.emit("relax.add", total, peak)
    return out if keep else ctx.emit("relax.squeeze", out, axis=axes)


@converter("ArgMax", "ArgMin")
def _arg_extreme(ctx, node, inputs, attrs, opset):
    if attrs.get("select_last_index"):
        raise ctx.error("select_last_index=1 is not supported")
    op = "relax.argmax" if node.op_type == "ArgMax" else "relax.argmin"
    axis, keep = int(attrs.get("axis", 0)), bool(attrs.get("keepdims", 1))
    return ctx.emit(op, inputs[0], axis=axis, keepdims=keep)


@converter("ThresholdedRelu")
def _thresholded_relu(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    above = ctx.emit("relax.greater", x, scalar(ctx, attrs.get("alpha", 1.0), x))
    return ctx.emit("relax.where", above, x, scalar(ctx, 0, x))


@converter("Celu")
def _celu(ctx, node, inputs, attrs, opset):
    x, alpha = inputs[0], float(attrs.get("alpha", 1.0))
    # max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
    scaled = ctx.emit("relax.exp", ctx.emit("relax.divide", x, scalar(ctx, alpha, x)))
    curve = ctx.emit("relax.subtract", scaled, scalar(ctx, 1, x))
    curve = ctx.emit("relax.multiply", curve, scalar(ctx, alpha, x))
    negative = ctx.emit("relax.minimum", curve, scalar(ctx, 0, x))
    return ctx.emit("relax.add", ctx.emit("relax.nn.relu", x), negative)


@converter("Mish")
def _mish(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    return ctx.emit("relax.multiply", x, ctx.emit("relax.tanh", ctx.emit("relax.nn.softplus", x)))


@converter("LpNormalization")
def _lp_normalization(ctx, node, inputs, attrs, opset):
    x, p = inputs[0], int(attrs.get("p", 2))
    axis = int(attrs.get("axis", -1))
    if p not in (1, 2):
        raise ctx.error(f"p must be 1 or 2, got {p}")
    magnitude = ctx.emit("relax.abs", x) if p == 1 else ctx.emit("relax.multiply", x, x)
    norm = ctx.emit("relax.sum", magnitude, axis=[axis], keepdims=True)
    norm = ctx.emit("relax.sqrt", norm) if p == 2 else norm
    return ctx.emit("relax.divide", x, norm)


@converter("MeanVarianceNormalization")
def _mean_variance_normalization(ctx, node, inputs, attrs, opset):
    x = inputs[0]
    axes = [int(a) for a in attrs.get("axes", [0, 2, 3])]
    mean = ctx.emit("relax.mean", x, axis=axes, keepdims=True)
    centered = ctx.emit("relax.subtract", x, mean)
    var = ctx.emit("relax.mean", ctx.emit("relax.multiply", centered, centered), axis=axes,
                   keepdims=True)  # fmt: skip
    std = ctx.emit("relax.sqrt", ctx.emit("relax.add", var, scalar(ctx, 1e-9, x)))
    return ctx.emit("relax.divide", centered, std)


@converter("Not", "And", "Or", "Xor")
def _logical(ctx, node, inputs, attrs, opset):
    """Boolean logic from comparisons and selects (there are no logical graph operators)."""
    false, true = ctx.const(np.array(False)), ctx.const(np.array(True))
    if node.op_type == "Not":
        return ctx.emit("relax.equal", inputs[0], false)
    a, b = inputs
    if node.op_type == "Xor":
        return ctx.emit("relax.not_equal", a, b)
    if node.op_type == "And":
        return ctx.emit("relax.where", a, b, false)
    return ctx.emit("relax.where", a, true, b)


@converter("Mod")
def _mod(ctx, node, inputs, attrs, opset):
    a, b = inputs
    if attrs.get("fmod") or np.dtype(ctx.dtype(a)).kind not in "iu":
        raise ctx.error("only integer Mod with fmod=0 is supported")
    quotient = ctx.emit("relax.floor_divide", a, b)
    return ctx.emit("relax.subtract", a, ctx.emit("relax.multiply", quotient, b))

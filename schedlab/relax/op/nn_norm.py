"""Softmax and normalization operators (TVM's relax.nn.softmax, log_softmax, layer_norm,
rms_norm, group_norm, instance_norm, batch_norm) and local response normalization.

Legalization is numerically careful like topi: softmax subtracts the row maximum before `exp`;
norms compute the mean first and the variance from it (two passes, no E[x^2] - E[x]^2).
batch_norm is inference only and returns just the normalized tensor (TVM returns the tuple
(normalized, moving_mean, moving_var)).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from schedlab import te
from schedlab.ir import op

from ._nn_common import (
    check_float,
    check_rank,
    dims_differ,
    fail,
    normalize_axes,
    normalize_axis,
    static,
)
from .registry import REQUIRED, TensorInfo, register_op


def reduce_stage(shape, axes: Sequence[int], expr: Callable, name: str, reducer=te.sum):
    """A stage over the non-reduced axes of `shape`: reducer(expr(full index)) over `axes`."""
    kept = [d for a, d in enumerate(shape) if a not in axes]

    def body(*indices):
        taps = [te.reduce_axis((0, shape[a]), name=f"k{a}") for a in axes]
        return reducer(expr(merge(indices, taps, axes, len(shape))), axis=taps)

    return te.compute(kept, body, name=name)


def merge(kept: Sequence, reduced: Sequence, axes: Sequence[int], ndim: int) -> tuple:
    """Full indices from the kept axes' indices and the reduced axes' ones."""
    kept, reduced = iter(kept), dict(zip(axes, reduced))
    return tuple(reduced[a] if a in reduced else next(kept) for a in range(ndim))


def drop(indices: Sequence, axes: Sequence[int]) -> tuple:
    """The indices of the kept axes."""
    return tuple(i for a, i in enumerate(indices) if a not in axes)


def infer_softmax(name: str):
    """The infer function of softmax / log_softmax."""

    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        """Same shape and dtype; axis must be in range and the dtype a float."""
        check_rank(name, inputs, 0, range(1, 33), "data")
        check_float(name, inputs)
        normalize_axis(name, inputs, attrs["axis"], inputs[0].ndim)
        return inputs[0]

    return infer


def _softmax_parts(data: te.Tensor, attrs: dict):
    axis = attrs["axis"] % data.ndim
    row_max = reduce_stage(data.shape, (axis,), lambda i: data[i], "T_softmax_maxelem", te.max)
    shifted = te.compute(
        data.shape, lambda *i: te.exp(data[i] - row_max[drop(i, (axis,))]), name="T_softmax_exp"
    )
    total = reduce_stage(data.shape, (axis,), lambda i: shifted[i], "T_softmax_expsum")
    return axis, row_max, shifted, total


def legalize_softmax(inputs: list, attrs: dict) -> te.Tensor:
    """max, exp(x - max), sum, divide: four stages."""
    data = inputs[0]
    axis, _, shifted, total = _softmax_parts(data, attrs)
    return te.compute(
        data.shape, lambda *i: shifted[i] / total[drop(i, (axis,))], name="T_softmax_norm"
    )


def legalize_log_softmax(inputs: list, attrs: dict) -> te.Tensor:
    """x - max - log(sum(exp(x - max)))."""
    data = inputs[0]
    axis, row_max, _, total = _softmax_parts(data, attrs)

    def element(*i):
        row = drop(i, (axis,))
        return data[i] - row_max[row] - te.log(total[row])

    return te.compute(data.shape, element, name="T_log_softmax")


def _check_param(name: str, inputs, index: int, what: str, expected: tuple) -> None:
    """Parameter input `index` must have shape `expected` (dims compared when static)."""
    shape = inputs[index].shape
    if shape is None or len(shape) != len(expected) or any(map(dims_differ, shape, expected)):
        text = ", ".join(str(d) for d in expected)
        raise fail(name, inputs, f"{what} must have shape ({text})")
    if inputs[index].dtype != inputs[0].dtype:
        raise fail(name, inputs, f"{what} must have the data's dtype {inputs[0].dtype}")


def make_affine_infer(name: str, names: tuple[str, ...], param_axes: Callable):
    """Infer for norms whose parameters (gamma, beta, ...) have the data's dims `param_axes`."""

    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        check_rank(name, inputs, 0, range(1, 33), "data")
        check_float(name, inputs)
        axes = param_axes(name, inputs, attrs)
        expected = tuple(inputs[0].shape[a] for a in axes)
        for index, what in enumerate(names, start=1):
            _check_param(name, inputs, index, what, expected)
        return inputs[0]

    return infer


def _layer_axes(name, inputs, attrs):
    return normalize_axes(name, inputs, attrs["axes"], inputs[0].ndim)


def _channel_axis(name, inputs, attrs):
    return (normalize_axis(name, inputs, attrs["channel_axis"], inputs[0].ndim),)


def _mean_var(data: te.Tensor, axes: Sequence[int], prefix: str):
    """Mean and (biased) variance over `axes`, two passes."""
    count = 1
    for a in axes:
        count = count * data.shape[a]
    count = op.cast(op.convert(count), data.dtype)
    total = reduce_stage(data.shape, axes, lambda i: data[i], f"{prefix}_sum")
    mean = te.compute(total.shape, lambda *i: total[i] / count, name=f"{prefix}_mean")

    def square(i):
        centered = data[i] - mean[drop(i, axes)]
        return centered * centered

    squares = reduce_stage(data.shape, axes, square, f"{prefix}_sqsum")
    var = te.compute(total.shape, lambda *i: squares[i] / count, name=f"{prefix}_var")
    return mean, var


def _affine(data, inputs, attrs, axes, param_axes, mean, var, name):
    """(x - mean) * rsqrt(var + eps), times gamma and plus beta where enabled."""
    eps = op.const(attrs["epsilon"], data.dtype)
    gamma, beta = inputs[1], inputs[2]

    def element(*i):
        stats = drop(i, axes)
        value = (data[i] - mean[stats]) * te.rsqrt(var[stats] + eps)
        p = tuple(i[a] for a in param_axes)
        if attrs.get("scale", True):
            value = value * gamma[p]
        if attrs.get("center", True):
            value = value + beta[p]
        return value

    return te.compute(data.shape, element, name=name)


def legalize_layer_norm(inputs: list, attrs: dict) -> te.Tensor:
    """Mean, variance over axes, then the affine normalization."""
    data = inputs[0]
    axes = tuple(sorted(a % data.ndim for a in _as_tuple(attrs["axes"])))
    mean, var = _mean_var(data, axes, "T_layer_norm")
    return _affine(data, inputs, attrs, axes, axes, mean, var, "T_layer_norm")


def _instance_axes(name, inputs, attrs) -> tuple[int, ...]:
    ndim = inputs[0].ndim
    channel = normalize_axis(name, inputs, attrs["channel_axis"], ndim)
    if attrs["axes"] is None:
        return tuple(a for a in range(ndim) if a not in (0, channel))
    axes = normalize_axes(name, inputs, attrs["axes"], ndim)
    if channel in axes:
        raise fail(name, inputs, f"axes {axes} must not contain channel_axis {channel}")
    return axes


def legalize_instance_norm(inputs: list, attrs: dict) -> te.Tensor:
    """Mean, variance per (sample, channel), then the affine normalization."""
    data = inputs[0]
    info = [TensorInfo(data.shape, data.dtype)]
    axes = _instance_axes("relax.nn.instance_norm", info, attrs)
    channel = attrs["channel_axis"] % data.ndim
    mean, var = _mean_var(data, axes, "T_instance_norm")
    return _affine(data, inputs, attrs, axes, (channel,), mean, var, "T_instance_norm")


def _as_tuple(value) -> tuple:
    return (value,) if isinstance(value, int) else tuple(value)


def infer_instance_norm(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """gamma, beta: (C,) for the channel axis; statistics over `axes` (default: all but the
    batch and channel axes)."""
    name = "relax.nn.instance_norm"
    info = make_affine_infer(name, ("gamma", "beta"), _channel_axis)(inputs, attrs)
    _instance_axes(name, inputs, attrs)
    return info


def infer_rms_norm(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """weight has the data's dims at `axes`."""
    return make_affine_infer("relax.nn.rms_norm", ("weight",), _layer_axes)(inputs, attrs)


def legalize_rms_norm(inputs: list, attrs: dict) -> te.Tensor:
    """x * rsqrt(mean(x^2 over axes) + eps) * weight."""
    data, weight = inputs
    axes = tuple(sorted(a % data.ndim for a in _as_tuple(attrs["axes"])))
    count = 1
    for a in axes:
        count = count * data.shape[a]
    count = op.cast(op.convert(count), data.dtype)
    squares = reduce_stage(data.shape, axes, lambda i: data[i] * data[i], "T_rms_sqsum")
    eps = op.const(attrs["epsilon"], data.dtype)

    def element(*i):
        scale = te.rsqrt(squares[drop(i, axes)] / count + eps)
        return data[i] * scale * weight[tuple(i[a] for a in axes)]

    return te.compute(data.shape, element, name="T_rms_norm")


def _group_check(name: str, inputs, attrs: dict) -> tuple[int, int]:
    """channel axis and groups; groups must divide the channels."""
    channel = normalize_axis(name, inputs, attrs["channel_axis"], inputs[0].ndim)
    groups = attrs["num_groups"]
    channels = static(inputs[0].shape[channel])
    if not isinstance(groups, int) or groups < 1 or (channels is not None and channels % groups):
        raise fail(
            name,
            inputs,
            f"num_groups={groups!r} must be >= 1 and divide the "
            f"{inputs[0].shape[channel]} channels",
        )
    return channel, groups


def infer_group_norm(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """gamma, beta: (C,); statistics per (sample, group) over the group's channels and `axes`
    (default: all axes but the batch and channel axes)."""
    name = "relax.nn.group_norm"
    info = make_affine_infer(name, ("gamma", "beta"), _channel_axis)(inputs, attrs)
    _group_check(name, inputs, attrs)
    _instance_axes(name, inputs, attrs)
    return info


def _group_stats(data: te.Tensor, channel: int, groups: int, axes: tuple):
    """Mean and variance of shape (kept axes..., groups): the group's channels and `axes`."""
    per_group = op.floordiv(data.shape[channel], groups)
    kept_axes = [a for a in range(data.ndim) if a != channel and a not in axes]
    shape = [data.shape[a] for a in kept_axes] + [groups]
    count = per_group
    for a in axes:
        count = count * data.shape[a]
    count = op.cast(count, data.dtype)

    def load(indices, rc, taps, shift=None):
        full = dict(zip(kept_axes, indices[:-1]))
        full.update(zip(axes, taps))
        full[channel] = indices[-1] * per_group + rc
        value = data[tuple(full[a] for a in range(data.ndim))]
        return value if shift is None else (value - shift) * (value - shift)

    def stage(name, shift_tensor=None):
        def body(*indices):
            rc = te.reduce_axis((0, per_group), name="rc")
            taps = [te.reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes]
            shift = None if shift_tensor is None else shift_tensor[indices]
            return te.sum(load(indices, rc, taps, shift), axis=[rc, *taps])

        return te.compute(shape, body, name=name)

    total = stage("T_group_norm_sum")
    mean = te.compute(shape, lambda *i: total[i] / count, name="T_group_norm_mean")
    squares = stage("T_group_norm_sqsum", mean)
    var = te.compute(shape, lambda *i: squares[i] / count, name="T_group_norm_var")
    return kept_axes, per_group, mean, var


def legalize_group_norm(inputs: list, attrs: dict) -> te.Tensor:
    """Mean, variance per (sample, group), then the per-channel affine normalization."""
    data, gamma, beta = inputs
    info = [TensorInfo(data.shape, data.dtype)]
    channel, groups = _group_check("relax.nn.group_norm", info, attrs)
    axes = _instance_axes("relax.nn.group_norm", info, attrs)
    kept_axes, per_group, mean, var = _group_stats(data, channel, groups, axes)
    eps = op.const(attrs["epsilon"], data.dtype)

    def element(*i):
        stats = (*(i[a] for a in kept_axes), op.floordiv(i[channel], per_group))
        value = (data[i] - mean[stats]) * te.rsqrt(var[stats] + eps)
        if attrs["scale"]:
            value = value * gamma[i[channel]]
        return value + beta[i[channel]] if attrs["center"] else value

    return te.compute(data.shape, element, name="T_group_norm")


def infer_batch_norm(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """Inference batch norm: gamma, beta, moving_mean, moving_var all (C,) for `axis`."""
    name = "relax.nn.batch_norm"
    if attrs["training"]:
        raise fail(name, inputs, "only inference (training=False) is supported")
    params = ("gamma", "beta", "moving_mean", "moving_var")
    axis = {"channel_axis": attrs["axis"]}
    return make_affine_infer(name, params, _channel_axis)(inputs, axis)


def legalize_batch_norm(inputs: list, attrs: dict) -> te.Tensor:
    """(x - moving_mean) / sqrt(moving_var + eps) * gamma + beta, one broadcast stage."""
    data, gamma, beta, mean, var = inputs
    axis = attrs["axis"] % data.ndim
    eps = op.const(attrs["epsilon"], data.dtype)

    def element(*i):
        c = i[axis]
        value = (data[i] - mean[c]) * te.rsqrt(var[c] + eps)
        if attrs["scale"]:
            value = value * gamma[c]
        return value + beta[c] if attrs["center"] else value

    return te.compute(data.shape, element, name="T_batch_norm")


def infer_lrn(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """Same shape; `size` (odd or even, >= 1) channels in each window."""
    name = "relax.nn.local_response_norm"
    check_rank(name, inputs, 0, range(1, 33), "data")
    check_float(name, inputs)
    normalize_axis(name, inputs, attrs["axis"], inputs[0].ndim)
    if not isinstance(attrs["size"], int) or attrs["size"] < 1:
        raise fail(name, inputs, f"size must be an int >= 1, got {attrs['size']!r}")
    return inputs[0]


def legalize_lrn(inputs: list, attrs: dict) -> te.Tensor:
    """x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)//2, c + size//2])^beta
    (ONNX LRN, TVM relay nn.lrn)."""
    data = inputs[0]
    axis, size = attrs["axis"] % data.ndim, attrs["size"]
    lo = (size - 1) // 2
    channels = data.shape[axis]

    def window(*i):
        r = te.reduce_axis((0, size), name="rc")
        c = i[axis] - lo + r
        source = tuple(c if a == axis else x for a, x in enumerate(i))
        inside = op.all(c >= 0, c < channels)
        value = op.if_then_else(inside, data[source] * data[source], op.const(0, data.dtype))
        return te.sum(value, axis=r)

    squares = te.compute(data.shape, window, name="T_lrn_sqsum")
    dtype = data.dtype
    alpha = op.const(attrs["alpha"] / size, dtype)
    bias, beta = op.const(attrs["bias"], dtype), op.const(attrs["beta"], dtype)
    return te.compute(
        data.shape, lambda *i: data[i] / te.pow(bias + alpha * squares[i], beta), name="T_lrn"
    )


_NORM = {"epsilon": 1e-5, "center": True, "scale": True}
register_op(
    "relax.nn.softmax",
    num_inputs=1,
    pattern="comm_reduce",
    infer=infer_softmax("relax.nn.softmax"),
    legalize=legalize_softmax,
    attrs={"axis": -1},
    doc="exp(x - max) / sum(exp(x - max)) along axis.",
)
register_op(
    "relax.nn.log_softmax",
    num_inputs=1,
    pattern="comm_reduce",
    infer=infer_softmax("relax.nn.log_softmax"),
    legalize=legalize_log_softmax,
    attrs={"axis": -1},
    doc="x - max - log(sum(exp(x - max))) along axis.",
)
register_op(
    "relax.nn.layer_norm",
    num_inputs=3,
    pattern="comm_reduce",
    infer=make_affine_infer("relax.nn.layer_norm", ("gamma", "beta"), _layer_axes),
    legalize=legalize_layer_norm,
    attrs={"axes": REQUIRED, **_NORM},
    doc="Normalize over axes; gamma and beta have the data's dims at axes.",
)
register_op(
    "relax.nn.rms_norm",
    num_inputs=2,
    pattern="comm_reduce",
    infer=infer_rms_norm,
    legalize=legalize_rms_norm,
    attrs={"axes": -1, "epsilon": 1e-5},
    doc="x / sqrt(mean(x^2 over axes) + epsilon) * weight.",
)
register_op(
    "relax.nn.instance_norm",
    num_inputs=3,
    pattern="comm_reduce",
    infer=infer_instance_norm,
    legalize=legalize_instance_norm,
    attrs={"channel_axis": 1, "axes": None, **_NORM},
    doc="Normalize each (sample, channel) over the spatial axes; gamma, beta: (C,).",
)
register_op(
    "relax.nn.group_norm",
    num_inputs=3,
    pattern="comm_reduce",
    infer=infer_group_norm,
    legalize=legalize_group_norm,
    attrs={"num_groups": REQUIRED, "channel_axis": 1, "axes": None, **_NORM},
    doc="Normalize each (sample, channel group) over the group's channels and axes.",
)
register_op(
    "relax.nn.batch_norm",
    num_inputs=5,
    pattern="broadcast",
    infer=infer_batch_norm,
    legalize=legalize_batch_norm,
    attrs={"axis": 1, "momentum": 0.1, "training": False, **_NORM},
    doc="Inference batch norm with moving statistics; returns the normalized tensor only.",
)
register_op(
    "relax.nn.local_response_norm",
    num_inputs=1,
    pattern="out_ewise_fusable",
    infer=infer_lrn,
    legalize=legalize_lrn,
    attrs={"size": REQUIRED, "axis": 1, "alpha": 1e-4, "beta": 0.75, "bias": 1.0},
    doc="Local response normalization across channels (ONNX LRN).",
)

"""Convolution and pooling operators (TVM's relax.nn.conv1d, conv2d, conv2d_transpose,
max_pool2d, avg_pool2d, adaptive_avg_pool2d) in channel-first layouts, and dropout (inference:
the identity).

Convolutions legalize like topi: a `pad_temp` stage (if_then_else guards) and the convolution,
a sum over the input channels of the group and the kernel taps. Pools pad with the reduction's
identity and reduce over the window.
"""

from __future__ import annotations

from schedlab import te
from schedlab.ir import op

from ._nn_common import (
    as_dtype, check_nonempty, check_rank, dims_differ, extent, fail, ints, out_dtype, pad,
    paddings, positive, static,
)  # fmt: skip
from .registry import REQUIRED, TensorInfo, register_op

_LAYOUTS = {1: ("NCW", "OIW"), 2: ("NCHW", "OIHW")}


def conv_params(name: str, attrs: dict, rank: int) -> dict:
    """strides, dilation, (before, after) padding and groups as checked ints."""
    strides = ints(name, "strides", attrs["strides"], rank)
    dilation = ints(name, "dilation", attrs["dilation"], rank)
    positive(name, "strides", strides)
    positive(name, "dilation", dilation)
    before, after = paddings(name, attrs["padding"], rank)
    groups = attrs["groups"]
    if not isinstance(groups, int) or groups < 1:
        raise fail(name, [], f"groups must be an int >= 1, got {groups!r}")
    return dict(strides=strides, dilation=dilation, before=before, after=after, groups=groups)


def _check_layouts(name: str, attrs: dict, rank: int, kernel_default: str | None = None) -> None:
    data_layout, kernel_layout = _LAYOUTS[rank]
    kernel_layout = kernel_default or kernel_layout
    out_layout = attrs.get("out_layout") or data_layout
    given = (attrs["data_layout"], attrs["kernel_layout"], out_layout)
    if given != (data_layout, kernel_layout, data_layout):
        raise fail(
            name, [], f"only data_layout={data_layout}, kernel_layout={kernel_layout} are "
            f"supported, got {given[0]}, {given[1]} (out_layout {given[2]})"
        )  # fmt: skip


def _check_conv_inputs(name: str, inputs, rank: int) -> None:
    check_rank(name, inputs, 0, (rank + 2,), "data")
    check_rank(name, inputs, 1, (rank + 2,), "weight")
    if inputs[0].dtype != inputs[1].dtype:
        raise fail(name, inputs, "data and weight dtypes differ")


def make_conv_infer(rank: int):
    name = f"relax.nn.conv{rank}d"

    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        """(N, C, *spatial) x (O, C // groups, *kernel) -> (N, O, *out)."""
        _check_conv_inputs(name, inputs, rank)
        _check_layouts(name, attrs, rank)
        p = conv_params(name, attrs, rank)
        data, weight, groups = inputs[0].shape, inputs[1].shape, p["groups"]
        if dims_differ(data[1], weight[1] * groups):
            raise fail(name, inputs, f"data channels {data[1]} != weight's {weight[1]} * "
                       f"groups {groups}")  # fmt: skip
        if static(weight[0]) is not None and static(weight[0]) % groups:
            raise fail(name, inputs, f"groups={groups} must divide output channels {weight[0]}")
        out = [
            extent(s, static(k) or k, st, b, a, d)
            for s, k, st, b, a, d in zip(data[2:], weight[2:], p["strides"], p["before"],
                                         p["after"], p["dilation"])
        ]  # fmt: skip
        check_nonempty(name, inputs, out)
        return TensorInfo((data[0], weight[0], *out), out_dtype(inputs, attrs))

    return infer


def make_conv_legalize(rank: int):
    name = f"relax.nn.conv{rank}d"

    def legalize(inputs: list, attrs: dict) -> te.Tensor:
        data, weight = inputs
        p = conv_params(name, attrs, rank)
        dtype = out_dtype([TensorInfo(data.shape, data.dtype)], attrs)
        padded = pad(data, (0, 0, *p["before"]), (0, 0, *p["after"]))
        cig, groups = weight.shape[1], p["groups"]
        cog = op.floordiv(weight.shape[0], groups)
        rc = te.reduce_axis((0, cig), name="rc")
        taps = [te.reduce_axis((0, k), name=f"r{i}") for i, k in enumerate(weight.shape[2:])]
        info = [TensorInfo(data.shape, data.dtype), TensorInfo(weight.shape, weight.dtype)]
        shape = make_conv_infer(rank)(info, attrs).shape

        def body(*indices):
            n, f, *positions = indices
            channel = rc if groups == 1 else op.floordiv(f, cog) * cig + rc
            window = [
                pos * s + t * d
                for pos, t, s, d in zip(positions, taps, p["strides"], p["dilation"])
            ]
            x = as_dtype(padded[(n, channel, *window)], dtype)
            return te.sum(x * as_dtype(weight[(f, rc, *taps)], dtype), axis=[rc, *taps])

        return te.compute(shape, body, name=f"conv{rank}d_nc")

    return legalize


def _transpose_params(name: str, inputs, attrs: dict) -> dict:
    p = conv_params(name, attrs, 2)
    p["output_padding"] = ints(name, "output_padding", attrs["output_padding"], 2)
    for o, s, d in zip(p["output_padding"], p["strides"], p["dilation"]):
        if o < 0 or (o >= s and o >= d):
            raise fail(name, inputs, f"output_padding {p['output_padding']} must be >= 0 and "
                       "smaller than strides or dilation")  # fmt: skip
    return p


def infer_conv2d_transpose(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """(N, C, H, W) x (C, O // groups, kh, kw) -> (N, O, OH, OW),
    OH = (H - 1) * stride - pad_before - pad_after + dilation * (kh - 1) + output_padding + 1."""
    name = "relax.nn.conv2d_transpose"
    _check_conv_inputs(name, inputs, 2)
    _check_layouts(name, attrs, 2, kernel_default="IOHW")
    p = _transpose_params(name, inputs, attrs)
    data, weight, groups = inputs[0].shape, inputs[1].shape, p["groups"]
    if dims_differ(data[1], weight[0]):
        raise fail(name, inputs, f"data channels {data[1]} != weight's first dimension {weight[0]}")
    if static(data[1]) is not None and static(data[1]) % groups:
        raise fail(name, inputs, f"groups={groups} must divide input channels {data[1]}")
    out = [
        (op.convert(s) - 1) * st - b - a + d * (k - 1) + o + 1
        for s, k, st, b, a, d, o in zip(data[2:], weight[2:], p["strides"], p["before"],
                                        p["after"], p["dilation"], p["output_padding"])
    ]  # fmt: skip
    check_nonempty(name, inputs, out)
    return TensorInfo((data[0], weight[1] * groups, *out), out_dtype(inputs, attrs))


def _dilate_pad(data: te.Tensor, weight: te.Tensor, p: dict, shape) -> te.Tensor:
    """The input with stride-1 zeros between elements and the border a direct convolution with
    the flipped kernel needs: element (y, x) reads data[(y - lo) / s] when that is integral."""
    lows = [d * (k - 1) - b for k, b, d in zip(weight.shape[2:], p["before"], p["dilation"])]
    sizes = [o + d * (k - 1) for o, k, d in zip(shape[2:], weight.shape[2:], p["dilation"])]

    def element(*indices):
        n, c, *positions = indices
        guards, source = [], []
        for pos, lo, s, size in zip(positions, lows, p["strides"], data.shape[2:]):
            q = pos - lo
            guards += [q >= 0, op.floormod(q, s) == 0, op.floordiv(q, s) < size]
            source.append(op.floordiv(q, s))
        zero = op.const(0, data.dtype)
        return op.if_then_else(op.all(*guards), data[(n, c, *source)], zero)

    return te.compute((data.shape[0], data.shape[1], *sizes), element, name="data_dilate_pad")


def legalize_conv2d_transpose(inputs: list, attrs: dict) -> te.Tensor:
    data, weight = inputs
    info = [TensorInfo(data.shape, data.dtype), TensorInfo(weight.shape, weight.dtype)]
    shape = infer_conv2d_transpose(info, attrs).shape
    p = _transpose_params("relax.nn.conv2d_transpose", info, attrs)
    dtype = out_dtype(info, attrs)
    padded = _dilate_pad(data, weight, p, shape)
    cog, groups = weight.shape[1], p["groups"]
    cig = op.floordiv(data.shape[1], groups)
    rc = te.reduce_axis((0, cig), name="rc")
    kh, kw = weight.shape[2:]
    ry, rx = te.reduce_axis((0, kh), name="ry"), te.reduce_axis((0, kw), name="rx")
    dy, dx = p["dilation"]

    def body(n, f, y, x):
        channel = rc if groups == 1 else op.floordiv(f, cog) * cig + rc
        value = as_dtype(padded[n, channel, y + ry * dy, x + rx * dx], dtype)
        w = weight[channel, op.floormod(f, cog), kh - 1 - ry, kw - 1 - rx]
        return te.sum(value * as_dtype(w, dtype), axis=[rc, ry, rx])

    return te.compute(shape, body, name="conv2d_transpose_nchw")


def infer_dropout(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """Inference dropout is the identity: same shape and dtype (TVM also returns the mask)."""
    rate = attrs["rate"]
    if not isinstance(rate, (int, float)) or not 0 <= rate < 1:
        raise fail("relax.nn.dropout", inputs, f"rate must be in [0, 1), got {rate!r}")
    return inputs[0]


def legalize_dropout(inputs: list, attrs: dict) -> te.Tensor:
    data = inputs[0]
    return te.compute(data.shape, lambda *i: data[i], name="T_dropout")


_CONV_ATTRS = {"strides": 1, "padding": 0, "dilation": 1, "groups": 1, "out_layout": None,
               "out_dtype": None}  # fmt: skip
for _rank in (1, 2):
    register_op(
        f"relax.nn.conv{_rank}d",
        num_inputs=2,
        pattern="out_ewise_fusable",
        infer=make_conv_infer(_rank),
        legalize=make_conv_legalize(_rank),
        attrs={
            **_CONV_ATTRS,
            "data_layout": _LAYOUTS[_rank][0],
            "kernel_layout": _LAYOUTS[_rank][1],
        },  # fmt: skip
        doc=f"{_rank}-D convolution, {_LAYOUTS[_rank][0]} data and {_LAYOUTS[_rank][1]} weight; "
        "padding: one value, one per axis, or befores then afters.",
    )
register_op(
    "relax.nn.conv2d_transpose",
    num_inputs=2,
    pattern="out_ewise_fusable",
    infer=infer_conv2d_transpose,
    legalize=legalize_conv2d_transpose,
    attrs={**_CONV_ATTRS, "output_padding": 0, "data_layout": "NCHW", "kernel_layout": "IOHW"},
    doc="Transposed 2-D convolution (the gradient of conv2d), NCHW data, IOHW weight.",
)
register_op(
    "relax.nn.dropout",
    num_inputs=1,
    pattern="elemwise",
    infer=infer_dropout,
    legalize=legalize_dropout,
    attrs={"rate": 0.5},
    doc="Dropout at inference: the identity. Returns the tensor only (TVM: (tensor, mask)).",
)


def _pool_params(name: str, inputs, attrs: dict) -> dict:
    p = {
        "pool_size": ints(name, "pool_size", attrs["pool_size"], 2),
        "strides": ints(name, "strides", attrs["strides"], 2),
        "dilation": ints(name, "dilation", attrs["dilation"], 2),
    }
    for key in p:
        positive(name, key, p[key])
    p["before"], p["after"] = paddings(name, attrs["padding"], 2)
    layout = (attrs["layout"], attrs.get("out_layout") or attrs["layout"])
    if layout != ("NCHW", "NCHW"):
        raise fail(name, inputs, f"only layout=NCHW is supported, got {layout[0]} "
                   f"(out_layout {layout[1]})")  # fmt: skip
    return p


def make_pool_infer(name: str):
    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        """(N, C, H, W) -> (N, C, OH, OW); ceil_mode rounds the window count up (as TVM)."""
        check_rank(name, inputs, 0, (4,), "data")
        p = _pool_params(name, inputs, attrs)
        data = inputs[0].shape
        out = [
            extent(s, k, st, b, a, d, ceil=bool(attrs["ceil_mode"]))
            for s, k, st, b, a, d in zip(data[2:], p["pool_size"], p["strides"], p["before"],
                                         p["after"], p["dilation"])
        ]  # fmt: skip
        check_nonempty(name, inputs, out)
        return TensorInfo((*data[:2], *out), inputs[0].dtype)

    return infer


def _pool_window(data: te.Tensor, attrs: dict, name: str, fill):
    """The padded input (ceil mode pads `stride - 1` more after), the window reduce axes and
    the padded-input index of tap (ry, rx) for output (y, x)."""
    info = [TensorInfo(data.shape, data.dtype)]
    p = _pool_params(name, info, attrs)
    shape = make_pool_infer(name)(info, attrs).shape
    extra = [s - 1 if attrs["ceil_mode"] else 0 for s in p["strides"]]
    after = [a + e for a, e in zip(p["after"], extra)]
    padded = pad(data, (0, 0, *p["before"]), (0, 0, *after), value=fill)
    taps = [te.reduce_axis((0, k), name=n) for k, n in zip(p["pool_size"], ("ry", "rx"))]

    def position(axis: int, out_index):
        return out_index * p["strides"][axis] + taps[axis] * p["dilation"][axis]

    return p, shape, padded, taps, position


def legalize_max_pool2d(inputs: list, attrs: dict) -> te.Tensor:
    data = inputs[0]
    fill = te.min_value(data.dtype).value
    _, shape, padded, taps, at = _pool_window(data, attrs, "relax.nn.max_pool2d", fill)

    def body(n, c, y, x):
        return te.max(padded[n, c, at(0, y), at(1, x)], axis=taps)

    return te.compute(shape, body, name="pool_max")


def _window_count(p: dict, sizes, shape, taps, at, include_pad: bool) -> te.Tensor:
    """How many taps of each output's window count toward the average: inside the input, or
    inside the input plus its declared padding (count_include_pad)."""

    def inside(axis: int, out_index):
        pos = at(axis, out_index) - p["before"][axis]  # position in unpadded coordinates
        lo = -p["before"][axis] if include_pad else 0
        hi = sizes[axis] + (p["after"][axis] if include_pad else 0)
        return op.all(pos >= lo, pos < hi)

    def body(n, c, y, x):
        valid = op.all(inside(0, y), inside(1, x))
        return te.sum(op.select(valid, op.const(1, "int32"), op.const(0, "int32")), axis=taps)

    return te.compute(shape, body, name="pool_count")


def legalize_avg_pool2d(inputs: list, attrs: dict) -> te.Tensor:
    data = inputs[0]
    name = "relax.nn.avg_pool2d"
    p, shape, padded, taps, at = _pool_window(data, attrs, name, 0.0)
    total = te.compute(
        shape, lambda n, c, y, x: te.sum(padded[n, c, at(0, y), at(1, x)], axis=taps),
        name="pool_sum",
    )  # fmt: skip
    count_taps = [te.reduce_axis((0, k), name=f"c{n}") for k, n in zip(p["pool_size"], "yx")]

    def at_count(axis, out_index):
        return out_index * p["strides"][axis] + count_taps[axis] * p["dilation"][axis]

    count = _window_count(p, data.shape[2:], shape, count_taps, at_count,
                          bool(attrs["count_include_pad"]))  # fmt: skip

    def average(n, c, y, x):
        divisor = op.cast(op.max(count[n, c, y, x], op.const(1, "int32")), data.dtype)
        return total[n, c, y, x] / divisor

    return te.compute(shape, average, name="pool_avg")


def _adaptive_output(name: str, inputs, attrs: dict) -> tuple:
    size = attrs["output_size"]
    if size is None:
        return tuple(inputs[0].shape[2:])
    return ints(name, "output_size", size, 2)


def infer_adaptive_avg_pool2d(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """(N, C, H, W) -> (N, C, *output_size); output_size None keeps (H, W)."""
    name = "relax.nn.adaptive_avg_pool2d"
    check_rank(name, inputs, 0, (4,), "data")
    layout = (attrs["layout"], attrs.get("out_layout") or attrs["layout"])
    if layout != ("NCHW", "NCHW"):
        raise fail(name, inputs, f"only layout=NCHW is supported, got {layout}")
    out = _adaptive_output(name, inputs, attrs)
    if any(static(op.convert(o)) is not None and static(op.convert(o)) < 1 for o in out):
        raise fail(name, inputs, f"output_size must be >= 1, got {out}")
    return TensorInfo((*inputs[0].shape[:2], *out), inputs[0].dtype)


def _adaptive_window(name: str, size, out: int) -> int | None:
    """The largest window of adaptive pooling along one axis (start floor(i*size/out), end
    ceil((i+1)*size/out)); the whole axis when out == 1; None when it cannot be known."""
    if out == 1:
        return size
    size = static(op.convert(size))
    if size is None:
        return None
    return max(-(-(i + 1) * size // out) - i * size // out for i in range(out))


def legalize_adaptive_avg_pool2d(inputs: list, attrs: dict) -> te.Tensor:
    data = inputs[0]
    name = "relax.nn.adaptive_avg_pool2d"
    info = [TensorInfo(data.shape, data.dtype)]
    shape = infer_adaptive_avg_pool2d(info, attrs).shape
    outs = [static(o) for o in shape[2:]]
    windows = [_adaptive_window(name, s, o) for s, o in zip(data.shape[2:], outs)]
    if None in outs or None in windows:
        raise fail(name, info, "legalization needs static sizes unless output_size is 1")
    taps = [te.reduce_axis((0, w), name=n) for w, n in zip(windows, ("ry", "rx"))]

    def bounds(axis: int, index):
        size = data.shape[2 + axis]
        start = op.floordiv(index * size, outs[axis])
        end = op.floordiv((index + 1) * size + outs[axis] - 1, outs[axis])
        return start, end

    def total(n, c, y, x):
        (y0, y1), (x0, x1) = bounds(0, y), bounds(1, x)
        yy, xx = y0 + taps[0], x0 + taps[1]
        valid = op.all(yy < y1, xx < x1)
        zero = op.const(0, data.dtype)
        return te.sum(op.if_then_else(valid, data[n, c, yy, xx], zero), axis=taps)

    summed = te.compute(shape, total, name="adaptive_pool_sum")

    def average(n, c, y, x):
        (y0, y1), (x0, x1) = bounds(0, y), bounds(1, x)
        return summed[n, c, y, x] / op.cast((y1 - y0) * (x1 - x0), data.dtype)

    return te.compute(shape, average, name="adaptive_pool_avg")


_POOL_ATTRS = {"pool_size": REQUIRED, "strides": 1, "padding": 0, "dilation": 1,
               "ceil_mode": False, "count_include_pad": False, "layout": "NCHW",
               "out_layout": None}  # fmt: skip
register_op(
    "relax.nn.max_pool2d",
    num_inputs=1,
    pattern="out_ewise_fusable",
    infer=make_pool_infer("relax.nn.max_pool2d"),
    legalize=legalize_max_pool2d,
    attrs=_POOL_ATTRS,
    doc="2-D max pooling, NCHW; padded positions never win.",
)
register_op(
    "relax.nn.avg_pool2d",
    num_inputs=1,
    pattern="out_ewise_fusable",
    infer=make_pool_infer("relax.nn.avg_pool2d"),
    legalize=legalize_avg_pool2d,
    attrs=_POOL_ATTRS,
    doc="2-D average pooling, NCHW; count_include_pad counts declared padding in the divisor.",
)
register_op(
    "relax.nn.adaptive_avg_pool2d",
    num_inputs=1,
    pattern="out_ewise_fusable",
    infer=infer_adaptive_avg_pool2d,
    legalize=legalize_adaptive_avg_pool2d,
    attrs={"output_size": None, "layout": "NCHW", "out_layout": None},
    doc="Adaptive average pooling to output_size (global average pooling: output_size=1).",
)

"""Convolution and pooling operators (TVM's relax.nn.conv{1,2,3}d, conv{1,2,3}d_transpose,
max_pool{1,2,3}d, avg_pool{1,2,3}d, adaptive_avg_pool{1,2,3}d) in channel-first layouts, and
dropout (inference: the identity).

Convolutions legalize like topi: a `pad_temp` stage (if_then_else guards) and the convolution,
a sum over the input channels of the group and the kernel taps. Pools pad with the reduction's
identity and reduce over the window.
"""

from __future__ import annotations

from schedlab import te
from schedlab.ir import op
from schedlab.ir.expr import PrimExpr

from ._nn_common import (
    as_dtype,
    check_nonempty,
    check_rank,
    dims_differ,
    extent,
    fail,
    ints,
    out_dtype,
    pad,
    paddings,
    positive,
    static,
)
from .layout import infer_blocked_conv2d, is_blocked, legalize_blocked_conv2d
from .registry import REQUIRED, OpTypeError, TensorInfo, register_op

_LAYOUTS = {1: ("NCW", "OIW"), 2: ("NCHW", "OIHW"), 3: ("NCDHW", "OIDHW")}


def conv_params(name: str, attrs: dict, rank: int) -> dict:
    """strides, dilation, (before, after) padding and groups as checked ints."""
    strides = ints(name, "strides", attrs["strides"], rank)
    dilation = ints(name, "dilation", attrs["dilation"], rank)
    positive(name, "strides", strides)
    positive(name, "dilation", dilation)
    before, after = paddings(name, attrs["padding"], rank)
    groups = attrs["groups"]
    if not isinstance(groups, int) or groups < 1:
        raise OpTypeError(f"{name}: attribute groups must be an int >= 1, got {groups!r}")
    return dict(strides=strides, dilation=dilation, before=before, after=after, groups=groups)


def _check_layouts(name: str, inputs, attrs: dict, rank: int, kernel: str | None = None) -> None:
    data_layout, kernel_layout = _LAYOUTS[rank]
    kernel_layout = kernel or kernel_layout
    out_layout = attrs.get("out_layout") or data_layout
    given = (attrs["data_layout"], attrs["kernel_layout"], out_layout)
    if given != (data_layout, kernel_layout, data_layout):
        raise fail(
            name,
            inputs,
            f"only data_layout={data_layout}, kernel_layout={kernel_layout} are "
            f"supported, got {given[0]}, {given[1]} (out_layout {given[2]})",
        )


def _check_conv_inputs(name: str, inputs, rank: int) -> None:
    check_rank(name, inputs, 0, (rank + 2,), "data")
    check_rank(name, inputs, 1, (rank + 2,), "weight")
    if inputs[0].dtype != inputs[1].dtype:
        raise fail(name, inputs, "data and weight dtypes differ")


def make_conv_infer(rank: int):
    """The infer function of relax.nn.conv{rank}d."""
    name = f"relax.nn.conv{rank}d"

    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        """(N, C, *spatial) x (O, C // groups, *kernel) -> (N, O, *out); channel-blocked
        2-D layouts: `layout.infer_blocked_conv2d`."""
        if rank == 2 and is_blocked(attrs["data_layout"]):
            return infer_blocked_conv2d(name, inputs, attrs, conv_params(name, attrs, rank))
        _check_conv_inputs(name, inputs, rank)
        _check_layouts(name, inputs, attrs, rank)
        p = conv_params(name, attrs, rank)
        data, weight, groups = inputs[0].shape, inputs[1].shape, p["groups"]
        if dims_differ(data[1], weight[1] * groups):
            raise fail(
                name, inputs, f"data channels {data[1]} != weight's {weight[1]} * groups {groups}"
            )
        if static(weight[0]) is not None and static(weight[0]) % groups:
            raise fail(name, inputs, f"groups={groups} must divide output channels {weight[0]}")
        out = [
            extent(s, static(k) or k, st, b, a, d)
            for s, k, st, b, a, d in zip(
                data[2:], weight[2:], p["strides"], p["before"], p["after"], p["dilation"]
            )
        ]
        check_nonempty(name, inputs, out)
        return TensorInfo((data[0], weight[0], *out), out_dtype(inputs, attrs))

    return infer


def make_conv_legalize(rank: int):
    """The legalize function of relax.nn.conv{rank}d: pad_temp, then the convolution."""
    name = f"relax.nn.conv{rank}d"

    def legalize(inputs: list, attrs: dict) -> te.Tensor:
        data, weight = inputs
        p = conv_params(name, attrs, rank)
        info = [TensorInfo(data.shape, data.dtype), TensorInfo(weight.shape, weight.dtype)]
        shape = make_conv_infer(rank)(info, attrs).shape
        if rank == 2 and is_blocked(attrs["data_layout"]):
            return legalize_blocked_conv2d(inputs, attrs, p, shape)
        dtype = out_dtype([TensorInfo(data.shape, data.dtype)], attrs)
        padded = pad(data, (0, 0, *p["before"]), (0, 0, *p["after"]))
        cig, groups = weight.shape[1], p["groups"]
        cog = op.floordiv(weight.shape[0], groups)
        rc = te.reduce_axis((0, cig), name="rc")
        taps = [te.reduce_axis((0, k), name=f"r{i}") for i, k in enumerate(weight.shape[2:])]

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


def _transpose_params(name: str, inputs, attrs: dict, rank: int) -> dict:
    p = conv_params(name, attrs, rank)
    p["output_padding"] = ints(name, "output_padding", attrs["output_padding"], rank)
    for o, s, d in zip(p["output_padding"], p["strides"], p["dilation"]):
        if o < 0 or (o >= s and o >= d):
            raise fail(
                name,
                inputs,
                f"output_padding {p['output_padding']} must be >= 0 and "
                "smaller than strides or dilation",
            )
    return p


def make_transpose_infer(rank: int):
    """The infer function of relax.nn.conv{rank}d_transpose."""
    name = f"relax.nn.conv{rank}d_transpose"

    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        """(N, C, *spatial) x (C, O // groups, *kernel) -> (N, O, *out), each out =
        (size - 1) * stride - pad_before - pad_after + dilation * (k - 1) + output_padding + 1."""
        _check_conv_inputs(name, inputs, rank)
        _check_layouts(name, inputs, attrs, rank, kernel="IO" + _LAYOUTS[rank][1][2:])
        p = _transpose_params(name, inputs, attrs, rank)
        data, weight, groups = inputs[0].shape, inputs[1].shape, p["groups"]
        if dims_differ(data[1], weight[0]):
            raise fail(name, inputs, f"data channels {data[1]} != weight's first dim {weight[0]}")
        if static(data[1]) is not None and static(data[1]) % groups:
            raise fail(name, inputs, f"groups={groups} must divide input channels {data[1]}")
        parts = zip(data[2:], weight[2:], p["strides"], p["before"], p["after"], p["dilation"],
                    p["output_padding"])  # fmt: skip
        out = [
            (op.convert(s) - 1) * st - b - a + d * (k - 1) + o + 1 for s, k, st, b, a, d, o in parts
        ]
        check_nonempty(name, inputs, out)
        return TensorInfo((data[0], weight[1] * groups, *out), out_dtype(inputs, attrs))

    return infer


def _dilate_pad(data: te.Tensor, weight: te.Tensor, p: dict, shape) -> te.Tensor:
    """The input with stride-1 zeros between elements and the border a direct convolution with
    the flipped kernel needs: element y reads data[(y - lo) / s] when that is integral."""
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


def make_transpose_legalize(rank: int):
    """The legalize function of relax.nn.conv{rank}d_transpose."""
    name = f"relax.nn.conv{rank}d_transpose"

    def legalize(inputs: list, attrs: dict) -> te.Tensor:
        """A direct convolution of the dilated, padded input with the flipped kernel."""
        data, weight = inputs
        info = [TensorInfo(data.shape, data.dtype), TensorInfo(weight.shape, weight.dtype)]
        shape = make_transpose_infer(rank)(info, attrs).shape
        p = _transpose_params(name, info, attrs, rank)
        dtype = out_dtype(info, attrs)
        padded = _dilate_pad(data, weight, p, shape)
        cog, groups = weight.shape[1], p["groups"]
        cig = op.floordiv(data.shape[1], groups)
        rc = te.reduce_axis((0, cig), name="rc")
        kernel = weight.shape[2:]
        taps = [te.reduce_axis((0, k), name=f"r{i}") for i, k in enumerate(kernel)]

        def body(*indices):
            n, f, *positions = indices
            channel = rc if groups == 1 else op.floordiv(f, cog) * cig + rc
            window = [pos + t * d for pos, t, d in zip(positions, taps, p["dilation"])]
            flipped = [k - 1 - t for k, t in zip(kernel, taps)]
            value = as_dtype(padded[(n, channel, *window)], dtype)
            w = weight[(channel, op.floormod(f, cog), *flipped)]
            return te.sum(value * as_dtype(w, dtype), axis=[rc, *taps])

        return te.compute(shape, body, name=f"conv{rank}d_transpose_nc")

    return legalize


def infer_dropout(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """Inference dropout is the identity: same shape and dtype (TVM also returns the mask)."""
    rate = attrs["rate"]
    if not isinstance(rate, (int, float)) or not 0 <= rate < 1:
        raise fail("relax.nn.dropout", inputs, f"rate must be in [0, 1), got {rate!r}")
    return inputs[0]


def legalize_dropout(inputs: list, attrs: dict) -> te.Tensor:
    """A copy of the input (inference dropout)."""
    data = inputs[0]
    return te.compute(data.shape, lambda *i: data[i], name="T_dropout")


_CONV_ATTRS = {
    "strides": 1,
    "padding": 0,
    "dilation": 1,
    "groups": 1,
    "out_layout": None,
    "out_dtype": None,
}
for _rank in (1, 2, 3):
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
        },
        doc=f"{_rank}-D convolution, {_LAYOUTS[_rank][0]} data and {_LAYOUTS[_rank][1]} weight; "
        "padding: one value, one per axis, or befores then afters.",
    )
for _rank in (1, 2, 3):
    register_op(
        f"relax.nn.conv{_rank}d_transpose",
        num_inputs=2,
        pattern="out_ewise_fusable",
        infer=make_transpose_infer(_rank),
        legalize=make_transpose_legalize(_rank),
        attrs={
            **_CONV_ATTRS,
            "output_padding": 0,
            "data_layout": _LAYOUTS[_rank][0],
            "kernel_layout": "IO" + _LAYOUTS[_rank][1][2:],
        },
        doc=f"Transposed {_rank}-D convolution (the gradient of conv{_rank}d), "
        f"{_LAYOUTS[_rank][0]} data, IO{_LAYOUTS[_rank][1][2:]} weight.",
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


_POOL_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
_TAP_NAMES = ("rz", "ry", "rx")


def _check_pool_layout(name: str, inputs, attrs: dict, rank: int) -> None:
    layout = (attrs["layout"], attrs.get("out_layout") or attrs["layout"])
    expected = _POOL_LAYOUTS[rank]
    if (
        rank == 2
        and is_blocked(layout[0])
        and layout[0] == layout[1]
        and "output_size" not in attrs
    ):
        return  # NCHW<b>c: the window over H and W, the channel block carried along
    if layout != (expected, expected):
        raise fail(
            name,
            inputs,
            f"only layout={expected}{' or NCHW<b>c' if rank == 2 else ''} is supported, got "
            f"{layout[0]} (out_layout {layout[1]})",
        )


def _pool_params(name: str, inputs, attrs: dict, rank: int) -> dict:
    p = {key: ints(name, key, attrs[key], rank) for key in ("pool_size", "strides", "dilation")}
    for key, values in p.items():
        positive(name, key, values)
    p["before"], p["after"] = paddings(name, attrs["padding"], rank)
    _check_pool_layout(name, inputs, attrs, rank)
    return p


def _pool_extent(size, kernel, stride, before, after, dilation, ceil_mode):
    """Windows along one axis. In ceil mode a last window that would start in the trailing
    padding is dropped (as PyTorch and onnxruntime do), when the size is static."""
    out = extent(size, kernel, stride, before, after, dilation, ceil=ceil_mode)
    n, length = static(out), static(op.convert(size))
    if ceil_mode and n is not None and length is not None and (n - 1) * stride >= length + before:
        return op.convert(n - 1)
    return out


def make_pool_infer(name: str, rank: int):
    """The infer function of the {rank}-D max/avg pool `name`."""

    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        """(N, C, *spatial) -> (N, C, *out); ceil_mode rounds the window count up (as TVM)."""
        blocked = is_blocked(attrs["layout"])
        check_rank(name, inputs, 0, (rank + 2 + blocked,), "data")
        p = _pool_params(name, inputs, attrs, rank)
        data = inputs[0].shape
        out = [
            _pool_extent(s, k, st, b, a, d, bool(attrs["ceil_mode"]))
            for s, k, st, b, a, d in zip(
                data[2 : 2 + rank],
                p["pool_size"],
                p["strides"],
                p["before"],
                p["after"],
                p["dilation"],
            )
        ]
        check_nonempty(name, inputs, out)
        return TensorInfo((*data[:2], *out, *data[2 + rank :]), inputs[0].dtype)

    return infer


def _window_taps(p: dict, prefix: str = "") -> list:
    names = _TAP_NAMES[len(_TAP_NAMES) - len(p["pool_size"]) :]
    return [te.reduce_axis((0, k), name=prefix + n) for k, n in zip(p["pool_size"], names)]


def _window_index(p: dict, taps, positions) -> list:
    """Padded-input positions of the window taps for output `positions`."""
    return [pos * s + t * d for pos, t, s, d in zip(positions, taps, p["strides"], p["dilation"])]


def _pool_input(data: te.Tensor, attrs: dict, name: str, rank: int, fill):
    """Params, output shape and the padded input (ceil mode pads `stride - 1` more after)."""
    info = [TensorInfo(data.shape, data.dtype)]
    p = _pool_params(name, info, attrs, rank)
    shape = make_pool_infer(name, rank)(info, attrs).shape
    extra = [s - 1 if attrs["ceil_mode"] else 0 for s in p["strides"]]
    after = [a + e for a, e in zip(p["after"], extra)]
    block = (0,) * (len(data.shape) - 2 - rank)  # NCHW<b>c: the channel block, not padded
    padded = pad(data, (0, 0, *p["before"], *block), (0, 0, *after, *block), value=fill)
    return p, shape, padded


def make_max_pool(rank: int):
    """The legalize function of relax.nn.max_pool{rank}d: pad with the lowest value, max."""
    name = f"relax.nn.max_pool{rank}d"

    def legalize(inputs: list, attrs: dict) -> te.Tensor:
        data = inputs[0]
        fill = te.min_value(data.dtype).value
        p, shape, padded = _pool_input(data, attrs, name, rank, fill)
        taps = _window_taps(p)

        def body(*indices):
            window = _window_index(p, taps, indices[2 : 2 + rank])
            return te.max(padded[(*indices[:2], *window, *indices[2 + rank :])], axis=taps)

        return te.compute(shape, body, name="pool_max")

    return legalize


def _window_count(p: dict, sizes, shape, include_pad: bool) -> te.Tensor:
    """How many taps of each output's window count toward the average: inside the input, or
    inside the input plus its declared padding (count_include_pad)."""
    taps = _window_taps(p, prefix="c")

    def inside(axis: int, position):
        pos = position - p["before"][axis]  # in unpadded coordinates
        lo = -p["before"][axis] if include_pad else 0
        hi = sizes[axis] + (p["after"][axis] if include_pad else 0)
        return op.all(pos >= lo, pos < hi)

    def body(*indices):
        window = _window_index(p, taps, indices[2 : 2 + len(sizes)])
        valid = op.all(*(inside(axis, pos) for axis, pos in enumerate(window)))
        return te.sum(op.select(valid, op.const(1, "int32"), op.const(0, "int32")), axis=taps)

    return te.compute(shape, body, name="pool_count")


def make_avg_pool(rank: int):
    """The legalize function of relax.nn.avg_pool{rank}d: window sum over tap count."""
    name = f"relax.nn.avg_pool{rank}d"

    def legalize(inputs: list, attrs: dict) -> te.Tensor:
        data = inputs[0]
        p, shape, padded = _pool_input(data, attrs, name, rank, 0.0)
        taps = _window_taps(p)

        def window_sum(*indices):
            window = _window_index(p, taps, indices[2 : 2 + rank])
            return te.sum(padded[(*indices[:2], *window, *indices[2 + rank :])], axis=taps)

        total = te.compute(shape, window_sum, name="pool_sum")
        sizes = data.shape[2 : 2 + rank]
        count = _window_count(p, sizes, shape, bool(attrs["count_include_pad"]))

        def average(*indices):
            divisor = op.cast(op.max(count[indices], op.const(1, "int32")), data.dtype)
            return total[indices] / divisor

        return te.compute(shape, average, name="pool_avg")

    return legalize


def make_adaptive_infer(rank: int):
    """The infer function of relax.nn.adaptive_avg_pool{rank}d."""
    name = f"relax.nn.adaptive_avg_pool{rank}d"

    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        """(N, C, *spatial) -> (N, C, *output_size); output_size None keeps the input's."""
        check_rank(name, inputs, 0, (rank + 2,), "data")
        _check_pool_layout(name, inputs, attrs, rank)
        size = attrs["output_size"]
        out = tuple(inputs[0].shape[2:]) if size is None else ints(name, "output_size", size, rank)
        if any(static(op.convert(o)) is not None and static(op.convert(o)) < 1 for o in out):
            raise fail(name, inputs, f"output_size must be >= 1, got {out}")
        return TensorInfo((*inputs[0].shape[:2], *out), inputs[0].dtype)

    return infer


def _adaptive_window(size, out: int) -> int | PrimExpr | None:
    """The largest window of adaptive pooling along one axis (start floor(i*size/out), end
    ceil((i+1)*size/out)); the whole axis when out == 1; None when it cannot be known."""
    if out == 1:
        return size
    size = static(op.convert(size))
    if size is None:
        return None
    return max(-(-(i + 1) * size // out) - i * size // out for i in range(out))


def make_adaptive_legalize(rank: int):
    """The legalize function of relax.nn.adaptive_avg_pool{rank}d."""
    name = f"relax.nn.adaptive_avg_pool{rank}d"

    def legalize(inputs: list, attrs: dict) -> te.Tensor:
        data = inputs[0]
        info = [TensorInfo(data.shape, data.dtype)]
        shape = make_adaptive_infer(rank)(info, attrs).shape
        outs = [static(o) for o in shape[2:]]
        windows = [_adaptive_window(s, o) for s, o in zip(data.shape[2:], outs)]
        if None in outs or None in windows:
            raise fail(name, info, "legalization needs static sizes unless output_size is 1")
        taps = _window_taps({"pool_size": windows})

        def bounds(axis: int, index):
            size = data.shape[2 + axis]
            start = op.floordiv(index * size, outs[axis])
            return start, op.floordiv((index + 1) * size + outs[axis] - 1, outs[axis])

        def total(*indices):
            ranges = [bounds(a, i) for a, i in enumerate(indices[2:])]
            window = [lo + t for (lo, _), t in zip(ranges, taps)]
            valid = op.all(*(w < hi for w, (_, hi) in zip(window, ranges)))
            value = op.if_then_else(valid, data[(*indices[:2], *window)], op.const(0, data.dtype))
            return te.sum(value, axis=taps)

        summed = te.compute(shape, total, name="adaptive_pool_sum")

        def average(*indices):
            count = 1
            for axis, index in enumerate(indices[2:]):
                lo, hi = bounds(axis, index)
                count = count * (hi - lo)
            return summed[indices] / op.cast(count, data.dtype)

        return te.compute(shape, average, name="adaptive_pool_avg")

    return legalize


_POOL_ATTRS = {"pool_size": REQUIRED, "strides": 1, "padding": 0, "dilation": 1,
               "ceil_mode": False, "count_include_pad": False, "out_layout": None}  # fmt: skip
for _rank, _layout in _POOL_LAYOUTS.items():
    register_op(
        f"relax.nn.max_pool{_rank}d",
        num_inputs=1,
        pattern="out_ewise_fusable",
        infer=make_pool_infer(f"relax.nn.max_pool{_rank}d", _rank),
        legalize=make_max_pool(_rank),
        attrs={**_POOL_ATTRS, "layout": _layout},
        doc=f"{_rank}-D max pooling, {_layout}; padded positions never win.",
    )
    register_op(
        f"relax.nn.avg_pool{_rank}d",
        num_inputs=1,
        pattern="out_ewise_fusable",
        infer=make_pool_infer(f"relax.nn.avg_pool{_rank}d", _rank),
        legalize=make_avg_pool(_rank),
        attrs={**_POOL_ATTRS, "layout": _layout},
        doc=f"{_rank}-D average pooling, {_layout}; count_include_pad counts the declared "
        "padding in the divisor.",
    )
    register_op(
        f"relax.nn.adaptive_avg_pool{_rank}d",
        num_inputs=1,
        pattern="out_ewise_fusable",
        infer=make_adaptive_infer(_rank),
        legalize=make_adaptive_legalize(_rank),
        attrs={"output_size": None, "layout": _layout, "out_layout": None},
        doc=f"{_rank}-D adaptive average pooling to output_size (global: output_size=1).",
    )

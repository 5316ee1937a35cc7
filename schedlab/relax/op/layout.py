"""Channel-blocked layouts (TVM's NCHW[x]c): `relax.layout_transform` between NCHW and
NCHW{b}c, and the blocked forms of conv2d (data NCHW{i}c, weight OIHW{i}i{o}o, output
NCHW{o}c) that `relax.nn.conv2d` and the 2-D pools dispatch to.

In NCHW{b}c a tensor [N, C, H, W] is stored as [N, C / b, H, W, b]: the b channels of one
pixel are contiguous, so a kernel holding channels in its vector lanes loads and stores whole
vectors (an NCHW output would take b scalar stores per vector). `ConvertToBlockedLayout`
rewrites a graph into it."""

from __future__ import annotations

import re

from schedlab import te
from schedlab.ir import op

from ._nn_common import (
    as_dtype,
    check_nonempty,
    check_rank,
    dims_differ,
    extent,
    fail,
    out_dtype,
    pad,
    static,
)
from .registry import REQUIRED, TensorInfo, register_op

_BLOCKED = re.compile(r"^NCHW(\d+)c$")
_BLOCKED_KERNEL = re.compile(r"^OIHW(\d+)i(\d+)o$")


def channel_block(layout: str) -> int | None:
    """b of "NCHW{b}c"; None for "NCHW"; a ValueError for anything else."""
    if layout == "NCHW":
        return None
    found = _BLOCKED.match(str(layout))
    if found is None or int(found.group(1)) < 1:
        raise ValueError(f"layout must be NCHW or NCHW<b>c (b >= 1), got {layout!r}")
    return int(found.group(1))


def is_blocked(layout) -> bool:
    """Whether `layout` is a channel-blocked NCHW{b}c layout."""
    return isinstance(layout, str) and _BLOCKED.match(layout) is not None


def kernel_blocks(layout: str) -> tuple[int, int] | None:
    """(i, o) of "OIHW{i}i{o}o", or None when `layout` is not of that form."""
    found = _BLOCKED_KERNEL.match(str(layout))
    return None if found is None else (int(found.group(1)), int(found.group(2)))


# -- relax.layout_transform ----------------------------------------------------------------------
def _transform_blocks(name: str, inputs, attrs: dict) -> tuple[int | None, int | None]:
    try:
        return channel_block(attrs["src_layout"]), channel_block(attrs["dst_layout"])
    except ValueError as err:
        raise fail(name, inputs, str(err)) from None


def infer_layout_transform(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """[N, C, H, W] <-> [N, C / b, H, W, b] (C a multiple of b); back to NCHW, `channels`
    crops padded channels (the first `channels` of the blocks)."""
    name = "relax.layout_transform"
    src, dst = _transform_blocks(name, inputs, attrs)
    check_rank(name, inputs, 0, (4 if src is None else 5,), f"data in {attrs['src_layout']}")
    shape = inputs[0].shape
    if src is None and dst is None or src is not None and dst is not None:
        if src == dst:
            return inputs[0]
        raise fail(name, inputs, "only NCHW <-> NCHW<b>c transforms are supported, got "
                   f"{attrs['src_layout']} -> {attrs['dst_layout']}")  # fmt: skip
    if src is None:
        channels = static(shape[1])
        if channels is None or channels % dst:
            raise fail(name, inputs, f"channels {shape[1]} must be a multiple of the block {dst}")
        return TensorInfo((shape[0], channels // dst, shape[2], shape[3], dst), inputs[0].dtype)
    if dims_differ(shape[4], op.convert(src)):
        raise fail(name, inputs, f"the last dimension {shape[4]} is not the block {src}")
    channels = attrs.get("channels")
    if channels is None:
        return TensorInfo((shape[0], shape[1] * src, shape[2], shape[3]), inputs[0].dtype)
    blocks = static(shape[1])
    if not isinstance(channels, int) or blocks is None or not 1 <= channels <= blocks * src:
        raise fail(name, inputs, f"channels={channels!r} must be an int from 1 to the "
                   f"{(blocks or 0) * src} channels of the blocks")  # fmt: skip
    return TensorInfo((shape[0], channels, shape[2], shape[3]), inputs[0].dtype)


def legalize_layout_transform(inputs: list, attrs: dict) -> te.Tensor:
    data = inputs[0]
    info = [TensorInfo(data.shape, data.dtype)]
    src, dst = _transform_blocks("relax.layout_transform", info, attrs)
    shape = infer_layout_transform(info, attrs).shape
    if src is None and dst is None or src == dst:
        return te.compute(shape, lambda *i: data[i], name="T_layout_copy")
    if src is None:
        return te.compute(shape, lambda n, c, h, w, b: data[n, c * dst + b, h, w],
                          name="T_to_blocked")  # fmt: skip
    return te.compute(shape, lambda n, c, h, w: data[n, op.floordiv(c, src), h, w,
                                                     op.floormod(c, src)],
                      name="T_from_blocked")  # fmt: skip


register_op(
    "relax.layout_transform",
    num_inputs=1,
    pattern="injective",
    infer=infer_layout_transform,
    legalize=legalize_layout_transform,
    attrs={"src_layout": REQUIRED, "dst_layout": REQUIRED, "channels": None},
    doc="NCHW <-> NCHW<b>c (TVM's layout_transform with a layout pair, not an index map); "
    "channels: the real channel count of a padded NCHW<b>c tensor (its NCHW form crops).",
)


# -- conv2d in NCHW{i}c x OIHW{i}i{o}o -> NCHW{o}c -----------------------------------------------
def blocked_conv_layouts(name: str, inputs, attrs: dict) -> tuple[int, int]:
    """(i, o) of a blocked conv2d's layouts, checked against each other and the inputs."""
    kernel = kernel_blocks(attrs["kernel_layout"])
    data = _BLOCKED.match(str(attrs["data_layout"]))
    out = _BLOCKED.match(str(attrs.get("out_layout") or ""))
    if kernel is None or data is None or out is None:
        raise fail(name, inputs, "a blocked conv2d takes data_layout NCHW<i>c, kernel_layout "
                   f"OIHW<i>i<o>o and out_layout NCHW<o>c, got {attrs['data_layout']}, "
                   f"{attrs['kernel_layout']}, {attrs.get('out_layout')}")  # fmt: skip
    if (int(data.group(1)), int(out.group(1))) != kernel:
        raise fail(name, inputs, f"data_layout {attrs['data_layout']} and out_layout "
                   f"{attrs['out_layout']} disagree with kernel_layout "
                   f"{attrs['kernel_layout']}")  # fmt: skip
    return kernel


def infer_blocked_conv2d(name: str, inputs: list[TensorInfo], attrs: dict, p: dict) -> TensorInfo:
    """[N, C/i, H, W, i] x [O/o, C/i, KH, KW, i, o] -> [N, O/o, OH, OW, o] (groups 1)."""
    check_rank(name, inputs, 0, (5,), "data")
    check_rank(name, inputs, 1, (6,), "weight")
    if inputs[0].dtype != inputs[1].dtype:
        raise fail(name, inputs, "data and weight dtypes differ")
    inner, outer = blocked_conv_layouts(name, inputs, attrs)
    if p["groups"] != 1:
        raise fail(name, inputs, f"a blocked conv2d needs groups=1, got {p['groups']}")
    data, weight = inputs[0].shape, inputs[1].shape
    for dim, expected, what in ((data[4], inner, "data's block"), (weight[4], inner,
                                "weight's input block"), (weight[5], outer,
                                "weight's output block")):  # fmt: skip
        if dims_differ(dim, op.convert(expected)):
            raise fail(name, inputs, f"{what} is {dim}, the layouts say {expected}")
    if dims_differ(data[1], weight[1]):
        raise fail(name, inputs, f"data channel blocks {data[1]} != weight's {weight[1]}")
    out = [
        extent(s, static(k) or k, st, b, a, d)
        for s, k, st, b, a, d in zip(
            data[2:4], weight[2:4], p["strides"], p["before"], p["after"], p["dilation"]
        )
    ]
    check_nonempty(name, inputs, out)
    return TensorInfo((data[0], weight[0], *out, outer), out_dtype(inputs, attrs))


def legalize_blocked_conv2d(inputs: list, attrs: dict, p: dict, shape) -> te.Tensor:
    """pad_temp, then out[n, oc, h, w, ob] = sum over (ic, ry, rx, ib) of
    data[n, ic, h * s + ry * d, w * s + rx * d, ib] * weight[oc, ic, ry, rx, ib, ob]."""
    data, weight = inputs
    dtype = out_dtype([TensorInfo(data.shape, data.dtype)], attrs)
    padded = pad(data, (0, 0, *p["before"], 0), (0, 0, *p["after"], 0))
    rc = te.reduce_axis((0, weight.shape[1]), name="rc")
    ry = te.reduce_axis((0, weight.shape[2]), name="ry")
    rx = te.reduce_axis((0, weight.shape[3]), name="rx")
    rb = te.reduce_axis((0, weight.shape[4]), name="rb")
    (sh, sw), (dh, dw) = p["strides"], p["dilation"]

    def body(n, oc, h, w, ob):
        x = as_dtype(padded[n, rc, h * sh + ry * dh, w * sw + rx * dw, rb], dtype)
        return te.sum(x * as_dtype(weight[oc, rc, ry, rx, rb, ob], dtype), axis=[rc, ry, rx, rb])

    return te.compute(shape, body, name="conv2d_NCHWc")

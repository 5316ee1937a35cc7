"""Convolutions in channel-first layouts (1-D/2-D/3-D, grouped, dilated, depthwise) and NHWC.

Each is two stages like TVM's topi: `pad_temp` (zero padding through `if_then_else`) and the
convolution, a sum over input channels and kernel taps. References pad with numpy and add one
`einsum` per kernel tap, in float64 (int64 for integers).
"""

from __future__ import annotations

import math

import numpy as np

from schedlab import te
from schedlab.ir.function import PrimFunc

from ._common import check_conv_sizes, out_size, pad, pad_spatial, tap, wide
from .registry import register

_REDUCE_NAMES = {1: ("rx",), 2: ("ry", "rx"), 3: ("rz", "ry", "rx")}
# output axes named like TVM's topi (nn, ff, yy, xx), one lambda per dimensionality
_OUTPUT_LAMBDAS = {
    1: lambda body: lambda nn, ff, xx: body(nn, ff, xx),
    2: lambda body: lambda nn, ff, yy, xx: body(nn, ff, yy, xx),
    3: lambda body: lambda nn, ff, zz, yy, xx: body(nn, ff, zz, yy, xx),
}


def conv_nc(
    name: str,
    N: int,
    CI: int,
    spatial: tuple[int, ...],
    CO: int,
    kernel: int,
    stride: int,
    padding: int,
    dilation: int,
    groups: int,
    dtype: str,
) -> PrimFunc:
    """A grouped, strided, dilated convolution over the trailing spatial axes of (N, C, ...):
    data (N, CI, *spatial), weight (CO, CI // groups, kernel, ...) -> (N, CO, *out)."""
    check_conv_sizes(name, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                     groups=groups)  # fmt: skip
    if CI % groups or CO % groups:
        raise ValueError(f"{name}: groups={groups} must divide CI={CI} and CO={CO}")
    rank = len(spatial)
    data = te.placeholder((N, CI, *spatial), dtype, name="data")
    weight = te.placeholder((CO, CI // groups, *[kernel] * rank), dtype, name="weight")
    padded = pad(data, [0, 0] + [padding] * rank)
    out = [out_size(s, kernel, stride, padding, dilation) for s in spatial]
    _check_output(name, out)
    cig, cog = CI // groups, CO // groups
    rc = te.reduce_axis((0, cig), name="rc")
    taps = [te.reduce_axis((0, kernel), name=n) for n in _REDUCE_NAMES[rank]]

    def body(n, f, *positions):
        channel = rc if groups == 1 else f // cog * cig + rc
        window = [p * stride + t * dilation for p, t in zip(positions, taps)]
        return te.sum(padded[(n, channel, *window)] * weight[(f, rc, *taps)], axis=[rc, *taps])

    output = te.compute((N, CO, *out), _OUTPUT_LAMBDAS[rank](body), name=name)
    return te.create_prim_func([data, weight, output])


def _check_output(name: str, out) -> None:
    if any(extent < 1 for extent in out):
        raise ValueError(f"{name}: these sizes give an empty output {tuple(out)}")


def conv_nc_ref(data, weight, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """Reference for `conv_nc`: one einsum per kernel tap and group."""
    rank = data.ndim - 2
    x, w = pad_spatial(wide(data), padding, 2), wide(weight)
    kernel = weight.shape[2:]
    out = [out_size(s, k, stride, padding, dilation) for s, k in zip(data.shape[2:], kernel)]
    N, CI, CO = data.shape[0], data.shape[1], weight.shape[0]
    result = np.zeros((N, CO, *out), dtype=x.dtype)
    cig, cog = CI // groups, CO // groups
    for offsets in np.ndindex(*kernel):
        window = tap(x, range(2, 2 + rank), [o * dilation for o in offsets], stride, out)
        for g in range(groups):
            taps = w[(slice(g * cog, (g + 1) * cog), slice(None), *offsets)]
            part = window[:, g * cig : (g + 1) * cig]
            result[:, g * cog : (g + 1) * cog] += np.einsum("nc...,fc->nf...", part, taps)
    return result.astype(data.dtype)


def _conv_flops(N, CI, CO, spatial, kernel, stride, padding, dilation, groups=1) -> int:
    out = [out_size(s, kernel, stride, padding, dilation) for s in spatial]
    return 2 * N * CO * math.prod(out) * (CI // groups) * kernel ** len(spatial)


_CONV2D = {"N": 1, "CI": 16, "H": 28, "W": 28, "CO": 32, "kernel": 3, "stride": 1, "padding": 1}


@register(
    "conv1d_ncw",
    defaults=dict(N=1, CI=16, L=64, CO=32, kernel=3, stride=1, padding=1, dilation=1),
    reference=conv_nc_ref,
    flops=lambda N, CI, L, CO, kernel, stride, padding, dilation: _conv_flops(
        N, CI, CO, (L,), kernel, stride, padding, dilation
    ),
    scale=("L",),
)
def conv1d_ncw(N, CI, L, CO, kernel, stride, padding, dilation, dtype="float32") -> PrimFunc:
    """1-D convolution: data (N, CI, L), weight (CO, CI, kernel) -> (N, CO, OL)."""
    return conv_nc("conv1d_ncw", N, CI, (L,), CO, kernel, stride, padding, dilation, 1, dtype)


def _conv2d_flops(N, CI, H, W, CO, kernel, stride, padding, dilation, groups=1) -> int:
    return _conv_flops(N, CI, CO, (H, W), kernel, stride, padding, dilation, groups)


@register(
    "conv2d_nchw",
    defaults={**_CONV2D, "dilation": 1},
    reference=conv_nc_ref,
    flops=_conv2d_flops,
    scale=("H", "W"),
)
def conv2d_nchw(N, CI, H, W, CO, kernel, stride, padding, dilation, dtype="float32") -> PrimFunc:
    """2-D convolution: data (N, CI, H, W), weight (CO, CI, k, k) -> (N, CO, OH, OW)."""
    return conv_nc("conv2d_nchw", N, CI, (H, W), CO, kernel, stride, padding, dilation, 1, dtype)


@register(
    "dilated_conv2d_nchw",
    defaults={**_CONV2D, "padding": 2, "dilation": 2},
    reference=conv_nc_ref,
    flops=_conv2d_flops,
    scale=("H", "W"),
)
def dilated_conv2d_nchw(
    N, CI, H, W, CO, kernel, stride, padding, dilation, dtype="float32"
) -> PrimFunc:
    """2-D convolution with kernel dilation (taps `dilation` apart), NCHW."""
    return conv_nc(
        "dilated_conv2d_nchw", N, CI, (H, W), CO, kernel, stride, padding, dilation, 1, dtype
    )


@register(
    "group_conv2d_nchw",
    defaults={**_CONV2D, "dilation": 1, "groups": 4},
    reference=conv_nc_ref,
    flops=_conv2d_flops,
    scale=("H", "W"),
)
def group_conv2d_nchw(
    N, CI, H, W, CO, kernel, stride, padding, dilation, groups, dtype="float32"
) -> PrimFunc:
    """Grouped 2-D convolution: weight (CO, CI // groups, k, k); output channel f reads input
    channels of its group f // (CO // groups)."""
    return conv_nc(
        "group_conv2d_nchw", N, CI, (H, W), CO, kernel, stride, padding, dilation, groups, dtype
    )


@register(
    "conv3d_ncdhw",
    defaults=dict(N=1, CI=8, D=8, H=12, W=12, CO=16, kernel=3, stride=1, padding=1, dilation=1),
    reference=conv_nc_ref,
    flops=lambda N, CI, D, H, W, CO, kernel, stride, padding, dilation: _conv_flops(
        N, CI, CO, (D, H, W), kernel, stride, padding, dilation
    ),
    scale=("D", "H", "W"),
)
def conv3d_ncdhw(
    N, CI, D, H, W, CO, kernel, stride, padding, dilation, dtype="float32"
) -> PrimFunc:
    """3-D convolution: data (N, CI, D, H, W), weight (CO, CI, k, k, k)."""
    return conv_nc(
        "conv3d_ncdhw", N, CI, (D, H, W), CO, kernel, stride, padding, dilation, 1, dtype
    )


def _conv2d_nhwc_ref(data, weight, stride=1, padding=0, dilation=1) -> np.ndarray:
    nchw = conv_nc_ref(
        data.transpose(0, 3, 1, 2), weight.transpose(3, 2, 0, 1), stride, padding, dilation
    )
    return np.ascontiguousarray(nchw.transpose(0, 2, 3, 1))


@register(
    "conv2d_nhwc",
    defaults={**_CONV2D, "dilation": 1},
    reference=_conv2d_nhwc_ref,
    flops=_conv2d_flops,
    scale=("H", "W"),
)
def conv2d_nhwc(N, CI, H, W, CO, kernel, stride, padding, dilation, dtype="float32") -> PrimFunc:
    """2-D convolution, channels last: data (N, H, W, CI), weight (k, k, CI, CO) (HWIO)."""
    check_conv_sizes("conv2d_nhwc", kernel=kernel, stride=stride, padding=padding,
                     dilation=dilation)  # fmt: skip
    data = te.placeholder((N, H, W, CI), dtype, name="data")
    weight = te.placeholder((kernel, kernel, CI, CO), dtype, name="weight")
    padded = pad(data, [0, padding, padding, 0])
    OH, OW = (out_size(s, kernel, stride, padding, dilation) for s in (H, W))
    _check_output("conv2d_nhwc", (OH, OW))
    rh = te.reduce_axis((0, kernel), name="rh")
    rw = te.reduce_axis((0, kernel), name="rw")
    rc = te.reduce_axis((0, CI), name="rc")
    output = te.compute(
        (N, OH, OW, CO),
        lambda n, h, w, co: te.sum(
            padded[n, h * stride + rh * dilation, w * stride + rw * dilation, rc]
            * weight[rh, rw, rc, co],
            axis=[rh, rw, rc],
        ),
        name="conv2d_nhwc",
    )
    return te.create_prim_func([data, weight, output])


def _depthwise_flops(N, C, H, W, multiplier, kernel, stride, padding, dilation) -> int:
    OH, OW = (out_size(s, kernel, stride, padding, dilation) for s in (H, W))
    return 2 * N * C * multiplier * OH * OW * kernel * kernel


def _depthwise_ref(data, weight, stride=1, padding=0, dilation=1) -> np.ndarray:
    C, multiplier, KH, KW = weight.shape
    x, w = pad_spatial(wide(data), padding, 2), wide(weight)
    out = [out_size(s, k, stride, padding, dilation) for s, k in zip(data.shape[2:], (KH, KW))]
    result = np.zeros((data.shape[0], C, multiplier, *out), dtype=x.dtype)
    for dy, dx in np.ndindex(KH, KW):
        window = tap(x, (2, 3), (dy * dilation, dx * dilation), stride, out)
        result += window[:, :, None] * w[None, :, :, dy, dx, None, None]
    return result.reshape(data.shape[0], C * multiplier, *out).astype(data.dtype)


@register(
    "depthwise_conv2d_nchw",
    defaults=dict(N=1, C=32, H=28, W=28, multiplier=1, kernel=3, stride=1, padding=1, dilation=1),
    reference=_depthwise_ref,
    flops=_depthwise_flops,
    scale=("H", "W"),
)
def depthwise_conv2d_nchw(
    N, C, H, W, multiplier, kernel, stride, padding, dilation, dtype="float32"
) -> PrimFunc:
    """Depthwise convolution as TVM's topi: weight (C, multiplier, k, k); output channel c
    reads input channel c // multiplier."""
    check_conv_sizes("depthwise_conv2d_nchw", kernel=kernel, stride=stride, padding=padding,
                     dilation=dilation)  # fmt: skip
    data = te.placeholder((N, C, H, W), dtype, name="data")
    weight = te.placeholder((C, multiplier, kernel, kernel), dtype, name="weight")
    padded = pad(data, [0, 0, padding, padding])
    OH, OW = (out_size(s, kernel, stride, padding, dilation) for s in (H, W))
    _check_output("depthwise_conv2d_nchw", (OH, OW))
    di = te.reduce_axis((0, kernel), name="di")
    dj = te.reduce_axis((0, kernel), name="dj")
    output = te.compute(
        (N, C * multiplier, OH, OW),
        lambda b, c, i, j: te.sum(
            padded[b, c // multiplier, i * stride + di * dilation, j * stride + dj * dilation]
            * weight[c // multiplier, c % multiplier, di, dj],
            axis=[di, dj],
        ),
        name="depthwise_conv2d_nchw",
    )
    return te.create_prim_func([data, weight, output])

"""Less common convolutions: transposed (NCHW) and capsule (TVM's C2D capsule workload)."""

from __future__ import annotations

import numpy as np

from schedlab import te
from schedlab.ir import op
from schedlab.ir.function import PrimFunc

from ._common import check_conv_sizes, out_size, pad, tap, wide
from .registry import register


def _transpose_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size - 1) * stride - 2 * padding + kernel


def _dilate_and_pad(data: te.Tensor, stride: int, border: int) -> te.Tensor:
    """`data` with stride-1 zeros between elements and `border` zeros around the spatial axes,
    in one stage: the gather form of a transposed convolution reads this."""
    N, C, H, W = (int(s) for s in data.shape)
    spans = ((H - 1) * stride + 1, (W - 1) * stride + 1)

    def element(n, c, y, x):
        guards, source = [], []
        for index, span in zip((y, x), spans):
            shifted = index - border
            guards += [index >= border, index < border + span]
            if stride > 1:
                guards.append(op.floormod(shifted, stride) == 0)
            source.append(op.floordiv(shifted, stride))
        return op.if_then_else(op.all(*guards), data[(n, c, *source)], op.const(0, data.dtype))

    shape = (N, C, spans[0] + 2 * border, spans[1] + 2 * border)
    return te.compute(shape, element, name="pad_temp")


def _conv2d_transpose_ref(data, weight, stride=1, padding=0) -> np.ndarray:
    """Scatter form: every input element adds `x * w` to a kernel-sized output window."""
    N, _, H, W = data.shape
    _, CO, KH, KW = weight.shape
    x, w = wide(data), wide(weight)
    full = np.zeros((N, CO, (H - 1) * stride + KH, (W - 1) * stride + KW), dtype=x.dtype)
    for ky, kx in np.ndindex(KH, KW):
        window = tap(full, (2, 3), (ky, kx), stride, (H, W))  # a view: adds in place
        window += np.einsum("nchw,co->nohw", x, w[:, :, ky, kx])
    OH, OW = _transpose_out(H, KH, stride, padding), _transpose_out(W, KW, stride, padding)
    return full[:, :, padding : padding + OH, padding : padding + OW].astype(data.dtype)


def _conv2d_transpose_flops(N, CI, H, W, CO, kernel, stride, padding) -> int:
    return 2 * N * CI * H * W * CO * kernel * kernel


@register(
    "conv2d_transpose_nchw",
    defaults=dict(N=1, CI=16, H=14, W=14, CO=16, kernel=4, stride=2, padding=1),
    reference=_conv2d_transpose_ref,
    flops=_conv2d_transpose_flops,
    scale=("H", "W"),
)
def conv2d_transpose_nchw(N, CI, H, W, CO, kernel, stride, padding, dtype="float32") -> PrimFunc:
    """Transposed convolution (the gradient of conv2d w.r.t. its input): data (N, CI, H, W),
    weight (CI, CO, k, k) -> (N, CO, (H-1)*stride - 2*padding + k, ...). Computed as TVM's topi
    does: dilate the input by the stride, pad by k-1-padding, convolve with the flipped kernel."""
    check_conv_sizes("conv2d_transpose_nchw", kernel=kernel, stride=stride, padding=padding)
    if padding > kernel - 1:
        raise ValueError(
            f"conv2d_transpose_nchw: padding must be <= kernel - 1 = {kernel - 1}, got {padding}"
        )
    data = te.placeholder((N, CI, H, W), dtype, name="data")
    weight = te.placeholder((CI, CO, kernel, kernel), dtype, name="weight")
    padded = _dilate_and_pad(data, stride, kernel - 1 - padding)
    OH, OW = (_transpose_out(s, kernel, stride, padding) for s in (H, W))
    rc = te.reduce_axis((0, CI), name="rc")
    rh = te.reduce_axis((0, kernel), name="rh")
    rw = te.reduce_axis((0, kernel), name="rw")
    output = te.compute(
        (N, CO, OH, OW),
        lambda n, co, h, w: te.sum(
            padded[n, rc, h + rh, w + rw] * weight[rc, co, kernel - 1 - rh, kernel - 1 - rw],
            axis=[rc, rh, rw],
        ),
        name="conv2d_transpose_nchw",
    )
    return te.create_prim_func([data, weight, output])


def _capsule_ref(data, weight, stride=1, padding=0) -> np.ndarray:
    KH, KW = weight.shape[:2]
    spatial = [(0, 0), (padding, padding), (padding, padding)]
    x, w = np.pad(wide(data), spatial + [(0, 0)] * 3), wide(weight)
    out = [out_size(s, k, stride, padding) for s, k in zip(data.shape[1:3], (KH, KW))]
    N, _, _, cap, _, _ = data.shape
    result = np.zeros((N, *out, cap, cap, weight.shape[-1]), dtype=x.dtype)
    for dy, dx in np.ndindex(KH, KW):
        window = tap(x, (1, 2), (dy, dx), stride, out)
        result += np.einsum("nhwikc,kjco->nhwijo", window, w[dy, dx])
    return result.astype(data.dtype)


def _capsule_flops(N, H, W, CI, CO, kernel, stride, padding, capsule) -> int:
    OH, OW = (out_size(s, kernel, stride, padding) for s in (H, W))
    return 2 * N * OH * OW * capsule**3 * CI * CO * kernel * kernel


@register(
    "capsule_conv2d",
    defaults=dict(N=1, H=16, W=16, CI=32, CO=32, kernel=3, stride=1, padding=1, capsule=4),
    reference=_capsule_ref,
    flops=_capsule_flops,
    scale=("H", "W"),
)
def capsule_conv2d(N, H, W, CI, CO, kernel, stride, padding, capsule, dtype="float32") -> PrimFunc:
    """Capsule convolution (TVM's C2D capsule workload, NHWIJC): data (N, H, W, cap, cap, CI),
    weight (k, k, cap, cap, CI, CO); each output pose matrix is a sum of matrix products."""
    check_conv_sizes("capsule_conv2d", kernel=kernel, stride=stride, padding=padding)
    data = te.placeholder((N, H, W, capsule, capsule, CI), dtype, name="data")
    weight = te.placeholder((kernel, kernel, capsule, capsule, CI, CO), dtype, name="weight")
    padded = pad(data, [0, padding, padding, 0, 0, 0])
    OH, OW = (out_size(s, kernel, stride, padding) for s in (H, W))
    if OH < 1 or OW < 1:
        raise ValueError(f"capsule_conv2d: these sizes give an empty output {(OH, OW)}")
    rh = te.reduce_axis((0, kernel), name="rh")
    rw = te.reduce_axis((0, kernel), name="rw")
    cap_k = te.reduce_axis((0, capsule), name="cap_k")
    rc = te.reduce_axis((0, CI), name="rc")
    output = te.compute(
        (N, OH, OW, capsule, capsule, CO),
        lambda n, h, w, cap_i, cap_j, co: te.sum(
            padded[n, h * stride + rh, w * stride + rw, cap_i, cap_k, rc]
            * weight[rh, rw, cap_k, cap_j, rc, co],
            axis=[rh, rw, cap_k, rc],
        ),
        name="capsule_conv2d",
    )
    return te.create_prim_func([data, weight, output])

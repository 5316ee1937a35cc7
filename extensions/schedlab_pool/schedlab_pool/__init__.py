"""Pooling workloads (NCHW max and average 2-D pooling) registered with schedlab.workloads."""

from __future__ import annotations

import numpy as np

from schedlab import te
from schedlab.ir import op
from schedlab.workloads import register

_DEFAULTS = {"N": 1, "C": 16, "H": 28, "W": 28, "kernel": 2, "stride": 2}


def _out(size: int, kernel: int, stride: int) -> int:
    if kernel < 1 or stride < 1 or size < kernel:
        raise ValueError(f"pooling: need 1 <= kernel <= size and stride >= 1, got "
                         f"size={size}, kernel={kernel}, stride={stride}")  # fmt: skip
    return (size - kernel) // stride + 1


def _windows(data: np.ndarray, kernel: int, stride: int) -> np.ndarray:
    """(N, C, OH, OW, kernel, kernel) strided view of every pooling window."""
    view = np.lib.stride_tricks.sliding_window_view(data, (kernel, kernel), axis=(2, 3))
    return view[:, :, ::stride, ::stride]


def _pool(name: str, N, C, H, W, kernel, stride, dtype, reducer):
    data = te.placeholder((N, C, H, W), dtype, name="data")
    rh = te.reduce_axis((0, kernel), name="rh")
    rw = te.reduce_axis((0, kernel), name="rw")
    shape = (N, C, _out(H, kernel, stride), _out(W, kernel, stride))
    pooled = te.compute(
        shape,
        lambda n, c, h, w: reducer(data[n, c, h * stride + rh, w * stride + rw], axis=[rh, rw]),
        name=name,
    )
    return data, pooled


@register(
    "max_pool2d_nchw",
    defaults=_DEFAULTS,
    reference=lambda data, kernel, stride: _windows(data, kernel, stride).max(axis=(-2, -1)),
    flops=lambda N, C, H, W, kernel, stride: (
        N * C * _out(H, kernel, stride) * _out(W, kernel, stride) * kernel * kernel
    ),
    scale=("H", "W"),
)
def max_pool2d_nchw(N, C, H, W, kernel, stride, dtype="float32"):
    """Max pooling over kernel x kernel windows with a stride, NCHW."""
    data, pooled = _pool("pool_max", N, C, H, W, kernel, stride, dtype, te.max)
    return te.create_prim_func([data, pooled])


def _avg_ref(data, kernel, stride):
    windows = _windows(data.astype(np.float64), kernel, stride)
    return windows.mean(axis=(-2, -1)).astype(data.dtype)


@register(
    "avg_pool2d_nchw",
    defaults=_DEFAULTS,
    reference=_avg_ref,
    flops=lambda N, C, H, W, kernel, stride: (
        N * C * _out(H, kernel, stride) * _out(W, kernel, stride) * (kernel * kernel + 1)
    ),
    scale=("H", "W"),
    dtypes=("float16", "float32", "float64"),
)
def avg_pool2d_nchw(N, C, H, W, kernel, stride, dtype="float32"):
    """Average pooling (window sum, then divide by the window size), NCHW."""
    data, summed = _pool("pool_sum", N, C, H, W, kernel, stride, dtype, te.sum)
    area = op.const(kernel * kernel, dtype)
    avg = te.compute(summed.shape, lambda n, c, h, w: summed[n, c, h, w] / area, name="pool_avg")
    return te.create_prim_func([data, avg])

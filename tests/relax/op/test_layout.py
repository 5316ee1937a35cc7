"""Channel-blocked layouts: relax.layout_transform and the NCHW{b}c forms of conv2d and the
2-D pools, checked against the NCHW operators on odd sizes."""

from __future__ import annotations

import numpy as np
import pytest

from schedlab.relax.op import OpTypeError, TensorInfo, get_op

from ._run import rand, run_op


def to_blocked(x: np.ndarray, b: int) -> np.ndarray:
    n, c, h, w = x.shape
    pad = -(-c // b) * b - c
    x = np.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0)))
    return np.ascontiguousarray(x.reshape(n, -1, b, h, w).transpose(0, 1, 3, 4, 2))


def from_blocked(x: np.ndarray, channels: int | None = None) -> np.ndarray:
    n, blocks, h, w, b = x.shape
    plain = x.transpose(0, 1, 4, 2, 3).reshape(n, blocks * b, h, w)
    return plain[:, : channels or blocks * b]


def blocked_weight(w: np.ndarray, inner: int, outer: int) -> np.ndarray:
    o, i, kh, kw = w.shape
    return np.ascontiguousarray(
        w.reshape(o // outer, outer, i // inner, inner, kh, kw).transpose(0, 2, 4, 5, 3, 1)
    )


def test_layout_transform_round_trip_and_crop():
    x = rand(2, 24, 5, 7)
    blocked = run_op("relax.layout_transform", [x], {"src_layout": "NCHW", "dst_layout":
                                                     "NCHW8c"})  # fmt: skip
    np.testing.assert_array_equal(blocked, to_blocked(x, 8))
    back = run_op("relax.layout_transform", [blocked], {"src_layout": "NCHW8c", "dst_layout":
                                                        "NCHW"})  # fmt: skip
    np.testing.assert_array_equal(back, x)
    cropped = run_op("relax.layout_transform", [blocked], {"src_layout": "NCHW8c",
                     "dst_layout": "NCHW", "channels": 19})  # fmt: skip
    np.testing.assert_array_equal(cropped, x[:, :19])


@pytest.mark.parametrize(
    "shape, attrs, message",
    [
        ((1, 20, 3, 3), {"src_layout": "NCHW", "dst_layout": "NCHW8c"}, "multiple of the block"),
        ((1, 2, 3, 3, 4), {"src_layout": "NCHW8c", "dst_layout": "NCHW"}, "is not the block 8"),
        ((1, 2, 3, 3, 8), {"src_layout": "NCHW8c", "dst_layout": "NCHW", "channels": 17},
         "from 1 to the 16 channels"),
        ((1, 8, 3, 3), {"src_layout": "NHWC", "dst_layout": "NCHW8c"}, "NCHW or NCHW<b>c"),
        ((1, 2, 3, 3, 8), {"src_layout": "NCHW8c", "dst_layout": "NCHW4c"}, "only NCHW <->"),
    ],
)  # fmt: skip
def test_layout_transform_errors(shape, attrs, message):
    spec = get_op("relax.layout_transform")
    with pytest.raises(OpTypeError, match=message):
        spec.infer([TensorInfo(shape, "float32")], spec.resolve_attrs(attrs))


@pytest.mark.parametrize(
    "cin, inner, cout, outer, size, kernel, attrs",
    [
        (16, 8, 16, 8, (9, 11), 3, {"padding": [1, 1, 1, 1]}),
        (3, 3, 16, 16, (13, 10), 3, {"strides": [2, 2]}),  # an RGB stem: a block of 3
        (12, 4, 8, 4, (7, 9), 1, {}),
        (8, 8, 16, 8, (11, 11), 3, {"padding": [2, 1, 0, 2], "dilation": [2, 1]}),
    ],
)  # fmt: skip
def test_blocked_conv2d_matches_nchw(cin, inner, cout, outer, size, kernel, attrs):
    x, w = rand(1, cin, *size), rand(cout, cin, kernel, kernel, seed=1)
    want = run_op("relax.nn.conv2d", [x, w], attrs)
    layouts = {"data_layout": f"NCHW{inner}c", "kernel_layout": f"OIHW{inner}i{outer}o",
               "out_layout": f"NCHW{outer}c"}  # fmt: skip
    got = run_op("relax.nn.conv2d", [to_blocked(x, inner), blocked_weight(w, inner, outer)],
                 {**attrs, **layouts})  # fmt: skip
    np.testing.assert_allclose(from_blocked(got), want, rtol=1e-5, atol=1e-5)


def test_blocked_conv2d_errors():
    spec = get_op("relax.nn.conv2d")
    data, weight = TensorInfo((1, 2, 5, 5, 8), "float32"), TensorInfo((2, 2, 3, 3, 8, 8))
    good = {"data_layout": "NCHW8c", "kernel_layout": "OIHW8i8o", "out_layout": "NCHW8c"}
    assert spec.infer([data, weight], spec.resolve_attrs(good)).static_shape() == (1, 2, 3, 3, 8)
    for attrs, message in (
        ({**good, "out_layout": "NCHW4c"}, "disagree"),
        ({**good, "kernel_layout": "OIHW"}, "a blocked conv2d takes"),
        ({**good, "groups": 2}, "groups=1"),
    ):
        with pytest.raises(OpTypeError, match=message):
            spec.infer([data, weight], spec.resolve_attrs(attrs))
    with pytest.raises(OpTypeError, match="input block"):
        spec.infer([data, TensorInfo((2, 2, 3, 3, 4, 8))], spec.resolve_attrs(good))


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize(
    "attrs",
    [
        {"pool_size": [3, 3], "strides": [2, 2]},
        {"pool_size": [3, 2], "strides": [1, 2], "padding": [1, 0, 1, 1], "ceil_mode": True},
        {"pool_size": [2, 2], "padding": [1, 1, 1, 1], "count_include_pad": True},
    ],
)
def test_blocked_pools_match_nchw(kind, attrs):
    x = rand(2, 16, 9, 11)
    name = f"relax.nn.{kind}_pool2d"
    want = run_op(name, [x], attrs)
    got = run_op(name, [to_blocked(x, 8)], {**attrs, "layout": "NCHW8c", "out_layout": "NCHW8c"})
    np.testing.assert_allclose(from_blocked(got), want, rtol=1e-6, atol=1e-6)

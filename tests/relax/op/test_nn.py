"""Convolution, pooling and dropout operators: inferred shapes equal legalized shapes, and the
legalized TE (create_prim_func -> interpret, some compiled) matches numpy references written
here with explicit tap loops."""

import numpy as np
import pytest

import schedlab
from schedlab import te
from schedlab.relax.op import OpTypeError, TensorInfo, get_op

RNG = np.random.default_rng(0)


def run_op(name: str, arrays, attrs=None, build=False, rtol=1e-5, atol=1e-5):
    """Infer, legalize, interpret (or compile) `name` on `arrays`; returns the output array.
    Checks that the inferred shape/dtype equal the legalized tensor's."""
    spec = get_op(name)
    attrs = attrs or {}
    infos = [TensorInfo(a.shape, str(a.dtype)) for a in arrays]
    info = spec.infer_info(infos, attrs)
    placeholders = [
        te.placeholder(a.shape, str(a.dtype), name=f"x{i}") for i, a in enumerate(arrays)
    ]
    out = spec.legalize(placeholders, spec.resolve_attrs(attrs))
    assert tuple(int(d) for d in out.shape) == info.static_shape()
    assert out.dtype == info.dtype
    func = te.create_prim_func([*placeholders, out])
    result = np.zeros(info.static_shape(), info.dtype.numpy)
    if build:
        schedlab.build(func, target="cpu")(*arrays, result)
    else:
        schedlab.interpret(func, *arrays, result)
    return result


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def conv_ref(x, w, strides, before, after, dilation, groups):
    """Direct convolution over any number of spatial axes: one einsum per kernel tap."""
    rank = x.ndim - 2
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *zip(before, after)])
    kernel = w.shape[2:]
    out = [
        (x.shape[2 + a] - dilation[a] * (kernel[a] - 1) - 1) // strides[a] + 1 for a in range(rank)
    ]
    n, ci, co = x.shape[0], x.shape[1], w.shape[0]
    cig, cog = ci // groups, co // groups
    result = np.zeros((n, co, *out))
    for offsets in np.ndindex(*kernel):
        window = tuple(
            slice(o * d, o * d + s * (m - 1) + 1, s)
            for o, d, s, m in zip(offsets, dilation, strides, out)
        )
        part = x[(slice(None), slice(None), *window)]
        for g in range(groups):
            taps = w[(slice(g * cog, (g + 1) * cog), slice(None), *offsets)]
            result[:, g * cog : (g + 1) * cog] += np.einsum(
                "nc...,fc->nf...", part[:, g * cig : (g + 1) * cig], taps
            )
    return result


@pytest.mark.parametrize(
    "attrs, before, after",
    [
        (dict(), (0, 0), (0, 0)),
        (dict(strides=2, padding=1), (1, 1), (1, 1)),
        (dict(strides=(1, 2), padding=(1, 2), dilation=2), (1, 2), (1, 2)),
        (dict(padding=(0, 1, 2, 1), groups=3), (0, 1), (2, 1)),
    ],
)
def test_conv2d(attrs, before, after):
    groups = attrs.get("groups", 1)
    x, w = rand(2, 3, 7, 9), rand(6, 3 // groups, 3, 2)
    got = run_op("relax.nn.conv2d", [x, w], attrs)
    strides = attrs.get("strides", 1)
    strides = (strides,) * 2 if isinstance(strides, int) else strides
    dilation = (attrs.get("dilation", 1),) * 2
    np.testing.assert_allclose(
        got, conv_ref(x, w, strides, before, after, dilation, groups), rtol=1e-4, atol=1e-4
    )


def test_conv1d_and_compiled_conv2d():
    x, w = rand(1, 4, 11), rand(6, 2, 3)
    got = run_op("relax.nn.conv1d", [x, w], dict(strides=2, padding=(2, 1), groups=2))
    np.testing.assert_allclose(got, conv_ref(x, w, (2,), (2,), (1,), (1,), 2), rtol=1e-4, atol=1e-4)
    x, w = rand(1, 3, 5, 6), rand(4, 3, 3, 3)
    got = run_op("relax.nn.conv2d", [x, w], dict(padding=1), build=True)
    ref = conv_ref(x, w, (1, 1), (1, 1), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def conv_transpose_ref(x, w, strides, before, after, output_padding, dilation, groups):
    """Scatter form over any number of spatial axes: every input element adds w * x to the
    outputs its taps reach; the padding is cropped at the end."""
    sizes, kernel = x.shape[2:], w.shape[2:]
    ci, cog = x.shape[1], w.shape[1]
    cig = ci // groups
    outs = [
        (n - 1) * s - b - a + d * (k - 1) + o + 1
        for n, k, s, b, a, d, o in zip(sizes, kernel, strides, before, after, dilation,
                                       output_padding)
    ]  # fmt: skip
    full = np.zeros((x.shape[0], cog * groups, *[o + b + k * d + n * s for o, b, k, d, n, s in
                     zip(outs, before, kernel, dilation, sizes, strides)]))  # fmt: skip
    for c in range(ci):
        g = c // cig
        for pos in np.ndindex(*sizes):
            for taps in np.ndindex(*kernel):
                at = [p * s + t * d for p, t, s, d in zip(pos, taps, strides, dilation)]
                index = (slice(None), slice(g * cog, (g + 1) * cog), *at)
                full[index] += np.outer(x[(slice(None), c, *pos)], w[(c, slice(None), *taps)])
    crop = tuple(slice(b, b + o) for b, o in zip(before, outs))
    return full[(slice(None), slice(None), *crop)]


def test_conv_1d_3d_and_transposes():
    x, w = rand(1, 2, 4, 5, 3), rand(3, 2, 2, 3, 2)
    got = run_op("relax.nn.conv3d", [x, w], dict(padding=1, strides=(1, 2, 1)))
    ref = conv_ref(x, w, (1, 2, 1), (1,) * 3, (1,) * 3, (1,) * 3, 1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    x, w = rand(2, 4, 6), rand(4, 3, 3)
    attrs = dict(strides=3, padding=(2, 1), output_padding=2, groups=2)
    got = run_op("relax.nn.conv1d_transpose", [x, w], attrs)
    ref = conv_transpose_ref(x, w, (3,), (2,), (1,), (2,), (1,), 2)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    x, w = rand(1, 2, 3, 2, 3), rand(2, 3, 2, 2, 3)
    got = run_op("relax.nn.conv3d_transpose", [x, w], dict(strides=2, padding=1, dilation=2))
    ref = conv_transpose_ref(x, w, (2,) * 3, (1,) * 3, (1,) * 3, (0,) * 3, (2,) * 3, 1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "attrs",
    [
        dict(),
        dict(strides=2, padding=1, output_padding=1),
        dict(strides=(3, 2), padding=(0, 1, 2, 0), dilation=2, groups=2),
    ],
)
def test_conv2d_transpose(attrs):
    groups = attrs.get("groups", 1)
    x, w = rand(1, 4, 5, 4), rand(4, 3, 3, 2)
    got = run_op("relax.nn.conv2d_transpose", [x, w], attrs)
    s = attrs.get("strides", 1)
    s = (s, s) if isinstance(s, int) else s
    p = attrs.get("padding", 0)
    before, after = ((p, p), (p, p)) if isinstance(p, int) else (p[:2], p[2:])
    op_ = attrs.get("output_padding", 0)
    d = attrs.get("dilation", 1)
    ref = conv_transpose_ref(x, w, s, before, after, (op_, op_), (d, d), groups)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def pool_ref(x, kind, k, s, before, after, ceil_mode=False, include_pad=False, dilation=None):
    """Explicit window loops over any number of spatial axes, PyTorch's output sizes and divisor
    rules (ceil mode drops a window starting in the trailing padding; count_include_pad counts
    declared padding only)."""
    sizes = x.shape[2:]
    dilation = dilation or (1,) * len(sizes)
    outs = []
    for size, kk, st, b, a, d in zip(sizes, k, s, before, after, dilation):
        span = size + b + a - d * (kk - 1) - 1 + (st - 1 if ceil_mode else 0)
        count = span // st + 1
        outs.append(count - 1 if ceil_mode and (count - 1) * st >= size + b else count)
    result = np.zeros((*x.shape[:2], *outs))
    for out in np.ndindex(*outs):
        values, count = [], 0
        for taps in np.ndindex(*k):
            pos = [o * st + t * d - b for o, t, st, d, b in zip(out, taps, s, dilation, before)]
            inside = all(0 <= p < n for p, n in zip(pos, sizes))
            padded = all(-b <= p < n + a for p, n, b, a in zip(pos, sizes, before, after))
            count += padded if include_pad else inside
            if inside:
                values.append(x[(slice(None), slice(None), *pos)])
        reduced = np.max(values, axis=0) if kind == "max" else np.sum(values, 0) / max(count, 1)
        result[(slice(None), slice(None), *out)] = reduced
    return result


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize(
    "shape, attrs, before, after",
    [
        ((2, 3, 9), dict(pool_size=3, strides=2, padding=(1, 2)), (1,), (2,)),
        (
            (1, 2, 5, 4, 6),
            dict(pool_size=(2, 3, 2), strides=2, padding=1, ceil_mode=True),
            (1, 1, 1),
            (1, 1, 1),
        ),
    ],
)
def test_pool_1d_3d(kind, shape, attrs, before, after):
    x = rand(*shape)
    rank = x.ndim - 2
    got = run_op(f"relax.nn.{kind}_pool{rank}d", [x], attrs)
    k = attrs["pool_size"]
    k = (k,) * rank if isinstance(k, int) else k
    strides = (attrs["strides"],) * rank
    ref = pool_ref(x, kind, k, strides, before, after, attrs.get("ceil_mode", False))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_adaptive_1d_3d():
    x = rand(2, 3, 7)
    got = run_op("relax.nn.adaptive_avg_pool1d", [x], dict(output_size=3))
    ref = adaptive_ref(x[..., None], (3, 1))[..., 0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    x = rand(1, 2, 3, 4, 5)
    got = run_op("relax.nn.adaptive_avg_pool3d", [x], dict(output_size=1))
    np.testing.assert_allclose(got, x.mean(axis=(2, 3, 4), keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize(
    "attrs",
    [
        dict(pool_size=2, strides=2),
        dict(pool_size=3, strides=2, padding=1),
        dict(pool_size=(3, 2), strides=(2, 1), padding=(1, 0, 1, 1), ceil_mode=True),
        dict(pool_size=3, strides=2, padding=1, count_include_pad=True, ceil_mode=True),
        dict(pool_size=2, dilation=2, padding=(1, 0)),
    ],
)
def test_pool2d(kind, attrs):
    x = rand(2, 3, 7, 6)
    got = run_op(f"relax.nn.{kind}_pool2d", [x], attrs)
    k = attrs["pool_size"]
    k = (k, k) if isinstance(k, int) else k
    s = attrs.get("strides", 1)
    s = (s, s) if isinstance(s, int) else s
    p = attrs.get("padding", 0)
    p = (p, p) if isinstance(p, int) else p
    before, after = (p[:2], p[2:]) if len(p) == 4 else (p, p)
    ref = pool_ref(
        x,
        kind,
        k,
        s,
        before,
        after,
        attrs.get("ceil_mode", False),
        attrs.get("count_include_pad", False),
        (attrs.get("dilation", 1),) * 2,
    )
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def adaptive_ref(x, out):
    n, c, h, w = x.shape
    result = np.zeros((n, c, *out))
    for i, j in np.ndindex(*out):
        y0, y1 = i * h // out[0], -(-(i + 1) * h // out[0])
        x0, x1 = j * w // out[1], -(-(j + 1) * w // out[1])
        result[:, :, i, j] = x[:, :, y0:y1, x0:x1].mean(axis=(2, 3))
    return result


@pytest.mark.parametrize("size", [1, (3, 2), (7, 5), None])
def test_adaptive_avg_pool2d(size):
    x = rand(2, 3, 7, 5)
    got = run_op("relax.nn.adaptive_avg_pool2d", [x], dict(output_size=size))
    out = (7, 5) if size is None else ((size, size) if isinstance(size, int) else size)
    np.testing.assert_allclose(got, adaptive_ref(x, out), rtol=1e-5, atol=1e-5)


def test_global_pool_compiled_and_dropout():
    x = rand(1, 5, 3, 7)
    got = run_op("relax.nn.adaptive_avg_pool2d", [x], dict(output_size=1), build=True)
    np.testing.assert_allclose(got, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)
    got = run_op("relax.nn.max_pool2d", [x], dict(pool_size=3, padding=1), build=True)
    np.testing.assert_allclose(got, pool_ref(x, "max", (3, 3), (1, 1), (1, 1), (1, 1)))
    np.testing.assert_array_equal(run_op("relax.nn.dropout", [x], dict(rate=0.25)), x)


def test_symbolic_shapes():
    n, h = te.size_var("n"), te.size_var("h")
    spec = get_op("relax.nn.conv2d")
    info = spec.infer_info([TensorInfo((n, 3, h, 8)), TensorInfo((4, 3, 3, 3))], dict(padding=1))
    assert info.shape[0] is n and info.shape[1].value == 4 and info.shape[3].value == 8
    pool = get_op("relax.nn.max_pool2d").infer_info([TensorInfo((n, 3, h, 8))], dict(pool_size=2))
    assert pool.shape[0] is n and pool.shape[3].value == 7


def expect_error(name, infos, attrs, match):
    spec = get_op(name)
    with pytest.raises(OpTypeError, match=match):
        spec.infer_info([TensorInfo(s) for s in infos], attrs)


def test_errors():
    expect_error(
        "relax.nn.conv2d",
        [(1, 3, 5, 5), (4, 2, 3, 3)],
        {},
        r"relax.nn.conv2d: data "
        r"channels 3 != weight's 2 \* groups 1; inputs \(Tensor\(\(1, 3, 5, 5\)",
    )
    expect_error("relax.nn.conv2d", [(1, 3, 5), (4, 3, 3, 3)], {}, "data must have rank 4")
    expect_error("relax.nn.conv2d", [(1, 3, 2, 2), (4, 3, 3, 3)], {}, "empty output")
    expect_error("relax.nn.conv2d", [(1, 4, 5, 5), (6, 2, 3, 3)], dict(groups=4), "channels")
    expect_error("relax.nn.conv2d", [(1, 3, 5, 5), (4, 3, 3, 3)], dict(strides=0), "strides")
    expect_error(
        "relax.nn.conv2d", [(1, 3, 5, 5), (4, 3, 3, 3)], dict(padding=(1, 2, 3)), "padding"
    )
    expect_error(
        "relax.nn.conv2d",
        [(1, 3, 5, 5), (4, 3, 3, 3)],
        dict(data_layout="NHWC"),
        "only data_layout=NCHW",
    )
    expect_error(
        "relax.nn.conv2d_transpose",
        [(1, 3, 5, 5), (3, 2, 3, 3)],
        dict(output_padding=1),
        "output_padding",
    )
    expect_error("relax.nn.max_pool2d", [(1, 3, 5, 5)], {}, "missing required attribute")
    expect_error("relax.nn.max_pool2d", [(3, 5, 5)], dict(pool_size=2), "rank 4")
    expect_error("relax.nn.avg_pool2d", [(1, 3, 2, 2)], dict(pool_size=3), "empty output")
    expect_error("relax.nn.dropout", [(3,)], dict(rate=1.5), "rate")
    assert get_op("relax.nn.conv2d").pattern == "out_ewise_fusable"


@pytest.mark.parametrize(
    "name, shapes, attrs",
    [
        ("relax.nn.conv2d", [("n", 3, 6, 5), (4, 3, 3, 3)], dict(padding=1, strides=2)),
        ("relax.nn.max_pool2d", [("n", 2, "h", 5)], dict(pool_size=2, ceil_mode=True)),
        ("relax.nn.adaptive_avg_pool2d", [("n", 2, "h", 5)], dict(output_size=1)),
        ("relax.nn.softmax", [("n", 7)], dict(axis=0)),
        ("relax.nn.layer_norm", [("n", 7), (7,), (7,)], dict(axes=-1)),
        ("relax.matmul", [("n", 3, 5), (5, 2)], {}),
        ("relax.nn.attention", [(1, "n", 2, 4), (1, "n", 2, 4), (1, "n", 2, 3)], {}),
    ],
)
def test_symbolic_legalize_runs(name, shapes, attrs):
    """Legalized with named dims, interpreted at two concrete sizes against the static run."""
    dims = {"n": te.size_var("n"), "h": te.size_var("h")}
    spec = get_op(name)
    symbolic = [tuple(dims.get(d, d) for d in s) for s in shapes]
    placeholders = [te.placeholder(s, "float32", name=f"x{i}") for i, s in enumerate(symbolic)]
    out = spec.legalize(placeholders, spec.resolve_attrs(attrs))
    func = te.create_prim_func([*placeholders, out])
    for n, h in ((2, 5), (3, 6)):
        sizes = {"n": n, "h": h}
        arrays = [rand(*(sizes.get(d, d) for d in s)) for s in shapes]
        expected = run_op(name, arrays, attrs)
        result = np.zeros_like(expected)
        schedlab.interpret(func, *arrays, result)
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)


COMPILED_CASES = [
    ("relax.nn.conv2d_transpose", [(1, 4, 3, 4), (4, 2, 3, 2)],
     dict(strides=2, padding=(1, 0, 0, 1), output_padding=1, groups=2)),
    ("relax.nn.avg_pool2d", [(1, 2, 5, 6)],
     dict(pool_size=3, strides=2, padding=1, ceil_mode=True, count_include_pad=True)),
    ("relax.nn.adaptive_avg_pool2d", [(1, 2, 7, 5)], dict(output_size=(3, 2))),
    ("relax.nn.group_norm", [(2, 4, 3, 5), (4,), (4,)], dict(num_groups=2)),
    ("relax.nn.layer_norm", [(3, 7), (7,), (7,)], dict(axes=-1)),
    ("relax.nn.log_softmax", [(3, 7)], dict(axis=0)),
    ("relax.nn.local_response_norm", [(1, 5, 2, 3)], dict(size=3)),
    ("relax.matmul", [(2, 1, 3, 5), (4, 5, 2)], {}),
    ("relax.linear", [(3, 5), (4, 5), (4,)], {}),
    ("relax.nn.attention", [(1, 3, 2, 4), (1, 5, 2, 4), (1, 5, 2, 3), (3, 5)],
     dict(causal_mask="TopLeft")),
]  # fmt: skip


@pytest.mark.parametrize("name, shapes, attrs", COMPILED_CASES, ids=[c[0] for c in COMPILED_CASES])
def test_compiled_matches_interpreted(name, shapes, attrs):
    arrays = [rand(*s) for s in shapes]
    expected = run_op(name, arrays, attrs)
    np.testing.assert_allclose(run_op(name, arrays, attrs, build=True), expected, rtol=1e-5,
                               atol=1e-5)  # fmt: skip


def test_registered_with_patterns():
    patterns = {
        "relax.matmul": "out_ewise_fusable", "relax.linear": "out_ewise_fusable",
        "relax.nn.conv2d": "out_ewise_fusable", "relax.nn.max_pool2d": "out_ewise_fusable",
        "relax.nn.softmax": "comm_reduce", "relax.nn.layer_norm": "comm_reduce",
        "relax.nn.batch_norm": "broadcast", "relax.nn.dropout": "elemwise",
        "relax.nn.attention": "opaque",
    }  # fmt: skip
    for name, pattern in patterns.items():
        spec = get_op(name)
        assert spec.pattern == pattern and spec.doc
    assert get_op("relax.nn.conv2d").attrs["kernel_layout"] == "OIHW"
    assert get_op("relax.nn.conv2d_transpose").attrs["kernel_layout"] == "IOHW"
    ceil = get_op("relax.nn.max_pool1d").infer_info(
        [TensorInfo((1, 1, 5))], dict(pool_size=2, strides=2, padding=1, ceil_mode=True)
    )
    assert int(ceil.shape[2]) == 3  # the 4th window would start in the trailing padding


def test_integer_conv_with_out_dtype_and_max_pool():
    rng = np.random.default_rng(1)
    x = rng.integers(-100, 100, (1, 3, 5, 4)).astype("int8")
    w = rng.integers(-100, 100, (2, 3, 3, 3)).astype("int8")
    got = run_op("relax.nn.conv2d", [x, w], dict(padding=1, out_dtype="int32"))
    assert got.dtype == np.int32
    ref = conv_ref(x.astype(np.int64), w.astype(np.int64), (1, 1), (1, 1), (1, 1), (1, 1), 1)
    np.testing.assert_array_equal(got, ref)
    got = run_op("relax.nn.max_pool2d", [x], dict(pool_size=2, padding=1))
    np.testing.assert_array_equal(got, pool_ref(x, "max", (2, 2), (1, 1), (1, 1), (1, 1)))

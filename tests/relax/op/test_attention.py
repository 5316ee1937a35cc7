"""relax.nn.attention against a numpy reference (bias, scale, both causal masks)."""

import numpy as np
import pytest

from schedlab import te
from schedlab.relax.op import OpTypeError, TensorInfo, get_op
from tests.relax.op.test_nn import rand, run_op


def attention_ref(q, k, v, bias=None, scale=None, causal=None):
    q, k, v = (a.astype(np.float64).transpose(0, 2, 1, 3) for a in (q, k, v))  # (B, N, S, H)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(0, 1, 3, 2) * scale
    if bias is not None:
        scores = scores + bias
    s, t = scores.shape[-2:]
    if causal is not None:
        shift = 0 if causal == "TopLeft" else t - s
        hidden = np.arange(t)[None, :] > np.arange(s)[:, None] + shift
        scores = np.where(hidden, -np.inf, scores)
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3)


@pytest.mark.parametrize(
    "attrs, bias_shape, build",
    [
        (dict(), None, False),
        (dict(scale=0.3, causal_mask="TopLeft"), (2, 3, 5, 7), False),
        (dict(causal_mask="BottomRight"), (5, 7), True),
        (dict(), (1, 3, 1, 7), False),
    ],
)
def test_attention(attrs, bias_shape, build):
    q, k, v = rand(2, 5, 3, 4), rand(2, 7, 3, 4), rand(2, 7, 3, 6)
    arrays = [q, k, v] + ([] if bias_shape is None else [rand(*bias_shape)])
    got = run_op("relax.nn.attention", arrays, attrs, build=build)
    bias = arrays[3] if bias_shape else None
    ref = attention_ref(q, k, v, bias, attrs.get("scale"), attrs.get("causal_mask"))
    assert got.shape == (2, 5, 3, 6)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_symbolic_sequence():
    s = te.size_var("s")
    info = get_op("relax.nn.attention").infer_info(
        [TensorInfo((1, s, 2, 8)), TensorInfo((1, s, 2, 8)), TensorInfo((1, s, 2, 4))], {}
    )
    assert info.shape[1] is s and info.shape[3].value == 4


def expect_error(infos, attrs, match):
    with pytest.raises(OpTypeError, match=match):
        get_op("relax.nn.attention").infer_info([TensorInfo(i) for i in infos], attrs)


def test_errors():
    q, k, v = (1, 5, 2, 4), (1, 6, 2, 4), (1, 6, 2, 3)
    expect_error(
        [q, (1, 6, 2, 5), v],
        {},
        r"relax.nn.attention: head size differs: 4 vs 5; "
        r"inputs \(Tensor\(\(1, 5, 2, 4\), float32\)",
    )
    expect_error([q, k, (1, 7, 2, 3)], {}, "key length differs")
    expect_error([q, (1, 6, 3, 4), v], {}, "heads differs")
    expect_error([q, k, v, (5, 5)], {}, "bias does not broadcast")
    expect_error([q, k, v], dict(causal_mask="Left"), "causal_mask")
    expect_error([q[:3], k, v], {}, "query must have rank 4")
    expect_error([q, k], {}, "takes 3 or 4 inputs")

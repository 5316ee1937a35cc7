"""Scaled dot-product attention (TVM's relax.nn.attention).

query (B, S, N, H), key (B, T, N, H), value (B, T, N, Hv), optional bias broadcastable to
(B, N, S, T) -> (B, S, N, Hv). scale defaults to 1 / sqrt(H); causal_mask "TopLeft" hides keys
j > i, "BottomRight" hides j > i + T - S. Legalized in stages like TVM: scores, row max, exp,
row sum, and the weighted sum of values divided by the row sum.
"""

from __future__ import annotations

import math

from schedlab import te
from schedlab.ir import op

from ._nn_common import check_float, check_rank, dims_differ, fail, static
from .registry import OpTypeError, TensorInfo, register_op

NAME = "relax.nn.attention"


def _check_bias(inputs: list[TensorInfo]) -> None:
    """bias: rank 2 to 4, broadcastable (static 1s) to (B, N, S, T)."""
    q, k = inputs[0].shape, inputs[1].shape
    target = (q[0], q[2], q[1], k[1])
    bias = inputs[3].shape
    if bias is None or not 2 <= len(bias) <= 4:
        raise fail(NAME, inputs, "bias must have rank 2 to 4, broadcastable to (B, N, S, T)")
    for have, want in zip(reversed(bias), reversed(target)):
        if static(have) != 1 and dims_differ(have, want):
            shape = ", ".join(str(d) for d in target)
            raise fail(NAME, inputs, f"bias does not broadcast to (B, N, S, T) = ({shape})")
    if inputs[3].dtype != inputs[0].dtype:
        raise fail(NAME, inputs, "bias must have the query's dtype")


def infer_attention(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """Checks ranks, the matching dims (batch, heads, head size, key length) and the mask."""
    if len(inputs) not in (3, 4):
        raise OpTypeError(
            f"{NAME} takes 3 or 4 inputs (query, key, value[, bias]), got {len(inputs)}"
        )
    for index, what in enumerate(("query", "key", "value")):
        check_rank(NAME, inputs, index, (4,), what)
    check_float(NAME, inputs)
    if len({i.dtype for i in inputs[:3]}) != 1:
        raise fail(NAME, inputs, "query, key and value must have the same dtype")
    q, k, v = (i.shape for i in inputs[:3])
    pairs = [
        ("batch", q[0], k[0]),
        ("batch", k[0], v[0]),
        ("heads", q[2], k[2]),
        ("heads", k[2], v[2]),
        ("head size", q[3], k[3]),
        ("key length", k[1], v[1]),
    ]
    for what, a, b in pairs:
        if dims_differ(a, b):
            raise fail(NAME, inputs, f"{what} differs: {a} vs {b}")
    if attrs["causal_mask"] not in (None, "TopLeft", "BottomRight"):
        raise fail(
            NAME,
            inputs,
            f"causal_mask must be None, 'TopLeft' or 'BottomRight', got {attrs['causal_mask']!r}",
        )
    if attrs["window_size"] is not None:
        raise fail(NAME, inputs, "window_size (sliding-window attention) is not supported")
    if len(inputs) == 4:
        _check_bias(inputs)
    return TensorInfo((q[0], q[1], q[2], v[3]), inputs[0].dtype)


def _bias_load(bias: te.Tensor, b, n, i, j):
    """bias[...] at (b, n, i, j), broadcasting from the right."""
    indices = (b, n, i, j)[4 - bias.ndim :]
    dims = bias.shape
    return bias[tuple(0 if static(d) == 1 else x for d, x in zip(dims, indices))]


def _scores(q, k, bias, attrs: dict) -> te.Tensor:
    """(B, N, S, T): scale * q.k (+ bias); masked positions get the dtype's lowest value."""
    head = q.shape[3]
    scale = attrs["scale"]
    if scale is None:
        size = static(head)
        scale = 1 / math.sqrt(size) if size is not None else te.rsqrt(op.cast(head, q.dtype))
    scale = op.const(scale, q.dtype) if isinstance(scale, (int, float)) else scale
    d = te.reduce_axis((0, head), name="d")
    shape = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
    dots = te.compute(
        shape,
        lambda b, n, i, j: te.sum(q[b, i, n, d] * k[b, j, n, d], axis=d),
        name="T_attention_qk",
    )
    shift = None
    if attrs["causal_mask"] == "BottomRight":
        shift = k.shape[1] - q.shape[1]

    def element(b, n, i, j):
        value = dots[b, n, i, j] * scale
        if bias is not None:
            value = value + _bias_load(bias, b, n, i, j)
        if attrs["causal_mask"] is None:
            return value
        limit = i if shift is None else i + shift
        return op.if_then_else(j <= limit, value, te.min_value(q.dtype))

    return te.compute(shape, element, name="T_attention_scores")


def legalize_attention(inputs: list, attrs: dict) -> te.Tensor:
    """Scores, row max, exp, row sum, then the weighted values over the row sum."""
    q, k, v = inputs[:3]
    bias = inputs[3] if len(inputs) == 4 else None
    scores = _scores(q, k, bias, attrs)
    t = scores.shape[3]
    rj = te.reduce_axis((0, t), name="rj")
    row_max = te.compute(
        scores.shape[:3],
        lambda b, n, i: te.max(scores[b, n, i, rj], axis=rj),
        name="T_attention_max",
    )
    probs = te.compute(
        scores.shape,
        lambda b, n, i, j: te.exp(scores[b, n, i, j] - row_max[b, n, i]),
        name="T_attention_exp",
    )
    rs = te.reduce_axis((0, t), name="rs")
    total = te.compute(
        scores.shape[:3],
        lambda b, n, i: te.sum(probs[b, n, i, rs], axis=rs),
        name="T_attention_sum",
    )
    rv = te.reduce_axis((0, t), name="rv")
    weighted = te.compute(
        (q.shape[0], q.shape[1], q.shape[2], v.shape[3]),
        lambda b, i, n, e: te.sum(probs[b, n, i, rv] * v[b, rv, n, e], axis=rv),
        name="T_attention_pv",
    )
    return te.compute(
        weighted.shape, lambda b, i, n, e: weighted[b, i, n, e] / total[b, n, i], name="T_attention"
    )


register_op(
    NAME,
    num_inputs=None,
    pattern="opaque",
    infer=infer_attention,
    legalize=legalize_attention,
    attrs={"scale": None, "causal_mask": None, "window_size": None},
    doc="Scaled dot-product attention on (batch, seq, heads, head_dim) tensors, optional bias "
    "and causal mask.",
)

"""Linear algebra operators: `relax.matmul` (numpy semantics: batched, broadcasting batch
dimensions, 1-D operands promoted and their axis dropped) and `relax.linear` (x @ w^T + b)."""

from __future__ import annotations

from schedlab import te
from schedlab.ir.expr import PrimExpr

from ._nn_common import as_dtype, check_rank, dims_differ, fail, out_dtype, same_dim, static
from .registry import OpTypeError, TensorInfo, register_op


def broadcast_batch(name: str, inputs, a: tuple, b: tuple) -> tuple[PrimExpr, ...]:
    """Numpy broadcasting of two batch shapes (static 1 stretches; static mismatches fail)."""
    rank = max(len(a), len(b))
    a = (None,) * (rank - len(a)) + tuple(a)
    b = (None,) * (rank - len(b)) + tuple(b)
    result = []
    for x, y in zip(a, b):
        if x is None or static(x) == 1:
            result.append(y if y is not None else x)
        elif y is None or static(y) == 1 or same_dim(x, y):
            result.append(x)
        elif dims_differ(x, y):
            raise fail(name, inputs, f"batch dimensions {x} and {y} do not broadcast")
        else:
            result.append(x)  # symbolic: assumed equal, as TVM does
    return tuple(result)


def _matmul_parts(name: str, inputs: list[TensorInfo]):
    """(a batch, M, K), (b batch, K, N) and the output shape, checking K agrees."""
    for index, what in ((0, "the first operand"), (1, "the second operand")):
        if inputs[index].shape is None or inputs[index].ndim < 1:
            raise fail(name, inputs, f"{what} must have rank >= 1")
    a, b = inputs[0].shape, inputs[1].shape
    a_k, b_k = a[-1], (b[0] if len(b) == 1 else b[-2])
    if dims_differ(a_k, b_k):
        raise fail(name, inputs, f"reduction dimensions differ: {a_k} vs {b_k}")
    batch = broadcast_batch(name, inputs, a[:-2], b[:-2])
    return batch + (a[-2:-1] if len(a) > 1 else ()) + (b[-1:] if len(b) > 1 else ())


def infer_matmul(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """Output shape of numpy-style matmul; dtypes must agree unless out_dtype is given."""
    name = "relax.matmul"
    if inputs[0].dtype != inputs[1].dtype and attrs.get("out_dtype") in (None, "", "void"):
        raise fail(name, inputs, "operand dtypes differ; give out_dtype")
    return TensorInfo(_matmul_parts(name, inputs), out_dtype(inputs, attrs))


def _batch_index(tensor: te.Tensor, batch_indices: tuple, keep: int) -> list:
    """Indices into `tensor`'s batch dims from the output's, 0 where the tensor broadcasts."""
    dims = tensor.shape[: tensor.ndim - keep]
    own = batch_indices[len(batch_indices) - len(dims) :] if dims else ()
    return [0 if static(d) == 1 else i for d, i in zip(dims, own)]


def matmul_te(a: te.Tensor, b: te.Tensor, dtype, name: str = "matmul") -> te.Tensor:
    """The matmul stage: a sum over K; both operands are cast to `dtype` first."""
    info = [TensorInfo(a.shape, a.dtype), TensorInfo(b.shape, b.dtype)]
    shape = _matmul_parts("relax.matmul", info)
    k = te.reduce_axis((0, a.shape[-1]), name="k")
    a_rows, b_cols = a.ndim > 1, b.ndim > 1
    batch_rank = len(shape) - a_rows - b_cols

    def element(*indices):
        batch = indices[:batch_rank]
        rows = list(indices[batch_rank : batch_rank + a_rows])
        a_idx = _batch_index(a, batch, 1 + a_rows) + rows + [k]
        cols = list(indices[len(indices) - b_cols :])
        b_idx = _batch_index(b, batch, 1 + b_cols) + [k] + cols
        return te.sum(as_dtype(a[tuple(a_idx)], dtype) * as_dtype(b[tuple(b_idx)], dtype), axis=k)

    return te.compute(shape, element, name=name)


def legalize_matmul(inputs: list, attrs: dict) -> te.Tensor:
    """One stage: a sum over K, operands cast to out_dtype."""
    a, b = inputs
    dtype = out_dtype([TensorInfo(a.shape, a.dtype)], attrs)
    return matmul_te(a, b, dtype)


def infer_linear(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    """linear(x, w[, b]): x (..., K), w (N, K), b (N,) or broadcastable -> (..., N)."""
    name = "relax.linear"
    if len(inputs) not in (2, 3):
        raise OpTypeError(f"{name} takes 2 or 3 inputs (data, weight[, bias]), got {len(inputs)}")
    check_rank(name, inputs, 1, (1, 2), "weight")
    if inputs[0].shape is None or inputs[0].ndim < 1:
        raise fail(name, inputs, "data must have rank >= 1")
    weight = inputs[1].shape
    if dims_differ(inputs[0].shape[-1], weight[-1]):
        raise fail(
            name, inputs, f"data's last dimension {inputs[0].shape[-1]} != weight's {weight[-1]}"
        )
    shape = inputs[0].shape[:-1] + ((weight[0],) if len(weight) == 2 else ())
    if len(inputs) == 3:
        bias = inputs[2].shape
        if bias is None or len(bias) > 1 or (bias and weight and dims_differ(bias[-1], weight[0])):
            raise fail(name, inputs, "bias must be a scalar or (N,) with N = weight's rows")
    if len({i.dtype for i in inputs}) != 1 and attrs.get("out_dtype") in (None, "", "void"):
        raise fail(name, inputs, "input dtypes differ; give out_dtype")
    return TensorInfo(shape, out_dtype(inputs, attrs))


def legalize_linear(inputs: list, attrs: dict) -> te.Tensor:
    """matmul against the transposed weight, then the bias add (one fused stage)."""
    x, w = inputs[0], inputs[1]
    dtype = out_dtype([TensorInfo(x.shape, x.dtype)], attrs)
    k = te.reduce_axis((0, x.shape[-1]), name="k")
    bias = inputs[2] if len(inputs) == 3 else None
    two_d = w.ndim == 2

    def product(*indices):
        rows = indices[:-1] if two_d else indices
        w_idx = (indices[-1], k) if two_d else (k,)
        x_load = as_dtype(x[(*rows, k)], dtype)
        return te.sum(x_load * as_dtype(w[w_idx], dtype), axis=k)

    shape = tuple(x.shape[:-1]) + ((w.shape[0],) if two_d else ())
    out = te.compute(shape, product, name="matmul")
    if bias is None:
        return out

    def add(*indices):
        if bias.ndim == 0:
            value = bias[()]
        else:
            value = bias[0] if static(bias.shape[0]) == 1 else bias[indices[-1]]
        return out[indices] + as_dtype(value, dtype)

    return te.compute(shape, add, name="T_add")


register_op(
    "relax.matmul",
    num_inputs=2,
    pattern="out_ewise_fusable",
    infer=infer_matmul,
    legalize=legalize_matmul,
    attrs={"out_dtype": None},
    doc="Matrix product with numpy semantics (batched, broadcasting batch dims, 1-D operands).",
)
register_op(
    "relax.linear",
    num_inputs=None,
    pattern="out_ewise_fusable",
    infer=infer_linear,
    legalize=legalize_linear,
    attrs={"out_dtype": None},
    doc="linear(x, w[, b]) = x @ w^T + b, w of shape (N, K) as in torch.nn.Linear.",
)

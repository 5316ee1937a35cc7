"""Element-wise operators: numpy-broadcasting binary arithmetic and comparisons, unary math and
activations (relu, gelu, ...), where, clip and astype. Names and attributes follow TVM Relax;
each legalizes to one TE stage named `T_<op>` (TVM's topi names)."""

from __future__ import annotations

import math

from schedlab import te
from schedlab.ir import op as tir
from schedlab.ir.dtype import DataType

from ._common import (
    broadcast_index,
    broadcast_shapes,
    fail,
    float_dtype,
    known_shape,
    normalize_axis,
    same_dtype,
)
from .registry import REQUIRED, TensorInfo, register_op

# --------------------------------------------------------------------------- binary (broadcast)


def _binary_infer(name: str, result_dtype: str | None):
    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        dtype = same_dtype(name, inputs)
        if name == "relax.power":
            float_dtype(name, inputs)  # the pow intrinsic is float-only
        shape = broadcast_shapes(name, inputs)
        return TensorInfo(shape, result_dtype or dtype)

    return infer


def _binary_legalize(fn, stage: str):
    def legalize(inputs: list, attrs: dict):
        a, b = inputs
        shape = _te_broadcast_shape(a, b)

        def element(*i):
            return fn(a[broadcast_index(a, shape, i)], b[broadcast_index(b, shape, i)])

        return te.compute(shape, element, name=stage)

    return legalize


def _te_broadcast_shape(*tensors) -> tuple:
    infos = [TensorInfo(t.shape, t.dtype) for t in tensors]
    return broadcast_shapes("legalize", infos)


def _divide(a, b):
    # relax.divide is true division; on integers TVM's topi.divide truncates like C.
    return tir.div(a, b)


_BINARY = {
    "add": (tir.add, None),
    "subtract": (tir.sub, None),
    "multiply": (tir.mul, None),
    "divide": (_divide, None),
    "power": (tir.pow, None),
    "maximum": (tir.max, None),
    "minimum": (tir.min, None),
    "floor_divide": (tir.floordiv, None),
    "equal": (tir.eq, "bool"),
    "not_equal": (tir.ne, "bool"),
    "less": (tir.lt, "bool"),
    "less_equal": (tir.le, "bool"),
    "greater": (tir.gt, "bool"),
    "greater_equal": (tir.ge, "bool"),
}

for _name, (_fn, _out) in _BINARY.items():
    register_op(
        f"relax.{_name}",
        num_inputs=2,
        pattern="broadcast",
        infer=_binary_infer(f"relax.{_name}", _out),
        legalize=_binary_legalize(_fn, f"T_{_name}"),
        doc=f"Element-wise {_name} with numpy broadcasting.",
    )

# --------------------------------------------------------------------------------------- unary


def _unary_infer(name: str, needs_float: bool):
    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        known_shape(name, inputs)
        dtype = float_dtype(name, inputs) if needs_float else inputs[0].dtype
        return TensorInfo(inputs[0].shape, dtype)

    return infer


def _unary_legalize(fn, stage: str):
    def legalize(inputs: list, attrs: dict):
        (x,) = inputs
        return te.compute(x.shape, lambda *i: fn(x[i], attrs), name=stage)

    return legalize


def _c(value, like):
    return tir.const(value, like.dtype)


def _sign(x, attrs):
    one, zero = _c(1, x), _c(0, x)
    return tir.select(x > zero, one, tir.select(x < zero, -one, zero))


def _elu_like(x, alpha):
    return tir.select(x > _c(0, x), x, _c(alpha, x) * (tir.exp(x) - _c(1, x)))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _gelu(x, attrs):
    half = _c(0.5, x)
    return half * x * (_c(1, x) + tir.erf(x * _c(1 / math.sqrt(2), x)))


def _gelu_tanh(x, attrs):
    inner = _c(math.sqrt(2 / math.pi), x) * (x + _c(0.044715, x) * x * x * x)
    return _c(0.5, x) * x * (_c(1, x) + tir.tanh(inner))


def _softplus(x, attrs):
    beta, threshold = _c(attrs["beta"], x), _c(attrs["threshold"], x)
    scaled = beta * x
    smooth = tir.log(_c(1, x) + tir.exp(scaled)) / beta
    return tir.select(scaled > threshold, x, smooth)


# name -> (expression, needs float, attrs, pattern)
_UNARY = {
    "relax.exp": (lambda x, a: tir.exp(x), True, {}),
    "relax.log": (lambda x, a: tir.log(x), True, {}),
    "relax.sqrt": (lambda x, a: tir.sqrt(x), True, {}),
    "relax.rsqrt": (lambda x, a: tir.rsqrt(x), True, {}),
    "relax.erf": (lambda x, a: tir.erf(x), True, {}),
    "relax.tanh": (lambda x, a: tir.tanh(x), True, {}),
    "relax.sigmoid": (lambda x, a: tir.sigmoid(x), True, {}),
    "relax.negative": (lambda x, a: -x, False, {}),
    "relax.abs": (lambda x, a: tir.abs(x), False, {}),
    "relax.sign": (_sign, False, {}),
    "relax.nn.relu": (lambda x, a: tir.max(x, _c(0, x)), False, {}),
    "relax.nn.leakyrelu": (
        lambda x, a: tir.select(x > _c(0, x), x, x * _c(a["alpha"], x)),
        True,
        {"alpha": 0.01},
    ),
    "relax.nn.elu": (lambda x, a: _elu_like(x, a["alpha"]), True, {"alpha": 1.0}),
    "relax.nn.selu": (lambda x, a: _c(_SELU_SCALE, x) * _elu_like(x, _SELU_ALPHA), True, {}),
    "relax.nn.gelu": (_gelu, True, {}),
    "relax.nn.gelu_tanh": (_gelu_tanh, True, {}),
    "relax.nn.silu": (lambda x, a: x * tir.sigmoid(x), True, {}),
    "relax.nn.softplus": (_softplus, True, {"beta": 1.0, "threshold": 20.0}),
}

for _name, (_fn, _float, _attrs) in _UNARY.items():
    _short = _name.rsplit(".", 1)[1]
    register_op(
        _name,
        num_inputs=1,
        pattern="elemwise",
        infer=_unary_infer(_name, _float),
        legalize=_unary_legalize(_fn, f"T_{_short}"),
        attrs=_attrs,
        doc=f"Element-wise {_short}.",
    )

# -------------------------------------------------------------------------------------- prelu


def _prelu_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    name = "relax.nn.prelu"
    known_shape(name, inputs)
    x, alpha = inputs
    same_dtype(name, inputs)
    float_dtype(name, inputs)
    axis = normalize_axis(name, inputs, attrs["axis"], x.ndim)
    if alpha.ndim != 1:
        raise fail(name, inputs, f"alpha must be 1-D, got rank {alpha.ndim}")
    alpha_len = alpha.static_shape()
    dim = x.static_shape()[axis] if x.static_shape() else None
    if alpha_len and alpha_len[0] != 1 and dim is not None and alpha_len[0] != dim:
        raise fail(name, inputs, f"alpha has {alpha_len[0]} elements, axis {axis} has {dim}")
    return TensorInfo(x.shape, x.dtype)


def _prelu_legalize(inputs: list, attrs: dict):
    x, alpha = inputs
    axis = attrs["axis"] % len(x.shape)
    single = tir.const(0, "int32") if _is_one(alpha.shape[0]) else None

    def element(*i):
        slope = alpha[single if single is not None else i[axis]]
        return tir.select(x[i] > _c(0, x[i]), x[i], x[i] * slope)

    return te.compute(x.shape, element, name="T_prelu")


def _is_one(dim) -> bool:
    return getattr(dim, "value", None) == 1


register_op(
    "relax.nn.prelu",
    num_inputs=2,
    pattern="broadcast",
    infer=_prelu_infer,
    legalize=_prelu_legalize,
    attrs={"axis": 1},
    doc="x if x > 0 else alpha[channel] * x, channels along `axis`.",
)

# ----------------------------------------------------------------------- where / clip / astype


def _where_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    name = "relax.where"
    cond, x, y = inputs
    if not cond.dtype.is_bool:
        raise fail(name, inputs, f"condition must be bool, got {cond.dtype}")
    dtype = same_dtype(name, [x, y])
    return TensorInfo(broadcast_shapes(name, inputs), dtype)


def _where_legalize(inputs: list, attrs: dict):
    cond, x, y = inputs
    shape = _te_broadcast_shape(cond, x, y)

    def element(*i):
        pick = cond[broadcast_index(cond, shape, i)]
        return tir.select(pick, x[broadcast_index(x, shape, i)], y[broadcast_index(y, shape, i)])

    return te.compute(shape, element, name="T_where")


register_op(
    "relax.where",
    num_inputs=3,
    pattern="broadcast",
    infer=_where_infer,
    legalize=_where_legalize,
    doc="x where condition else y, all three broadcast.",
)


def _clip_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    name = "relax.clip"
    known_shape(name, inputs)
    lo, hi = attrs["min"], attrs["max"]
    for key in ("min", "max"):
        value = attrs[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise fail(name, inputs, f"{key} must be a number or None, got {value!r}")
    if lo is not None and hi is not None and lo > hi:
        raise fail(name, inputs, f"min {lo} is greater than max {hi}")
    return TensorInfo(inputs[0].shape, inputs[0].dtype)


def _clip_legalize(inputs: list, attrs: dict):
    (x,) = inputs

    def element(*i):
        value = x[i]
        if attrs["min"] is not None:
            value = tir.max(value, _c(attrs["min"], value))
        if attrs["max"] is not None:
            value = tir.min(value, _c(attrs["max"], value))
        return value

    return te.compute(x.shape, element, name="T_clip")


register_op(
    "relax.clip",
    num_inputs=1,
    pattern="elemwise",
    infer=_clip_infer,
    legalize=_clip_legalize,
    attrs={"min": None, "max": None},
    doc="Values limited to [min, max] (None: no bound on that side).",
)


def _astype_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    known_shape("relax.astype", inputs)
    try:
        dtype = DataType(attrs["dtype"])
    except (TypeError, ValueError) as err:
        raise fail("relax.astype", inputs, f"bad dtype {attrs['dtype']!r}: {err}") from None
    return TensorInfo(inputs[0].shape, dtype)


def _astype_legalize(inputs: list, attrs: dict):
    (x,) = inputs
    dtype = DataType(attrs["dtype"])
    return te.compute(x.shape, lambda *i: tir.cast(x[i], dtype), name="T_cast")


register_op(
    "relax.astype",
    num_inputs=1,
    pattern="elemwise",
    infer=_astype_infer,
    legalize=_astype_legalize,
    attrs={"dtype": REQUIRED},
    doc="Each element converted to `dtype`.",
)

"""Indexing, padding and creation operators: take, gather_elements, nn.pad, full, zeros, ones.
All injective; names and attributes follow TVM Relax (where TVM passes a shape or a fill value
as an argument, here it is the attribute `shape` / `fill_value`)."""

from __future__ import annotations

from schedlab import te
from schedlab.ir import op as tir

from ._common import (
    fail,
    int_list,
    known_shape,
    normalize_axis,
    product,
    register_injective,
    static_value,
    unravel,
)
from .registry import REQUIRED, TensorInfo, register_op

# --------------------------------------------------------------------------- take / gather


def _index_dtype_check(name: str, inputs, indices: TensorInfo) -> None:
    if not indices.dtype.is_integer:
        raise fail(name, inputs, f"indices must be integers, got {indices.dtype}")


def _take_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    name = "relax.take"
    known_shape(name, inputs)
    x, indices = inputs
    _index_dtype_check(name, inputs, indices)
    if attrs["mode"] not in ("fast", "clip", "wrap"):
        raise fail(name, inputs, f"mode must be fast, clip or wrap, got {attrs['mode']!r}")
    if attrs["axis"] is None:
        return TensorInfo(indices.shape, x.dtype)
    axis = normalize_axis(name, inputs, attrs["axis"], x.ndim)
    return TensorInfo(x.shape[:axis] + indices.shape + x.shape[axis + 1 :], x.dtype)


def _wrap_index(index, extent, mode: str):
    """An index into an axis of `extent`: negative counts from the end (ONNX Gather); `clip`
    clamps into range, `wrap` takes it modulo the extent."""
    extent = tir.cast(extent, index.dtype)
    if mode == "wrap":
        return tir.floormod(index, extent)
    index = tir.select(index < tir.const(0, index.dtype), index + extent, index)
    if mode == "clip":
        zero = tir.const(0, index.dtype)
        index = tir.min(tir.max(index, zero), extent - tir.const(1, index.dtype))
    return index


def _take_legalize(inputs: list, attrs: dict):
    x, indices = inputs
    mode, k = attrs["mode"], len(indices.shape)
    if attrs["axis"] is None:
        total = product(x.shape)

        def flat(*i):
            where = _wrap_index(indices[i], total, mode)
            return x[tuple(unravel(where, x.shape))]

        return te.compute(indices.shape, flat, name="T_take")
    axis = attrs["axis"] % len(x.shape)
    shape = tuple(x.shape[:axis]) + tuple(indices.shape) + tuple(x.shape[axis + 1 :])

    def element(*i):
        where = _wrap_index(indices[i[axis : axis + k]], x.shape[axis], mode)
        return x[tuple(i[:axis]) + (where,) + tuple(i[axis + k :])]

    return te.compute(shape, element, name="T_take")


register_injective(
    "take",
    _take_infer,
    _take_legalize,
    {"axis": None, "mode": "fast"},
    num_inputs=2,
    doc="Elements of x at `indices` along `axis` (None: of the flattened x).",
)


def _gather_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    name = "relax.gather_elements"
    known_shape(name, inputs)
    x, indices = inputs
    _index_dtype_check(name, inputs, indices)
    if x.ndim != indices.ndim:
        raise fail(name, inputs, "data and indices must have the same rank")
    normalize_axis(name, inputs, attrs["axis"], x.ndim)
    return TensorInfo(indices.shape, x.dtype)


def _gather_legalize(inputs: list, attrs: dict):
    x, indices = inputs
    axis = attrs["axis"] % len(x.shape)

    def element(*i):
        where = _wrap_index(indices[i], x.shape[axis], "fast")
        return x[tuple(where if d == axis else v for d, v in enumerate(i))]

    return te.compute(indices.shape, element, name="T_gather_elements")


register_injective(
    "gather_elements",
    _gather_infer,
    _gather_legalize,
    {"axis": 0},
    num_inputs=2,
    doc="out[i][j] = x[indices[i][j]][j] for axis 0 (ONNX GatherElements).",
)

# ---------------------------------------------------------------------------------------- pad


def _pad_pairs(name: str, inputs, attrs: dict) -> list[tuple[int, int]]:
    """(before, after) per axis from `pad_width`: pairs, or flat [b0, a0, b1, a1, ...] (TVM)."""
    x, width = inputs[0], attrs["pad_width"]
    if attrs["pad_mode"] != "constant":
        raise fail(name, inputs, f"pad_mode {attrs['pad_mode']!r} is not supported (constant)")
    if width and isinstance(width[0], (list, tuple)):
        pairs = [tuple(int_list(name, inputs, p, "pad_width pair")) for p in width]
    else:
        flat = int_list(name, inputs, width, "pad_width")
        pairs = list(zip(flat[0::2], flat[1::2]))
    if len(pairs) != x.ndim or any(len(p) != 2 for p in pairs):
        raise fail(name, inputs, f"pad_width needs (before, after) for {x.ndim} axes: {width}")
    if any(v < 0 for p in pairs for v in p):
        raise fail(name, inputs, f"pad_width must be >= 0, got {width}")
    return pairs


def _pad_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    known_shape("relax.nn.pad", inputs)
    pairs = _pad_pairs("relax.nn.pad", inputs, attrs)
    shape = tuple(d + b + a for d, (b, a) in zip(inputs[0].shape, pairs))
    return TensorInfo(shape, inputs[0].dtype)


def _pad_legalize(inputs: list, attrs: dict):
    (x,) = inputs
    pairs = _pad_pairs("relax.nn.pad", [TensorInfo(x.shape, x.dtype)], attrs)
    shape = tuple(d + b + a for d, (b, a) in zip(x.shape, pairs))
    fill = tir.const(attrs["pad_value"], x.dtype)

    def element(*i):
        guards = []
        for v, d, (before, _) in zip(i, x.shape, pairs):
            if before:
                guards.append(v >= before)
            guards.append(v < d + before)
        load = x[tuple(v - b for v, (b, _) in zip(i, pairs))]
        return tir.if_then_else(tir.all(*guards), load, fill) if guards else load

    return te.compute(shape, element, name="T_pad")


register_op(
    "relax.nn.pad",
    num_inputs=1,
    pattern="injective",
    infer=_pad_infer,
    legalize=_pad_legalize,
    attrs={"pad_width": REQUIRED, "pad_value": 0.0, "pad_mode": "constant"},
    doc="Constant padding: (before, after) per axis filled with `pad_value`.",
)

# -------------------------------------------------------------------------- full/zeros/ones


def _creation(name: str, fixed):
    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        shape = attrs["shape"]
        if not isinstance(shape, (list, tuple)):
            raise fail(name, inputs, f"shape must be a list, got {shape!r}")
        if any(static_value(tir.convert(d)) is not None and int(d) < 0 for d in shape):
            raise fail(name, inputs, f"shape {list(shape)} has a negative dimension")
        try:
            return TensorInfo(tuple(shape), attrs["dtype"])
        except (TypeError, ValueError) as err:
            raise fail(name, inputs, f"bad shape or dtype: {err}") from None

    def legalize(inputs: list, attrs: dict):
        info = TensorInfo(tuple(attrs["shape"]), attrs["dtype"])
        value = tir.const(attrs["fill_value"] if fixed is None else fixed, info.dtype)
        return te.compute(info.shape, lambda *i: value, name=f"T_{name.rsplit('.', 1)[1]}")

    return infer, legalize


for _name, _fixed in (("full", None), ("zeros", 0), ("ones", 1)):
    _attrs = {"shape": REQUIRED, "dtype": "float32"}
    if _fixed is None:
        _attrs["fill_value"] = REQUIRED
    _fill = "fill_value" if _fixed is None else _fixed
    register_injective(
        _name,
        *_creation(f"relax.{_name}", _fixed),
        _attrs,
        num_inputs=0,
        doc=f"A new tensor of `shape` and `dtype` filled with {_fill}.",
    )

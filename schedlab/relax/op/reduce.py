"""Reductions over axes: sum, mean, max, min, prod (attrs `axis`, `keepdims`) and argmax/argmin
(attrs `axis` (an int or None for all axes), `keepdims`; int64 output, the first extreme index
like numpy). Legalized to TE reductions named like TVM's topi (`T_sum`, `T_mean`, ...)."""

from __future__ import annotations

from schedlab import te
from schedlab.ir import op as tir

from ._common import fail, known_shape, normalize_axes, normalize_axis, product
from .registry import TensorInfo, register_op

_prod = te.comm_reducer(lambda x, y: x * y, lambda t: tir.const(1, t), name="prod")
_REDUCERS = {"sum": te.sum, "max": te.max, "min": te.min, "prod": _prod, "mean": te.sum}


def _reduced_shape(shape, axes: list[int], keepdims: bool) -> tuple:
    one = tir.const(1, "int32")
    out = []
    for d, dim in enumerate(shape):
        if d not in axes:
            out.append(dim)
        elif keepdims:
            out.append(one)
    return tuple(out)


def _reduce_infer(name: str):
    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        known_shape(name, inputs)
        (x,) = inputs
        axes = normalize_axes(name, inputs, attrs["axis"], x.ndim)
        if name.endswith("mean") and not x.dtype.is_float:
            raise fail(name, inputs, f"mean needs a float input, got {x.dtype}")
        return TensorInfo(_reduced_shape(x.shape, axes, bool(attrs["keepdims"])), x.dtype)

    return infer


def _reduce_stage(x, axes: list[int], keepdims: bool, reducer, name: str):
    """One TE reduction of `x` over `axes`."""
    raxes = {d: te.reduce_axis((0, x.shape[d]), name=f"k{d}") for d in axes}
    shape = _reduced_shape(x.shape, axes, keepdims)

    def element(*i):
        it = iter(i)
        index = []
        for d in range(len(x.shape)):
            if d in raxes:
                if keepdims:
                    next(it)
                index.append(raxes[d])
            else:
                index.append(next(it))
        return reducer(x[tuple(index)], axis=list(raxes.values()))

    return te.compute(shape, element, name=name)


def _reduce_legalize(kind: str):
    def legalize(inputs: list, attrs: dict):
        (x,) = inputs
        axes = sorted({a % len(x.shape) for a in _axis_list(attrs["axis"], len(x.shape))})
        keepdims = bool(attrs["keepdims"])
        if kind != "mean":
            return _reduce_stage(x, axes, keepdims, _REDUCERS[kind], f"T_{kind}")
        total = _reduce_stage(x, axes, keepdims, te.sum, "T_sum")
        count = tir.cast(product([x.shape[a] for a in axes]), x.dtype)
        return te.compute(total.shape, lambda *i: total[i] / count, name="T_mean")

    return legalize


def _axis_list(axis, ndim: int) -> list[int]:
    if axis is None:
        return list(range(ndim))
    return [axis] if isinstance(axis, int) else list(axis)


for _kind in ("sum", "mean", "max", "min", "prod"):
    register_op(
        f"relax.{_kind}",
        num_inputs=1,
        pattern="comm_reduce",
        infer=_reduce_infer(f"relax.{_kind}"),
        legalize=_reduce_legalize(_kind),
        attrs={"axis": None, "keepdims": False},
        doc=f"The {_kind} over `axis` (None: all axes); `keepdims` keeps them as size 1.",
    )

# ----------------------------------------------------------------------------- argmax / argmin


def _arg_infer(name: str):
    def infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
        known_shape(name, inputs)
        (x,) = inputs
        axis = attrs["axis"]
        if axis is not None:
            axis = normalize_axis(name, inputs, axis, x.ndim)
        axes = list(range(x.ndim)) if axis is None else [axis]
        return TensorInfo(_reduced_shape(x.shape, axes, bool(attrs["keepdims"])), "int64")

    return infer


def _arg_legalize(kind: str):
    """Two stages: the extreme value, then the smallest linear index holding it (numpy picks
    the first occurrence)."""

    def legalize(inputs: list, attrs: dict):
        (x,) = inputs
        ndim = len(x.shape)
        axes = list(range(ndim)) if attrs["axis"] is None else [attrs["axis"] % ndim]
        keepdims = bool(attrs["keepdims"])
        reducer = te.max if kind == "argmax" else te.min
        extreme = _reduce_stage(x, axes, keepdims, reducer, f"T_{kind}_value")
        return _first_index(x, extreme, axes, keepdims, f"T_{kind}")

    return legalize


def _first_index(x, extreme, axes: list[int], keepdims: bool, name: str):
    raxes = {d: te.reduce_axis((0, x.shape[d]), name=f"k{d}") for d in axes}
    big = tir.const(2**62, "int64")

    def element(*i):
        it, index, linear = iter(i), [], tir.const(0, "int64")
        for d in range(len(x.shape)):
            if d in raxes:
                if keepdims:
                    next(it)
                index.append(raxes[d])
                linear = linear * tir.cast(x.shape[d], "int64") + tir.cast(raxes[d], "int64")
            else:
                index.append(next(it))
        hit = x[tuple(index)] == extreme[i]
        return te.min(tir.select(hit, linear, big), axis=list(raxes.values()))

    return te.compute(extreme.shape, element, name=name)


for _kind in ("argmax", "argmin"):
    register_op(
        f"relax.{_kind}",
        num_inputs=1,
        pattern="comm_reduce",
        infer=_arg_infer(f"relax.{_kind}"),
        legalize=_arg_legalize(_kind),
        attrs={"axis": None, "keepdims": False},
        doc=f"The index of the {_kind[3:]} along `axis` (None: over the flattened tensor).",
    )

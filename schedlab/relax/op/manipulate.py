"""Shape operators: reshape, flatten, squeeze, expand_dims, permute_dims, concat, split,
strided_slice, broadcast_to, tile (take, gather_elements, nn.pad and full/zeros/ones are in
`indexing.py`). All injective; names and attributes follow TVM Relax (where TVM passes a shape
as an argument, here it is the attribute `shape`)."""

from __future__ import annotations

from schedlab import te
from schedlab.ir import op as tir
from schedlab.ir.expr import PrimExpr

from ._common import (
    broadcast_index,
    broadcast_shapes,
    fail,
    int_list,
    known_shape,
    normalize_axes,
    normalize_axis,
    product,
    register_injective,
    same_dim,
    same_dtype,
    static_value,
    unravel,
)
from .registry import REQUIRED, TensorInfo


def _ravel(indices, shape) -> PrimExpr:
    linear: PrimExpr = tir.const(0, "int32")
    for index, dim in zip(indices, shape):
        linear = linear * dim + index
    return linear


def _reshape_to(x, shape, name: str):
    return te.compute(shape, lambda *i: x[tuple(unravel(_ravel(i, shape), x.shape))], name=name)


# ------------------------------------------------------------------------------------ reshape


def _reshape_shape(name: str, inputs, new_shape) -> tuple:
    """The target shape with ONNX/TVM rules: 0 copies the input dim, -1 is inferred."""
    x = inputs[0]
    dims = int_list(name, inputs, new_shape, "shape") if not _has_expr(new_shape) else new_shape
    out: list = []
    for d, dim in enumerate(dims):
        if isinstance(dim, int) and dim == 0:
            if d >= x.ndim:
                raise fail(name, inputs, f"shape {list(dims)}: 0 at position {d} has no input dim")
            out.append(x.shape[d])
        elif isinstance(dim, int) and dim < -1:
            raise fail(name, inputs, f"shape {list(dims)} has an invalid dimension {dim}")
        else:
            out.append(dim)
    return _infer_minus_one(name, inputs, out)


def _has_expr(shape) -> bool:
    return isinstance(shape, (list, tuple)) and any(isinstance(d, PrimExpr) for d in shape)


def _infer_minus_one(name: str, inputs, out: list) -> tuple:
    holes = [d for d, dim in enumerate(out) if isinstance(dim, int) and dim == -1]
    if len(holes) > 1:
        raise fail(name, inputs, f"shape {out} has more than one -1")
    given = [tir.convert(d) for d in out if not (isinstance(d, int) and d == -1)]
    total, known = _cancel(list(inputs[0].shape), given)
    if holes:
        if static_value(known) == 0:
            raise fail(name, inputs, f"shape {out}: cannot infer -1 with a zero-size dim")
        if _static_mismatch(total, known, divide=True):
            raise fail(name, inputs, f"cannot reshape {static_value(total)} elements to {out}")
        out[holes[0]] = tir.floordiv(total, known)
    elif _static_mismatch(total, known, divide=False):
        raise fail(name, inputs, f"cannot reshape {static_value(total)} elements to {out}")
    return tuple(out)


def _cancel(in_dims: list, out_dims: list) -> tuple:
    """The element counts of both sides with symbolic dims common to both cancelled, so that
    (n, 4, 3) -> (n, -1) infers 12, not (n * 12) // n."""
    rest_in, rest_out = list(in_dims), []
    for dim in out_dims:
        match = next(
            (k for k, d in enumerate(rest_in) if static_value(dim) is None and same_dim(d, dim)),
            None,
        )
        if match is None:
            rest_out.append(dim)
        else:
            del rest_in[match]
    return product(rest_in), product(rest_out)


def _static_mismatch(total, known, divide: bool) -> bool:
    t, k = static_value(total), static_value(known)
    if t is None or k is None:
        return False
    return t % k != 0 if divide else t != k


def _reshape_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    known_shape("relax.reshape", inputs)
    return TensorInfo(_reshape_shape("relax.reshape", inputs, attrs["shape"]), inputs[0].dtype)


def _reshape_legalize(inputs: list, attrs: dict):
    (x,) = inputs
    shape = _reshape_shape("relax.reshape", [TensorInfo(x.shape, x.dtype)], attrs["shape"])
    return _reshape_to(x, shape, "T_reshape")


register_injective(
    "reshape",
    _reshape_infer,
    _reshape_legalize,
    {"shape": REQUIRED},
    doc="The same elements in a new shape (0 copies a dim, -1 is inferred).",
)


def _flatten_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    known_shape("relax.flatten", inputs)
    return TensorInfo((product(inputs[0].shape),), inputs[0].dtype)


def _flatten_legalize(inputs: list, attrs: dict):
    (x,) = inputs
    return _reshape_to(x, (product(x.shape),), "T_reshape")


register_injective(
    "flatten", _flatten_infer, _flatten_legalize, doc="The elements as a 1-D tensor."
)

# ------------------------------------------------------------------------ squeeze/expand_dims


def _squeeze_axes(inputs, axis) -> list[int]:
    x = inputs[0]
    if axis is None:
        return [d for d, dim in enumerate(x.shape) if static_value(dim) == 1]
    axes = normalize_axes("relax.squeeze", inputs, axis, x.ndim)
    for a in axes:
        if static_value(x.shape[a]) not in (1, None):
            raise fail("relax.squeeze", inputs, f"axis {a} has size {x.shape[a]}, not 1")
    return axes


def _squeeze_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    known_shape("relax.squeeze", inputs)
    axes = _squeeze_axes(inputs, attrs["axis"])
    x = inputs[0]
    return TensorInfo(tuple(d for a, d in enumerate(x.shape) if a not in axes), x.dtype)


def _squeeze_legalize(inputs: list, attrs: dict):
    (x,) = inputs
    axes = _squeeze_axes([TensorInfo(x.shape, x.dtype)], attrs["axis"])
    shape = tuple(d for a, d in enumerate(x.shape) if a not in axes)

    def element(*i):
        it = iter(i)
        return x[tuple(tir.const(0, "int32") if a in axes else next(it) for a in range(x.ndim))]

    return te.compute(shape, element, name="T_squeeze")


register_injective(
    "squeeze",
    _squeeze_infer,
    _squeeze_legalize,
    {"axis": None},
    doc="Size-1 axes removed (`axis` None: all of them).",
)


def _expand_axes(inputs, axis) -> list[int]:
    axes = int_list("relax.expand_dims", inputs, axis, "axis")
    return sorted(normalize_axes("relax.expand_dims", inputs, axes, inputs[0].ndim + len(axes)))


def _expand_shape(shape, axes: list[int]) -> tuple:
    it = iter(shape)
    one = tir.const(1, "int32")
    return tuple(one if d in axes else next(it) for d in range(len(shape) + len(axes)))


def _expand_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    known_shape("relax.expand_dims", inputs)
    axes = _expand_axes(inputs, attrs["axis"])
    return TensorInfo(_expand_shape(inputs[0].shape, axes), inputs[0].dtype)


def _expand_legalize(inputs: list, attrs: dict):
    (x,) = inputs
    axes = _expand_axes([TensorInfo(x.shape, x.dtype)], attrs["axis"])
    shape = _expand_shape(x.shape, axes)
    return te.compute(
        shape,
        lambda *i: x[tuple(v for d, v in enumerate(i) if d not in axes)],
        name="T_expand_dims",
    )


register_injective(
    "expand_dims",
    _expand_infer,
    _expand_legalize,
    {"axis": REQUIRED},
    doc="New size-1 axes at the positions `axis` of the output.",
)

# ------------------------------------------------------------------------------- permute_dims


def _perm(inputs, axes) -> list[int]:
    ndim = inputs[0].ndim
    if axes is None:
        return list(range(ndim))[::-1]
    perm = normalize_axes("relax.permute_dims", inputs, int_list("", inputs, axes, "axes"), ndim)
    if len(perm) != ndim:
        raise fail("relax.permute_dims", inputs, f"axes {list(axes)} must list all {ndim} axes")
    return perm


def _permute_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    known_shape("relax.permute_dims", inputs)
    perm = _perm(inputs, attrs["axes"])
    return TensorInfo(tuple(inputs[0].shape[p] for p in perm), inputs[0].dtype)


def _permute_legalize(inputs: list, attrs: dict):
    (x,) = inputs
    perm = _perm([TensorInfo(x.shape, x.dtype)], attrs["axes"])
    shape = tuple(x.shape[p] for p in perm)

    def element(*i):
        index = [None] * len(perm)
        for out_axis, in_axis in enumerate(perm):
            index[in_axis] = i[out_axis]
        return x[tuple(index)]

    return te.compute(shape, element, name="T_transpose")


register_injective(
    "permute_dims",
    _permute_infer,
    _permute_legalize,
    {"axes": None},
    doc="Axes reordered: output axis k is input axis axes[k] (None: reversed).",
)

# ------------------------------------------------------------------------------------- concat


def _concat_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    name = "relax.concat"
    if not inputs:
        raise fail(name, inputs, "needs at least one input")
    known_shape(name, inputs)
    dtype = same_dtype(name, inputs)
    ndim = inputs[0].ndim
    if any(i.ndim != ndim for i in inputs):
        raise fail(name, inputs, "inputs must have the same rank")
    axis = normalize_axis(name, inputs, attrs["axis"], ndim)
    for d in range(ndim):
        if d != axis and not all(same_dim(i.shape[d], inputs[0].shape[d]) for i in inputs):
            raise fail(name, inputs, f"inputs differ in axis {d} (only axis {axis} may)")
    total = inputs[0].shape[axis]
    for info in inputs[1:]:
        total = total + info.shape[axis]
    return TensorInfo(
        tuple(total if d == axis else s for d, s in enumerate(inputs[0].shape)), dtype
    )


def _concat_legalize(inputs: list, attrs: dict):
    axis = attrs["axis"] % len(inputs[0].shape)
    offsets, total = [], tir.const(0, "int32")
    for t in inputs:
        offsets.append(total)
        total = total + t.shape[axis]
    shape = tuple(total if d == axis else s for d, s in enumerate(inputs[0].shape))

    def element(*i):
        # the last input is the fallback; earlier ones are picked by the position along `axis`
        value = _shifted(inputs[-1], i, axis, offsets[-1])
        for t, start in reversed(list(zip(inputs[:-1], offsets[:-1]))):
            inside = i[axis] < start + t.shape[axis]
            value = tir.if_then_else(inside, _shifted(t, i, axis, start), value)
        return value

    return te.compute(shape, element, name="T_concat")


def _shifted(t, i, axis: int, start):
    return t[tuple(v - start if d == axis else v for d, v in enumerate(i))]


register_injective(
    "concat",
    _concat_infer,
    _concat_legalize,
    {"axis": 0},
    num_inputs=None,
    doc="Inputs joined along `axis`.",
)

# -------------------------------------------------------------------------------------- split


def _split_bounds(name: str, inputs, attrs: dict) -> tuple[int, list[tuple]]:
    """The axis and the (start, extent) of each piece."""
    x = inputs[0]
    axis = normalize_axis(name, inputs, attrs["axis"], x.ndim)
    dim, spec = x.shape[axis], attrs["indices_or_sections"]
    if isinstance(spec, int) and not isinstance(spec, bool):
        return axis, _sections(name, inputs, dim, spec)
    indices = int_list(name, inputs, spec, "indices_or_sections")
    size = static_value(dim)
    if size is None:
        raise fail(name, inputs, f"split by indices needs a static axis {axis}, got {dim}")
    cuts = [0] + [min(max(c, 0), size) for c in indices] + [size]
    return axis, [(a, max(b - a, 0)) for a, b in zip(cuts, cuts[1:])]


def _sections(name: str, inputs, dim, sections: int) -> list[tuple]:
    if sections < 1:
        raise fail(name, inputs, f"indices_or_sections must be >= 1, got {sections}")
    size = static_value(dim)
    if size is None:
        piece = tir.floordiv(dim, sections)
        return [(piece * k, piece) for k in range(sections)]
    if size % sections:
        raise fail(name, inputs, f"axis size {size} is not divisible into {sections} sections")
    piece = size // sections
    return [(piece * k, piece) for k in range(sections)]


def _split_infer(inputs: list[TensorInfo], attrs: dict) -> tuple[TensorInfo, ...]:
    known_shape("relax.split", inputs)
    axis, pieces = _split_bounds("relax.split", inputs, attrs)
    x = inputs[0]
    return tuple(
        TensorInfo(tuple(ext if d == axis else s for d, s in enumerate(x.shape)), x.dtype)
        for _, ext in pieces
    )


def _split_legalize(inputs: list, attrs: dict) -> tuple:
    (x,) = inputs
    axis, pieces = _split_bounds("relax.split", [TensorInfo(x.shape, x.dtype)], attrs)
    outs = []
    for k, (start, extent) in enumerate(pieces):
        shape = tuple(extent if d == axis else s for d, s in enumerate(x.shape))
        outs.append(
            te.compute(shape, lambda *i, s=start: _shifted(x, i, axis, -s), name=f"T_split_{k}")
        )
    return tuple(outs)


register_injective(
    "split",
    _split_infer,
    _split_legalize,
    {"indices_or_sections": REQUIRED, "axis": 0},
    doc="Pieces along `axis`: n equal sections, or cut at the given indices.",
)

# ------------------------------------------------------------------------------ strided_slice


def _slice_plan(name: str, inputs, attrs: dict) -> list[tuple]:
    """(axis, start, step, extent) per sliced axis, clamped like ONNX Slice."""
    x = inputs[0]
    begin = int_list(name, inputs, attrs["begin"], "begin")
    end = int_list(name, inputs, attrs["end"], "end")
    axes = list(range(len(begin))) if attrs["axes"] is None else attrs["axes"]
    axes = normalize_axes(name, inputs, int_list(name, inputs, axes, "axes"), x.ndim)
    strides = [1] * len(axes) if attrs["strides"] is None else attrs["strides"]
    strides = int_list(name, inputs, strides, "strides")
    if not len(axes) == len(begin) == len(end) == len(strides):
        raise fail(name, inputs, "axes, begin, end and strides must have the same length")
    return [_slice_axis(name, inputs, *item) for item in zip(axes, begin, end, strides)]


def _slice_axis(name, inputs, axis: int, begin: int, end: int, step: int) -> tuple:
    size = static_value(inputs[0].shape[axis])
    if step == 0:
        raise fail(name, inputs, f"stride on axis {axis} must not be 0")
    if size is None:
        raise fail(name, inputs, f"strided_slice needs a static size on axis {axis}")
    start, stop, step = slice(begin, end, step).indices(size)
    return axis, start, step, len(range(start, stop, step))


def _slice_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    known_shape("relax.strided_slice", inputs)
    shape = list(inputs[0].shape)
    for axis, _, _, extent in _slice_plan("relax.strided_slice", inputs, attrs):
        shape[axis] = extent
    return TensorInfo(tuple(shape), inputs[0].dtype)


def _slice_legalize(inputs: list, attrs: dict):
    (x,) = inputs
    plan = {p[0]: p for p in _slice_plan("relax.strided_slice", [TensorInfo(x.shape)], attrs)}
    shape = tuple(plan[d][3] if d in plan else s for d, s in enumerate(x.shape))

    def element(*i):
        return x[tuple(plan[d][1] + v * plan[d][2] if d in plan else v for d, v in enumerate(i))]

    return te.compute(shape, element, name="T_strided_slice")


register_injective(
    "strided_slice",
    _slice_infer,
    _slice_legalize,
    {"axes": None, "begin": REQUIRED, "end": REQUIRED, "strides": None, "assume_inbound": False},
    doc="x[begin:end:stride] on `axes`; bounds clamp like numpy/ONNX.",
)

# ----------------------------------------------------------------------- broadcast_to / tile


def _broadcast_to_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    name = "relax.broadcast_to"
    known_shape(name, inputs)
    target = TensorInfo(tuple(attrs["shape"]), inputs[0].dtype)
    if target.ndim < inputs[0].ndim:
        raise fail(name, inputs, f"target shape {attrs['shape']} has lower rank than the input")
    shape = broadcast_shapes(name, [inputs[0], target])
    if not all(same_dim(a, b) for a, b in zip(shape, target.shape)):
        raise fail(name, inputs, f"cannot broadcast to shape {list(attrs['shape'])}")
    return target


def _broadcast_to_legalize(inputs: list, attrs: dict):
    (x,) = inputs
    shape = TensorInfo(tuple(attrs["shape"])).shape
    return te.compute(shape, lambda *i: x[broadcast_index(x, shape, i)], name="T_broadcast_to")


register_injective(
    "broadcast_to",
    _broadcast_to_infer,
    _broadcast_to_legalize,
    {"shape": REQUIRED},
    doc="The input broadcast (numpy rules) to `shape`.",
)


def _tile_shape(name: str, inputs, repeats) -> tuple:
    x = inputs[0]
    reps = int_list(name, inputs, repeats, "repeats")
    if any(r < 1 for r in reps):
        raise fail(name, inputs, f"repeats must be >= 1, got {reps}")
    rank = max(len(reps), x.ndim)
    reps = [1] * (rank - len(reps)) + reps
    dims = [tir.const(1, "int32")] * (rank - x.ndim) + list(x.shape)
    return tuple(d * r for d, r in zip(dims, reps))


def _tile_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    known_shape("relax.tile", inputs)
    return TensorInfo(_tile_shape("relax.tile", inputs, attrs["repeats"]), inputs[0].dtype)


def _tile_legalize(inputs: list, attrs: dict):
    (x,) = inputs
    shape = _tile_shape("relax.tile", [TensorInfo(x.shape, x.dtype)], attrs["repeats"])
    offset = len(shape) - len(x.shape)

    def element(*i):
        return x[tuple(tir.floormod(v, d) for v, d in zip(i[offset:], x.shape))]

    return te.compute(shape, element, name="T_tile")


register_injective(
    "tile",
    _tile_infer,
    _tile_legalize,
    {"repeats": REQUIRED},
    doc="The input repeated `repeats` times along each axis (numpy.tile).",
)

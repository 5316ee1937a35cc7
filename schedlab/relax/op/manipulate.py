"""Shape operators: reshape, flatten, squeeze, expand_dims, permute_dims, concat, split,
strided_slice, broadcast_to, tile, take, gather_elements, nn.pad and the creators full, zeros,
ones. All injective; names and attributes follow TVM Relax (where TVM passes a shape or a fill
value as an argument, here it is the attribute `shape` / `fill_value`)."""

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
    same_dim,
    same_dtype,
    static_value,
)
from .registry import REQUIRED, TensorInfo, register_op


def _register(name: str, infer, legalize, attrs=None, num_inputs=1, doc=""):
    register_op(f"relax.{name}", num_inputs=num_inputs, pattern="injective", infer=infer,
                legalize=legalize, attrs=attrs or {}, doc=doc)  # fmt: skip


def _unravel(linear: PrimExpr, shape) -> list[PrimExpr]:
    """Row-major indices of position `linear` in `shape`."""
    index = []
    for dim in reversed(shape):
        index.append(tir.floormod(linear, dim))
        linear = tir.floordiv(linear, dim)
    return index[::-1]


def _ravel(indices, shape) -> PrimExpr:
    linear: PrimExpr = tir.const(0, "int32")
    for index, dim in zip(indices, shape):
        linear = linear * dim + index
    return linear


def _reshape_to(x, shape, name: str):
    return te.compute(shape, lambda *i: x[tuple(_unravel(_ravel(i, shape), x.shape))], name=name)


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
    total = product(inputs[0].shape)
    holes = [d for d, dim in enumerate(out) if isinstance(dim, int) and dim == -1]
    if len(holes) > 1:
        raise fail(name, inputs, f"shape {out} has more than one -1")
    known = product([tir.convert(d) for d in out if not (isinstance(d, int) and d == -1)])
    if holes:
        if static_value(known) == 0:
            raise fail(name, inputs, f"shape {out}: cannot infer -1 with a zero-size dim")
        if _static_mismatch(total, known, divide=True):
            raise fail(name, inputs, f"cannot reshape {static_value(total)} elements to {out}")
        out[holes[0]] = tir.floordiv(total, known)
    elif _static_mismatch(total, known, divide=False):
        raise fail(name, inputs, f"cannot reshape {static_value(total)} elements to {out}")
    return tuple(out)


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


_register("reshape", _reshape_infer, _reshape_legalize, {"shape": REQUIRED},
          doc="The same elements in a new shape (0 copies a dim, -1 is inferred).")  # fmt: skip


def _flatten_infer(inputs: list[TensorInfo], attrs: dict) -> TensorInfo:
    known_shape("relax.flatten", inputs)
    return TensorInfo((product(inputs[0].shape),), inputs[0].dtype)


def _flatten_legalize(inputs: list, attrs: dict):
    (x,) = inputs
    return _reshape_to(x, (product(x.shape),), "T_reshape")


_register("flatten", _flatten_infer, _flatten_legalize, doc="The elements as a 1-D tensor.")

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


_register("squeeze", _squeeze_infer, _squeeze_legalize, {"axis": None},
          doc="Size-1 axes removed (`axis` None: all of them).")  # fmt: skip


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


_register("expand_dims", _expand_infer, _expand_legalize, {"axis": REQUIRED},
          doc="New size-1 axes at the positions `axis` of the output.")  # fmt: skip

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


_register("permute_dims", _permute_infer, _permute_legalize, {"axes": None},
          doc="Axes reordered: output axis k is input axis axes[k] (None: reversed).")  # fmt: skip

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


_register("concat", _concat_infer, _concat_legalize, {"axis": 0}, num_inputs=None,
          doc="Inputs joined along `axis`.")  # fmt: skip

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


_register("split", _split_infer, _split_legalize, {"indices_or_sections": REQUIRED, "axis": 0},
          doc="Pieces along `axis`: n equal sections, or cut at the given indices.")  # fmt: skip

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


_register("strided_slice", _slice_infer, _slice_legalize,
          {"axes": None, "begin": REQUIRED, "end": REQUIRED, "strides": None,
           "assume_inbound": False},
          doc="x[begin:end:stride] on `axes`; bounds clamp like numpy/ONNX.")  # fmt: skip

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


_register("broadcast_to", _broadcast_to_infer, _broadcast_to_legalize, {"shape": REQUIRED},
          doc="The input broadcast (numpy rules) to `shape`.")  # fmt: skip


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


_register("tile", _tile_infer, _tile_legalize, {"repeats": REQUIRED},
          doc="The input repeated `repeats` times along each axis (numpy.tile).")  # fmt: skip

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
            return x[tuple(_unravel(where, x.shape))]

        return te.compute(indices.shape, flat, name="T_take")
    axis = attrs["axis"] % len(x.shape)
    shape = tuple(x.shape[:axis]) + tuple(indices.shape) + tuple(x.shape[axis + 1 :])

    def element(*i):
        where = _wrap_index(indices[i[axis : axis + k]], x.shape[axis], mode)
        return x[tuple(i[:axis]) + (where,) + tuple(i[axis + k :])]

    return te.compute(shape, element, name="T_take")


_register("take", _take_infer, _take_legalize, {"axis": None, "mode": "fast"}, num_inputs=2,
          doc="Elements of x at `indices` along `axis` (None: of the flattened x).")  # fmt: skip


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


_register("gather_elements", _gather_infer, _gather_legalize, {"axis": 0}, num_inputs=2,
          doc="out[i][j] = x[indices[i][j]][j] for axis 0 (ONNX GatherElements).")  # fmt: skip

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


register_op("relax.nn.pad", num_inputs=1, pattern="injective", infer=_pad_infer,
            legalize=_pad_legalize,
            attrs={"pad_width": REQUIRED, "pad_value": 0.0, "pad_mode": "constant"},
            doc="Constant padding: (before, after) per axis filled with `pad_value`.")  # fmt: skip

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
    _register(_name, *_creation(f"relax.{_name}", _fixed), _attrs, num_inputs=0,
              doc=f"A new tensor of `shape` and `dtype` filled with {_fill}.")  # fmt: skip

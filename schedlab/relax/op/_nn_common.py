"""Helpers shared by the neural-network operator families (linear algebra, convolution, pooling,
normalization, attention): attribute normalization, shape checks that name the operator and its
inputs, symbolic output-extent arithmetic and the TE padding stage."""

from __future__ import annotations

from collections.abc import Sequence

from schedlab import te
from schedlab.ir import op
from schedlab.ir.dtype import DataType
from schedlab.ir.expr import IntImm, PrimExpr
from schedlab.ir.structural import structural_equal

from .registry import OpTypeError, TensorInfo, describe


def fail(name: str, inputs: Sequence[TensorInfo], message: str) -> OpTypeError:
    """An OpTypeError naming the operator, its inputs and what is wrong (raise the result)."""
    return OpTypeError(f"{name}: {message}; inputs {describe(list(inputs))}")


def ints(name: str, attr: str, value, count: int) -> tuple[int, ...]:
    """An int or sequence attribute as `count` ints (one value is repeated)."""
    values = (value,) if isinstance(value, int) else tuple(value)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise OpTypeError(f"{name}: attribute {attr} must be ints, got {value!r}")
    if len(values) == 1:
        values = values * count
    if len(values) != count:
        raise OpTypeError(f"{name}: attribute {attr} needs 1 or {count} values, got {value!r}")
    return values


def paddings(name: str, value, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """TVM's padding forms as (before, after) per spatial axis: one value (all sides), `rank`
    values (symmetric per axis) or `2 * rank` values (all befores, then all afters)."""
    values = (value,) if isinstance(value, int) else tuple(value)
    if len(values) == 2 * rank:
        before, after = values[:rank], values[rank:]
    else:
        before = after = ints(name, "padding", values, rank)
    if any(p < 0 for p in before + after):
        raise OpTypeError(f"{name}: padding must be >= 0, got {value!r}")
    return tuple(before), tuple(after)


def positive(name: str, attr: str, values: Sequence[int]) -> None:
    """Every value of `attr` must be >= 1."""
    if any(v < 1 for v in values):
        raise OpTypeError(f"{name}: attribute {attr} must be >= 1, got {tuple(values)}")


def static(dim: PrimExpr) -> int | None:
    """The dimension as an int, or None when symbolic."""
    return dim.value if isinstance(dim, IntImm) else None


def dims_differ(a: PrimExpr, b: PrimExpr) -> bool:
    """True when two dimensions are provably different (both static and unequal)."""
    sa, sb = static(a), static(b)
    if sa is not None and sb is not None:
        return sa != sb
    return False


def same_dim(a: PrimExpr, b: PrimExpr) -> bool:
    """True when two dimensions are known equal (same value or the same expression)."""
    sa, sb = static(a), static(b)
    if sa is not None and sb is not None:
        return sa == sb
    return structural_equal(a, b)


def check_rank(name: str, inputs: Sequence[TensorInfo], index: int, ranks, what: str) -> None:
    """Input `index` (`what`) must have a known rank in `ranks`."""
    info = inputs[index]
    if info.shape is None:
        raise fail(name, inputs, f"{what} needs a known rank")
    if info.ndim not in tuple(ranks):
        expected = " or ".join(str(r) for r in ranks)
        raise fail(name, inputs, f"{what} must have rank {expected}, got rank {info.ndim}")


def check_same_dtype(name: str, inputs: Sequence[TensorInfo]) -> DataType:
    """All inputs share one dtype; returns it."""
    dtypes = {info.dtype for info in inputs}
    if len(dtypes) != 1:
        raise fail(name, inputs, "inputs must have the same dtype")
    return inputs[0].dtype


def check_float(name: str, inputs: Sequence[TensorInfo]) -> None:
    """The operator computes in floating point (exp, division, ...)."""
    if not inputs[0].dtype.is_float:
        raise fail(name, inputs, f"expects a float dtype, got {inputs[0].dtype}")


def out_dtype(inputs: Sequence[TensorInfo], attrs: dict) -> DataType:
    """The `out_dtype` attribute, or the inputs' dtype when it is None or empty."""
    value = attrs.get("out_dtype")
    return DataType(value) if value not in (None, "", "void") else inputs[0].dtype


def normalize_axis(name: str, inputs, axis: int, ndim: int) -> int:
    """A possibly negative axis as an index in [0, ndim)."""
    if not isinstance(axis, int) or not -ndim <= axis < ndim:
        raise fail(name, inputs, f"axis {axis!r} is out of range for rank {ndim}")
    return axis % ndim


def normalize_axes(name: str, inputs, axes, ndim: int) -> tuple[int, ...]:
    """Axes (an int or a sequence) as sorted, distinct, non-negative indices."""
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    result = sorted(normalize_axis(name, inputs, a, ndim) for a in axes)
    if len(set(result)) != len(result):
        raise fail(name, inputs, f"axes {axes} repeat an axis")
    return tuple(result)


def extent(size, kernel: int, stride: int, before: int, after: int, dilation: int = 1, ceil=False):
    """Output extent of a window operation along one axis (a PrimExpr; folds when static)."""
    span = op.convert(size) + (before + after - dilation * (kernel - 1) - 1)
    if ceil:
        span = span + (stride - 1)
    return op.floordiv(span, stride) + 1


def check_nonempty(name: str, inputs, shape: Sequence[PrimExpr]) -> None:
    """Window operators whose static output extent is below 1 are errors."""
    empty = [static(d) for d in shape if static(d) is not None and static(d) < 1]
    if empty:
        text = ", ".join(str(d) for d in shape)
        raise fail(name, inputs, f"these sizes give an empty output ({text})")


def pad(
    data: te.Tensor, before: Sequence[int], after: Sequence[int], value=0.0, name: str = "pad_temp"
) -> te.Tensor:
    """A constant-padding stage like topi.nn.pad: an if_then_else guards each padded axis.
    Returns `data` itself when nothing is padded."""
    if not any(before) and not any(after):
        return data
    shape = tuple(op.convert(s) + (b + a) for s, b, a in zip(data.shape, before, after))
    fill = op.const(value, data.dtype)

    def element(*indices):
        guards, source = [], []
        for index, size, lo, hi in zip(indices, data.shape, before, after):
            source.append(index - lo if lo else index)
            if lo:
                guards.append(index >= lo)
            if hi:
                guards.append(index < size + lo)
        return op.if_then_else(op.all(*guards), data[tuple(source)], fill)

    return te.compute(shape, element, name=name)


def as_dtype(value: PrimExpr, dtype: DataType) -> PrimExpr:
    """`value` cast to `dtype` when it differs."""
    return value if value.dtype == dtype else op.cast(value, dtype)

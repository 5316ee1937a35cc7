"""Helpers that the interpreter's generated code calls.

Values in generated code are either *scalars* (Python ints and bools kept inside their dtype's
range; numpy scalars of the exact dtype for floats) or *arrays* (numpy arrays of the exact dtype,
one axis per vectorized loop, plus a leading axis for vector lanes). Every helper here accepts
both, so the generated code can mix them freely.
"""

from __future__ import annotations

import math

import numpy as np

# ---------------------------------------------------------------------------------------------
# integer arithmetic with C / TIR semantics
# ---------------------------------------------------------------------------------------------


def tdiv(a, b):
    """Truncated division (C's `/` on integers) of ints or integer arrays."""
    quotient = a // b
    return quotient + ((a % b != 0) & ((a < 0) != (b < 0)))


def tmod(a, b):
    """Truncated remainder (C's `%`): the sign follows the dividend."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.fmod(a, b)
    return a - b * tdiv(a, b)


def ffloordiv(a, b):
    """FloorDiv of floats: floor(a / b) in the operands' dtype."""
    return np.floor(a / b)


def ffloormod(a, b):
    """FloorMod of floats: a - floor(a / b) * b in the operands' dtype."""
    return a - np.floor(a / b) * b


def select(condition, true_value, false_value):
    """Eager select of scalars: both values were already evaluated."""
    return true_value if condition else false_value


def where(condition, true_value, false_value, dtype):
    """Element-wise select that keeps the IR dtype (numpy may widen mixed scalars)."""
    result = np.where(condition, true_value, false_value)
    return result if result.dtype == dtype else result.astype(dtype)


def float_to_int(value, dtype):
    """A float scalar converted to an integer dtype as C does (truncation), as a Python int."""
    return np.asarray(value).astype(dtype).item()


def astype(value, dtype):
    """An array or numpy scalar converted to `dtype`."""
    return np.asarray(value).astype(dtype)


# ---------------------------------------------------------------------------------------------
# math intrinsics (numpy ufuncs keep float16/bfloat16/float32 precision)
# ---------------------------------------------------------------------------------------------


def _typed(value, like):
    """Convert a result back to the dtype of `like` (numpy promotes some mixes to float64)."""
    dtype = np.asarray(like).dtype
    if isinstance(value, np.ndarray):
        return value if value.dtype == dtype else value.astype(dtype)
    return dtype.type(value)


def sigmoid(x):
    one = np.asarray(x).dtype.type(1)
    return _typed(one / (one + np.exp(-x)), x)


def rsqrt(x):
    one = np.asarray(x).dtype.type(1)
    return _typed(one / np.sqrt(x), x)


def exp10(x):
    return _typed(np.power(np.asarray(x).dtype.type(10), x), x)


_ERF = np.frompyfunc(math.erf, 1, 1)


def erf(x):
    """The error function, exact to double precision then rounded to x's dtype."""
    dtype = np.asarray(x).dtype
    if isinstance(x, np.ndarray):
        return _ERF(x.astype(np.float64)).astype(dtype)
    return dtype.type(math.erf(float(x)))


def iabs(x):
    """abs of an integer scalar or array; the caller wraps scalars (abs(INT_MIN) = INT_MIN)."""
    return np.abs(x) if isinstance(x, np.ndarray) else abs(x)


MATH = {
    "exp": np.exp, "exp2": np.exp2, "exp10": exp10, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": rsqrt, "tanh": np.tanh,
    "sigmoid": sigmoid, "erf": erf, "floor": np.floor, "ceil": np.ceil, "round": np.rint,
    "trunc": np.trunc, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "isnan": np.isnan,
    "isinf": np.isinf, "isfinite": np.isfinite, "pow": np.power, "fmod": np.fmod,
    "atan2": np.arctan2, "abs": np.abs, "fabs": np.abs,
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------


def out_of_bounds(name: str, dim: int, index, extent):
    raise IndexError(
        f"interpret: buffer {name}: index {index} is out of bounds in dimension {dim} "
        f"(extent {extent})"
    )


def check(index, extent, name: str, dim: int):
    """`index` (an int or an array) after checking that it lies in [0, extent)."""
    if isinstance(index, np.ndarray):
        if index.size and (index.min() < 0 or index.max() >= extent):
            bad = index[(index < 0) | (index >= extent)].flat[0]
            out_of_bounds(name, dim, int(bad), extent)
    elif not 0 <= index < extent:
        out_of_bounds(name, dim, index, extent)
    return index


def clip(index, extent):
    """`index` forced into [0, extent): for loads whose lanes are masked off (their values are
    discarded, but the load must not fault)."""
    if isinstance(index, np.ndarray):
        return np.clip(index, 0, max(extent - 1, 0))
    return min(max(index, 0), max(extent - 1, 0))


def safe_load(array: np.ndarray, indices: tuple):
    """A load under a mask: out-of-bounds lanes read element 0 (their values are unused)."""
    if array.size == 0:
        shape = np.broadcast_shapes(*(np.shape(i) for i in indices))
        return np.zeros(shape, array.dtype)
    return array[tuple(clip(i, n) for i, n in zip(indices, array.shape))]


def masked_store(array: np.ndarray, indices: tuple, value, mask, name: str) -> None:
    """Store `value` at `indices` where `mask` holds, checking the bounds of the stored lanes."""
    shape = np.broadcast_shapes(np.shape(mask), np.shape(value), *(np.shape(i) for i in indices))
    mask = np.broadcast_to(mask, shape)
    if not mask.any():
        return
    if not shape:  # a scalar store (a 0-d buffer): boolean indexing would make it a sequence
        array[indices] = value
        return
    selected = tuple(np.broadcast_to(i, shape)[mask] for i in indices)
    for dim, (index, extent) in enumerate(zip(selected, array.shape)):
        check(index, extent, name, dim)
    array[selected] = np.broadcast_to(value, shape)[mask]


def store(array: np.ndarray, indices: tuple, value, name: str) -> None:
    """A vector store (no mask) with bounds checks."""
    for dim, (index, extent) in enumerate(zip(indices, array.shape)):
        check(index, extent, name, dim)
    array[indices] = value


def allocate(dtype, shape: tuple, strides: tuple | None = None, offset: int = 0):
    """Storage for an intermediate buffer. Floats start as NaN so that reading an element never
    written shows up in results; other types start at zero."""
    dtype = np.dtype(dtype)
    fill = np.nan if dtype.kind == "f" or dtype.name == "bfloat16" else 0
    if strides is None and offset == 0:
        return np.full(shape, fill, dtype)
    strides = strides if strides is not None else compact_strides(shape)
    span = offset + sum((n - 1) * s for n, s in zip(shape, strides) if n > 0) + 1
    base = np.full(max(span, 1), fill, dtype)
    return strided_view(base, shape, strides, offset)


def warp_op(name: str, *args) -> None:
    """A warp-level tensor-core operation on whole 16 x 16 tiles (schedlab.ir.mma)."""
    from schedlab.ir import mma

    mma.emulate(name, *args)


def compact_strides(shape: tuple) -> tuple:
    strides, running = [], 1
    for extent in reversed(shape):
        strides.append(running)
        running *= extent
    return tuple(reversed(strides))


def strided_view(base: np.ndarray, shape: tuple, strides: tuple, offset: int) -> np.ndarray:
    """A view of the 1-D array `base` with element `strides` starting at element `offset`."""
    itemsize = base.dtype.itemsize
    span = offset + sum((n - 1) * s for n, s in zip(shape, strides) if n > 0)
    if min(shape, default=1) > 0 and (offset < 0 or span >= base.size):
        raise IndexError(
            f"interpret: a view of shape {shape}, strides {strides}, offset {offset} does not fit "
            f"in storage of {base.size} elements"
        )
    return np.lib.stride_tricks.as_strided(
        base[offset:] if base.size else base,
        shape=shape,
        strides=tuple(s * itemsize for s in strides),
        writeable=True,
    )


def flat_storage(array: np.ndarray) -> np.ndarray:
    """The 1-D storage an array's elements live in (the array must be contiguous)."""
    return array.reshape(-1)


def reinterpret(array: np.ndarray, dtype, shape: tuple, strides: tuple, offset: int):
    """Another buffer over the same storage (a flat or reshaped alias)."""
    base = array.reshape(-1) if array.flags.c_contiguous else None
    if base is None:
        raise ValueError("interpret: cannot alias the storage of a non-contiguous array")
    if np.dtype(dtype) != base.dtype:
        if np.dtype(dtype).itemsize != base.dtype.itemsize:
            raise ValueError(
                f"interpret: cannot view {base.dtype} storage as {np.dtype(dtype)} "
                "(different element sizes)"
            )
        base = base.view(dtype)
    return strided_view(base, shape, strides, offset)


def match_region(array: np.ndarray, starts: tuple, extents: tuple, ndim: int, name: str):
    """The view a block's match_buffer binds: a region of `array`, with leading unit
    dimensions dropped when the matched buffer has fewer dimensions."""
    drop = len(starts) - ndim
    if drop < 0:
        raise ValueError(
            f"interpret: match_buffer {name} has {ndim} dimensions, its region only {len(starts)}"
        )
    index = []
    for dim, (start, extent) in enumerate(zip(starts, extents)):
        if start < 0 or start + extent > array.shape[dim]:
            out_of_bounds(name, dim, f"{start}:{start + extent}", array.shape[dim])
        if dim < drop:
            if extent != 1:
                raise ValueError(
                    f"interpret: match_buffer {name}: dropped dimension {dim} of the region has "
                    f"extent {extent}, expected 1"
                )
            index.append(start)
        else:
            index.append(slice(start, start + extent))
    return array[tuple(index)]


def view_strides(view: np.ndarray) -> tuple:
    return tuple(s // view.dtype.itemsize for s in view.strides)


def view_offset(view: np.ndarray, storage: np.ndarray) -> int:
    """Elements between the start of `storage` and the start of `view`."""
    delta = view.__array_interface__["data"][0] - storage.__array_interface__["data"][0]
    return delta // view.dtype.itemsize


# ---------------------------------------------------------------------------------------------
# vectorized loops
# ---------------------------------------------------------------------------------------------


def axis(start, extent, dtype, position: int, ndim: int) -> np.ndarray:
    """The values of a vectorized loop variable laid along axis `position` of `ndim` axes."""
    shape = [1] * ndim
    shape[position] = max(extent, 0)
    return np.arange(start, start + max(extent, 0), dtype=dtype).reshape(shape)


def lanes(count: int, dtype, ndim: int) -> np.ndarray:
    """Lane numbers 0..count-1 along a new leading axis in front of `ndim` loop axes."""
    return np.arange(count, dtype=dtype).reshape((count,) + (1,) * ndim)


def radix_ok(terms) -> bool:
    """Whether sum(c * x) over x in [0, extent) is injective, by the mixed-radix rule: sorted by
    |c|, each |c| exceeds the largest value the smaller terms can reach."""
    reach = 0
    for coefficient, extent in sorted(((abs(c), e) for c, e in terms if e > 1)):
        if coefficient <= reach:
            return False
        reach += coefficient * (extent - 1)
    return True


_REDUCERS = {
    "add": (np.add, "sum"),
    "sub": (np.subtract, "sum"),
    "mul": (np.multiply, "prod"),
    "min": (np.minimum, "min"),
    "max": (np.maximum, "max"),
    "and": (np.logical_and, "all"),
    "or": (np.logical_or, "any"),
}


def identity(kind: str, dtype: np.dtype):
    dtype = np.dtype(dtype)
    if kind in ("add", "sub", "or"):
        return dtype.type(0)
    if kind in ("mul", "and"):
        return dtype.type(1)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return dtype.type(info.max if kind == "min" else info.min)
    if dtype.kind == "b":
        return dtype.type(kind == "min")
    return dtype.type(np.inf if kind == "min" else -np.inf)


def merge_leading(values, full_shape: tuple, count: int):
    """`values` broadcast to `full_shape` with its `count` leading axes merged into one (in
    loop order: the merged axis runs through the reduction points sequentially)."""
    return np.broadcast_to(values, full_shape).reshape((-1,) + tuple(full_shape[count:]))


def reduce_merged(kind: str, merged, dtype):
    """Combine over axis 0 (the merged reduction axis)."""
    method = _REDUCERS[kind][1]
    if method in ("sum", "prod"):
        return getattr(np, method)(merged, axis=0, dtype=dtype)
    if method in ("all", "any"):
        return getattr(np, method)(merged, axis=0)
    return getattr(np, method)(merged, axis=0, initial=identity(kind, dtype))


def reduce_leading(kind: str, values, full_shape: tuple, count: int, dtype):
    """Combine `values` over the `count` leading axes of `full_shape` (the reduction loops)."""
    return reduce_merged(kind, merge_leading(values, full_shape, count), dtype)


def combine(kind: str, current, reduced, dtype):
    """`current op reduced` in the IR dtype."""
    result = _REDUCERS[kind][0](current, reduced)
    return result if result.dtype == dtype else result.astype(dtype)


def reduction(kind, dtype, full_shape, count, values, update, init, start, current):
    """A reduction loop nest run at once, with the exact sequential semantics of

        for r in <count leading axes, in order>:
            if init[r]:   C = start
            if update[r]: C = C op values[r]

    (`update`/`init` are masks or None; None for `update` means always, for `init` never).
    Returns (result, written): the final value and the mask of where C was written at all."""
    dtype = np.dtype(dtype)
    ctx_shape = tuple(full_shape[count:])
    flat = (-1,) + ctx_shape
    update = None if update is None else np.broadcast_to(update, full_shape).reshape(flat)
    everywhere = np.ones(ctx_shape, bool)  # (the caller runs this only for >= 1 iteration)
    if init is None:
        keep = update
        written = everywhere if update is None else update.any(axis=0)
        base = current
    else:
        init = np.broadcast_to(init, full_shape).reshape(flat)
        later = np.logical_or.accumulate(init[::-1], axis=0)[::-1]
        after_last = np.ones_like(later)
        after_last[:-1] = ~later[1:]
        keep = after_last if update is None else (after_last & update)
        has_init = later[0] if later.shape[0] else np.zeros(ctx_shape, bool)
        base = where(has_init, start, current, dtype)
        written = everywhere if update is None else (has_init | update.any(axis=0))
    values = merge_leading(values, full_shape, count)
    if keep is not None:
        values = where(keep, values, identity(kind, dtype), dtype)
    reduced = reduce_merged(kind, values, dtype)
    return combine(kind, base, reduced, dtype), written

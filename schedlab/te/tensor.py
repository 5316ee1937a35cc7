"""Tensors and the operations that produce them: `placeholder`, `compute`, `reduce_axis`.

A `Tensor` is a node of a dataflow graph: a placeholder (an input) or a compute stage whose
element `[i, j, ...]` is a scalar expression of the axes. Indexing a tensor gives a `BufferLoad`
of the tensor's own buffer; `create_prim_func` later maps those buffers to the PrimFunc's
parameters and intermediates, so one tensor graph can be turned into several PrimFuncs.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from schedlab.ir import op
from schedlab.ir.buffer import Buffer, decl_buffer
from schedlab.ir.dtype import DataType, int32
from schedlab.ir.expr import BufferLoad, IntImm, PrimExpr, Range, SizeVar, Var
from schedlab.ir.functor import post_order_visit
from schedlab.ir.node import ir_node, meta
from schedlab.ir.stmt import IterType

# id(template buffer) -> the tensor that owns it; lets `compute` find the tensors a body reads
_OWNERS: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()


@ir_node
class AxisVar(Var):
    """An axis of a compute stage: a variable with its domain and kind (TVM's `te` IterVar).

    It is an expression (use it in indices and arithmetic directly); `create_prim_func` replaces
    it by the block iter var of the stage."""

    dom: Range = meta(default=None, child=False)
    iter_type: IterType = meta(default=IterType.SPATIAL, child=False)

    @property
    def var(self) -> AxisVar:
        """The variable itself (TVM code writes `axis.var`)."""
        return self


def reduce_axis(dom, name: str = "rv") -> AxisVar:
    """A reduction axis over `dom`: a `(lo, hi)` pair (half-open) or a `Range`."""
    if isinstance(dom, Range):
        lo, extent = dom.min, dom.extent
    elif isinstance(dom, (tuple, list)) and len(dom) == 2:
        lo = _as_index(dom[0], f"reduce_axis {name!r}: lower bound")
        hi = _as_index(dom[1], f"reduce_axis {name!r}: upper bound")
        lo, hi = op.promote(lo, hi)
        extent = op.sub(hi, lo)
    else:
        raise TypeError(f"reduce_axis {name!r}: expected (lo, hi) or a Range, got {dom!r}")
    if isinstance(extent, IntImm) and extent.value <= 0:
        raise ValueError(f"reduce_axis {name!r}: the range {dom!r} is empty")
    return AxisVar(name, lo.dtype, Range(lo, extent), IterType.REDUCE)


def var(name: str = "tindex", dtype="int32") -> Var:
    """A scalar variable (a symbolic size or a scalar parameter)."""
    return Var(name, DataType(dtype))


def size_var(name: str = "size", dtype="int32") -> SizeVar:
    """A non-negative scalar variable, for symbolic shapes."""
    return SizeVar(name, DataType(dtype))


# ---------------------------------------------------------------------------------------------
# operations and tensors
# ---------------------------------------------------------------------------------------------
class Operation:
    """What produces a tensor (base class of PlaceholderOp and ComputeOp)."""

    name: str
    tag: str = ""
    attrs: dict[str, Any]

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    def output(self, index: int = 0) -> Tensor:
        if index != 0:
            raise IndexError(f"operation {self.name} has one output, asked for #{index}")
        return self._output

    @property
    def num_outputs(self) -> int:
        return 1


class PlaceholderOp(Operation):
    """An input: its values come from outside (a function parameter)."""

    def __init__(self, name: str, shape: tuple[PrimExpr, ...], dtype: DataType):
        self.name, self.shape, self.dtype = name, shape, dtype
        self.attrs = {}

    def __repr__(self) -> str:
        return f"PlaceholderOp({self.name}, {_shape_text(self.shape)}, {self.dtype})"


class ComputeOp(Operation):
    """A stage computing each element from its spatial `axis` (and `reduce_axis` when the body is
    a reduction)."""

    def __init__(self, name, tag, attrs, axis, body, inputs):
        self.name, self.tag, self.attrs = name, tag, dict(attrs or {})
        self.axis: tuple[AxisVar, ...] = axis
        self.body: PrimExpr = body
        self._inputs: list[Tensor] = inputs

    @property
    def reduce_axis(self) -> tuple[AxisVar, ...]:
        from .reduction import Reduce

        return self.body.axis if isinstance(self.body, Reduce) else ()

    @property
    def input_tensors(self) -> list[Tensor]:
        """The tensors the body reads, in first-use order."""
        return list(self._inputs)

    def __repr__(self) -> str:
        return f"ComputeOp({self.name}, axis={[a.name for a in self.axis]})"


class Tensor:
    """The output of an operation: `.shape`, `.dtype`, `.name`, `.op`, `.ndim`.

    `T[i, j]` (or `T(i, j)`, or `T[i][j]`) is a load of element (i, j)."""

    def __init__(self, shape: tuple[PrimExpr, ...], dtype: DataType, op: Operation):
        self.shape = shape
        self.dtype = dtype
        self.op = op
        self.value_index = 0
        self.buffer: Buffer = decl_buffer(shape, dtype, op.name)
        _OWNERS[id(self.buffer)] = self
        op._output = self

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) < self.ndim:
            return _TensorSlice(self, indices)
        return self._load(indices)

    def __call__(self, *indices) -> BufferLoad:
        return self._load(indices)

    def _load(self, indices: tuple) -> BufferLoad:
        if len(indices) != self.ndim:
            raise ValueError(
                f"tensor {self.name} has {self.ndim} dimension(s), got {len(indices)} indices"
            )
        converted = []
        for position, index in enumerate(indices):
            if isinstance(index, slice) or not _is_index_like(index):
                raise TypeError(
                    f"tensor {self.name}: index {position} must be an integer expression, "
                    f"got {index!r}"
                )
            converted.append(op.convert(index))
        return BufferLoad(self.buffer, tuple(converted))

    def __repr__(self) -> str:
        kind = "placeholder" if isinstance(self.op, PlaceholderOp) else "compute"
        return f"Tensor({self.name}, {_shape_text(self.shape)}, {self.dtype}, {kind})"


class _TensorSlice:
    """`T[i]` of a tensor with more dimensions, waiting for the rest of its indices."""

    def __init__(self, tensor: Tensor, indices: tuple):
        self.tensor, self.indices = tensor, indices

    def __getitem__(self, more):
        more = more if isinstance(more, tuple) else (more,)
        return self.tensor[self.indices + more]


def _is_index_like(value) -> bool:
    if isinstance(value, PrimExpr):
        return value.dtype.is_integer and value.dtype.is_scalar
    return isinstance(value, int) and not isinstance(value, bool) or _is_numpy_int(value)


def _is_numpy_int(value) -> bool:
    dtype = getattr(value, "dtype", None)
    return dtype is not None and hasattr(value, "item") and getattr(dtype, "kind", "") in ("i", "u")


def _as_index(value, what: str) -> PrimExpr:
    if isinstance(value, bool) or not _is_index_like(value):
        raise ValueError(f"{what} must be an integer or an integer expression, got {value!r}")
    return op.convert(value.item() if _is_numpy_int(value) else value)


def normalize_shape(shape, what: str) -> tuple[PrimExpr, ...]:
    """A tuple of integer extents (ints or integer expressions); raise ValueError otherwise."""
    if isinstance(shape, (int, PrimExpr)) or _is_numpy_int(shape):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise ValueError(f"{what}: shape must be a tuple of integers, got {shape!r}")
    result = []
    for position, extent in enumerate(shape):
        extent = _as_index(extent, f"{what}: shape[{position}]")
        if isinstance(extent, IntImm) and extent.value < 0:
            raise ValueError(f"{what}: shape[{position}] must be >= 0, got {extent.value}")
        result.append(extent)
    return tuple(result)


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def placeholder(shape, dtype="float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape (ints or integer Vars) and dtype."""
    shape = normalize_shape(shape, f"placeholder {name!r}")
    dtype = DataType(dtype)
    return Tensor(shape, dtype, PlaceholderOp(name, shape, dtype))


def compute(
    shape,
    fcompute: Callable[..., Any],
    name: str = "compute",
    tag: str = "",
    attrs: dict[str, Any] | None = None,
) -> Tensor:
    """A tensor whose element at `(i, j, ...)` is `fcompute(i, j, ...)`: a scalar expression,
    or a reduction built by `sum`/`max`/`min`/a `comm_reducer`. The axes are named after
    `fcompute`'s parameters (`i0, i1, ...` for `*args`). `attrs` become block annotations."""
    from .reduction import Reduce, check_top_level_reduce

    shape = normalize_shape(shape, f"compute {name!r}")
    names = _axis_names(fcompute, len(shape), name)
    axis = tuple(
        AxisVar(n, extent.dtype if extent.dtype.is_integer else int32, Range(0, extent))
        for n, extent in zip(names, shape)
    )
    body = fcompute(*axis)
    if isinstance(body, (list, tuple)):
        raise ValueError(f"compute {name!r}: multiple outputs are not supported, got {body!r}")
    if isinstance(body, Tensor):
        raise TypeError(f"compute {name!r}: fcompute returned a tensor; index it: {body.name}[...]")
    body = op.convert(body)
    check_top_level_reduce(body, name)
    inputs = _input_tensors(body, name)
    _check_free_axes(body, axis, name)
    dtype = body.dtype if not isinstance(body, Reduce) else body.source.dtype
    return Tensor(shape, dtype, ComputeOp(name, tag, attrs, axis, body, inputs))


def _axis_names(fcompute, ndim: int, name: str) -> list[str]:
    """Names of the axes: fcompute's own parameter names, like TVM; `i0, i1, ...` for *args."""
    try:
        parameters = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature
        return [f"i{d}" for d in range(ndim)]
    positional = [
        p.name
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    variadic = any(p.kind == p.VAR_POSITIONAL for p in parameters)
    if variadic and not positional:
        return [f"i{d}" for d in range(ndim)]
    if len(positional) != ndim:
        raise ValueError(
            f"compute {name!r}: the shape has {ndim} dimension(s) but fcompute takes "
            f"{len(positional)} index argument(s) ({', '.join(positional) or 'none'})"
        )
    return positional


def _input_tensors(body: PrimExpr, name: str) -> list[Tensor]:
    found: dict[int, Tensor] = {}

    def record(node):
        if isinstance(node, BufferLoad) and id(node.buffer) not in found:
            owner = _OWNERS.get(id(node.buffer))
            if owner is None or owner.buffer is not node.buffer:
                raise ValueError(
                    f"compute {name!r}: the body loads buffer {node.buffer.name}, which is not a "
                    "tensor; index te tensors (placeholder/compute) instead"
                )
            found[id(node.buffer)] = owner

    post_order_visit(body, record)
    return list(found.values())


def _check_free_axes(body: PrimExpr, axis: Sequence[AxisVar], name: str) -> None:
    """Every reduce axis used in the body must be one this stage reduces over."""
    from .reduction import Reduce

    allowed = {id(a) for a in axis}
    if isinstance(body, Reduce):
        allowed |= {id(a) for a in body.axis}

    def check(node):
        if isinstance(node, AxisVar) and id(node) not in allowed:
            kind = "reduce axis" if node.iter_type == IterType.REDUCE else "axis of another stage"
            raise ValueError(
                f"compute {name!r}: the body uses {kind} {node.name!r}, which this stage does "
                "not iterate over (pass reduce axes to the reducer's `axis`)"
            )

    post_order_visit(body, check)

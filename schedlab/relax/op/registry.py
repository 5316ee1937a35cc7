"""The operator registry: what each graph operator is, how its output shape/dtype follows from
its inputs (`infer`), and how it becomes loop IR (`legalize`, to tensor expressions).

    spec = get_op("relax.add")
    out = spec.infer([TensorInfo((4, 1), "float32"), TensorInfo((3,), "float32")], {})
    C = spec.legalize([te.placeholder((4, 1)), te.placeholder((3,))], spec.resolve_attrs({}))

`infer` raises `OpTypeError` naming the operator, its inputs' shapes and dtypes and what is
wrong; the graph layer adds which binding it was. `pattern` is the operator's fusion class
(TVM's OpPatternKind): elemwise, broadcast, injective, comm_reduce, out_ewise_fusable, opaque.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schedlab.errors import SchedlabError
from schedlab.ir.dtype import DataType
from schedlab.ir.expr import IntImm, PrimExpr
from schedlab.ir.op import convert

PATTERNS = ("elemwise", "broadcast", "injective", "comm_reduce", "out_ewise_fusable", "opaque")
_REQUIRED = object()


class OpTypeError(SchedlabError, TypeError):
    """An operator's inputs or attributes do not fit it (shape, rank, dtype, attribute)."""


@dataclass(frozen=True)
class TensorInfo:
    """What is known about a tensor value: its shape (ints or symbolic PrimExprs; None when
    even the rank is unknown) and dtype."""

    shape: tuple | None
    dtype: DataType = DataType("float32")

    def __post_init__(self):
        object.__setattr__(self, "dtype", DataType(self.dtype))
        if self.shape is not None:
            object.__setattr__(self, "shape", tuple(_dim(d) for d in self.shape))

    @property
    def ndim(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as Python ints, or None when some dimension is symbolic."""
        if self.shape is None or not all(isinstance(d, IntImm) for d in self.shape):
            return None
        return tuple(d.value for d in self.shape)

    def __str__(self) -> str:
        dims = "?" if self.shape is None else ", ".join(str(d) for d in self.shape)
        return f"Tensor(({dims}), {self.dtype})"


def _dim(value) -> PrimExpr:
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"TensorInfo: dimensions are ints or PrimExprs, got {value!r}")
    return convert(int(value)) if value < 2**31 else convert(value)


@dataclass(frozen=True)
class OpSpec:
    """One operator. `attrs` maps attribute names to defaults (`REQUIRED` for none)."""

    name: str
    num_inputs: int | None  # None: variadic (concat, ...)
    pattern: str
    infer: Callable[[list[TensorInfo], dict], Any] = field(repr=False)
    legalize: Callable[[list, dict], Any] = field(repr=False)
    attrs: dict[str, Any] = field(default_factory=dict)
    doc: str = ""

    def resolve_attrs(self, given: dict) -> dict:
        """The attributes with defaults filled in; unknown or missing ones raise OpTypeError."""
        unknown = sorted(set(given) - set(self.attrs))
        if unknown:
            raise OpTypeError(
                f"{self.name}: unknown attribute(s) {', '.join(unknown)}; "
                f"valid: {', '.join(sorted(self.attrs)) or 'none'}"
            )
        resolved = {**self.attrs, **given}
        missing = sorted(k for k, v in resolved.items() if v is _REQUIRED)
        if missing:
            raise OpTypeError(f"{self.name}: missing required attribute(s) {', '.join(missing)}")
        return resolved

    def check_arity(self, inputs: list) -> None:
        if self.num_inputs is not None and len(inputs) != self.num_inputs:
            raise OpTypeError(f"{self.name} takes {self.num_inputs} input(s), got {len(inputs)}")

    def infer_info(self, inputs: list[TensorInfo], attrs: dict):
        """Check arity and attributes, then infer the output info."""
        self.check_arity(inputs)
        return self.infer(inputs, self.resolve_attrs(attrs))


REQUIRED = _REQUIRED
_OPS: dict[str, OpSpec] = {}


def register_op(name: str, *, num_inputs: int | None, pattern: str, infer, legalize,
                attrs: dict | None = None, doc: str = "") -> OpSpec:  # fmt: skip
    """Add an operator to the registry (extensions may add their own)."""
    if pattern not in PATTERNS:
        raise ValueError(f"register_op {name}: pattern must be one of {PATTERNS}, got {pattern!r}")
    if name in _OPS:
        raise ValueError(f"operator {name} is already registered")
    spec = OpSpec(name, num_inputs, pattern, infer, legalize, dict(attrs or {}), doc)
    _OPS[name] = spec
    return spec


def get_op(name: str) -> OpSpec:
    _load_families()
    try:
        return _OPS[name]
    except KeyError:
        raise KeyError(f"unknown operator {name!r}; see schedlab.relax.op.list_ops()") from None


def list_ops() -> list[str]:
    _load_families()
    return sorted(_OPS)


def _load_families() -> None:
    import importlib
    import pkgutil

    from schedlab.relax import op as package

    for module in pkgutil.iter_modules(package.__path__):
        if not module.name.startswith("_") and module.name != "registry":
            importlib.import_module(f"{package.__name__}.{module.name}")


def describe(inputs: list[TensorInfo]) -> str:
    """Inputs as text for error messages: `(Tensor((4, 3), float32), Tensor((5,), float32))`."""
    return "(" + ", ".join(str(i) for i in inputs) + ")"

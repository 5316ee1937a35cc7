"""The workload registry: named PrimFunc factories with numpy references.

A `Workload` bundles a factory (`factory(**sizes, dtype=...) -> PrimFunc`, built with
`schedlab.te`), a numpy `reference(*inputs, **params)`, default sizes, a FLOP count and a
description. `get(name, **sizes)` returns `(func, reference)` with the sizes bound; the outputs
are the last `num_outputs` parameters of `func` (recorded in `func.attrs["schedlab.num_outputs"]`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from schedlab.host_arrays import aligned, aligned_zeros
from schedlab.ir.dtype import DataType
from schedlab.ir.expr import IntImm, Var
from schedlab.ir.function import PrimFunc

NUM_OUTPUTS_ATTR = "schedlab.num_outputs"
# integer sizes that may be 0; every other one (with a positive default) must be >= 1
ZERO_SIZES = frozenset({"padding"})

_REGISTRY: dict[str, Workload] = {}


@dataclass(frozen=True)
class Workload:
    """A standard operator: `factory(**sizes, dtype=)` builds its PrimFunc, `reference(*inputs,
    **params)` computes its outputs with numpy, `defaults` are its sizes (and parameters such as
    stride/padding), `flops(**sizes)` counts its floating-point operations."""

    name: str
    factory: Callable[..., PrimFunc]
    reference: Callable[..., Any]
    defaults: dict[str, Any]
    flop_count: Callable[..., int] = field(repr=False)
    num_outputs: int = 1
    description: str = ""
    dtypes: tuple[str, ...] = ()  # dtypes it supports (empty: any)
    # what a numpy user would write, in the inputs' dtype (benchmarks time it side by side);
    # None: the exact reference serves as the baseline
    baseline: Callable[..., Any] | None = field(default=None, repr=False)
    scale: tuple[str, ...] = ()  # the sizes `schedlab bench --size N` sets to N

    def resolve(self, sizes: dict[str, Any]) -> dict[str, Any]:
        """The defaults updated with `sizes`; unknown keys raise ValueError listing valid ones."""
        unknown = sorted(set(sizes) - set(self.defaults))
        if unknown:
            valid = ", ".join(sorted(self.defaults)) or "none"
            raise ValueError(
                f"workload {self.name!r}: unknown size {', '.join(map(repr, unknown))}; "
                f"valid sizes: {valid} (and dtype)"
            )
        resolved = {**self.defaults, **sizes}
        for key, value in resolved.items():
            problem = self.size_problem(key, value)
            if problem:
                raise ValueError(f"workload {self.name!r}: {problem}")
        return resolved

    def size_minimum(self, key: str) -> int | None:
        """The smallest value size `key` takes: 1 for an extent, stride, kernel, ... and 0 for
        padding (an empty tensor is no workload); None when it has no lower bound."""
        default = self.defaults.get(key)
        if isinstance(default, bool) or not isinstance(default, int) or default < 1:
            return None
        return 0 if key in ZERO_SIZES else 1

    def size_problem(self, key: str, value) -> str | None:
        """What is wrong with `value` as size `key` ("size M must be >= 1, got -5"), or None;
        the message says what is accepted. Unknown keys are `resolve`'s to report."""
        default = self.defaults.get(key)
        if not isinstance(default, int) or isinstance(default, bool):
            return None
        if isinstance(value, bool) or not _is_int(value):
            return f"size {key} must be an integer, got {value!r}"
        minimum = self.size_minimum(key)
        if minimum is not None and value < minimum:
            return f"size {key} must be >= {minimum}, got {value}"
        return None

    def flops(self, **sizes) -> int:
        """Floating-point operations of one run at these sizes (defaults for the rest)."""
        return int(self.flop_count(**self.resolve(sizes)))

    def make(self, dtype="float32", **sizes) -> PrimFunc:
        """The PrimFunc at these sizes, with `schedlab.num_outputs` recorded."""
        dtype = str(DataType(dtype))
        if self.dtypes and dtype not in self.dtypes:
            raise ValueError(
                f"workload {self.name!r}: dtype {dtype} is not supported; "
                f"supported: {', '.join(self.dtypes)}"
            )
        func = self.factory(**self.resolve(sizes), dtype=dtype)
        func = func.with_attr("global_symbol", self.name)
        return func.with_attr(NUM_OUTPUTS_ATTR, self.num_outputs)

    def bound_reference(self, **sizes) -> Callable[..., Any]:
        """The reference with its parameters (stride, padding, ...) bound: `ref(*inputs)`."""
        return _bind_params(self.reference, self.resolve(sizes))

    def bound_baseline(self, **sizes) -> Callable[..., Any]:
        """The fast numpy baseline (or the reference) with its parameters bound."""
        return _bind_params(self.baseline or self.reference, self.resolve(sizes))

    def scaled_sizes(self, n: int) -> dict[str, int]:
        """The sizes that `--size n` means: every key in `scale` set to n."""
        if not self.scale:
            raise ValueError(
                f"workload {self.name!r} has no single size; pass KEY=VALUE pairs "
                f"(sizes: {', '.join(sorted(self.defaults))})"
            )
        return {key: n for key in self.scale}


def _bind_params(fn: Callable[..., Any], resolved: dict[str, Any]) -> Callable[..., Any]:
    accepted = inspect.signature(fn).parameters
    bound = functools.partial(fn, **{k: v for k, v in resolved.items() if k in accepted})
    functools.update_wrapper(bound, fn)
    return bound


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer))


def register(
    name: str,
    *,
    defaults: dict[str, Any],
    reference: Callable[..., Any],
    flops: Callable[..., int],
    num_outputs: int = 1,
    description: str = "",
    dtypes: tuple[str, ...] = (),
    baseline: Callable[..., Any] | None = None,
    scale: tuple[str, ...] = (),
):
    """Decorator registering a factory as workload `name`."""

    def decorate(factory: Callable[..., PrimFunc]) -> Callable[..., PrimFunc]:
        if name in _REGISTRY:
            raise ValueError(f"workload {name!r} is already registered")
        text = description or (inspect.getdoc(factory) or "").split("\n")[0]
        _REGISTRY[name] = Workload(
            name,
            factory,
            reference,
            dict(defaults),
            flops,
            num_outputs,
            text,
            tuple(dtypes),
            baseline,
            tuple(scale),
        )
        return factory

    return decorate


ENTRY_POINT_GROUP = "schedlab.workloads"
_plugins_loaded = False


def load_plugins() -> list[str]:
    """Import the installed extensions listed under the entry-point group `schedlab.workloads`
    (once per process); importing one registers its workloads. Returns the modules loaded. A
    broken extension raises ImportError naming it, rather than hiding its workloads."""
    global _plugins_loaded
    if _plugins_loaded:
        return []
    _plugins_loaded = True
    from importlib.metadata import entry_points

    loaded = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()
        except Exception as err:
            raise ImportError(f"schedlab extension {entry.name!r} ({entry.value}) failed to "
                              f"load: {err}") from err  # fmt: skip
        loaded.append(entry.value)
    return loaded


def names(include_plugins: bool = True) -> list[str]:
    """The registered workload names, in registration order; with `include_plugins=False` only
    schedlab's own (those defined inside the schedlab package)."""
    load_plugins()
    if include_plugins:
        return list(_REGISTRY)
    return [n for n, w in _REGISTRY.items() if w.factory.__module__.startswith("schedlab.")]


def spec(name: str) -> Workload:
    """The Workload registered as `name`; ValueError listing the valid names otherwise."""
    load_plugins()
    found = _REGISTRY.get(name)
    if found is None:
        raise ValueError(f"unknown workload {name!r}; valid workloads: {', '.join(names())}")
    return found


def get(name: str, dtype="float32", **sizes) -> tuple[PrimFunc, Callable[..., Any]]:
    """`(func, reference)` for workload `name` at the given sizes (defaults for the rest).

    `reference(*inputs)` returns the numpy output (a tuple when there are several)."""
    workload = spec(name)
    return workload.make(dtype=dtype, **sizes), workload.bound_reference(**sizes)


def make_args(func: PrimFunc, seed: int = 0) -> list[np.ndarray]:
    """Arrays for `func`'s buffer parameters: random inputs (floats uniform in [-1, 1), which
    keeps exp/sqrt/division stable; small integers) and zeros for the outputs, which are the
    last `func.attrs["schedlab.num_outputs"]` parameters (1 when absent)."""
    rng = np.random.default_rng(seed)
    num_outputs = int(func.attrs.get(NUM_OUTPUTS_ATTR, 1))
    buffers = []
    for param in func.params:
        if param not in func.buffer_map:
            raise ValueError(
                f"make_args: parameter {param.name} is a scalar; only buffer parameters are "
                "supported"
            )
        buffers.append(func.buffer_map[param])
    arrays = []
    for position, buffer in enumerate(buffers):
        shape = _concrete_shape(buffer)
        is_output = position >= len(buffers) - num_outputs
        arrays.append(_zeros(shape, buffer.dtype) if is_output else _random(rng, shape, buffer))
    return arrays


def _concrete_shape(buffer) -> tuple[int, ...]:
    shape = []
    for extent in buffer.shape:
        if not isinstance(extent, IntImm):
            text = extent.name if isinstance(extent, Var) else str(extent)
            raise ValueError(
                f"make_args: buffer {buffer.name} has the symbolic extent {text}; "
                "pass arrays of your chosen size instead"
            )
        shape.append(extent.value)
    return tuple(shape)


def _zeros(shape, dtype: DataType) -> np.ndarray:
    return aligned_zeros(shape, dtype.numpy)


def _random(rng: np.random.Generator, shape, buffer) -> np.ndarray:
    dtype = buffer.dtype
    if dtype.is_float:
        values = rng.uniform(-1.0, 1.0, size=shape)
    elif dtype.is_bool:
        values = rng.integers(0, 2, size=shape).astype(bool)
    elif dtype.is_uint:
        values = rng.integers(0, 5, size=shape)
    else:
        values = rng.integers(-4, 5, size=shape)
    return aligned(np.asarray(values).astype(dtype.numpy))

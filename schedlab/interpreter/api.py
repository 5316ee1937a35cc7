"""`interpret(func, *arrays)`: run a PrimFunc on numpy arrays, in place.

A PrimFunc is translated to Python/numpy source once (`codegen.translate`) and the compiled
function is cached per PrimFunc object (weakly: dropping the PrimFunc drops its translation).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from schedlab.arguments import ArgumentError, BoundArguments, bind_arguments
from schedlab.ir.function import IRModule, PrimFunc

from .codegen import Translation, translate

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
_FORCE_SCALAR = threading.local()


@contextmanager
def scalar_mode() -> Iterator[None]:
    """Within this block `interpret` runs every loop as a plain Python loop (no numpy
    vectorization). Used by tests to check the vectorizer against the scalar translation."""
    previous = getattr(_FORCE_SCALAR, "on", False)
    _FORCE_SCALAR.on = True
    try:
        yield
    finally:
        _FORCE_SCALAR.on = previous


def interpret(func: PrimFunc | IRModule, *arrays, func_name: str | None = None) -> None:
    """Run `func` on `arrays` (numpy arrays for buffer parameters, numbers for scalar ones),
    writing its outputs into the arrays in place. The reference semantics of the loop IR.

    With an IRModule, `func_name` picks the function (default: the only PrimFunc, or "main").
    Raises ValueError naming the parameter for arguments that do not fit the signature."""
    func = _select(func, func_name)
    bound = bind_arguments(func, arrays)
    vectorize = not getattr(_FORCE_SCALAR, "on", False)
    translation = get_translation(func, vectorize)
    _check_writable(func, bound, translation)
    if vectorize and _aliased(bound, translation):
        translation = get_translation(func, vectorize=False)  # overlapping arrays: go in order
    with np.errstate(all="ignore"):
        translation.function(bound.values, bound.values_by_id())


def get_translation(func: PrimFunc, vectorize: bool = True) -> Translation:
    """The cached translation of `func` (made on first use)."""
    with _LOCK:
        per_func = _CACHE.get(func)
        if per_func is None:
            per_func = {}
            _CACHE[func] = per_func
        found = per_func.get(vectorize)
    if found is not None:
        return found
    made = translate(func, vectorize)
    with _LOCK:
        return per_func.setdefault(vectorize, made)


def source(func: PrimFunc | IRModule, vectorize: bool = True, func_name: str | None = None) -> str:
    """The Python source the interpreter runs for `func` (for reading and debugging)."""
    return get_translation(_select(func, func_name), vectorize).source


def _select(func, func_name: str | None) -> PrimFunc:
    if isinstance(func, PrimFunc):
        return func
    if not isinstance(func, IRModule):
        raise TypeError(f"interpret: expected a PrimFunc or IRModule, got {type(func).__name__}")
    prims = {name: f for name, f in func.items() if isinstance(f, PrimFunc)}
    if func_name is None:
        if len(prims) == 1:
            return next(iter(prims.values()))
        if "main" in prims:
            return prims["main"]
        raise ValueError(
            f"interpret: the module has {len(prims)} PrimFuncs ({', '.join(prims) or 'none'}); "
            "pass func_name= to pick one"
        )
    if func_name not in prims:
        raise ValueError(
            f"interpret: func_name: expected one of {', '.join(prims) or 'no PrimFunc'}, "
            f"got {func_name!r}"
        )
    return prims[func_name]


def _check_writable(func: PrimFunc, bound: BoundArguments, translation: Translation) -> None:
    for position in translation.written:
        array = bound.values[position]
        if isinstance(array, np.ndarray) and not array.flags.writeable:
            raise ArgumentError(
                f"{func.name}: argument {func.params[position].name}: expected a writeable "
                "array (the function writes it), got a read-only array"
            )


def _aliased(bound: BoundArguments, translation: Translation) -> bool:
    """Do two array arguments overlap in memory while one of them is written?"""
    arrays = [(i, v) for i, v in enumerate(bound.values) if isinstance(v, np.ndarray)]
    for first, (i, a) in enumerate(arrays):
        for j, b in arrays[first + 1 :]:
            if (i in translation.written or j in translation.written) and np.may_share_memory(a, b):
                return True
    return False

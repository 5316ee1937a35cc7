"""Loading built CPU libraries with ctypes and calling their kernels.

`build_module(lowered, target)` renders every PrimFunc of a lowered module into one C file,
compiles it (cached) and loads it: a `CpuLibrary`, whose `kernel(name)` is a callable `Kernel`.
The C entry points are typed (see codegen.py); ctypes releases the GIL while a kernel runs.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from pathlib import Path

import numpy as np

from schedlab.arguments import BoundArguments
from schedlab.errors import LoweringError
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.target import Target

from ..build import Kernel
from ..c_family import CParam, RenderedFunction, RenderedModule
from .cache_flush import flush
from .codegen import CpuRenderer
from .compiler import compile_source

_CTYPES = {
    "bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
    "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
    "float16": ctypes.c_float, "bfloat16": ctypes.c_float, "float32": ctypes.c_float,
    "float64": ctypes.c_double, "handle": ctypes.c_void_p,
}  # fmt: skip

_TOO_HARD = getattr(getattr(np, "exceptions", np), "TooHardError", Exception)
_loaded: dict[str, ctypes.CDLL] = {}
LAUNCHES_KEPT = 4  # argument lists a kernel remembers (see CpuKernel.call_checked_once)
_load_lock = threading.Lock()


def build_module(
    lowered: IRModule | PrimFunc, target: Target | str = "cpu", renderer: CpuRenderer | None = None
) -> CpuLibrary:
    """Render, compile (or reuse from the cache) and load every PrimFunc of a LOWERED module.
    `renderer` replaces the default `CpuRenderer(target)` (a subclass with other hooks)."""
    target = Target(target)
    if isinstance(lowered, PrimFunc):
        lowered = IRModule.from_expr(lowered)
    rendered = (renderer or CpuRenderer(target)).render(lowered)
    stem = "_".join(rendered.functions) or "module"
    path = compile_source(rendered.source, target, stem)
    return CpuLibrary(path, rendered, lowered, target, _load(path, rendered.source, target, stem))


def _load(path: Path, source: str, target: Target, stem: str) -> ctypes.CDLL:
    with _load_lock:
        handle = _loaded.get(str(path))
        if handle is None:
            try:
                handle = ctypes.CDLL(str(path))
            except OSError:  # a damaged cache entry: build it again once
                path.unlink(missing_ok=True)
                path = compile_source(source, target, stem)
                handle = ctypes.CDLL(str(path))
            _loaded[str(path)] = handle
        return handle


class CpuLibrary:
    """A loaded shared library built from a lowered module."""

    def __init__(self, path: Path, rendered: RenderedModule, lowered: IRModule, target, handle):
        self.path = path
        self.rendered = rendered
        self.lowered = lowered
        self.target = target
        self.handle = handle

    @property
    def source(self) -> str:
        return self.rendered.source

    def kernel(self, name: str, original: PrimFunc | None = None) -> CpuKernel:
        """The callable kernel of function `name`; arguments are checked against `original`
        (the function before lowering; the lowered one when not given)."""
        if name not in self.rendered.functions:
            known = ", ".join(self.rendered.functions)
            raise ValueError(f"library has no function {name!r}; it has {known}")
        info = self.rendered.functions[name]
        func = original if original is not None else self.lowered[name]
        return CpuKernel(self, info, func)


class CpuKernel(Kernel):
    """A kernel in a loaded CPU library (see `Kernel`). Also: `.library_path`, `.symbol`,
    `.loop_lines` (loop uid -> LoopSpan of source lines), `.params` (the C parameters)."""

    def __init__(self, library: CpuLibrary, info: RenderedFunction, func: PrimFunc):
        super().__init__(info.name, func, library.lowered, library.target, library.source)
        self.library = library
        self.info = info
        self.symbol = info.symbol
        self.params = info.params
        self.loop_lines = info.loop_lines
        self.library_path = library.path
        self._sources = _argument_sources(func, library.lowered[info.name], info.params)
        # arguments passed straight through (no size variables): the VM's fast path applies
        self._pass_through = (
            len(info.params) == len(func.params)
            and all(p.role == "buffer" for p in info.params)
            and all(func.buffer_map.get(p) is not None for p in func.params)
        )
        self._checked: set[tuple] = set()
        self._launches: list[tuple[list, list[int]]] = []  # see call_checked_once
        types = [_ctype(p) for p in info.params]
        self._entry = _function(library.handle, info.symbol, types, ctypes.c_int32)
        timed = _function(library.handle, info.symbol + "__timed", types + [ctypes.c_int64],
                          ctypes.c_double)  # fmt: skip
        self._timed = timed

    def written_params(self) -> set[str]:
        return {p.var.name for p in self.params if p.role == "buffer" and p.written}

    def call_checked_once(self, args) -> None:
        """`kernel(*args)` for a caller that passes arrays of the same shapes, dtypes and
        layouts again and again (the graph VM): the full argument check runs for the first call
        with each such signature; later calls compare the signature and the no-overlap rule
        only, then launch (~30 us less per call). Called again with the very array objects of
        one of its last LAUNCHES_KEPT launches (a static graph's planned tensors and weights;
        a kernel called at several places of the graph has several), it launches at once with
        the pointers it took then: an array keeps its shape and memory for life (the VM
        re-checks its own parameters' shapes on every call)."""
        for refs, pointers in self._launches:
            if len(refs) == len(args):
                for ref, arg in zip(refs, args):
                    if ref() is not arg:
                        break
                else:
                    self._launch_pointers(pointers)
                    return
        signature = _signature(args) if self._pass_through else None
        if signature is None or signature not in self._checked:
            self(*args)
            if signature is not None:
                self._checked.add(signature)
                self._remember(args)
            return
        if self.func.attrs.get("tir.noalias"):
            _check_no_overlap(self.name, self.func, args, self.written_params())
        self._launch_pointers(self._remember(args))

    def _remember(self, args) -> list[int]:
        """The C pointers of `args`, kept with weak references to them for the next call (weak:
        a kernel must not keep a caller's arrays alive)."""
        pointers = [a.ctypes.data for a in args]
        kept = [([weakref.ref(a) for a in args], pointers), *self._launches]
        self._launches = kept[:LAUNCHES_KEPT]  # one assignment: safe for concurrent callers
        return pointers

    def _launch_pointers(self, pointers: list[int]) -> None:
        status = self._entry(*pointers)
        if status != 0:
            raise MemoryError(f"{self.name}: the kernel could not allocate its scratch buffers")

    def _c_args(self, bound: BoundArguments) -> list:
        if self.func.attrs.get("tir.noalias"):
            _check_no_overlap(self.name, self.func, bound.values, self.written_params())
        table = bound.values_by_id()
        args = []
        for source in self._sources:
            value = source(bound, table)
            args.append(value.ctypes.data if isinstance(value, np.ndarray) else value)
        return args

    def _launch(self, bound: BoundArguments) -> None:
        status = self._entry(*self._c_args(bound))
        if status != 0:
            raise MemoryError(f"{self.name}: the kernel could not allocate its scratch buffers")

    def _run_timed(self, bound: BoundArguments, number: int) -> float:
        seconds = self._timed(*self._c_args(bound), number)
        if seconds < 0:
            raise MemoryError(f"{self.name}: the kernel could not allocate its scratch buffers")
        return seconds

    def _flush_caches(self, bound: BoundArguments) -> None:
        for value in bound.values[1:]:
            if isinstance(value, np.ndarray):
                flush(value)


def _function(handle, symbol: str, argtypes, restype):
    function = getattr(handle, symbol)
    function.argtypes = argtypes
    function.restype = restype
    return function


def _ctype(param: CParam):
    if param.role in ("buffer", "handle"):
        return ctypes.c_void_p
    return _CTYPES[str(param.dtype)]


def _argument_sources(original: PrimFunc, lowered: PrimFunc, params: tuple[CParam, ...]):
    """For each C parameter, how to read its value from the bound arguments of `original`:
    parameters by position (lowering keeps them in order), symbolic sizes by identity, else by
    name. A size no argument determines is an error now, not at call time."""
    position = {id(p): index for index, p in enumerate(lowered.params)}
    known = _bindable_vars(original)
    sources = []
    for param in params:
        index = position.get(id(param.var))
        if index is not None:
            sources.append(lambda bound, table, i=index: bound.values[i])
            continue
        var = known.get(id(param.var))
        if var is None:
            var = _by_name(known, param.var)
        if var is None:
            raise LoweringError(
                f"{lowered.name}: the size variable {param.var.name} is not determined by any "
                f"argument (it is not in a parameter buffer's shape)"
            )
        sources.append(_by_id(id(var)))
    return sources


def _by_id(key: int):
    return lambda bound, table: table[key]


def _bindable_vars(func: PrimFunc) -> dict:
    from schedlab.ir.functor import collect_vars

    found = {}
    for buffer in func.buffer_map.values():
        for expr in (*buffer.shape, *buffer.strides, buffer.elem_offset):
            for var in collect_vars(expr):
                found.setdefault(id(var), var)
    buffers = {id(p) for p in func.buffer_map}
    for param in func.params:
        if id(param) not in buffers and param.dtype.is_integer:
            found.setdefault(id(param), param)
    return found


def _by_name(known: dict, var):
    matches = [v for v in known.values() if v.name == var.name and v.dtype == var.dtype]
    return matches[0] if len(matches) == 1 else None


def _signature(args) -> tuple | None:
    """What the full argument check depends on, for arrays only (None when an argument is not
    a numpy array)."""
    if not all(isinstance(a, np.ndarray) for a in args):
        return None
    return tuple((a.shape, a.dtype.str, a.flags.c_contiguous, a.flags.writeable) for a in args)


def _check_no_overlap(name: str, func: PrimFunc, values, outputs: set[str]):
    """`restrict` pointers must not alias: an output may not share memory with another argument."""
    arrays = [(p.name, v) for p, v in zip(func.params, values) if isinstance(v, np.ndarray)]
    for out_name, out in arrays:
        if out_name not in outputs or out.size == 0:
            continue
        for other_name, other in arrays:
            if other_name == out_name or other.size == 0:
                continue
            if np.may_share_memory(out, other) and _shares(out, other):
                raise ValueError(
                    f"{name}: arguments {out_name} and {other_name} overlap in memory; expected "
                    f"separate arrays (the kernel is compiled with tir.noalias), got views of "
                    f"one array: pass a copy"
                )


def _shares(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))
    except _TOO_HARD:  # undecided within the work limit: assume they overlap
        return True

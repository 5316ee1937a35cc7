"""Hand-built LOWERED PrimFuncs (flat buffers, no blocks) for backend tests, and a runner."""

from __future__ import annotations

import numpy as np

from schedlab.backend.cpu import build_module
from schedlab.ir import FloatImm, For, IntImm, PrimFunc, SeqStmt, Var
from schedlab.ir.buffer import decl_buffer


class Params:
    """Flat buffer parameters declared in order: `p.buf("A", 17)` -> the Buffer."""

    def __init__(self):
        self.params: list[Var] = []
        self.buffer_map: dict = {}
        self.shapes: dict = {}

    def buf(self, name: str, size, dtype: str = "float32"):
        """A flat parameter buffer; a tuple `size` is its logical shape (as FlattenBuffer records
        in the "param_shapes" attribute), so callers pass N-D arrays."""
        if isinstance(size, tuple):
            self.shapes[name] = size
            size = int(np.prod(size))
        buffer = decl_buffer((size,), dtype, name)
        param = Var(name, "handle")
        self.params.append(param)
        self.buffer_map[param] = buffer
        return buffer

    def scalar(self, name: str, dtype: str = "int32") -> Var:
        var = Var(name, dtype)
        self.params.append(var)
        return var

    def func(self, body, name: str = "kernel", noalias: bool = True) -> PrimFunc:
        attrs = {"global_symbol": name, "tir.noalias": noalias}
        if self.shapes:
            attrs["param_shapes"] = dict(self.shapes)
        return PrimFunc(tuple(self.params), body, self.buffer_map, attrs)


def loop(var: Var, extent, body, kind: str = "serial", start=0) -> For:
    return For(var, start, extent, kind, body)


def seq(*stmts):
    return SeqStmt(list(stmts))


def f32(value: float) -> FloatImm:
    return FloatImm("float32", value)


def i32(value: int) -> IntImm:
    return IntImm("int32", value)


def build(func: PrimFunc, target="cpu"):
    """Compile a lowered function and return its kernel."""
    return build_module(func, target).kernel(func.name)


def rand(shape, dtype="float32", seed=0, low=-2.0, high=2.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)
    return rng.uniform(low, high, shape).astype(dtype)

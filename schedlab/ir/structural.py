"""Structural equality and hashing, up to renaming of variables and buffers (alpha-equivalence).

Variables and buffers are matched where they are defined (function params and buffer_map, loop
vars, block iter vars and allocated/matched buffers, let bindings); after that every use must
follow the same correspondence. Free variables must be the same object unless
`map_free_vars=True`. Names of variables and buffers are ignored; block names are compared. Stable
ids (`uid`) are ignored.
"""

from __future__ import annotations

import enum
from typing import Any

from .buffer import Buffer, MatchBufferRegion
from .expr import Let, Var
from .function import IRModule, PrimFunc
from .node import Node, compared_fields
from .stmt import Allocate, Block, For, IterVar, LetStmt

_BUFFER_FIELDS = (
    "data", "dtype", "shape", "strides", "elem_offset", "scope", "axis_separators",
    "data_alignment", "offset_factor",
)  # fmt: skip


class _Mismatch(Exception):
    def __init__(self, path: str, lhs, rhs, why: str):
        super().__init__(f"{path}: {why}")
        self.path, self.lhs, self.rhs, self.why = path, lhs, rhs, why


class _Comparator:
    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.forward: dict[int, Any] = {}
        self.backward: dict[int, Any] = {}
        self.defining = 0

    # -- variables and buffers --------------------------------------------------------------
    def _bind(self, a, b, path: str) -> bool:
        """Record a <-> b; return False if it was already bound (then check consistency)."""
        known_a, known_b = self.forward.get(id(a)), self.backward.get(id(b))
        if known_a is None and known_b is None:
            self.forward[id(a)] = b
            self.backward[id(b)] = a
            return True
        if known_a is not b or known_b is not a:
            raise _Mismatch(path, a, b, "variables/buffers bound to different definitions")
        return False

    def var(self, a: Var, b: Var, path: str) -> None:
        if type(a) is not type(b) or a.dtype != b.dtype:
            raise _Mismatch(
                path, a, b, f"{type(a).__name__} {a.dtype} vs {type(b).__name__} {b.dtype}"
            )
        if id(a) in self.forward or id(b) in self.backward:
            self._bind(a, b, path)
        elif self.defining or self.map_free_vars:
            self._bind(a, b, path)
        elif a is not b:
            raise _Mismatch(path, a, b, f"free variables {a.name} and {b.name} differ")

    def define_var(self, a: Var, b: Var, path: str) -> None:
        self.defining += 1
        try:
            self.var(a, b, path)
        finally:
            self.defining -= 1

    def buffer(self, a: Buffer, b: Buffer, path: str, define: bool = False) -> None:
        if id(a) in self.forward or id(b) in self.backward:
            self._bind(a, b, path)
            return
        if not (define or self.map_free_vars):
            if a is not b:
                raise _Mismatch(path, a, b, f"undeclared buffers {a.name} and {b.name} differ")
            return
        self.defining += 1
        try:
            for name in _BUFFER_FIELDS:
                self.value(getattr(a, name), getattr(b, name), f"{path}.{name}")
        finally:
            self.defining -= 1
        self._bind(a, b, path)

    def graph_var(self, a, b, path: str) -> None:
        """A graph-IR variable (class attribute `_graph_var`): mapped where it is defined (the
        node fields named by the definer's `_defines`), its struct info compared then."""
        if type(a) is not type(b):
            raise _Mismatch(path, a, b, f"{type(a).__name__} vs {type(b).__name__}")
        if id(a) in self.forward or id(b) in self.backward:
            self._bind(a, b, path)
        elif self.defining or self.map_free_vars:
            self._bind(a, b, path)
            self.defining += 1
            try:
                self.value(a.struct_info_, b.struct_info_, f"{path}.struct_info")
            finally:
                self.defining -= 1
        elif a is not b:
            raise _Mismatch(path, a, b, f"free variables {a.name_hint} and {b.name_hint} differ")

    # -- generic values ---------------------------------------------------------------------
    def value(self, a, b, path: str) -> None:
        if _is_graph_var(a) or _is_graph_var(b):
            return self.graph_var(a, b, path)
        if isinstance(a, Var) or isinstance(b, Var):
            if not (isinstance(a, Var) and isinstance(b, Var)):
                raise _Mismatch(path, a, b, f"{type(a).__name__} vs {type(b).__name__}")
            return self.var(a, b, path)
        if isinstance(a, Buffer) or isinstance(b, Buffer):
            if not (isinstance(a, Buffer) and isinstance(b, Buffer)):
                raise _Mismatch(path, a, b, f"{type(a).__name__} vs {type(b).__name__}")
            return self.buffer(a, b, path)
        if isinstance(a, Node) or isinstance(b, Node):
            return self.node(a, b, path)
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
            if len(a) != len(b):
                raise _Mismatch(path, a, b, f"length {len(a)} vs {len(b)}")
            for i, (x, y) in enumerate(zip(a, b)):
                self.value(x, y, f"{path}[{i}]")
            return None
        if isinstance(a, dict) and isinstance(b, dict):
            return self.mapping(a, b, path)
        if type(a) is not type(b) and not (isinstance(a, enum.Enum) or isinstance(b, enum.Enum)):
            raise _Mismatch(path, a, b, f"{type(a).__name__} vs {type(b).__name__}")
        if a != b:
            raise _Mismatch(path, a, b, f"{a!r} vs {b!r}")
        return None

    def mapping(self, a: dict, b: dict, path: str) -> None:
        if set(a) != set(b):
            raise _Mismatch(path, a, b, f"keys {sorted(map(str, a))} vs {sorted(map(str, b))}")
        for key in a:
            self.value(a[key], b[key], f"{path}[{key!r}]")

    def node(self, a, b, path: str) -> None:
        if type(a) is not type(b):
            raise _Mismatch(path, a, b, f"{type(a).__name__} vs {type(b).__name__}")
        if isinstance(a, IRModule):
            return self.module(a, b, path)
        if isinstance(a, PrimFunc):
            return self.prim_func(a, b, path)
        self.definitions(a, b, path)
        for name in compared_fields(type(a)):
            self.value(getattr(a, name), getattr(b, name), f"{path}.{name}")
        return None

    def definitions(self, a, b, path: str) -> None:
        """Bind what a node defines before its fields (some of which use it) are compared."""
        for name in getattr(type(a), "_defines", ()):  # graph IR: bindings, function params
            self.defining += 1
            try:
                self.value(getattr(a, name), getattr(b, name), f"{path}.{name}")
            finally:
                self.defining -= 1
        if isinstance(a, For):
            self.define_var(a.loop_var, b.loop_var, f"{path}.loop_var")
        elif isinstance(a, IterVar):
            self.define_var(a.var, b.var, f"{path}.var")
        elif isinstance(a, (Let, LetStmt)):
            self.define_var(a.var, b.var, f"{path}.var")
        elif isinstance(a, Block):
            self.value(len(a.alloc_buffers), len(b.alloc_buffers), f"{path}.alloc_buffers")
            for i, (x, y) in enumerate(zip(a.alloc_buffers, b.alloc_buffers)):
                self.buffer(x, y, f"{path}.alloc_buffers[{i}]", define=True)
            # matched buffers are used by the body, which is compared before match_buffers
            self.value(len(a.match_buffers), len(b.match_buffers), f"{path}.match_buffers")
            for i, (x, y) in enumerate(zip(a.match_buffers, b.match_buffers)):
                self.buffer(x.buffer, y.buffer, f"{path}.match_buffers[{i}].buffer", define=True)
        elif isinstance(a, MatchBufferRegion):
            self.buffer(a.buffer, b.buffer, f"{path}.buffer", define=True)
        elif isinstance(a, Allocate):
            self.buffer(a.buffer, b.buffer, f"{path}.buffer", define=True)

    def prim_func(self, a: PrimFunc, b: PrimFunc, path: str) -> None:
        if len(a.params) != len(b.params):
            raise _Mismatch(path, a, b, f"{len(a.params)} vs {len(b.params)} params")
        for i, (x, y) in enumerate(zip(a.params, b.params)):
            self.define_var(x, y, f"{path}.params[{i}]")
            if (x in a.buffer_map) != (y in b.buffer_map):
                raise _Mismatch(path, a, b, f"param {i} has a buffer on one side only")
            if x in a.buffer_map:
                self.buffer(a.buffer_map[x], b.buffer_map[y], f"{path}.buffer_map[{i}]", True)
        self.value(a.body, b.body, f"{path}.body")
        self.mapping(a.attrs, b.attrs, f"{path}.attrs")

    def module(self, a: IRModule, b: IRModule, path: str) -> None:
        if list(a) != list(b) and sorted(a) != sorted(b):
            raise _Mismatch(path, a, b, f"functions {sorted(a)} vs {sorted(b)}")
        for name in sorted(a):
            self.value(a[name], b[name], f"{path}[{name!r}]")


def _is_graph_var(value) -> bool:
    return getattr(type(value), "_graph_var", False) is True


def structural_equal(lhs, rhs, map_free_vars: bool = False) -> bool:
    """Whether two IR objects are equal up to renaming of variables and buffers."""
    try:
        _Comparator(map_free_vars).value(lhs, rhs, "root")
    except _Mismatch:
        return False
    return True


def assert_structural_equal(lhs, rhs, map_free_vars: bool = False) -> None:
    """Raise AssertionError naming the first place where `lhs` and `rhs` differ."""
    try:
        _Comparator(map_free_vars).value(lhs, rhs, "root")
    except _Mismatch as err:
        raise AssertionError(
            f"structural mismatch at {err.path}: {err.why}\n"
            f"  lhs: {_short(err.lhs)}\n  rhs: {_short(err.rhs)}\n"
            f"--- lhs ---\n{_short(lhs, 4000)}\n--- rhs ---\n{_short(rhs, 4000)}"
        ) from None


def _short(value, limit: int = 300) -> str:
    try:
        text = str(value)
    except Exception:
        text = object.__repr__(value)
    return text if len(text) <= limit else text[:limit] + " ..."


# ---------------------------------------------------------------------------------------------
# hashing: the same walk, numbering variables and buffers by first definition/use
# ---------------------------------------------------------------------------------------------
class _Hasher(_Comparator):
    def __init__(self):
        super().__init__(map_free_vars=True)
        self.numbers: dict[int, int] = {}
        self.parts: list = []

    def _number(self, obj) -> int:
        return self.numbers.setdefault(id(obj), len(self.numbers))

    def var(self, a, b, path):
        self.parts.append(("var", type(a).__name__, str(a.dtype), self._number(a)))

    def buffer(self, a, b, path, define=False):
        if id(a) in self.numbers:
            self.parts.append(("buf", self.numbers[id(a)]))
            return
        self._number(a)
        self.parts.append(("buf-def",))
        for name in _BUFFER_FIELDS:
            self.value(getattr(a, name), getattr(a, name), name)

    def graph_var(self, a, b, path):
        if id(a) in self.numbers:
            self.parts.append(("gvar", type(a).__name__, self.numbers[id(a)]))
            return
        self.parts.append(("gvar-def", type(a).__name__, self._number(a)))
        self.value(a.struct_info_, a.struct_info_, path)

    def value(self, a, b, path):
        if _is_graph_var(a):
            return self.graph_var(a, a, path)
        if isinstance(a, Var):
            return self.var(a, a, path)
        if isinstance(a, Buffer):
            return self.buffer(a, a, path)
        if isinstance(a, Node):
            self.parts.append(type(a).__name__)
            return self.node(a, a, path)
        if isinstance(a, (tuple, list)):
            self.parts.append(("seq", len(a)))
            for item in a:
                self.value(item, item, path)
            return None
        if isinstance(a, dict):
            keys = sorted(a, key=repr)
            self.parts.append(("map", tuple(repr(k) for k in keys)))
            for key in keys:
                self.value(a[key], a[key], path)
            return None
        self.parts.append(a.value if isinstance(a, enum.Enum) else a)
        return None

    def prim_func(self, a, b, path):
        for param in a.params:
            self.var(param, param, path)
            if param in a.buffer_map:
                self.buffer(a.buffer_map[param], None, path, True)
            else:
                self.parts.append("no-buffer")
        self.value(a.body, a.body, path)
        self.value(a.attrs, a.attrs, path)


def structural_hash(node) -> int:
    """A hash consistent with `structural_equal` (with or without free-variable mapping)."""
    hasher = _Hasher()
    hasher.value(node, node, "root")
    return hash(tuple(hasher.parts))


def structural_fingerprint(node) -> str:
    """A hex digest consistent with `structural_equal` that is stable across processes and
    machines (unlike `structural_hash`, which uses Python's salted string hash). Traces record it
    to recognise the workload they were made for."""
    import hashlib

    hasher = _Hasher()
    hasher.value(node, node, "root")
    return hashlib.sha256(repr(tuple(hasher.parts)).encode()).hexdigest()

"""Functions and modules: `PrimFunc` (a loop-IR kernel) and `IRModule` (named functions)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .buffer import Buffer
from .expr import Var
from .node import Node, ir_node, meta
from .stmt import Stmt


class BaseFunc(Node):
    __slots__ = ()


@ir_node
class PrimFunc(BaseFunc):
    """A kernel over buffers. `params` are variables; `buffer_map` binds handle params to the
    buffers the body uses. `attrs` holds metadata such as `global_symbol`."""

    params: tuple[Var, ...]
    body: Stmt
    buffer_map: dict[Var, Buffer] = meta(factory=dict, child=False)
    attrs: dict[str, Any] = meta(factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "buffer_map", dict(self.buffer_map))
        object.__setattr__(self, "attrs", dict(self.attrs))
        for key in self.buffer_map:
            if not any(key is param for param in self.params):
                raise ValueError(f"PrimFunc: buffer_map key {key.name} is not a parameter")
        if not isinstance(self.body, Stmt):
            raise TypeError(f"PrimFunc.body: expected a Stmt, got {type(self.body).__name__}")

    def __repr__(self) -> str:
        try:
            return self.script()
        except Exception:
            return object.__repr__(self)

    @property
    def buffers(self) -> tuple[Buffer, ...]:
        """The parameter buffers, in parameter order."""
        return tuple(self.buffer_map[p] for p in self.params if p in self.buffer_map)

    @property
    def name(self) -> str:
        return self.attrs.get("global_symbol", "main")

    def with_attr(self, key: str, value) -> PrimFunc:
        return self.replace(attrs={**self.attrs, key: value})

    def with_body(self, body: Stmt) -> PrimFunc:
        return self.replace(body=body)


class IRModule(Node):
    """Named functions (PrimFuncs now; graph-IR functions join later). Immutable: `update` and
    `with_function` return new modules."""

    __slots__ = ("_functions", "attrs")

    def __init__(self, functions: dict[str, BaseFunc] | None = None, attrs=None):
        functions = dict(functions or {})
        for name, func in functions.items():
            if not isinstance(name, str):
                raise TypeError(f"IRModule: function names must be str, got {name!r}")
            if not isinstance(func, Node):
                raise TypeError(f"IRModule: {name} is not an IR function: {type(func).__name__}")
        object.__setattr__(self, "_functions", functions)
        object.__setattr__(self, "attrs", dict(attrs or {}))

    def __setattr__(self, name, value):
        raise AttributeError("IRModule is immutable; use with_function / update")

    def __reduce__(self):
        # pickled by its constructor (the default would set slots through __setattr__):
        # search workers send scheduled modules back to the tuner
        return (IRModule, (self._functions, self.attrs))

    @staticmethod
    def from_expr(func: BaseFunc, name: str | None = None) -> IRModule:
        name = name or (func.name if isinstance(func, PrimFunc) else "main")
        return IRModule({name: func})

    def __getitem__(self, name: str) -> BaseFunc:
        try:
            return self._functions[name]
        except KeyError:
            known = ", ".join(self._functions) or "none"
            raise KeyError(f"IRModule has no function {name!r} (functions: {known})") from None

    def __contains__(self, name: str) -> bool:
        return name in self._functions

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def items(self):
        return self._functions.items()

    def keys(self):
        return self._functions.keys()

    def values(self):
        return self._functions.values()

    def get(self, name: str, default=None):
        """The function `name`, or `default` when the module has none (dict-like)."""
        return self._functions.get(name, default)

    def functions(self) -> dict[str, BaseFunc]:
        return dict(self._functions)

    def get_global_vars(self) -> list[str]:
        return list(self._functions)

    def with_function(self, name: str, func: BaseFunc) -> IRModule:
        return IRModule({**self._functions, name: func}, self.attrs)

    def update(self, other: IRModule | dict) -> IRModule:
        items = other.functions() if isinstance(other, IRModule) else dict(other)
        return IRModule({**self._functions, **items}, self.attrs)

    def without(self, name: str) -> IRModule:
        return IRModule({k: v for k, v in self._functions.items() if k != name}, self.attrs)

    def __repr__(self) -> str:
        try:
            return self.script()
        except Exception:
            return f"IRModule({list(self._functions)})"

    def replace(self, **changes):  # Node.replace uses dataclasses; a module is not one
        return IRModule(changes.get("functions", self._functions), changes.get("attrs", self.attrs))


Mapping.register(IRModule)  # read-only name -> function mapping (isinstance checks, dict(...))

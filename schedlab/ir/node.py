"""The base of every IR node: a frozen dataclass compared by identity.

Structural (alpha-equivalent) comparison lives in `structural.py`; `==` on expressions builds an
`EQ` node, as in TVM. Fields marked `meta(child=False)` are not visited by the generic functors,
fields marked `meta(compare=False)` are ignored by structural equality (stable ids).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable
from functools import cache
from typing import Any

# Each process numbers from its own range, pid * 2**30: nodes travel between processes (the
# tuner's search workers send scheduled modules back), and a loop made here must never take
# the id of one made there. Ids stay below 2**53, exact as JavaScript numbers (the explorer).
_UID_RANGE = 1 << 30
_uid_pid = os.getpid()
_uid_counter = itertools.count(_uid_pid * _UID_RANGE + 1)


def fresh_uid() -> int:
    """A process-wide unique id for loops and blocks (kept across copies; ignored by equality)."""
    global _uid_pid, _uid_counter
    if os.getpid() != _uid_pid:  # a forked child starts its own range
        _uid_pid = os.getpid()
        _uid_counter = itertools.count(_uid_pid * _UID_RANGE + 1)
    return next(_uid_counter)


def meta(*, child: bool = True, compare: bool = True, default=dataclasses.MISSING, factory=None):
    """A dataclass field with IR metadata: is it visited as a child, is it structurally compared."""
    kwargs: dict[str, Any] = {"metadata": {"child": child, "compare": compare}}
    if factory is not None:
        kwargs["default_factory"] = factory
    elif default is not dataclasses.MISSING:
        kwargs["default"] = default
    return dataclasses.field(**kwargs)


# The text form belongs to schedlab.script, which registers its printers here when imported
# (`import schedlab` imports it): printing hangs off the IR, the IR never imports the printer.
_PRINTERS: dict[str, Callable[..., str]] = {}


def register_printers(*, script: Callable[..., str], html: Callable[..., str],
                      expr: Callable[..., str]) -> None:  # fmt: skip
    """Install the text form: `script(node, **kwargs)` for `Node.script`, `html(node)` for
    notebooks, `expr(expr)` for the repr of expressions."""
    _PRINTERS.update(script=script, html=html, expr=expr)


def printer(kind: str) -> Callable[..., str]:
    """The registered printer of `kind` ("script", "html" or "expr")."""
    found = _PRINTERS.get(kind)
    if found is None:
        raise RuntimeError("no IR printer is registered: import schedlab.script")
    return found


class Node:
    """Base class of all IR nodes."""

    __slots__ = ()

    def replace(self, **changes):
        """A copy with some fields changed (stable ids are kept)."""
        return dataclasses.replace(self, **changes)

    def script(self, **kwargs) -> str:
        """This node printed in the TVMScript-style text form."""
        return printer("script")(self, **kwargs)

    def __str__(self) -> str:
        try:
            return self.script()
        except Exception:  # printing must never hide the node; fall back to the dataclass repr
            return object.__repr__(self)

    def _repr_html_(self) -> str:
        return printer("html")(self)

    def same_as(self, other) -> bool:
        """Identity comparison (the same object)."""
        return self is other


@cache
def node_fields(cls) -> tuple[dataclasses.Field, ...]:
    return tuple(dataclasses.fields(cls))


@cache
def child_fields(cls) -> tuple[str, ...]:
    """Names of fields the generic functors descend into."""
    return tuple(f.name for f in node_fields(cls) if f.metadata.get("child", True))


@cache
def compared_fields(cls) -> tuple[str, ...]:
    """Names of fields structural equality compares."""
    return tuple(f.name for f in node_fields(cls) if f.metadata.get("compare", True))


def ir_node(cls):
    """Class decorator: a frozen, identity-compared dataclass node."""
    return dataclasses.dataclass(frozen=True, eq=False, repr=False)(cls)


def default_repr(node) -> str:
    fields = ", ".join(f"{f.name}={getattr(node, f.name)!r}" for f in node_fields(type(node)))
    return f"{type(node).__name__}({fields})"

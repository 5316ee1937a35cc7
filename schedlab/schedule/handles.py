"""Handles ("random variables" in TVM's words) that a Schedule hands out: `BlockRV`, `LoopRV`
and `ExprRV` (a sampled integer). They are plain identity objects; the schedule maps each to the
uid of its loop/block (or the sampled value) in every version of the IR."""

from __future__ import annotations


class _Handle:
    __slots__ = ("hint",)
    prefix = "h"

    def __init__(self, hint: str = ""):
        self.hint = hint

    def __repr__(self) -> str:
        hint = f" {self.hint}" if self.hint else ""
        return f"{type(self).__name__}({self.prefix}{hint})"


class BlockRV(_Handle):
    """A handle to a block."""

    __slots__ = ()
    prefix = "b"


class LoopRV(_Handle):
    """A handle to a loop."""

    __slots__ = ()
    prefix = "l"


class ExprRV(_Handle):
    """A handle to a sampled integer (use it as a split factor; `sch.get(rv)` gives the value)."""

    __slots__ = ()
    prefix = "v"


HANDLE_TYPES = (BlockRV, LoopRV, ExprRV)


def is_handle(value) -> bool:
    return isinstance(value, HANDLE_TYPES)

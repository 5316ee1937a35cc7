"""Errors people see. Each names what was wrong, what was expected and what was given."""

from __future__ import annotations

import math


class SchedlabError(Exception):
    """Base class of schedlab's own errors."""


class ScriptError(SchedlabError, SyntaxError):
    """Malformed script text: carries the line and column (1-based) of the problem."""

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        source_line: str | None = None,
    ):
        where = f"line {line}, column {column}: " if line is not None else ""
        text = f"{where}{message}"
        if source_line is not None and column is not None:
            shown, caret = _excerpt(source_line.rstrip(), column)
            text += f"\n    {shown}\n    {' ' * max(caret - 1, 0)}^"
        super().__init__(text)
        self.msg = text
        self.lineno = line
        self.offset = column
        self.line = line
        self.column = column

    def __str__(self) -> str:
        return self.msg


# the longest source line an error shows whole: a generated line can be megabytes long
_SHOWN_CHARS = 100


def _excerpt(line: str, column: int) -> tuple[str, int]:
    """`line` clipped to a window around `column` (1-based), and the column within the clip."""
    if len(line) <= _SHOWN_CHARS:
        return line, column
    start = max(column - 1 - _SHOWN_CHARS // 2, 0)
    head = "..." if start else ""
    tail = "..." if start + _SHOWN_CHARS < len(line) else ""
    return head + line[start : start + _SHOWN_CHARS] + tail, column - start + len(head)


def short_int(value: int, keep: int = 6) -> str:
    """An integer as text for a message: whole up to 24 digits, else its first and last `keep`
    digits and the digit count (a 400-digit split factor would fill the screen, and Python
    refuses to convert one of more than 4300 digits to text at all)."""
    magnitude = abs(value)
    if magnitude < 10**24:  # beyond any 64-bit value: shortening these would hide nothing
        return str(value)
    digits = int(math.log10(magnitude)) + 1  # a float estimate for huge ints: correct it
    while 10 ** (digits - 1) > magnitude:
        digits -= 1
    while 10**digits <= magnitude:
        digits += 1
    first = magnitude // 10 ** (digits - keep)
    last = magnitude % 10**keep
    sign = "-" if value < 0 else ""
    return f"{sign}{first}...{last:0{keep}d} ({digits} digits)"


def short_repr(value) -> str:
    """`repr(value)` with huge integers shortened (inside lists and tuples too)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return short_int(value)
    if isinstance(value, list):
        return "[" + ", ".join(short_repr(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(short_repr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


class CompileError(SchedlabError):
    """A toolchain (gcc, nvcc, ...) rejected generated code; the message holds its output and
    the offending source lines."""


class ToolchainMissingError(SchedlabError, RuntimeError):
    """A compiler or driver the target needs is not installed; the message says how to get it."""


class LoweringError(SchedlabError):
    """The IR cannot be lowered for the target (the message names the construct and why)."""

"""Errors people see. Each names what was wrong, what was expected and what was given."""

from __future__ import annotations


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
            text += f"\n    {source_line.rstrip()}\n    {' ' * max(column - 1, 0)}^"
        super().__init__(text)
        self.msg = text
        self.lineno = line
        self.offset = column
        self.line = line
        self.column = column

    def __str__(self) -> str:
        return self.msg


class CompileError(SchedlabError):
    """A toolchain (gcc, nvcc, ...) rejected generated code; the message holds its output and
    the offending source lines."""


class ToolchainMissingError(SchedlabError, RuntimeError):
    """A compiler or driver the target needs is not installed; the message says how to get it."""


class LoweringError(SchedlabError):
    """The IR cannot be lowered for the target (the message names the construct and why)."""

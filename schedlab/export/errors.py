"""Errors of the exporters and importers."""

from __future__ import annotations

from schedlab.schedule.errors import TraceError


class TVMExportError(ValueError):
    """Something has no counterpart in Apache TVM's formats (an instruction kind, an IR
    construct, a value); the message names it."""


class TVMImportError(TraceError):
    """A TVM trace or MetaSchedule record cannot become a schedlab trace: malformed data or an
    instruction kind schedlab has no counterpart for (the message names the first one)."""

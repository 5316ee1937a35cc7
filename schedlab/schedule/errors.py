"""Errors of schedule primitives: what precondition broke, in plain words, with the function
printed and the offending loops/blocks underlined. A failed primitive leaves the schedule (IR,
trace, handles) exactly as it was.

Primitive families subclass `ScheduleError` per cause (e.g. `NotSingleChildError`), so callers can
catch one cause while the message stays readable.
"""

from __future__ import annotations

from collections.abc import Iterable

from schedlab.errors import SchedlabError

RENDER_LEVELS = ("detail", "fast", "none")


class ScheduleError(SchedlabError):
    """A schedule primitive's precondition failed.

    `primitive` names the primitive, `reason` says what was wrong, `nodes` are the loops/blocks
    involved (underlined in the rendered function), `func` the function they are in."""

    def __init__(self, reason: str, nodes: Iterable = (), primitive: str | None = None,
                 func=None):  # fmt: skip
        self.reason = reason
        self.nodes = tuple(nodes)
        self.primitive = primitive
        self.func = func
        self.render_level = "detail"
        super().__init__(reason)

    def attach(self, primitive: str, func, render_level: str) -> ScheduleError:
        """Fill in where the error happened (done by the Schedule before it re-raises)."""
        self.primitive = self.primitive or primitive
        self.func = self.func if self.func is not None else func
        self.render_level = render_level
        return self

    @property
    def cause(self) -> str:
        """The one-line message: which primitive and what was wrong, without the function."""
        head = f"ScheduleError in {self.primitive}: " if self.primitive else "ScheduleError: "
        return head + self.reason

    def __str__(self) -> str:
        text = self.cause
        if self.render_level != "detail" or self.func is None:
            return text
        from schedlab.script.printer import script

        try:
            rendered = script(self.func, underline=self.nodes, show_header=False)
        except Exception as err:  # never let rendering hide the real error
            rendered = f"(the function could not be printed: {err})"
        return f"{text}\nThe function, with what this is about marked ^^^:\n{rendered}"


class HandleError(ScheduleError):
    """A handle (LoopRV/BlockRV) points at something that no longer exists, or at nothing."""


class BlockNotFoundError(ScheduleError):
    """No block (or more than one) has the requested name."""


class NotSingleChildError(ScheduleError):
    """Loops that must form a single chain have siblings in between."""


class NonAffineBindingError(ScheduleError):
    """A block's iter values are not an affine (bijective) map of the loops above it."""


class AnnotationError(ScheduleError):
    """A loop already has a kind, binding or annotation that forbids the request."""


class LoopKindError(ScheduleError):
    """The loop's iterations cannot run in the requested way (parallel/vectorized/bound)."""


class DependencyError(ScheduleError):
    """The transformation would reorder a write and a read (or two writes) of the same data."""


class NotReductionBlockError(ScheduleError):
    """The primitive needs a reduction block (init + a commutative update)."""


class NotCompleteBlockError(ScheduleError):
    """The primitive needs a block that writes every element it covers exactly once."""


class LocationError(ScheduleError):
    """The requested loop is not a legal place to move the block to."""


class BufferIndexError(ScheduleError):
    """A buffer index/name does not refer to one of the block's reads or writes."""


class TensorizeError(ScheduleError):
    """The subtree does not match the tensor intrinsic's description."""


class TraceError(SchedlabError):
    """A trace cannot be read or applied (bad schema, wrong workload or target)."""

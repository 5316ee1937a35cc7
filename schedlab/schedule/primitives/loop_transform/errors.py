"""The causes a loop transformation can fail for (each a ScheduleError subclass)."""

from __future__ import annotations

from ...errors import AnnotationError, NotSingleChildError, ScheduleError


class LoopAnnotationError(AnnotationError):
    """The loop carries an annotation or a thread binding, which the new loops could not keep."""


class LoopStartError(ScheduleError):
    """The loop does not start at 0."""


class FactorError(ScheduleError):
    """The split or partition factors are malformed (not positive integers, several None, or a
    product/sum that does not fit the loop's extent)."""


class LoopsNotAChainError(NotSingleChildError):
    """The loops are not one chain of nested loops in one block scope."""


class RepeatedLoopError(ScheduleError):
    """A loop was passed more than once."""


class DependentLoopError(ScheduleError):
    """A loop's range depends on a loop that would be inside it (or fused with it)."""


class BlockIterTypeError(ScheduleError):
    """A block under the loops has iter vars other than spatial or reduction ones."""


class LoopNestMismatchError(ScheduleError):
    """Loop nests to merge differ in depth or extents."""


class SymbolicExtentError(ScheduleError):
    """The primitive needs a loop with a constant start and extent."""


__all__ = [
    "LoopAnnotationError", "LoopStartError", "FactorError", "LoopsNotAChainError",
    "RepeatedLoopError", "DependentLoopError", "BlockIterTypeError", "LoopNestMismatchError",
    "SymbolicExtentError",
]  # fmt: skip

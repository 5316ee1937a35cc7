"""Loop transformations (TVM names and semantics): split, fuse, reorder, merge, add_unit_loop,
loop_partition. Each failure is a ScheduleError subclass from `.errors`."""

from .errors import (
    BlockIterTypeError,
    DependentLoopError,
    FactorError,
    LoopAnnotationError,
    LoopNestMismatchError,
    LoopsNotAChainError,
    LoopStartError,
    RepeatedLoopError,
    SymbolicExtentError,
)
from .merge import merge
from .partition import add_unit_loop, loop_partition
from .reorder import reorder
from .split_fuse import fuse, split

__all__ = [
    "split", "fuse", "reorder", "merge", "add_unit_loop", "loop_partition",
    "LoopAnnotationError", "LoopStartError", "FactorError", "LoopsNotAChainError",
    "RepeatedLoopError", "DependentLoopError", "BlockIterTypeError", "LoopNestMismatchError",
    "SymbolicExtentError",
]  # fmt: skip

"""The scheduling core: `Schedule` with its primitives, handles, traces and errors."""

from .errors import (
    AnnotationError,
    BlockNotFoundError,
    BufferIndexError,
    DependencyError,
    HandleError,
    LocationError,
    LoopKindError,
    NonAffineBindingError,
    NotCompleteBlockError,
    NotReductionBlockError,
    NotSingleChildError,
    ScheduleError,
    TensorizeError,
    TraceError,
)  # fmt: skip
from .handles import BlockRV, ExprRV, LoopRV
from .index_map import IndexMap
from .instruction import INSTRUCTION_KINDS, InstructionKind, all_kinds, get_kind, primitive
from .schedule import Schedule, Step, install_methods
from .state import ScheduleState
from .tensor_intrin import TensorIntrin
from .trace import Instruction, Trace

install_methods()

__all__ = [
    "Schedule", "Step", "ScheduleState", "Trace", "Instruction", "BlockRV", "LoopRV", "ExprRV",
    "ScheduleError", "HandleError", "BlockNotFoundError", "NotSingleChildError",
    "NonAffineBindingError", "AnnotationError", "LoopKindError", "DependencyError",
    "NotReductionBlockError", "NotCompleteBlockError", "LocationError", "BufferIndexError",
    "TensorizeError", "TraceError", "INSTRUCTION_KINDS", "InstructionKind", "all_kinds",
    "get_kind", "primitive", "IndexMap", "TensorIntrin",
]  # fmt: skip

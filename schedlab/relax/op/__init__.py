"""Graph operators: the registry plus one module per family (each registers its operators)."""

from .registry import (
    PATTERNS,
    REQUIRED,
    OpSpec,
    OpTypeError,
    TensorInfo,
    describe,
    get_op,
    list_ops,
    register_op,
)  # fmt: skip

__all__ = [
    "PATTERNS", "REQUIRED", "OpSpec", "OpTypeError", "TensorInfo", "describe", "get_op",
    "list_ops", "register_op",
]  # fmt: skip

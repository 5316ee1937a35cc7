"""The table of ONNX op converters: op_type -> converter(ctx, node, inputs, attrs, opset).

A converter receives the import context (`importer.Context`: emit operators, read constant
inputs, look at shapes), the NodeProto, the node's inputs as graph expressions (None for an
omitted optional input), its attributes as Python values and the model's default-domain opset.
It returns one graph expression, or a tuple of them for a node with several outputs.
"""

from __future__ import annotations

from collections.abc import Callable

CONVERTERS: dict[str, Callable] = {}


def converter(*op_types: str):
    """Register the decorated function as the converter of `op_types`."""

    def register(func: Callable) -> Callable:
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise ValueError(f"ONNX op {op_type} already has a converter")
            CONVERTERS[op_type] = func
        return func

    return register


def supported_ops() -> list[str]:
    """The ONNX op types the importer converts."""
    from . import _math, _nn, _resize, _shape  # noqa: F401

    return sorted(CONVERTERS)

"""Importers of models from other frameworks into the graph IR, named as in TVM:
`relax.frontend.from_onnx(model_or_path, shape_dict=None)`, also reachable as
`relax.frontend.onnx.from_onnx`. Each importer loads on first use, and the `onnx` package only
when a model is read."""

from __future__ import annotations

import importlib

# name -> the importer module that defines it
_LAZY = {"from_onnx": "onnx", "OnnxImportError": "onnx"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    if name == "onnx":
        return importlib.import_module(".onnx", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), "onnx", *_LAZY])


__all__ = ["from_onnx", "OnnxImportError"]

"""Importers of models from other frameworks into the graph IR, named as in TVM:
`relax.frontend.from_onnx(model_or_path, shape_dict=None)`, also reachable as
`relax.frontend.onnx.from_onnx`. Each importer loads on first use, and the `onnx` package only
when a model is read. `from_file(path)` picks the importer by the file's suffix, among ONNX and
the frontends installed extensions register (`register_frontend`, entry-point group
`schedlab.frontends`; docs/extending.md)."""

from __future__ import annotations

import importlib

# name -> the importer module that defines it
_LAZY = {"from_onnx": "onnx", "OnnxImportError": "onnx", "register_frontend": "registry",
         "frontends": "registry", "frontend_for": "registry", "from_file": "registry",
         "Frontend": "registry", "FrontendError": "registry"}  # fmt: skip


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    if name == "onnx":
        return importlib.import_module(".onnx", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), "onnx", *_LAZY])


__all__ = list(_LAZY)

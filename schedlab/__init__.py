"""schedlab: a tensor compiler you can watch and steer.

`import schedlab` needs numpy only; everything heavier is imported when first used.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# the text form registers its printers on the IR (the IR never imports it)
import schedlab.script  # noqa: E402, F401
from schedlab.errors import (  # noqa: E402
    CompileError,
    LoweringError,
    SchedlabError,
    ScriptError,
    ToolchainMissingError,
)  # fmt: skip
from schedlab.ir import IRModule, PrimFunc  # noqa: E402

# name -> (module, attribute or None for the module itself); resolved on first access
_LAZY = {
    "tir": ("schedlab.tir", None),
    "arith": ("schedlab.arith", None),
    "te": ("schedlab.te", None),
    "script": ("schedlab.script", None),
    "transform": ("schedlab.transform", None),
    "workloads": ("schedlab.workloads", None),
    "backend": ("schedlab.backend", None),
    "interpret": ("schedlab.interpreter", "interpret"),
    "build": ("schedlab.backend.build", "build"),
    "Kernel": ("schedlab.backend.build", "Kernel"),
    "Target": ("schedlab.target", "Target"),
    "schedule": ("schedlab.schedule", None),
    "Schedule": ("schedlab.schedule", "Schedule"),
    "ScheduleError": ("schedlab.schedule", "ScheduleError"),
    "Trace": ("schedlab.schedule", "Trace"),
    "relax": ("schedlab.relax", None),
    "compile": ("schedlab.relax.vm", "compile"),
    "explore": ("schedlab.ui.jupyter", "explore"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'schedlab' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))


__all__ = [
    "__version__", "IRModule", "PrimFunc", "SchedlabError", "ScriptError", "CompileError",
    "LoweringError", "ToolchainMissingError", *_LAZY,
]  # fmt: skip

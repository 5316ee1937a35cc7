"""Code generation backends, one per target kind: cpu, cuda (PTX by NVRTC), opencl and adreno
(pyopencl), rocm (HIP rendered; building needs hipcc).

A backend is a module with `build_module(lowered: IRModule, target) -> Library`, where
`Library.kernel(name, original=None)` returns a callable `schedlab.backend.build.Kernel`.
`register_backend` adds one (extensions may); `get_backend(target)` finds it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from schedlab.errors import LoweringError

# target kind -> module implementing it (imported on first use)
_BACKENDS: dict[str, str] = {
    "cpu": "schedlab.backend.cpu",
    "cuda": "schedlab.backend.cuda",
    "rocm": "schedlab.backend.rocm",
    "opencl": "schedlab.backend.opencl",
    "adreno": "schedlab.backend.opencl",  # OpenCL C; texture memory comes later
}


def register_backend(kind: str, module: str) -> None:
    """Make `module` (dotted name) the backend of target `kind`."""
    _BACKENDS[kind] = module


def available_backends() -> list[str]:
    return sorted(_BACKENDS)


def get_backend(target) -> ModuleType:
    """The backend module of `target` (a Target or kind name)."""
    from schedlab.target import Target

    kind = Target(target).kind
    module = _BACKENDS.get(kind)
    if module is None:
        raise LoweringError(
            f"no backend for target kind {kind!r} yet; available: {', '.join(available_backends())}"
        )
    return importlib.import_module(module)


__all__ = ["register_backend", "available_backends", "get_backend"]

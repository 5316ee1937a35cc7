"""Model importers by name and file suffix: ONNX built in, others from installed extensions
(entry-point group `schedlab.frontends`).

    register_frontend("npz", import_npz, suffixes=(".npz",))
    mod = relax.frontend.from_file("model.npz")        # the importer of its suffix
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from schedlab.errors import SchedlabError


class FrontendError(SchedlabError, ValueError):
    """No importer for a file, or a bad registration (the message lists what there is)."""


@dataclass(frozen=True)
class Frontend:
    """An importer: `importer(path, shape_dict=None) -> IRModule` (a graph module whose
    "main" takes the model's inputs), and the file suffixes it reads."""

    name: str
    importer: Callable
    suffixes: tuple[str, ...]
    doc: str = ""


def _import_onnx(path, shape_dict=None):
    from .onnx import from_onnx

    return from_onnx(path, shape_dict)


_FRONTENDS: dict[str, Frontend] = {
    "onnx": Frontend("onnx", _import_onnx, (".onnx",), "ONNX models (the onnx package)"),
}


def register_frontend(name: str, importer: Callable, suffixes=(), doc: str = "",
                      override: bool = False) -> Frontend:  # fmt: skip
    """Register `importer(path, shape_dict=None) -> IRModule` as frontend `name` for files
    ending in `suffixes` (".npz", ...). A name or suffix taken by another frontend is an
    error unless `override=True` (the built-in "onnx" cannot be replaced)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise FrontendError(f"register_frontend: the name must be an identifier, got {name!r}")
    if not callable(importer):
        raise FrontendError(f"register_frontend: the importer of {name!r} is not callable")
    suffixes = tuple(s.lower() for s in ([suffixes] if isinstance(suffixes, str) else suffixes))
    bad = [s for s in suffixes if not (s.startswith(".") and len(s) > 1)]
    if bad:
        raise FrontendError(f"register_frontend: suffixes start with a dot, got {bad}")
    if name == "onnx":
        raise FrontendError("register_frontend: 'onnx' is built in")
    taken = {s: f.name for f in _FRONTENDS.values() if f.name != name for s in f.suffixes}
    clash = sorted(s for s in suffixes if s in taken)
    if (name in _FRONTENDS or clash) and not override:
        what = f"suffix {clash[0]} is read by {taken[clash[0]]!r}" if clash else "it exists"
        raise FrontendError(f"register_frontend: {name!r}: {what} (override=True)")
    for other in [f for f in _FRONTENDS.values() if set(f.suffixes) & set(suffixes)]:
        kept = tuple(s for s in other.suffixes if s not in suffixes)
        _FRONTENDS[other.name] = Frontend(other.name, other.importer, kept, other.doc)
    frontend = Frontend(name, importer, suffixes, doc)
    _FRONTENDS[name] = frontend
    return frontend


def frontends() -> dict[str, Frontend]:
    """Every frontend by name (installed extensions loaded first)."""
    from schedlab import plugins

    plugins.load("schedlab.frontends")
    return dict(_FRONTENDS)


def frontend_for(path: str | os.PathLike) -> Frontend | None:
    """The frontend that reads files like `path` (by suffix), or None."""
    name = os.fspath(path).lower()
    for frontend in frontends().values():
        if any(name.endswith(suffix) for suffix in frontend.suffixes):
            return frontend
    return None


def from_file(path: str | os.PathLike, shape_dict=None, frontend: str | None = None):
    """Import the model file at `path` with the frontend of its suffix (or the one named)."""
    known = frontends()
    if frontend is not None:
        chosen = known.get(frontend)
        if chosen is None:
            raise FrontendError(f"no frontend named {frontend!r}; frontends: {', '.join(known)}")
    else:
        chosen = frontend_for(path)
        if chosen is None:
            listed = ", ".join(f"{f.name} ({' '.join(f.suffixes) or 'no suffix'})"
                               for f in known.values())  # fmt: skip
            raise FrontendError(f"no frontend reads {os.fspath(path)!r}: the frontends and "
                                f"their suffixes are {listed}")  # fmt: skip
    return chosen.importer(os.fspath(path), shape_dict)

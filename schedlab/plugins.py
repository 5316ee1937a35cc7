"""Entry-point plug-in points: an installed package extends schedlab by listing an object under
one of these groups in its pyproject.toml (docs/extending.md describes each):

    [project.entry-points."schedlab.targets"]
    my_presets = "my_package.presets"          # a module: importing it registers
    my_rules = "my_package.rules:register"     # a function: called once, it registers

Each registry loads its group the first time it is asked for something (a target name it does
not know, the default rules, a model file's importer, ...), once per process. A broken extension
raises `PluginError` (an ImportError) naming the entry point, never a silent fallback.
"""

from __future__ import annotations

import importlib.metadata
import threading
import types

from schedlab.errors import SchedlabError

# group -> what an entry point of it registers (and with which function)
# ("schedlab.workloads" is loaded by schedlab.workloads.registry itself, which predates this)
GROUPS: dict[str, str] = {
    "schedlab.workloads": "operator workloads: schedlab.workloads.register",
    "schedlab.targets": "target presets: schedlab.target.register_preset",
    "schedlab.schedule_rules": "default-schedule rules: schedlab.dlight.register_rule",
    "schedlab.primitives": "schedule primitives: schedlab.schedule.primitive",
    "schedlab.intrinsics": "tensor intrinsics: schedlab.schedule.TensorIntrin.register",
    "schedlab.frontends": "model importers: schedlab.relax.frontend.register_frontend",
    "schedlab.explorer_panels": "explorer tabs: schedlab.ui.panels.register_panel",
}

_lock = threading.RLock()
_state: dict[str, str] = {}  # group -> "loading" | "loaded"
_loaded: dict[str, list[str]] = {}  # group -> the entry points loaded ("name = value")
_done: set[tuple[str, str, str]] = set()  # (group, name, value) of every entry point loaded


class PluginError(SchedlabError, ImportError):
    """An installed extension failed to load (the message names it and its group)."""


def entry_points(group: str) -> list:
    """The installed entry points of `group` (importlib.metadata's, sorted by name so the
    registration order does not depend on the order packages were installed in)."""
    return sorted(importlib.metadata.entry_points(group=group), key=lambda e: (e.name, e.value))


def load(group: str) -> list[str]:
    """Load every extension listed under `group`, once per process; returns those loaded now.

    An entry point naming a module registers by being imported; one naming a function (or any
    callable that is not a class) is called with no arguments. Loading is re-entrant: an
    extension that asks a registry of its own group while it loads sees the group as loaded.
    A failure raises PluginError, and the next call tries the entry points not loaded yet
    again (and fails the same way): an extension registers once per process."""
    if group not in GROUPS:
        raise ValueError(f"unknown plug-in group {group!r}; groups: {', '.join(GROUPS)}")
    with _lock:
        if group in _state:
            return []
        _state[group] = "loading"
        done: list[str] = []
        try:
            for entry in entry_points(group):
                key = (group, entry.name, entry.value)
                if key not in _done:
                    _load_one(group, entry)
                    _done.add(key)
                    done.append(f"{entry.name} = {entry.value}")
                    _loaded.setdefault(group, []).append(done[-1])
        except BaseException:
            del _state[group]
            raise
        _state[group] = "loaded"
        return done


def _load_one(group: str, entry) -> None:
    try:
        obj = entry.load()
        if callable(obj) and not isinstance(obj, (types.ModuleType, type)):
            obj()
    except Exception as err:
        cause = f"{type(err).__name__}: {err}"
        raise PluginError(f"schedlab extension {entry.name!r} ({entry.value}) in group "
                          f"{group} failed to load: {cause}") from err  # fmt: skip


def loaded(group: str | None = None) -> dict[str, list[str]]:
    """{group: ["name = value", ...]} of the extensions loaded so far (one group if given)."""
    with _lock:
        if group is not None:
            return {group: list(_loaded.get(group, []))}
        return {g: list(v) for g, v in _loaded.items()}


def describe() -> str:
    """Every plug-in group with the installed extensions listed under it (none loaded)."""
    lines = []
    for group, what in GROUPS.items():
        names = [f"{e.name} = {e.value}" for e in entry_points(group)]
        lines.append(f"{group}  ({what})")
        lines.extend(f"  {name}" for name in names or ["(none installed)"])
    return "\n".join(lines)


def reset(group: str) -> None:
    """Forget that `group` was loaded, so the next `load` looks for new entry points (tests;
    the extensions already loaded are not loaded twice)."""
    with _lock:
        _state.pop(group, None)
        _loaded.pop(group, None)


__all__ = ["GROUPS", "PluginError", "describe", "entry_points", "load", "loaded", "reset"]

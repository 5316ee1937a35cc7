"""Explorer tabs that extensions add (entry-point group `schedlab.explorer_panels`).

    def render(model):                 # an ExplorerModel, a function open in it
        return f"{model.func_name}: {len(model.steps())} steps"

    register_panel("steps", "Steps", render)

Each panel becomes a tab after the built-in ones, in the web app and in the JupyterLab widget
(state field `panels`: [{"name", "title", "text", "error", "stale"}]). `render(model)` returns
plain text (shown as preformatted text, never as HTML) or None when it has nothing to show for
the open function (no tab then); an exception becomes the tab's `error`, and the session goes
on. Its result is cached per step. The explorer runs it for the current step while its tab is
shown, and once per function and target to learn whether it has a tab; behind another tab it
is not run again when the step changes: its tab stays, marked `stale` with no text, until it
is shown (a panel predicting on seven CPUs was about half the session's work for an apply).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

MAX_TEXT = 200_000  # characters a panel may send per state (a runaway panel stays usable)


@dataclass(frozen=True)
class Panel:
    name: str
    title: str
    render: Callable


_PANELS: dict[str, Panel] = {}


def register_panel(name: str, title: str, render: Callable, override: bool = False) -> Panel:
    """Add the tab `title` whose text is `render(model)` (see the module docstring). `name` is
    its id (letters, digits, "_" and "-"); taking another panel's name needs `override=True`."""
    if not isinstance(name, str) or not name or not name.replace("-", "_").isidentifier():
        raise ValueError(f"register_panel: name must be letters, digits, _ or -, got {name!r}")
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"register_panel: panel {name!r} needs a title")
    if not callable(render):
        raise TypeError(f"register_panel: render of panel {name!r} is not callable")
    if name in _PANELS and not override:
        raise ValueError(f"register_panel: {name!r} is registered already (override=True)")
    panel = Panel(name, title, render)
    _PANELS[name] = panel
    return panel


def unregister_panel(name: str) -> None:
    _PANELS.pop(name, None)


def panels() -> list[Panel]:
    """The registered panels (installed extensions loaded first), in registration order."""
    from schedlab import plugins

    plugins.load("schedlab.explorer_panels")
    return list(_PANELS.values())


def panels_state(model, cache: dict, shown: str | None = None, lazy: bool = False) -> list[dict]:
    """The `panels` state field for the function open in `model`. `cache` (the session's)
    keeps each panel's last result with the step and target it was made for. With `lazy`, only
    panel `shown` (the tab in view) and panels not yet run for this function and target are
    run; the others keep their tab, `stale`, until shown."""
    entries = []
    for panel in panels():
        func, target, name = model.func, str(model.target), model.func_name
        kept = cache.get(panel.name)
        stale = kept is None or kept[0] is not func or kept[1] != target
        known = kept is not None and kept[1:3] == (target, name)  # whether it has a tab
        if stale and (not lazy or panel.name == shown or not known):
            kept = cache[panel.name] = (func, target, name, _render(panel, model))
            stale = False
        text, error = kept[3]
        if text is not None or error:
            entries.append({"name": panel.name, "title": panel.title,
                            "text": "" if stale else text or "", "error": "" if stale else error,
                            "stale": stale})  # fmt: skip
    return entries


def _render(panel: Panel, model) -> tuple[str | None, str]:
    try:
        text = panel.render(model)
    except Exception as err:  # an extension's bug shows in its tab, never breaks the session
        return None, f"panel {panel.name!r} failed: {type(err).__name__}: {err}"
    if text is None:
        return None, ""
    text = str(text)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + f"\n... ({len(text) - MAX_TEXT} more characters)"
    return text, ""


__all__ = ["Panel", "panels", "panels_state", "register_panel", "unregister_panel"]

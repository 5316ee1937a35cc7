"""Explorer tabs that extensions add (entry-point group `schedlab.explorer_panels`).

    def render(model):                 # an ExplorerModel, a function open in it
        return f"{model.func_name}: {len(model.steps())} steps"

    register_panel("steps", "Steps", render)

Each panel becomes a tab after the built-in ones, in the web app and in the JupyterLab widget
(state field `panels`: [{"name", "title", "text", "error"}]). `render(model)` returns plain text
(shown as preformatted text, never as HTML) or None when it has nothing to show for the open
function (no tab then). It runs when the schedule, the function or the target changes, with its
result cached per step; an exception becomes the tab's `error`, and the session goes on.
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


def panels_state(model, cache: dict) -> list[dict]:
    """The `panels` state field for the function open in `model`. `cache` (the session's)
    keeps each panel's last result with the step and target it was made for."""
    shown = []
    for panel in panels():
        func, target = model.func, str(model.target)
        kept = cache.get(panel.name)
        if kept is None or kept[0] is not func or kept[1] != target:
            kept = cache[panel.name] = (func, target, _render(panel, model))
        text, error = kept[2]
        if text is not None or error:
            shown.append({"name": panel.name, "title": panel.title, "text": text or "",
                          "error": error})  # fmt: skip
    return shown


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

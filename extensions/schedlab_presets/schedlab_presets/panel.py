"""The explorer tab "CPU presets": the open kernel, as scheduled at the current step, predicted
by schedlab's cost model on every CPU preset (the built-in ones and this package's), fastest
first. A quick look at how a schedule made for one machine would fare on the others."""

from __future__ import annotations

from schedlab.cost import predict
from schedlab.target import CPU_PRESETS, Target, presets


def render(model) -> str | None:
    """The tab's text, or None (no tab) when the explorer is not on a CPU target."""
    if model.target.kind != "cpu":
        return None
    cores = model.target.num_cores
    rows = []
    for name in [p for p in presets() if p in CPU_PRESETS]:
        target = Target(name, num_cores=cores)
        seconds = predict(model.func, target).seconds
        rows.append((seconds, name, target.describe().split(": ", 1)[1]))
    rows.sort()
    lines = [f"{model.func_name}, as scheduled at this step, predicted with {cores} cores:", ""]
    lines += [f"{name:<16}{_time(seconds):>12}   {about}" for seconds, name, about in rows]
    return "\n".join(lines)


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.2f} us"


def register() -> None:
    """Entry point of group `schedlab.explorer_panels`."""
    from schedlab.ui.panels import register_panel

    register_panel("cpu-presets", "CPU presets", render)

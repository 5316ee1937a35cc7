"""The JupyterLab explorer: `schedlab.explore(func_or_module_or_workload)` (ipywidgets).

A thin shell around the same ExplorerSession and ESM component as the web app: the component
is an anywidget (its front-end code travels inside the widget state, so nothing is fetched
from a CDN and an executed notebook keeps it), the latency chart a Bokeh model. Every method
below goes through the session's actions, exactly as a click would, so a notebook that calls
`ex.apply(...)` leaves the same widget state a user would see.
"""

from __future__ import annotations

import threading
from pathlib import Path

from .component import ESM_PATH, stylesheet, ui_import_error
from .model import ExplorerModel
from .session import DEFAULT_WORKLOAD, ExplorerSession

try:
    import anywidget
    import ipywidgets
    import traitlets
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise ui_import_error(_err, "schedlab.explore") from None


class ExplorerWidget(anywidget.AnyWidget):
    """The ESM component as an anywidget: `state` in, `action` out (see docs/explorer.md)."""

    _esm = ESM_PATH
    _css = stylesheet()
    state = traitlets.Dict().tag(sync=True)
    action = traitlets.Dict().tag(sync=True)

    def __init__(self, session: ExplorerSession, **kwargs):
        super().__init__(state=session.state(), **kwargs)
        self.session = session
        self.observe(lambda change: self._show(session.handle(change["new"])), names="action")

    def _show(self, state: dict) -> None:
        self.state = state


class Explorer(ipywidgets.VBox):
    """The explorer in a notebook: the component and a latency chart, plus Python methods
    that act as the matching clicks do."""

    def __init__(self, model: ExplorerModel):
        self.session = ExplorerSession(model, on_update=self._refresh)
        self.widget = ExplorerWidget(self.session)
        self._seq = 0
        self._lock = threading.Lock()
        children = [self.widget]
        self._chart_source = None
        chart = _latency_chart(self.widget.state["latency"])
        if chart is not None:
            self._chart_source = chart[1]
            children.append(chart[0])
        super().__init__(children=children)
        self.widget.observe(self._chart_follow, names="state")

    # -- acting as the user would ------------------------------------------------------------
    @property
    def model(self) -> ExplorerModel:
        return self.session.model

    @property
    def state(self) -> dict:
        return self.widget.state

    def act(self, type: str, **fields) -> dict:
        """Send one action (see docs/explorer.md) and return the new state."""
        with self._lock:
            self._seq += 1
            seq = max(self._seq, self.session.seq + 1)
        self.widget.action = {"seq": seq, "type": type, **fields}
        return self.widget.state

    def select(self, loop: int | str | None = None, block: int | str | None = None) -> dict:
        """Select a loop (uid or loop-variable name) or a block (uid or name)."""
        if loop is not None:
            return self.act("select", kind="loop", uid=self._loop_uid(loop))
        return self.act("select", kind="block", uid=self._block_uid(block))

    def apply(self, primitive: str, **args) -> dict:
        """Apply a primitive to the selection; loops/blocks in args may be given by name."""
        resolved = {k: self._resolve_arg(v) for k, v in args.items()}
        return self.act("apply", primitive=primitive, args=resolved)

    def undo(self) -> dict:
        return self.act("undo")

    def redo(self) -> dict:
        return self.act("redo")

    def fork(self, name: str) -> dict:
        return self.act("fork", name=name)

    def diff(self, a: int, b: int | None = None) -> dict:
        return self.act("diff", a=a, b=self.state["current_step"] if b is None else b)

    def measure(self, wait: bool = True, timeout: float | None = None) -> dict:
        """Measure the current step in the worker process (waits for the result by default)."""
        state = self.act("measure")
        if wait:
            self.session.wait_for_measurements(timeout)
            self._refresh()
        return self.widget.state if wait else state

    def tune(self, trials: int = 64, per_batch: int = 16, scope: str = "all",
             work_dir: str | None = None) -> dict:  # fmt: skip
        """Start tuning in the background (the Tune tab shows its progress; `stop_tuning()` or
        the tab's Stop ends it, `tune()` again with the same `work_dir` resumes)."""
        return self.act("tune_start", trials=trials, per_batch=per_batch, scope=scope,
                        work_dir=work_dir)  # fmt: skip

    def stop_tuning(self) -> dict:
        return self.act("tune_stop")

    def open_tuned(self, rank: int = 1) -> dict:
        """Open the `rank`-th best tuned schedule (1: the best) as a branch."""
        top = self.state["tune"]["top"]
        if not 1 <= rank <= len(top):
            raise ValueError(f"open_tuned: rank must be in 1..{len(top)}, got {rank}")
        entry = top[rank - 1]
        return self.act("tune_open", task=entry["task"], candidate=entry["candidate"])

    def export_trace(self, path: str | Path | None = None) -> str:
        """The trace as JSON text (also written to `path` when given)."""
        text = self.state["trace"]["json"]
        if path is not None:
            Path(path).write_text(text)
        return text

    def import_trace(self, text_or_path: str | Path) -> dict:
        text = str(text_or_path)
        path = Path(text)
        if not text.lstrip().startswith("{") and path.exists():
            text = path.read_text()
        return self.act("import_trace", text=text, filename=path.name)

    @property
    def message(self) -> str:
        """The message the view shows ("" when none): the cause, then the function it is
        about (what the view folds under the cause), if any."""
        message = self.state.get("message")
        if not message:
            return ""
        detail = message.get("detail") or ""
        return f"{message['text']}\n{detail}" if detail else message["text"]

    # -- helpers -----------------------------------------------------------------------------
    def _refresh(self) -> None:
        self.widget.state = self.session.state()

    def _chart_follow(self, change) -> None:
        if self._chart_source is not None:
            from .views import plots

            plots.update_latency(self._chart_source, change["new"]["latency"])

    def _loop_uid(self, loop: int | str) -> int:
        if isinstance(loop, int):
            return loop
        found = [c["uid"] for c in self.state["loop_choices"] if c["name"] == loop]
        if len(found) != 1:
            names = [c["name"] for c in self.state["loop_choices"]]
            raise ValueError(f"loop {loop!r}: {len(found)} loops have that name; loops: {names}")
        return found[0]

    def _block_uid(self, block: int | str | None) -> int | None:
        if block is None or isinstance(block, int):
            return block
        found = [c["uid"] for c in self.state["block_choices"] if c["name"] == block]
        if len(found) != 1:
            names = [c["name"] for c in self.state["block_choices"]]
            raise ValueError(
                f"block {block!r}: {len(found)} blocks have that name; blocks: {names}"
            )
        return found[0]

    def _resolve_arg(self, value):
        """Loop names in arguments become uids (lists of names too); other values pass."""
        names = {c["name"] for c in self.state["loop_choices"]}
        if isinstance(value, str) and value in names:
            return self._loop_uid(value)
        if (
            isinstance(value, (list, tuple))
            and value
            and all(isinstance(v, str) and v in names for v in value)
        ):
            return [self._loop_uid(v) for v in value]
        return list(value) if isinstance(value, tuple) else value


def explore(what=None, target: str = "cpu", **sizes) -> Explorer:
    """Open the explorer on a workload name (sizes as keywords), a PrimFunc, an IRModule, an
    ONNX model (path or ModelProto), a model file another installed frontend reads
    (`relax.frontend.frontends()`), or the built-in example (gemm 1024) when nothing is given.

        ex = schedlab.explore("gemm", M=256, N=256, K=256)
        ex.select(loop="i"); ex.apply("split", factors=[None, 16])
    """
    from schedlab.ir.function import IRModule, PrimFunc

    model = ExplorerModel(target=target)
    if what is None:
        name, defaults = DEFAULT_WORKLOAD
        model.load_workload(name, **{**defaults, **sizes})
    elif isinstance(what, PrimFunc):
        model.load_func(what)
    elif isinstance(what, IRModule):
        if all(isinstance(f, PrimFunc) for _name, f in what.items()):
            model.load_module(what)
        else:
            model.load_graph(what)
    elif isinstance(what, (str, Path)) and str(what).endswith(".onnx"):
        model.load_onnx(str(what))
    elif isinstance(what, (str, Path)) and (frontend := _model_file(what)) is not None:
        graph = frontend.importer(str(what), None)
        model.load_graph(graph, f"{frontend.name} model {Path(what).name}")
    elif isinstance(what, str):
        model.load_workload(what, **sizes)
    elif type(what).__name__ == "ModelProto":
        model.load_onnx(what)
    else:
        raise TypeError(
            "explore: expected a workload name, PrimFunc, IRModule or ONNX model, got "
            f"{type(what).__name__}"
        )
    return Explorer(model)


def _model_file(what):
    """The frontend (an extension's, `schedlab.frontends`) reading the file `what`, if any."""
    from schedlab.relax.frontend.registry import frontend_for

    return frontend_for(what) if Path(what).is_file() else None


_BOKEH_READY = False


def _latency_chart(points):
    """(widget, source) of the Bokeh latency chart, or None when jupyter_bokeh is missing.
    BokehJS is loaded inline once (no CDN) so the chart renders offline."""
    global _BOKEH_READY
    try:
        import bokeh.io
        import bokeh.resources
        from jupyter_bokeh import BokehModel
    except ImportError:
        return None
    from .views import plots

    if not _BOKEH_READY:
        bokeh.io.output_notebook(bokeh.resources.INLINE, hide_banner=True)
        _BOKEH_READY = True
    figure, source = plots.latency_figure()
    plots.update_latency(source, points)
    return BokehModel(figure), source

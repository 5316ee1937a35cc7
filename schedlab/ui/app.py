"""The standalone web app: `schedlab serve [--port 5006] [--address 127.0.0.1]` (Panel).

A thin shell: each browser session gets its own ExplorerSession (so sessions never share a
schedule), rendered by the shared ESM component plus a Bokeh latency chart. Every script and
stylesheet is served by the Panel server itself; the page makes no request off the machine.
A session's actions run off the server's event loop, on threads shared by all sessions
(`offload.SessionQueue`); only the document updates happen on the loop.
"""

from __future__ import annotations

import os
from functools import partial

from .component import ESM_PATH, stylesheet, ui_import_error
from .model import ExplorerModel
from .offload import TIMINGS_ENV, AnswerTimes, SessionQueue
from .session import DEFAULT_WORKLOAD, ExplorerSession

try:
    import panel as pn
    import param
    from panel.custom import AnyWidgetComponent
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise ui_import_error(_err, "schedlab serve") from None


class ExplorerComponent(AnyWidgetComponent):
    """The ESM component inside Panel: `state` in, `action` out (see docs/explorer.md)."""

    _esm = ESM_PATH
    state = param.Dict(default={})
    action = param.Dict(default={})


def build_app(workload: tuple[str, dict] = DEFAULT_WORKLOAD, onnx_path: str | None = None,
              target: str = "cpu") -> pn.viewable.Viewable:  # fmt: skip
    """One session's page: a fresh model, the component and the latency chart."""
    from .views import plots

    model = ExplorerModel(target=target)
    session = ExplorerSession(model)
    if onnx_path:
        model.load_onnx(onnx_path)
    else:
        name, sizes = workload
        model.load_workload(name, **sizes)
    component = ExplorerComponent(state=session.state(), stylesheets=[stylesheet()],
                                  sizing_mode="stretch_width", min_height=760)  # fmt: skip
    figure, source = plots.latency_figure()
    plots.update_latency(source, component.state["latency"], figure)
    chart = pn.pane.Bokeh(figure, sizing_mode="stretch_width", height=280)

    times = AnswerTimes(os.environ.get(TIMINGS_ENV))
    shown = dict(component.state)  # the state the page has, whole

    def show(state: dict) -> None:
        with pn.io.hold():  # the state and the chart's data in one message
            component.state = changed_fields(shown, state)
            plots.update_latency(source, state["latency"], figure)
        shown.update(state)
        times.answered(state["seq"])

    doc = pn.state.curdoc
    if doc is None:  # not served (a test building the page): act in the caller's thread

        def on_action(event) -> None:
            show(session.handle(event.new))
    else:
        # The action runs on a pool thread (the event loop stays free for the other sessions);
        # its state, and those a finished measurement or a tuning run asks for, come back to
        # the event loop as a next-tick callback, in order.
        queue = SessionQueue(lambda state: doc.add_next_tick_callback(partial(show, state)))

        def on_action(event) -> None:
            times.received(event.new)
            if isinstance(event.new, dict) and event.new.get("type") == "resync":
                shown.clear()  # the page has no state to merge into: send it whole
            queue.submit(partial(session.handle, event.new))

        session.on_update = lambda: queue.submit(session.state, coalesce=True)

        def destroyed(_ctx) -> None:
            queue.close()
            session.close()

        doc.on_session_destroyed(destroyed)
    component.param.watch(on_action, "action")
    header = pn.pane.HTML(
        '<div class="sl-app-header"><b>schedlab explorer</b> — apply schedule primitives, '
        "watch the code and the latency change</div>",
        sizing_mode="stretch_width",
        stylesheets=[_HEADER_CSS],
    )
    page = pn.Column(header, component, chart, sizing_mode="stretch_width")
    page.session = session  # for tests and the benchmark (server-side introspection)
    return page


def changed_fields(shown: dict, state: dict) -> dict:
    """What the page must be sent to show `state` when it shows `shown`: the fields that differ
    (the same object or an equal value is not sent again), marked `"partial": true`, which the
    component merges into the state it has (docs/explorer.md). A select changes a few small
    fields; sending the whole state (the highlighted code and script, the trace, the bundle)
    cost the server, the socket and the browser on every click. With nothing shown yet (a
    page that asked with `resync`), the whole state, unmarked."""
    if not shown:
        return state
    missing = object()
    changed = {}
    for key, value in state.items():
        old = shown.get(key, missing)
        if old is not value and (old is missing or old != value):
            changed[key] = value
    return {**changed, "seq": state["seq"], "partial": True}


_HEADER_CSS = """
.sl-app-header { font: 600 18px system-ui, sans-serif; padding: 8px 12px; color: #fff;
  background: #2f3e56; border-radius: 6px; }
.sl-app-header b { margin-right: .5em; }
"""


def serve(port: int = 5006, address: str = "127.0.0.1", workload: tuple[str, dict] =
          DEFAULT_WORKLOAD, onnx_path: str | None = None, show: bool = False,
          threaded: bool = False):  # fmt: skip
    """Start the Panel server (blocking unless `threaded`); returns the server."""
    origins = [f"{address}:{port}", f"localhost:{port}", f"127.0.0.1:{port}"]

    def session_page():  # a plain function: Panel calls it once per browser session
        return build_app(workload, onnx_path)

    return pn.serve(
        session_page,
        port=port,
        address=address,
        show=show,
        title="schedlab explorer",
        websocket_origin=origins,
        threaded=threaded,
        print_url=True,
    )

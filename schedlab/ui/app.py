"""The standalone web app: `schedlab serve [--port 5006] [--address 127.0.0.1]` (Panel).

A thin shell: each browser session gets its own ExplorerSession (so sessions never share a
schedule), rendered by the shared ESM component plus a zoomable Bokeh latency chart (folded
until opened). Every script and stylesheet is served by the Panel server itself; the page
makes no request off the machine.
A session's actions run off the server's event loop, on threads shared by all sessions
(`offload.SessionQueue`); only the document updates happen on the loop.
"""

from __future__ import annotations

import json
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
    """The ESM component inside Panel: `state` in, `action` out (see docs/explorer.md).

    `state` is the state as JSON text: Bokeh sends a string as it is, where it walked a nested
    dict value by value (for models inside it) and encoded and decoded it field by field, in
    the server and in the page, on every click."""

    _esm = ESM_PATH
    state = param.String(default="")
    action = param.Dict(default={})
    # Panel counts every received event into pn.state.busy (param events, a cleanup); nothing
    # here shows it, and each click paid for it on the event loop all sessions share
    _busy__ignore = ["action"]
    # Panel holds a change from the page back for 50 ms (`_debounce`) to merge it with the
    # next, which suits a dragged slider; an action is one click, answered as soon as it comes
    # (the 50 ms were most of an apply's time with one session) and never merged with another
    _priority_changes = ["action"]

    def _update_properties(self, *events, doc):
        # only the state changed: Panel's design (stylesheet modifiers, resolved anew on every
        # change) has nothing to add to it
        if all(event.name == "state" for event in events):
            return self._process_param_change({event.name: event.new for event in events})
        return super()._update_properties(*events, doc=doc)


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
    first = session.state()
    component = ExplorerComponent(state=json.dumps(first), stylesheets=[stylesheet()],
                                  sizing_mode="stretch_width", min_height=760)  # fmt: skip
    figure, source = plots.latency_figure()
    plots.update_latency(source, first["latency"], figure)
    # Folded at first: the explorer draws its own small latency chart, and this zoomable one,
    # redrawn by Bokeh on every step, took a third of the page's work per click (a canvas
    # repaint and its layout reads). Folded, it is sent nothing; opened, it gets the latest.
    chart = pn.Card(pn.pane.Bokeh(figure, sizing_mode="stretch_width", height=280),
                    title="Latency per step (zoomable chart)", collapsed=True,
                    sizing_mode="stretch_width")  # fmt: skip
    latest = {"points": first["latency"]}

    def draw_chart() -> None:
        if not chart.collapsed:
            plots.update_latency(source, latest["points"], figure)

    chart.param.watch(lambda _event: draw_chart(), "collapsed")

    times = AnswerTimes(os.environ.get(TIMINGS_ENV))
    sent = Sent(first)

    def show(answer: tuple[str, dict]) -> None:
        text, state = answer
        latest["points"] = state["latency"]
        with pn.io.hold():  # the state and the chart's data in one message
            component.state = text
            draw_chart()
        times.answered(state["seq"])

    doc = pn.state.curdoc
    if doc is None:  # not served (a test building the page): act in the caller's thread

        def on_action(event) -> None:
            show(sent.answer(session.handle(event.new)))
    else:
        # The action runs on a pool thread (the event loop stays free for the other sessions),
        # and so does making its JSON; the text, and those a finished measurement or a tuning
        # run asks for, come back to the event loop as a next-tick callback, in order.
        def deliver(state: dict) -> None:
            doc.add_next_tick_callback(partial(show, sent.answer(state)))

        queue = SessionQueue(deliver)

        def on_action(event) -> None:
            times.received(event.new)
            if isinstance(event.new, dict) and event.new.get("type") == "resync":
                sent.forget()  # the page has no state to merge into: send it whole
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


class Sent:
    """What the page was sent, whole, to send it next only what changed (`answer`). Used from
    the session's queue, one job at a time; `forget` (a resync) may come from the event loop:
    the next answer is then the whole state."""

    def __init__(self, first: dict):
        self.shown = dict(first)
        self._forget = False

    def forget(self) -> None:
        self._forget = True

    def answer(self, state: dict) -> tuple[str, dict]:
        """(the JSON text to send, `state`)."""
        if self._forget:
            self._forget = False
            self.shown = {}
        text = json.dumps(changed_fields(self.shown, state))
        self.shown.update(state)
        return text, state


def changed_fields(shown: dict, state: dict) -> dict:
    """What the page must be sent to show `state` when it shows `shown`: the fields that differ
    (the same object or an equal value is not sent again), marked `"partial": true`, which the
    component merges into the state it has (docs/explorer.md). A select changes a few small
    fields; sending the whole state (the highlighted code and script, the trace, the bundle)
    cost the server, the socket and the browser on every click. With nothing shown yet (a
    page that asked with `resync`) or a field gone (a merge cannot drop it), the whole state,
    unmarked."""
    if not shown or shown.keys() - state.keys():
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
        # each part its own document root: Bokeh lays a root out as one whole, so in one
        # Column every resize of the explorer (a form opening, a step more) laid the chart
        # out and repainted it too
        for part in build_app(workload, onnx_path):
            part.servable(title="schedlab explorer")

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

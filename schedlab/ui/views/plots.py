"""The latency chart (Bokeh): predicted and measured milliseconds per schedule step.

    figure, source = latency_figure()
    update_latency(source, model.latency(), figure)   # LatencyPoints or the state's dicts

Bokeh is imported inside the functions, so importing this module needs no UI library.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

COLUMNS = ("step", "label", "predicted_ms", "measured_ms")
SOURCE_NAME = "latency-per-step"  # the data source's Bokeh name (the browser tests find it by it)
PREDICTED_COLOR = "#1f77b4"
MEASURED_COLOR = "#d62728"
# Above this max/min ratio a linear axis squashes the fast steps flat against zero.
LOG_RATIO = 30.0
# The y tick labels, padded to one width (in a monospace font): the axis keeps its width when
# a step changes the latencies, and Bokeh repaints the chart instead of laying the whole plot
# out again, which it does whenever an axis's width changes ("157.5" after "158": about a
# third of the browser's work for an apply went into that). As many decimals as the ticks
# need to differ, like Bokeh's BasicTickFormatter.
Y_TICK_WIDTH = 8
_Y_TICKS_JS = f"""
let digits = 0;
while (digits < 6 && new Set(ticks.map((t) => t.toFixed(digits))).size < ticks.length) digits++;
const text = Math.abs(tick) >= 1e6 ? tick.toExponential(2) : tick.toFixed(digits);
return text.padStart({Y_TICK_WIDTH});
"""


def _bokeh():
    try:
        import bokeh.models as models
        import bokeh.plotting as plotting
    except ImportError as err:
        raise ImportError(
            "the latency chart needs bokeh: install the explorer extra, pip install 'schedlab[ui]'"
        ) from err
    return models, plotting


def _field(point, name: str):
    return point[name] if isinstance(point, Mapping) else getattr(point, name)


def _ms(seconds) -> float:
    return math.nan if seconds is None else float(seconds) * 1e3


def latency_data(points: Iterable) -> dict[str, list]:
    """ColumnDataSource columns from `LatencyPoint`s or the state's latency dicts (seconds):
    step, label, predicted_ms and measured_ms (NaN where unknown, which Bokeh leaves out)."""
    data: dict[str, list] = {name: [] for name in COLUMNS}
    for point in points:
        data["step"].append(int(_field(point, "step")))
        data["label"].append(str(_field(point, "label")))
        data["predicted_ms"].append(_ms(_field(point, "predicted")))
        data["measured_ms"].append(_ms(_field(point, "measured")))
    return data


def wants_log_y(data: Mapping[str, list]) -> bool:
    """Whether the values span so wide a range that a log axis reads better (all positive)."""
    values = [v for name in ("predicted_ms", "measured_ms") for v in data.get(name, ())
              if not math.isnan(v)]  # fmt: skip
    if len(values) < 2 or min(values) <= 0:
        return False
    return max(values) / min(values) > LOG_RATIO


def _set_y_scale(figure, log: bool) -> None:
    models, _ = _bokeh()
    figure.y_scale = models.LogScale() if log else models.LinearScale()
    figure.yaxis[0].ticker = models.LogTicker() if log else models.BasicTicker()


def _fixed_width_y_ticks(figure) -> None:
    models, _ = _bokeh()
    axis = figure.yaxis[0]
    axis.formatter = models.CustomJSTickFormatter(code=_Y_TICKS_JS)
    axis.major_label_text_font = "monospace"


def latency_figure(source=None):
    """(figure, ColumnDataSource): predicted latency as a line with circles, measured as
    squares, in ms per step; log y when the initial data spans a wide range."""
    models, plotting = _bokeh()
    if source is None:
        source = models.ColumnDataSource(data={name: [] for name in COLUMNS}, name=SOURCE_NAME)
    log = wants_log_y(source.data)
    figure = plotting.figure(
        title="Latency per step", height=260, sizing_mode="stretch_width",
        y_axis_type="log" if log else "linear", x_axis_label="step", y_axis_label="ms",
        tools="pan,box_zoom,wheel_zoom,reset,save", toolbar_location="above",
    )  # fmt: skip
    figure.line("step", "predicted_ms", source=source, color=PREDICTED_COLOR, line_width=2,
                legend_label="predicted")  # fmt: skip
    predicted = figure.scatter("step", "predicted_ms", source=source, marker="circle", size=7,
                               color=PREDICTED_COLOR, legend_label="predicted")  # fmt: skip
    measured = figure.scatter("step", "measured_ms", source=source, marker="square", size=8,
                              color=MEASURED_COLOR, legend_label="measured")  # fmt: skip
    figure.add_tools(models.HoverTool(
        renderers=[predicted, measured],
        tooltips=[("step", "@step: @label"), ("predicted", "@predicted_ms{0.000} ms"),
                  ("measured", "@measured_ms{0.000} ms")],
    ))  # fmt: skip
    _fixed_width_y_ticks(figure)
    # Steps are whole numbers: one tick each, none between.
    figure.xaxis.ticker = models.SingleIntervalTicker(interval=1, num_minor_ticks=0)
    # Latency usually falls step by step, which leaves the lower left corner free.
    figure.legend.location = "bottom_left"
    figure.legend.background_fill_alpha = 0.7
    figure.legend.click_policy = "hide"
    return figure, source


def update_latency(source, points: Iterable, figure=None) -> None:
    """Replace the chart's data; with `figure`, also switch its y axis to log or linear to
    suit the new range. What is already shown is not sent again: a select or a tab switch
    leaves the chart alone, and the axis models are replaced only when log/linear flips (new
    Bokeh models make the server walk the whole document and the browser rebuild the plot:
    ~70 ms a click, most of an apply)."""
    models, _ = _bokeh()
    data = latency_data(points)
    if not _same_data(source.data, data):
        source.data = data
    if figure is not None:
        log = wants_log_y(data)
        if log != isinstance(figure.y_scale, models.LogScale):
            _set_y_scale(figure, log)


def _same_data(old: Mapping[str, list], new: Mapping[str, list]) -> bool:
    """Equal columns, NaN equal to NaN (the ms of an unknown latency)."""
    if set(old) != set(new):
        return False
    for name, values in new.items():
        shown = list(old[name])
        if len(shown) != len(values):
            return False
        for a, b in zip(shown, values, strict=True):
            if a != b and not (_isnan(a) and _isnan(b)):
                return False
    return True


def _isnan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)

"""Views the explorer renders in Python: highlighted source lines (`highlight`), Graphviz
graphs of a module or kernel (`graph`) and the Bokeh latency chart (`plots`).

No UI framework is imported here; pygraphviz and bokeh are imported inside the functions that
need them, so `import schedlab.ui.views` works without the `schedlab[ui]` extra."""

from .graph import module_graph_svg, primfunc_graph_svg
from .highlight import css, diff_html, lines_html, write_css
from .plots import latency_data, latency_figure, update_latency

__all__ = [
    "css", "diff_html", "latency_data", "latency_figure", "lines_html", "module_graph_svg",
    "primfunc_graph_svg", "update_latency", "write_css",
]  # fmt: skip

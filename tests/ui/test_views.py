"""Views rendered in Python: highlighted lines, Graphviz SVG of graphs and kernels, the Bokeh
latency chart. Everything is really rendered (pygments, pygraphviz, bokeh); nothing is faked."""

import difflib
import html
import math
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from schedlab import relax
from schedlab.ir.function import IRModule
from schedlab.ir.functor import pre_order_visit
from schedlab.ir.stmt import Block
from schedlab.schedule import Schedule
from schedlab.target import Target
from schedlab.ui.derive import generate_code
from schedlab.ui.results import LatencyPoint
from schedlab.ui.views import highlight
from schedlab.ui.views.highlight import css, diff_html, lines_html
from schedlab.workloads import get

pygments = pytest.importorskip("pygments")

LINE = re.compile(r'<span class="sl-line( [\w-]+)?" data-line="(\d+)">(.*)</span>')
SVG_NS = "{http://www.w3.org/2000/svg}"


def _gemm(n=1024):
    func, _ = get("gemm", M=n, N=n, K=n)
    return func


def _lines(rendered: str) -> list[tuple[str, int, str]]:
    """(extra class, line number, inner html) of each rendered line; checks the line format."""
    assert rendered == "" or rendered.endswith("</span>\n")
    out = []
    for row in rendered.split("\n")[:-1]:
        match = LINE.fullmatch(row)
        assert match, row
        out.append(((match.group(1) or "").strip(), int(match.group(2)), match.group(3)))
    return out


def _text(inner: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", inner))


# -- highlighting --------------------------------------------------------------------------------
@pytest.mark.parametrize("language", ["python", "c", "text"])
def test_lines_round_trip_one_span_per_source_line(language):
    func = _gemm()
    text = func.script() if language != "c" else generate_code(func, "gemm", Target("cpu")).source
    text = "\n" + text + "\n\n"  # blank lines at both ends keep their numbers
    rows = _lines(lines_html(text, language))
    assert len(rows) == len(text.splitlines())
    assert [n for _, n, _ in rows] == list(range(1, len(rows) + 1))
    assert [_text(inner) for _, _, inner in rows] == text.splitlines()
    assert rows[0][2] == "" and rows[-1][2] == ""


def test_lines_escape_and_use_pygments_classes():
    c = 'if (a < b && c > 0) { x = "<&>"; } // a<b\nfloat y = 1.5f;\n'
    rows = _lines(lines_html(c, "c"))
    first = rows[0][2]
    assert "<b" not in first.replace("<span", "").replace("</span", "")
    assert "&lt;" in first and "&amp;&amp;" in first and "&gt;" in first
    assert '<span class="k">if</span>' in first
    assert '<span class="c1">// a&lt;b</span>' in first
    assert '<span class="kt">float</span>' in rows[1][2]
    assert '<span class="mf">1.5f</span>' in rows[1][2]
    py = "@T.prim_func\ndef f(A: T.Buffer((4,), 'float32')):\n    for i in range(4):  # loop\n"
    rows = _lines(lines_html(py, "python"))
    assert '<span class="nd">@T</span>' in rows[0][2]
    assert '<span class="k">def</span> <span class="nf">f</span>' in rows[1][2]
    assert "<span class=\"s1\">'float32'</span>" in rows[1][2]
    assert '<span class="ow">in</span> <span class="nb">range</span>' in rows[2][2]
    assert '<span class="c1"># loop</span>' in rows[2][2]


def test_token_spanning_lines_is_split_per_line():
    rows = _lines(lines_html("/* one\n\ntwo */\nint x;", "c"))
    assert [inner for _, _, inner in rows[:3]] == [
        '<span class="cm">/* one</span>',
        "",
        '<span class="cm">two */</span>',
    ]
    rows = _lines(lines_html('x = """a\nb"""\n', "python"))
    assert rows[1][2] == '<span class="s2">b"""</span>'


def test_cuda_words():
    src = "__global__ void k(float4* __restrict__ A) { int t = threadIdx.x; __syncthreads(); }"
    (row,) = _lines(lines_html(src, "cuda"))
    inner = row[2]
    expected = [("kr", "__global__"), ("kt", "void"), ("kt", "float4"), ("kt", "__restrict__"),
                ("nb", "threadIdx"), ("nf", "__syncthreads"), ("kt", "int")]  # fmt: skip
    for cls, word in expected:
        assert f'<span class="{cls}">{word}</span>' in inner, word


def _char_classes(pairs) -> list[str]:
    out = []
    for ttype, value in pairs:
        cls = highlight._css_class(ttype)
        out += ["" if cls == "w" else cls] * len(value)
    return out


@pytest.mark.parametrize("language", ["python", "c"])
def test_classes_agree_with_pygments_lexers(language):
    from pygments.lexers import CLexer, PythonLexer

    sch = Schedule(_gemm(64))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 16])
    func = sch.mod["gemm"]
    if language == "c":
        text, lexer = generate_code(func, "gemm", Target("cpu")).source, CLexer
    else:
        text, lexer = func.script(), PythonLexer
    ours = _char_classes(highlight._tokens(text, language))
    theirs = _char_classes(lexer(stripnl=False, ensurenl=False).get_tokens(text))
    assert len(ours) == len(theirs) == len(text)
    visible = [k for k, ch in enumerate(text) if not ch.isspace()]
    same = sum(ours[k] == theirs[k] for k in visible)
    assert same / len(visible) > 0.97


def test_highlighting_200_lines_of_c_is_fast():
    source = generate_code(_gemm(), "gemm", Target("cpu")).source
    text = "\n".join([source] * 5)  # ~200 lines: as long as a deeply tiled kernel's source
    assert len(text.splitlines()) >= 200
    lines_html(text, "c")  # compile the scanner once
    best = min(_timed(lambda: lines_html(text, "c")) for _ in range(5))
    assert best < 0.010, f"{best * 1e3:.1f} ms"


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="unknown language"):
        lines_html("x", "fortran")


def test_diff_lines_carry_add_del_hunk_classes():
    before = _gemm(64).script()
    sch = Schedule(_gemm(64))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 16])
    after = sch.mod["gemm"].script()
    text = "\n".join(difflib.unified_diff(before.splitlines(), after.splitlines(),
                                         "step 0", "step 1", lineterm=""))  # fmt: skip
    rows = _lines(diff_html(text))
    source = text.splitlines()
    assert len(rows) == len(source)
    expected = []
    for line in source:
        if line.startswith(("---", "+++", "@@")):
            expected.append("sl-hunk")
        else:
            expected.append({"+": "sl-add", "-": "sl-del"}.get(line[:1], ""))
    assert [cls for cls, _, _ in rows] == expected
    assert {"sl-add", "sl-del", "sl-hunk"} <= set(expected)
    assert [_text(inner) for _, _, inner in rows] == source


def test_diff_body_lines_that_look_like_headers_are_changes():
    text = "--- a\n+++ b\n@@ -1,2 +1,2 @@\n--- x\n+++ y\n ctx\n--- c\n"
    classes = [cls for cls, _, _ in _lines(diff_html(text))]
    assert classes == ["sl-hunk", "sl-hunk", "sl-hunk", "sl-del", "sl-add", "", "sl-hunk"]


def test_css_is_scoped_and_the_static_file_is_current():
    text = css()
    rules = [line for line in text.splitlines() if "{" in line]
    assert rules and all(rule.startswith(".sl-code") for rule in rules)
    assert ".sl-code .k {" in text and ".sl-code .sl-add {" in text
    assert highlight.CSS_PATH.read_text(encoding="utf-8") == text, "run write_css()"


# -- graphs --------------------------------------------------------------------------------------
def _svg_graph(svg: str) -> tuple[dict[str, str], set[tuple[str, str]]]:
    """(node title -> id, edges as (id, id)) of a Graphviz SVG, which must parse as XML."""
    assert svg.startswith("<svg") and "<!DOCTYPE" not in svg
    root = ET.fromstring(svg)
    ids, edges = {}, set()
    for group in root.iter(f"{SVG_NS}g"):
        title = group.find(f"{SVG_NS}title")
        if group.get("class") == "node":
            ids[title.text] = group.get("id")
        elif group.get("class") == "edge":
            edges.add(tuple(title.text.split("->")))
    return ids, {(ids[a], ids[b]) for a, b in edges}


@pytest.fixture(scope="module")
def mlp_graph():
    pytest.importorskip("pygraphviz")
    pytest.importorskip("onnx")
    from schedlab.relax.frontend.onnx import from_onnx
    from tests.relax.test_end_to_end import mlp_model

    return from_onnx(mlp_model())


def test_module_graph_of_lowered_mlp_has_clickable_primfunc_nodes(mlp_graph):
    from schedlab.ui.views.graph import module_graph_svg

    lowered = relax.get_pipeline("zero")(mlp_graph)
    prims = [name for name, f in lowered.items() if type(f).__name__ == "PrimFunc"]
    assert len(prims) == 2
    svg = module_graph_svg(lowered)
    ids, edges = _svg_graph(svg)
    for name in prims:
        assert f'<g id="fn:{name}" class="node"' in svg
    first, second = (f"fn:{p}" for p in prims)
    assert ("param:x", first) in edges and (first, second) in edges
    assert (second, "output") in edges
    consts = [i for i in ids.values() if i.startswith("const:")]
    assert len(consts) == len(set(consts)) >= 4  # weights, biases, the 0.5 scale
    assert "(3, 21) float32" in svg  # output shape in the call's label


def test_module_graph_of_unlowered_graph_names_the_ops(mlp_graph):
    from schedlab.ui.views.graph import module_graph_svg

    svg = module_graph_svg(mlp_graph)
    ids, edges = _svg_graph(svg)
    assert not any(i.startswith("fn:") for i in ids.values())
    labels = "".join(ET.fromstring(svg).itertext())
    for op in ("matmul", "add", "nn.relu", "multiply", "sigmoid"):
        assert op in labels
    ops = {i for i in ids.values() if i.startswith("op:")}
    assert len(ops) == 7
    # `output = lv6` is an alias: the sigmoid feeds the output directly
    assert ("op:lv6", "output") in edges


def test_module_graph_needs_a_graph_function():
    pytest.importorskip("pygraphviz")
    from schedlab.ui.views.graph import module_graph_svg

    with pytest.raises(ValueError, match="no graph function 'main'"):
        module_graph_svg(IRModule({"gemm": _gemm(8)}))


def test_primfunc_graph_of_gemm():
    pytest.importorskip("pygraphviz")
    from schedlab.ui.views.graph import primfunc_graph_svg

    func = _gemm()
    blocks = []
    pre_order_visit(func.body, lambda n: blocks.append(n) if isinstance(n, Block) else None)
    (block,) = [b for b in blocks if b.name_hint == "C"]
    svg = primfunc_graph_svg(func)
    ids, edges = _svg_graph(svg)
    node = f"block:{block.uid}"
    assert f'<g id="{node}" class="node"' in svg
    assert sorted(ids.values()) == sorted(["buffer:A", "buffer:B", "buffer:C", node])
    assert edges == {("buffer:A", node), ("buffer:B", node), (node, "buffer:C")}


def test_graphs_drawn_from_many_threads_at_once():
    """schedlab serve draws sessions' graphs on a thread pool; Graphviz is not thread-safe
    (without the module's lock this aborted the process in cgraph within a few drawings). In a
    subprocess, so that a regression fails this test rather than killing the run."""
    pytest.importorskip("pygraphviz")
    code = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from schedlab.ui.views import graph\n"
        "from schedlab.ui.views.graph import primfunc_graph_svg as draw\n"
        "from schedlab.workloads import get\n"
        "class Forget(dict):\n"  # every drawing laid out: no graph drawn before is kept
        "    def __setitem__(self, key, value): pass\n"
        "graph._DRAWN = Forget()\n"
        "funcs = [get('gemm', M=m, N=m, K=m)[0] for m in (8, 16, 32, 64)]\n"
        "want = [draw(f) for f in funcs]\n"
        "with ThreadPoolExecutor(8) as pool:\n"
        "    same = list(pool.map(lambda i: draw(funcs[i % 4]) == want[i % 4], range(200)))\n"
        "print('all equal' if all(same) else 'some differ')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0 and "all equal" in done.stdout, done.stderr[-2000:]


def test_a_graph_drawn_before_is_not_laid_out_again(monkeypatch):
    """Most schedule steps change no block or buffer: the graph of the new step is the DOT
    text of the last one, drawn once for every session."""
    pytest.importorskip("pygraphviz")
    import pygraphviz

    from schedlab.schedule import Schedule
    from schedlab.ui.views import graph

    monkeypatch.setattr(graph, "_DRAWN", {})
    draws = []
    draw = pygraphviz.AGraph.draw
    monkeypatch.setattr(pygraphviz.AGraph, "draw",
                        lambda self, *a, **k: draws.append(1) or draw(self, *a, **k))  # fmt: skip
    sch = Schedule(_gemm())
    first = graph.primfunc_graph_svg(sch.func)
    sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 16])
    assert graph.primfunc_graph_svg(sch.func) == first and len(draws) == 1  # the same graph
    other = graph.primfunc_graph_svg(get("gemm", M=8, N=4, K=2)[0])
    assert other != first and len(draws) == 2


def test_primfunc_graph_shows_allocated_buffers_between_blocks():
    pytest.importorskip("pygraphviz")
    from schedlab.ui.views.graph import primfunc_graph_svg

    sch = Schedule(_gemm(64))
    block = sch.get_block("C")
    sch.cache_write(block, 0, "local")
    func = sch.mod["gemm"]
    ids, edges = _svg_graph(primfunc_graph_svg(func))
    blocks = [i for i in ids.values() if i.startswith("block:")]
    assert len(blocks) == 2
    local = [i for i in ids.values() if i.startswith("buffer:") and "local" in i]
    assert local, ids
    # the cache block writes the local buffer, the copy-out block reads it and writes C
    (producer,) = [a for a, b in edges if b == local[0]]
    (consumer,) = [b for a, b in edges if a == local[0]]
    assert (consumer, "buffer:C") in edges and producer != consumer


# -- latency chart -------------------------------------------------------------------------------
def test_latency_data_from_points_and_dicts():
    from schedlab.ui.views.plots import latency_data

    points = [LatencyPoint(0, "start", 0.5, None), LatencyPoint(1, "split", 0.002, 0.0025)]
    data = latency_data(points)
    assert data["step"] == [0, 1] and data["label"] == ["start", "split"]
    assert data["predicted_ms"] == [500.0, 2.0]
    assert math.isnan(data["measured_ms"][0]) and data["measured_ms"][1] == pytest.approx(2.5)
    dicts = [{"step": p.step, "label": p.label, "predicted": p.predicted,
              "measured": p.measured} for p in points]  # fmt: skip
    again = latency_data(dicts)
    assert again["predicted_ms"] == data["predicted_ms"] and math.isnan(again["measured_ms"][0])


def test_latency_figure_and_update():
    pytest.importorskip("bokeh")
    from bokeh.embed import json_item
    from bokeh.models import HoverTool, LinearScale, LogScale

    from schedlab.ui.views.plots import latency_figure, update_latency

    figure, source = latency_figure()
    assert set(source.data) == {"step", "label", "predicted_ms", "measured_ms"}
    assert figure.title.text == "Latency per step"
    assert figure.sizing_mode == "stretch_width" and 200 <= figure.height <= 320
    assert isinstance(figure.y_scale, LinearScale)
    (hover,) = figure.select(type=HoverTool)
    assert any("@label" in value for _, value in hover.tooltips)
    markers = {r.glyph.marker for r in figure.renderers if hasattr(r.glyph, "marker")}
    assert markers == {"circle", "square"}

    wide = [LatencyPoint(0, "start", 1.0, 1.2), LatencyPoint(1, "tile", 0.001, None)]
    update_latency(source, wide, figure)
    assert source.data["predicted_ms"] == [1000.0, 1.0]
    assert isinstance(figure.y_scale, LogScale)
    update_latency(source, [LatencyPoint(0, "start", 0.002, 0.003)], figure)
    assert source.data["step"] == [0] and isinstance(figure.y_scale, LinearScale)
    # y tick labels of one width on both scales: a new step repaints, no new plot layout
    axis = figure.yaxis[0]
    assert axis.major_label_text_font == "monospace" and "padStart(8)" in axis.formatter.code
    json_item(figure)  # serializes (what Panel/Jupyter send to the browser)

    figure2, same = latency_figure(source)
    assert same is source
    log_source = latency_figure()[1]
    update_latency(log_source, wide)
    assert isinstance(latency_figure(log_source)[0].y_scale, LogScale)


def test_latency_update_sends_nothing_already_shown():
    pytest.importorskip("bokeh")
    from schedlab.ui.views.plots import latency_figure, update_latency

    figure, source = latency_figure()
    points = [LatencyPoint(0, "start", 1.0, None), LatencyPoint(1, "tile", 0.001, None)]
    update_latency(source, points, figure)
    data, scale, ticker = source.data, figure.y_scale, figure.yaxis[0].ticker
    changes = []
    source.on_change("data", lambda attr, old, new: changes.append(new))
    update_latency(source, list(points), figure)  # a select: same steps, NaN for unmeasured
    assert changes == [] and source.data is data
    assert figure.y_scale is scale and figure.yaxis[0].ticker is ticker  # no new Bokeh models
    update_latency(source, [*points, LatencyPoint(2, "vectorize", 0.0005, None)], figure)
    assert len(changes) == 1 and source.data["step"] == [0, 1, 2]
    assert figure.y_scale is scale  # still log: nothing to replace


def test_views_import_no_ui_framework():
    code = (
        "import sys, schedlab.ui.views\n"
        "bad = [m for m in ('panel', 'bokeh', 'ipywidgets', 'anywidget', 'pygraphviz')\n"
        "       if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

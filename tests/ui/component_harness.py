"""A browser harness for the explorer's ESM component, without Python widgets behind it.

`serve_harness()` serves a page on 127.0.0.1 that imports `schedlab/ui/static/explorer.js` and
mounts it on a small in-page fake of the anywidget model (`window.__model`): `get/set/on/off/
save_changes`, with every saved action recorded in `window.__model.actions` and
`window.__model.push(state)` to deliver a new state as Python would. The fixture states below
are written by hand after the view-state contract (notes/UI_STATE.md): a gemm whose `i` loop was
split by 16 and whose outer part is parallel.
"""

from __future__ import annotations

import contextlib
import copy
import html
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "schedlab" / "ui" / "static"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>explorer harness</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/explorer.css">
{highlight}
</head><body style="margin:0">
<div id="host"></div>
<script type="module">
import widget from "/static/explorer.js";

class FakeModel {{
  constructor(state) {{
    this.data = {{ state, action: null }};
    this.listeners = {{}};
    this.actions = [];      // every action as it was when save_changes() ran
    this.problems = [];     // contract breaches seen by the fake (reused action objects)
  }}
  get(name) {{ return this.data[name]; }}
  set(name, value) {{
    if (name === "action" && value === this.data.action) this.problems.push("action reused");
    this.data[name] = value;
  }}
  save_changes() {{ this.actions.push(JSON.parse(JSON.stringify(this.data.action))); }}
  on(event, callback) {{ (this.listeners[event] ||= []).push(callback); }}
  off(event, callback) {{
    this.listeners[event] = (this.listeners[event] || []).filter((f) => f !== callback);
  }}
  push(state) {{
    this.data.state = state;
    for (const callback of this.listeners["change:state"] || []) callback();
  }}
}}

window.__mount = (state) => {{
  window.__model = new FakeModel(state);
  const el = document.getElementById("host");
  el.replaceChildren();
  window.__cleanup = widget.render({{ model: window.__model, el }});
}};
window.__ready = true;
</script>
</body></html>
"""


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path in ("/", "/index.html"):
            highlight = (STATIC / "highlight.css").exists()
            link = '<link rel="stylesheet" href="/static/highlight.css">' if highlight else ""
            self._reply(_PAGE.format(highlight=link).encode(), "text/html; charset=utf-8")
            return
        name = self.path.removeprefix("/static/")
        file = STATIC / name
        if self.path.startswith("/static/") and "/" not in name and file.is_file():
            kind = {".js": "text/javascript", ".css": "text/css"}.get(file.suffix, "text/plain")
            self._reply(file.read_bytes(), f"{kind}; charset=utf-8")
            return
        self.send_error(404)

    def _reply(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # keep pytest output clean
        pass


@contextlib.contextmanager
def serve_harness() -> Iterator[str]:
    """Serve the harness page on a free loopback port; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# -- fixture states ------------------------------------------------------------------------------
def highlighted(text: str, line_classes: dict[int, str] | None = None) -> str:
    """Text in the contract's line format: one `<span class="sl-line" data-line="N">` per line
    (extra classes per line number, e.g. sl-add), each followed by a newline."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        extra = (line_classes or {}).get(number, "")
        classes = f"sl-line {extra}".strip()
        out.append(f'<span class="{classes}" data-line="{number}">{html.escape(line)}</span>\n')
    return "".join(out)


UID_I0, UID_I1, UID_J, UID_K, UID_C = 11, 12, 4, 5, 2

SCRIPT = """\
@T.prim_func
def gemm(A: T.Buffer((1024, 1024), "float32"), B: T.Buffer((1024, 1024), "float32"), C: T.Buffer((1024, 1024), "float32")):
    for i_0 in T.parallel(64):
        for i_1 in range(16):
            for j in range(1024):
                for k in range(1024):
                    with T.block("C"):
                        vi = T.axis.spatial(1024, i_0 * 16 + i_1)
                        vj = T.axis.spatial(1024, j)
                        vk = T.axis.reduce(1024, k)
                        with T.init():
                            C[vi, vj] = T.float32(0)
                        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""  # noqa: E501 (TVMScript prints the signature on one line)
SCRIPT_LINES = {str(UID_I0): 3, str(UID_I1): 4, str(UID_J): 5, str(UID_K): 6, str(UID_C): 7}

CODE = """\
#include <stdint.h>

void gemm(const float* restrict A, const float* restrict B, float* restrict C) {
  #pragma omp parallel for
  for (int64_t i_0 = 0; i_0 < 64; ++i_0) {
    for (int64_t i_1 = 0; i_1 < 16; ++i_1) {
      for (int64_t j = 0; j < 1024; ++j) {
        C[(i_0 * 16 + i_1) * 1024 + j] = 0.0f;
        for (int64_t k = 0; k < 1024; ++k) {
          C[(i_0 * 16 + i_1) * 1024 + j] += A[(i_0 * 16 + i_1) * 1024 + k] * B[k * 1024 + j];
        }
      }
    }
  }
}
"""
CODE_LINES = {
    str(UID_I0): [4, 14],
    str(UID_I1): [6, 13],
    str(UID_J): [7, 12],
    str(UID_K): [9, 11],
}

DIFF = """\
--- step 1
+++ step 2
@@ -1,4 +1,4 @@
-    for i_0 in range(64):
+    for i_0 in T.parallel(64):
         for i_1 in range(16):
"""

SCHEDULE_ERROR = """\
ScheduleError: reorder: the loops i_1 and i_0 are not in a single chain
    for i_0 in T.parallel(64):
        ^^^^^^^^^^^^^^^^^^^^^^
        for i_1 in range(16):
            ^^^^^^^^^^^^^^^^^
a parallel loop cannot move inside a serial one"""

GRAPH_SVG = """<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg width="170pt" height="188pt" viewBox="0 0 170 188" xmlns="http://www.w3.org/2000/svg">
<g id="graph0" class="graph" transform="translate(4 184)">
<g id="param:x" class="node"><title>x</title>
<ellipse fill="none" stroke="black" cx="81" cy="-162" rx="27" ry="18"/>
<text text-anchor="middle" x="81" y="-157.8" font-size="14">x</text></g>
<g id="fn:gemm" class="node"><title>gemm</title>
<polygon fill="#e3ecfd" stroke="black" points="126,-108 36,-108 36,-72 126,-72 126,-108"/>
<text text-anchor="middle" x="81" y="-85.8" font-size="14">gemm</text></g>
<g id="block:2" class="node"><title>C</title>
<polygon fill="none" stroke="black" points="108,-36 54,-36 54,0 108,0 108,-36"/>
<text text-anchor="middle" x="81" y="-13.8" font-size="14">block C</text></g>
<g id="edge1" class="edge"><title>x&#45;&gt;gemm</title>
<path fill="none" stroke="black" d="M81,-143.7C81,-135.98 81,-126.71 81,-118.11"/></g>
</g></svg>"""

TRACE_JSON = json.dumps(
    {
        "version": 1,
        "func": "gemm",
        "target": "cpu",
        "insts": [
            {"kind": "GetBlock", "inputs": [], "attrs": ["C", "gemm"], "outputs": ["b0"]},
            {"kind": "Split", "inputs": ["l1", None, 16], "attrs": [True], "outputs": ["l2", "l3"]},
            {"kind": "Parallel", "inputs": ["l2"], "attrs": [], "outputs": []},
        ],
    },
    indent=2,
)
BUNDLE_JSON = json.dumps({"schema": "schedlab.bundle", "name": "gemm"}, indent=1)
TRACE_PYTHON = """\
b0 = sch.get_block("C", func_name="gemm")
l1, l4, l5 = sch.get_loops(b0)
l2, l3 = sch.split(l1, factors=[None, 16], preserve_unit_iters=True)
sch.parallel(l2)
"""


def _arg(name, kind, default=None, choices=(), help="", required=True) -> dict:
    return {
        "name": name,
        "kind": kind,
        "default": default,
        "choices": list(choices),
        "help": help,
        "required": required,
    }


_FACTORS = _arg("factors", "ints", help="split factors; one may be None (inferred)")
LOOP_PALETTE = [
    {
        "name": "split",
        "target": "loop",
        "doc": "Split a loop into a list of consecutive loops.",
        "args": [_FACTORS, _arg("preserve_unit_iters", "bool", True, required=False)],
    },
    {
        "name": "fuse",
        "target": "loop",
        "doc": "Fuse a list of consecutive loops into one.",
        "args": [_arg("loops", "loops", required=False, help="the loops after the selected one")],
    },
    {
        "name": "reorder",
        "target": "loop",
        "doc": "Reorder a list of loops.",
        "args": [_arg("loops", "loops", help="the new order, selected loop included")],
    },
    {"name": "parallel", "target": "loop", "doc": "Parallelize the input loop.", "args": []},
    {"name": "vectorize", "target": "loop", "doc": "Vectorize the input loop.", "args": []},
    {"name": "unroll", "target": "loop", "doc": "Unroll the input loop.", "args": []},
    {
        "name": "rfactor",
        "target": "loop",
        "doc": "Factorize an associative reduction block by the specified loop.",
        "args": [_arg("factor_axis", "int", 0)],
    },
    {
        "name": "annotate",
        "target": "loop",
        "doc": "Annotate a block/loop with a key value pair.",
        "args": [_arg("ann_key", "str"), _arg("ann_val", "any")],
    },
]
BLOCK_PALETTE = [
    {
        "name": "compute_at",
        "target": "block",
        "doc": "Compute-At. Move a producer block under the specific loop.",
        "args": [
            _arg("loop", "loop"),
            _arg("preserve_unit_loops", "bool", False, required=False),
        ],
    },
    {
        "name": "cache_write",
        "target": "block",
        "doc": "Create a block that writes a buffer region into a write cache.",
        "args": [
            _arg("write_buffer_index", "int", 0),
            _arg("storage_scope", "choice", "local", ("global", "local", "shared")),
        ],
    },
    {
        "name": "decompose_reduction",
        "target": "block",
        "doc": "Decompose a reduction block into two separate blocks.",
        "args": [_arg("loop", "loop")],
    },
]


def _loop(uid, name, extent, children, kind="serial", annotations=None) -> dict:
    return {
        "uid": uid,
        "type": "loop",
        "name": name,
        "kind": kind,
        "extent": extent,
        "thread": None,
        "annotations": annotations or {},
        "iters": "",
        "children": children,
    }


def gemm_tree() -> list[dict]:
    block = {
        "uid": UID_C,
        "type": "block",
        "name": "C",
        "kind": "",
        "extent": "",
        "thread": None,
        "annotations": {},
        "iters": "vi:S vj:S vk:R",
        "children": [],
    }
    k = _loop(UID_K, "k", "1024", [block], annotations={"pragma_unroll_explicit": "0"})
    j = _loop(UID_J, "j", "1024", [k])
    i1 = _loop(UID_I1, "i_1", "16", [j])
    return [_loop(UID_I0, "i_0", "64", [i1], kind="parallel")]


def gemm_state(**overrides) -> dict:
    """The explorer after `split(i, [None, 16])` and `parallel(i_0)`, loop i_1 selected."""
    state = {
        "version": 1,
        "seq": 0,
        "source": "workload gemm(M=1024, N=1024, K=1024)",
        "workloads": [
            {"name": "gemm", "sizes": {"M": 1024, "N": 1024, "K": 1024}},
            {"name": "conv2d", "sizes": {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64}},
            {"name": "softmax", "sizes": {"M": 128, "N": 1024}},
        ],
        "targets": ["cpu", "cuda"],
        "target": "cpu",
        "functions": [{"name": "gemm", "kind": "PrimFunc"}, {"name": "main", "kind": "Function"}],
        "func": "gemm",
        "graph_svg": GRAPH_SVG,
        "tree": gemm_tree(),
        "selection": {"block": None, "loop": UID_I1},
        "loop_choices": [
            {"uid": UID_I0, "name": "i_0"},
            {"uid": UID_I1, "name": "i_1"},
            {"uid": UID_J, "name": "j"},
            {"uid": UID_K, "name": "k"},
        ],
        "block_choices": [{"uid": UID_C, "name": "C"}],
        "palette": copy.deepcopy(LOOP_PALETTE),
        "script": {"html": highlighted(SCRIPT), "lines": dict(SCRIPT_LINES)},
        "code": {
            "target": "cpu",
            "html": highlighted(CODE),
            "lines": dict(CODE_LINES),
            "error": "",
        },
        "prediction": {
            "available": True,
            "seconds": 0.01234,
            "text": "12.34 ms",
            "bound": "memory",
            "assumptions": [["cores", "16"], ["L2 cache", "1 MiB"], ["vector width", "8 x f32"]],
        },
        "measurement": {"status": "none", "text": ""},
        "steps": [
            {"index": 0, "label": "start"},
            {"index": 1, "label": "split(i, [None, 16])"},
            {"index": 2, "label": "parallel(i_0)"},
        ],
        "current_step": 2,
        "can_undo": True,
        "can_redo": False,
        "branches": ["main", "tiled"],
        "branch": "main",
        "message": None,
        "diff": None,
        "compare": None,
        "pipeline": None,
        "trace": {
            "json": TRACE_JSON,
            "python": TRACE_PYTHON,
            "filename": "gemm_trace.json",
            "bundle": BUNDLE_JSON,
            "bundle_filename": "gemm.bundle.json",
            "bundle_error": "",
        },
        "latency": [
            {"step": 0, "label": "start", "predicted": 0.096, "measured": 0.11},
            {"step": 1, "label": "split(i, [None, 16])", "predicted": 0.094, "measured": None},
            {"step": 2, "label": "parallel(i_0)", "predicted": 0.01234, "measured": None},
        ],
    }
    state.update(overrides)
    return state


def block_selected_state(**overrides) -> dict:
    """The same gemm with block C selected: the block palette (compute_at, ...)."""
    return gemm_state(
        selection={"block": UID_C, "loop": None},
        palette=copy.deepcopy(BLOCK_PALETTE),
        **overrides,
    )


def error_state(**overrides) -> dict:
    """A rejected reorder: an error message naming loops i_0 and i_1."""
    message = {"level": "error", "text": SCHEDULE_ERROR, "uids": [UID_I0, UID_I1]}
    return gemm_state(message=message, **overrides)


def diff_state(**overrides) -> dict:
    classes = {1: "sl-hunk", 2: "sl-hunk", 3: "sl-hunk", 4: "sl-del", 5: "sl-add"}
    return gemm_state(diff={"a": 1, "b": 2, "html": highlighted(DIFF, classes)}, **overrides)


def compare_state(**overrides) -> dict:
    compare = {
        "a": "main",
        "b": "tiled",
        "html": highlighted(DIFF, {4: "sl-del", 5: "sl-add"}),
        "predicted": {"main": "12.34 ms", "tiled": "8.10 ms"},
        "measured": {"main": "13.0 ms"},
    }
    return gemm_state(compare=compare, **overrides)


PIPELINE = [
    {"name": "lower", "seconds": 0.0123, "depth": 0, "changed": True, "before": SCRIPT,
     "after": "# lowered\n" + SCRIPT},
    {"name": "Simplify", "seconds": 0.0021, "depth": 1, "changed": True, "before": "x + 0",
     "after": "x"},
    {"name": "VectorizeLoop", "seconds": 0.0004, "depth": 1, "changed": False, "before": "y",
     "after": "y"},
]  # fmt: skip


def pipeline_state(**overrides) -> dict:
    return gemm_state(pipeline=copy.deepcopy(PIPELINE), **overrides)

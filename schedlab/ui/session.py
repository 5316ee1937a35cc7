"""`ExplorerSession`: one explorer session for a front end, with no UI library imported.

Both shells (the Panel app and the JupyterLab widget) render the same ESM component
(`static/explorer.js`) from one JSON value, `state()`, and pass the component's user actions to
`handle(action)`. The contract (state fields, action objects) is documented in
`docs/explorer.md`. Everything a click can do goes through `handle`, so it is unit-tested here
without a browser; a failing action becomes a message in the state, never an exception that
would take a shell down.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
from collections.abc import Callable
from functools import cache

from schedlab.errors import SchedlabError
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import pre_order_visit
from schedlab.ir.node import child_fields
from schedlab.ir.stmt import Block, BlockRealize, For, IterType, Stmt
from schedlab.schedule.errors import TraceError
from schedlab.script.printer import script_lines
from schedlab.target import Target

from . import panels as P
from . import tune_panel as TP
from .model import ExplorerModel
from .results import ApplyResult, Measurement, PredictionResult, Selection
from .views import graph as G
from .views import highlight as H

STATE_VERSION = 1
# The target menu: the host, and GPU presets whose code is rendered (CUDA C, HIP, OpenCL C) but
# neither compiled nor run here; the tuner measures, so it is offered the host only.
TARGETS = ("cpu", "sm_90", "h200", "sm_80", "gfx942", "gfx90a", "adreno740", "adreno750")
TUNE_TARGETS = ("cpu",)
DEFAULT_WORKLOAD = ("gemm", {"M": 1024, "N": 1024, "K": 1024})
_ITER_LETTER = {IterType.SPATIAL: "S", IterType.REDUCE: "R", IterType.SCAN: "C",
                IterType.OPAQUE: "O"}  # fmt: skip


@cache
def _menu_target(name: str) -> Target:
    return Target(name)


def target_choice(target: Target) -> str:
    """The menu entry of `target` (TARGETS); its kind when it is none of them (a CPU preset)."""
    if target.kind != "cpu":
        for name in TARGETS[1:]:
            if _menu_target(name) == target:
                return name
    return str(target.kind)


def _language(target: Target) -> str:
    """The highlighter's language of the target's generated code."""
    return "cuda" if target.kind in ("cuda", "rocm") else "c"


class ActionError(ValueError):
    """A malformed action (missing or mistyped field); shown as a message."""


class ExplorerSession:
    """Owns an ExplorerModel; turns actions into model calls and the model into view state.

    `on_update` is called (from a background thread) when something changes outside an
    action — a measurement ends, a tuning run makes progress — so the shell can push `state()`
    to its view. `tune` is the session's tuning run (TuneController; tests pass one).
    """

    def __init__(self, model: ExplorerModel | None = None,
                 on_update: Callable[[], None] | None = None,
                 tune: TP.TuneController | None = None):  # fmt: skip
        self.model = model or ExplorerModel()
        self.on_update = on_update
        self.tune = tune or TP.TuneController()
        self.tune.on_update = self._tune_updated
        self.seq = 0
        self.message: dict | None = None
        self._diff: tuple[int, int] | None = None
        self._compare: tuple[str, str] | None = None
        self._pipeline: list | None = None
        self._running: dict = {}  # id(mod) -> Future of a measurement in progress
        self._lock = threading.RLock()  # actions (UI thread) vs measurement callbacks
        self._graph: tuple = (None, "")  # (what it shows, its SVG): rendering costs ms
        self._view: tuple | None = None  # (step key, the fields of that step: _step_view)
        self._bundle: tuple | None = None  # (step and measurement key, bundle fields)
        self._palette_kept: tuple | None = None  # ((module, selection), palette)
        self._panels: dict = {}  # extensions' tabs: panel name -> (func, target, name, result)
        self._panel_shown: str | None = None  # the extension tab in view (others run lazily)
        self.model.subscribe(self._on_model_event, kinds=("module", "branch", "target"))

    # -- actions ---------------------------------------------------------------------------------
    def handle(self, action) -> dict:
        """Carry out one action (a dict from the component) and return the new state."""
        with self._lock:
            try:
                if not isinstance(action, dict):
                    raise ActionError(f"an action must be an object, got {type(action).__name__}")
                self.seq = max(self.seq, _int(action, "seq", required=False) or 0)
                kind = action.get("type")
                handler = getattr(self, f"_do_{kind}", None) if isinstance(kind, str) else None
                if handler is None:
                    raise ActionError(f"unknown action type {kind!r}; known: {', '.join(ACTIONS)}")
                handler(action)
            except (ActionError, SchedlabError, ValueError, TypeError, KeyError,
                    IndexError) as err:  # fmt: skip
                self.message = {"level": "error", "text": _error_text(action, err), "uids": []}
            return self.state()

    def _do_load_workload(self, action: dict) -> None:
        name = _str(action, "name")
        self.model.load_workload(name, **workload_sizes(name, action.get("sizes")))
        self.message = None

    def _do_load_onnx(self, action: dict) -> None:
        try:
            data = base64.b64decode(_str(action, "data_b64"), validate=True)
        except (binascii.Error, ValueError) as err:
            raise ActionError(f"load_onnx: data_b64 is not base64 ({err})") from None
        self.model.load_onnx(data)
        filename = action.get("filename") or "model.onnx"
        self.model.source = f"ONNX model {filename}"
        self.message = None

    def _do_open_function(self, action: dict) -> None:
        self.model.open_function(_str(action, "name"))
        self._reset_views()

    def _do_set_target(self, action: dict) -> None:
        target = _str(action, "target")
        if target not in TARGETS:
            raise ActionError(f"set_target: target must be one of {list(TARGETS)}, got {target!r}")
        self.model.set_target(target)

    def _do_select(self, action: dict) -> None:
        uid = _int(action, "uid", required=False)
        kind = action.get("kind")
        if kind == "loop":
            self.model.select_loop(uid)
        elif kind == "block":
            self.model.select_block(uid)
        else:
            raise ActionError(f"select: kind must be 'loop' or 'block', got {kind!r}")

    def _do_apply(self, action: dict) -> None:
        args = action.get("args") or {}
        if not isinstance(args, dict):
            raise ActionError(f"apply: args must be an object, got {args!r}")
        result = self.model.apply(_str(action, "primitive"), **args)
        self.message = None if result.ok else _apply_message(result)

    def _do_undo(self, action: dict) -> None:
        if not self.model.undo():
            self.message = {"level": "info", "text": "nothing to undo", "uids": []}

    def _do_redo(self, action: dict) -> None:
        if not self.model.redo():
            self.message = {"level": "info", "text": "nothing to redo", "uids": []}

    def _do_fork(self, action: dict) -> None:
        self.model.fork(_str(action, "name").strip())

    def _do_switch(self, action: dict) -> None:
        self.model.switch(_str(action, "name"))

    def _do_compare(self, action: dict) -> None:
        a, b = _str(action, "a"), _str(action, "b")
        self.model.compare(a, b)  # validates the names now, so the error shows at once
        self._compare = (a, b)

    def _do_diff(self, action: dict) -> None:
        a, b = _int(action, "a"), _int(action, "b")
        last = self.model.current_step
        for name, step in (("a", a), ("b", b)):
            if not 0 <= step <= last:
                raise ActionError(f"diff: step {name} must be in 0..{last}, got {step}")
        self._diff = (a, b)

    def _do_measure(self, action: dict) -> None:
        mod = self.model.steps()[-1].mod
        if id(mod) in self._running:
            return
        future = self.model.measure_in_background()
        key = id(mod)
        self._running[key] = future
        future.add_done_callback(lambda _future: self._measured(key))

    def wait_for_measurements(self, timeout: float | None = None) -> None:
        """Block until the measurements in progress are done (notebooks, tests)."""
        for future in list(self._running.values()):
            future.result(timeout=timeout)

    def _measured(self, key: int) -> None:
        with self._lock:
            self._running.pop(key, None)
        if self.on_update is not None:
            self.on_update()

    def _do_import_trace(self, action: dict) -> None:
        text = _str(action, "text")
        try:
            self.model.import_trace(text)
        except TraceError as err:
            name = action.get("filename") or "the trace"
            raise ActionError(f"import_trace: {name} was not imported: {err}") from None
        self.message = {"level": "info", "text": "trace imported", "uids": []}

    def _do_pipeline(self, action: dict) -> None:
        self._pipeline = [
            {"name": r.name, "seconds": r.seconds, "depth": r.depth, "changed": r.changed,
             "before": _text(r.before), "after": _text(r.after)}
            for r in self.model.pipeline_records()
        ]  # fmt: skip

    # -- the Tune panel: its refusals show in the panel, not as the explorer's message -----------
    def _do_tune_start(self, action: dict) -> None:
        def start() -> None:
            target = action.get("target") or self.model.target.kind
            if target not in TUNE_TARGETS:
                raise TP.TuneInputError(
                    f"target must be one of {list(TUNE_TARGETS)}, got {target!r}"
                )
            work_dir = action.get("work_dir")
            if work_dir is not None and not isinstance(work_dir, str):
                raise TP.TuneInputError(f"the folder must be text, got {work_dir!r}")
            scope = action.get("scope") or "all"
            tasks, what = TP.tasks_for(self.model, scope, self.model.target
                                       if target == self.model.target.kind else target)  # fmt: skip
            self.tune.start(tasks, what, target, action.get("trials", TP.DEFAULT_TRIALS),
                            action.get("per_batch", TP.DEFAULT_PER_BATCH), work_dir,
                            TP.graph_for(self.model, scope))  # fmt: skip

        self._tune_request(start)

    def _do_tune_stop(self, action: dict) -> None:
        self.tune.stop()

    def _do_tune_resume(self, action: dict) -> None:
        self._tune_request(lambda: self.tune.resume(action.get("trials"), action.get("per_batch")))

    def _do_tune_open(self, action: dict) -> None:
        opened = self._tune_request(
            lambda: TP.open_record(
                self.model, *self.tune.record(_str(action, "task"), _str(action, "candidate"))
            )
        )
        if opened is not None:
            self._compare = opened  # the tuned schedule beside the one the user had open
            previous, branch = opened
            text = (
                f"opened the tuned schedule as branch {branch}; Compare shows it beside {previous}"
            )
            self.message = {"level": "info", "text": text, "uids": []}

    def _tune_request(self, request: Callable):
        """Run a Tune panel request; a refusal becomes the panel's error line."""
        try:
            result = request()
        except (TP.TuneInputError, TraceError, SchedlabError) as err:
            self.tune.error = str(err)
            return None
        self.tune.error = ""
        return result

    def _tune_updated(self) -> None:
        if self.on_update is not None:
            self.on_update()

    def _do_show_tab(self, action: dict) -> None:
        """The user shows tab `tab` ("code", ..., "panel-<name>" for an extension's): a panel
        in view is run for every step, the others only when shown (panels.py)."""
        tab = _str(action, "tab")
        self._panel_shown = tab.removeprefix("panel-") if tab.startswith("panel-") else None

    def _do_resync(self, action: dict) -> None:
        """A view that lost its state asks for it again (the answer is the state)."""

    def _do_dismiss(self, action: dict) -> None:
        self.message = None

    def _on_model_event(self, event) -> None:
        if event.kind == "module":
            self._graph = (None, "")
        self._reset_views()

    def _reset_views(self) -> None:
        self._diff = self._compare = self._pipeline = None

    # -- state -------------------------------------------------------------------------------------
    def state(self) -> dict:
        """The JSON view state (see docs/explorer.md)."""
        with self._lock:
            m = self.model
            base = {
                "version": STATE_VERSION, "seq": self.seq, "source": m.source,
                "workloads": workload_choices(), "targets": list(TARGETS),
                "tune_targets": list(TUNE_TARGETS), "target": target_choice(m.target),
                "functions": [
                    {"name": n, "kind": k} for n, k in m.functions()],
                "func": m.func_name, "message": self.message and {"detail": "", **self.message},
                "tune": {**self.tune.state(), "scopes": TP.scope_choices(m)},
            }  # fmt: skip
            if m.func_name is None:
                return {**base, **_EMPTY}
            return {**base, **self._function_state()}

    def _function_state(self) -> dict:
        m = self.model
        sel = m.selection
        steps = m.steps()
        current = steps[-1].mod
        view = self._step_view(current)
        return {
            "graph_svg": self._graph_svg(current),
            **view,
            "selection": {"block": sel.block, "loop": sel.loop},
            "palette": self._palette(current, sel),
            "measurement": self._measurement_json(current),
            "steps": [{"index": s.index, "label": s.label} for s in steps],
            "current_step": len(steps) - 1,
            "can_undo": len(steps) > 1, "can_redo": m.can_redo,
            "branches": m.branches(), "branch": m.branch,
            "diff": self._diff_json(len(steps) - 1),
            "compare": self._compare_json(),
            "pipeline": self._pipeline,
            "trace": {**view["trace"], **self._bundle_json(current)},
            "latency": [{"step": p.step, "label": p.label, "predicted": p.predicted,
                         "measured": p.measured} for p in m.latency_history()],
            "panels": P.panels_state(m, self._panels, shown=self._panel_shown, lazy=True),
        }  # fmt: skip

    def _step_view(self, mod: IRModule) -> dict:
        """The state fields that only the current step (its module and trace) and the target
        decide, made once per step: a select, a measurement or an undone step's return sends
        the same objects again instead of printing and highlighting the function anew."""
        m = self.model
        key = (mod, m.schedule.trace, str(m.target), m.func_name)
        if _same_key(self._view, key):
            return self._view[1]
        func = m.func
        script_text, script_map = script_lines(func, show_header=False)
        code = m.code()
        view = {
            "tree": loop_tree(func),
            "loop_choices": [{"uid": n.uid, "name": n.loop_var.name} for n in _walk(func, For)],
            "block_choices": [{"uid": n.uid, "name": n.name_hint} for n in _walk(func, Block)
                              if n is not _root_block(func)],
            "script": {"html": H.lines_html(script_text, "python"),
                       "lines": {str(u): n for u, n in script_map.items()}},
            "code": {"target": code.target, "html": H.lines_html(code.source, _language(m.target)),
                     "lines": {str(u): [s.first, s.last] for u, s in code.loop_lines.items()},
                     "error": code.error},
            "prediction": prediction_json(m.prediction()),
            "trace": {"json": json.dumps(m.export_trace_json(), indent=1),
                      "python": m.export_trace_python(),
                      "filename": f"{m.func_name}.trace.json"},
        }  # fmt: skip
        self._view = (key, view)
        return view

    def _palette(self, mod: IRModule, sel) -> list[dict]:
        """The primitives that fit the selection, once per step and selection."""
        key = (mod, sel)
        if not _same_key(self._palette_kept, key):
            specs = self.model.applicable_primitives()
            self._palette_kept = (key, [_spec_json(s) for s in specs])
        return self._palette_kept[1]

    def _bundle_json(self, mod: IRModule) -> dict:
        """The schedule bundle for the export button, or why there is none (once per step and
        measurement: the bundle carries the step's measurement)."""
        m = self.model
        key = (mod, m.schedule.trace, m.known_measurement(mod), str(m.target), m.func_name)
        if _same_key(self._bundle, key):
            return self._bundle[1]
        try:
            text = json.dumps(self.model.export_bundle(), indent=1)
        except SchedlabError as err:  # a function that cannot travel as a bundle
            bundle = {"bundle": "", "bundle_filename": "", "bundle_error": str(err)}
        else:
            name = f"{self.model.func_name}.bundle.json"
            bundle = {"bundle": text, "bundle_filename": name, "bundle_error": ""}
        self._bundle = (key, bundle)
        return bundle

    def _graph_svg(self, mod: IRModule) -> str:
        """The model graph for an imported model (clickable functions), else the current
        kernel's block/buffer dataflow (clickable blocks)."""
        m = self.model
        graph = any(kind != "PrimFunc" for _name, kind in m.functions())
        shown = m.module if graph else mod
        if self._graph[0] is not shown:
            svg = G.module_graph_svg(shown) if graph else G.primfunc_graph_svg(mod[m.func_name])
            self._graph = (shown, svg)
        return self._graph[1]

    def _measurement_json(self, mod: IRModule) -> dict:
        if id(mod) in self._running:
            return {"status": "running", "text": "measuring..."}
        known = self.model.known_measurement(mod)
        if known is None:
            return {"status": "none", "text": "not measured"}
        return {"status": "ok" if known.ok else "failed", "text": known.message}

    def _diff_json(self, last: int) -> dict | None:
        if self._diff is None:
            return None
        a, b = self._diff
        if not (0 <= a <= last and 0 <= b <= last):  # the branch got shorter (undo)
            return None
        return {"a": a, "b": b, "html": H.diff_html(self.model.diff(a, b))}

    def _compare_json(self) -> dict | None:
        if self._compare is None:
            return None
        a, b = self._compare
        if not {a, b} <= set(self.model.branches()):
            return None
        result = self.model.compare(a, b)
        return {
            "a": a, "b": b, "html": H.diff_html(result["diff"]),
            "predicted": {n: prediction_json(p)["text"] for n, p in result["predicted"].items()},
            "measured": {n: (m.message if isinstance(m, Measurement) else "not measured")
                         for n, m in result["measured"].items()},
        }  # fmt: skip

    def close(self) -> None:
        """Stop the tuning run and the measurements (a closed browser tab, a stopped server)."""
        self.tune.close()
        self.model.close()


ACTIONS = tuple(sorted(name[4:] for name in vars(ExplorerSession) if name.startswith("_do_")))
_EMPTY = {
    "graph_svg": "", "tree": [], "selection": {"block": None, "loop": None}, "loop_choices": [],
    "block_choices": [], "palette": [], "script": {"html": "", "lines": {}},
    "code": {"target": "", "html": "", "lines": {}, "error": ""},
    "prediction": {"available": False, "seconds": None, "text": "", "bound": "",
                   "assumptions": []},
    "measurement": {"status": "none", "text": ""}, "steps": [], "current_step": 0,
    "can_undo": False, "can_redo": False, "branches": [], "branch": "", "diff": None,
    "compare": None, "pipeline": None,
    "trace": {"json": "", "python": "", "filename": "", "bundle": "", "bundle_filename": "",
              "bundle_error": ""},
    "latency": [], "panels": [],
}  # fmt: skip


# -- state pieces ----------------------------------------------------------------------------------
@cache
def workload_choices() -> list[dict]:
    """Registry workloads with their default sizes (integers only: what the picker edits)."""
    from schedlab import workloads

    choices = []
    for name in workloads.names():
        defaults = workloads.spec(name).defaults
        choices.append(
            {
                "name": name,
                "sizes": {
                    k: v
                    for k, v in defaults.items()
                    if isinstance(v, int) and not isinstance(v, bool)
                },
            }
        )
    return choices


def loop_tree(func: PrimFunc) -> list[dict]:
    """The loop nest as nested loop/block nodes (the implicit root block is skipped)."""

    def visit(stmt) -> list[dict]:
        if isinstance(stmt, For):
            return [{
                "uid": stmt.uid, "type": "loop", "name": stmt.loop_var.name,
                "kind": str(stmt.kind), "extent": str(stmt.extent),
                "thread": stmt.thread_tag, "annotations": _annotations(stmt.annotations),
                "iters": "", "children": visit(stmt.body),
            }]  # fmt: skip
        if isinstance(stmt, BlockRealize):
            stmt = stmt.block
        if isinstance(stmt, Block):
            children = visit(stmt.body)
            if stmt is root:
                return children
            iters = " ".join(f"{iv.var.name}:{_ITER_LETTER.get(iv.iter_type, '?')}"
                             for iv in stmt.iter_vars)  # fmt: skip
            return [{
                "uid": stmt.uid, "type": "block", "name": stmt.name_hint, "kind": "",
                "extent": "", "thread": None, "annotations": _annotations(stmt.annotations),
                "iters": iters, "children": children,
            }]  # fmt: skip
        found = []
        for child in _children(stmt):
            found += visit(child)
        return found

    root = _root_block(func)
    return visit(func.body)


def prediction_json(result: PredictionResult) -> dict:
    if not result.available:
        return {"available": False, "seconds": None, "text": result.reason, "bound": "",
                "assumptions": []}  # fmt: skip
    details = result.details
    assumptions = []
    if details is not None:
        assumptions.append(["FLOPs", f"{details.flops:,}"])
        assumptions.append(["roofline bound", f"{details.roofline_seconds * 1e3:.3f} ms"])
        for name, value in details.peaks.items():
            assumptions.append([f"peak {name}", _quantity(name, value)])
        for level, value in details.bytes_moved.items():
            assumptions.append([f"bytes {level}", f"{value / 1e6:.2f} MB"])
        for nest in details.nests:
            assumptions.append([f"block {nest.block}",
                                f"{nest.seconds * 1e3:.3f} ms, {nest.bound}-bound, "
                                f"cores {nest.cores_used}, lanes {nest.vector_lanes} "
                                f"({nest.vectorization})"])  # fmt: skip
        notes = getattr(details, "notes", None)  # the GPU model's kernels (cost/gpu.py)
        assumptions += notes() if callable(notes) else []
    return {"available": True, "seconds": result.seconds, "text": _ms(result.seconds),
            "bound": getattr(details, "bound", ""), "assumptions": assumptions}  # fmt: skip


def _spec_json(spec) -> dict:
    return {
        "name": spec.name, "target": spec.target, "doc": spec.doc,
        "args": [{"name": a.name, "kind": a.kind, "default": _jsonable(a.default),
                  "choices": [_jsonable(c) for c in a.choices], "help": a.help,
                  "required": a.required} for a in spec.args],
    }  # fmt: skip


def _apply_message(result: ApplyResult) -> dict:
    return {"level": "error", "text": result.message, "uids": list(result.uids),
            "detail": result.detail}  # fmt: skip


def workload_sizes(name: str, given) -> dict[str, int]:
    """The sizes of a load_workload action, as typed ("M=1024, N=512 K=64") or as an object,
    checked field by field against workload `name`: an ActionError lists every bad field
    with its name, what it accepts and what it got."""
    from schedlab import workloads

    spec = workloads.spec(name)  # an unknown workload: its own error, listing the known ones
    if given is None or given == "":
        return {}
    if isinstance(given, str):
        items, problems = _size_items(given)
    elif isinstance(given, dict):
        items, problems = list(given.items()), []
    else:
        raise ActionError(f"load_workload: sizes must be text or an object, got {given!r}")
    sizes: dict[str, int] = {}
    for key, raw in items:
        known = [k for k, v in spec.defaults.items() if type(v) is int]
        if key not in known:
            problems.append(f"{key}: {name} has no size {key} (its sizes: {', '.join(known)})")
        elif key in sizes:
            problems.append(f"{key}: given twice")
        else:
            value = _whole_number(raw)
            minimum = spec.size_minimum(key)
            if value is None or (minimum is not None and value < minimum):
                accepted = "a whole number" + ("" if minimum is None else f" >= {minimum}")
                shown = value if value is not None else "nothing" if raw == "" else repr(raw)
                problems.append(f"{key}: expected {accepted}, got {shown}")
            else:
                sizes[key] = value
    if problems:
        lines = "".join(f"\n  {p}" for p in problems)
        raise ActionError(f"load_workload: {name} was not loaded:{lines}")
    return sizes


def _size_items(text: str) -> tuple[list, list]:
    """("M=64, N=x" -> [("M", "64"), ("N", "x")], problems with what is not NAME=VALUE)."""
    items, problems = [], []
    for match in re.finditer(r"([A-Za-z_]\w*)\s*=\s*([^\s,;=]*)|([^\s,;]+)", text):
        if match.group(3) is not None:
            problems.append(f"{match.group(3)!r} is not NAME=VALUE (write M=1024, N=512)")
        else:
            items.append((match.group(1), match.group(2)))
    return items, problems


def _whole_number(raw) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and re.fullmatch(r"\s*[-+]?\d+\s*", raw):
        return int(raw)
    return None


def _same_key(kept: tuple | None, key: tuple) -> bool:
    """Whether `kept` (key, value) was made for `key`: IR objects (modules, traces,
    measurements) compared by identity, as structural equality costs a walk; the rest by ==."""
    if kept is None or len(kept[0]) != len(key):
        return False
    return all(a is b or (isinstance(a, (str, Selection)) and a == b)
               for a, b in zip(kept[0], key))  # fmt: skip


def _walk(func: PrimFunc, cls) -> list:
    """Nodes of type `cls` in the function body, in preorder (printing order)."""
    found = []
    pre_order_visit(func.body, lambda node: found.append(node) if isinstance(node, cls) else None)
    return found


def _children(stmt) -> list:
    """The statements directly inside `stmt` (its child fields that are statements)."""
    out = []
    for name in child_fields(type(stmt)):
        value = getattr(stmt, name)
        if isinstance(value, Stmt):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            out += [v for v in value if isinstance(v, Stmt)]
    return out


def _root_block(func: PrimFunc):
    body = func.body
    if isinstance(body, BlockRealize) and body.block.name_hint == "root":
        return body.block
    return None


def _annotations(annotations) -> dict:
    return {str(k): str(v) for k, v in (annotations or {}).items()}


def _jsonable(value):
    return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)


def _text(node) -> str:
    """A pass record's IR as text."""
    if node is None or isinstance(node, str):
        return node or ""
    return node.script() if hasattr(node, "script") else str(node)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.3f} s"


def _quantity(name: str, value: float) -> str:
    if "flop" in name.lower():
        return f"{value / 1e9:.1f} GFLOP/s"
    return f"{value / 1e9:.1f} GB/s"


def _str(action: dict, key: str) -> str:
    value = action.get(key)
    if not isinstance(value, str):
        raise ActionError(f"{action.get('type')}: {key} must be a string, got {value!r}")
    return value


def _int(action: dict, key: str, required: bool = True) -> int | None:
    value = action.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ActionError(f"{action.get('type')}: {key} must be an integer, got {value!r}")
    return value


def _error_text(action, err: Exception) -> str:
    kind = action.get("type") if isinstance(action, dict) else None
    text = str(err)
    if isinstance(err, KeyError) and err.args:
        text = str(err.args[0])
    return text if kind is None or text.startswith(f"{kind}") else f"{kind}: {text}"

"""ExplorerSession: every action the component can send, and the JSON state it renders from."""

from __future__ import annotations

import base64
import json
import threading

import pytest

from schedlab.bundle import Bundle, BundleError
from schedlab.script.printer import script_lines
from schedlab.ui.model import ExplorerModel
from schedlab.ui.session import ACTIONS, ExplorerSession

SIZES = {"M": 48, "N": 40, "K": 24}


@pytest.fixture
def session():
    s = ExplorerSession(ExplorerModel())
    s.model.load_workload("gemm", **SIZES)
    yield s
    s.close()


def _loop(state, name):
    return next(c["uid"] for c in state["loop_choices"] if c["name"] == name)


def _act(session, type, **fields):
    session_seq = session.seq + 1
    return session.handle({"seq": session_seq, "type": type, **fields})


def test_initial_state_is_json_and_describes_the_kernel(session):
    state = session.state()
    json.dumps(state)  # everything the component gets is plain JSON
    assert state["func"] == "gemm" and state["source"].startswith("workload gemm")
    assert [f["name"] for f in state["functions"]] == ["gemm"]
    (i,) = state["tree"]
    assert (i["type"], i["name"], i["extent"], i["kind"]) == ("loop", "i", "48", "serial")
    j = i["children"][0]
    k = j["children"][0]
    block = k["children"][0]
    assert (block["type"], block["name"], block["iters"]) == ("block", "C", "vi:S vj:S vk:R")
    assert [c["name"] for c in state["loop_choices"]] == ["i", "j", "k"]
    assert [c["name"] for c in state["block_choices"]] == ["C"]
    # script and code are highlighted line by line; loops link to their lines
    text, _lines = script_lines(session.model.func)
    assert state["script"]["html"].count('class="sl-line"') == len(text.splitlines())
    assert set(state["script"]["lines"]) == {str(c["uid"]) for c in state["loop_choices"]} | {
        str(state["block_choices"][0]["uid"])
    }
    assert state["code"]["error"] == "" and ">for</span>" in state["code"]["html"]
    assert set(state["code"]["lines"]) == {str(c["uid"]) for c in state["loop_choices"]}
    assert state["prediction"]["available"] and state["prediction"]["text"].endswith("ms")
    assert ["FLOPs", f"{2 * 48 * 40 * 24:,}"] in state["prediction"]["assumptions"]
    assert state["measurement"]["status"] == "none"
    assert state["steps"] == [{"index": 0, "label": "start"}]
    assert not state["can_undo"] and not state["can_redo"]
    assert 'id="block:' in state["graph_svg"]
    assert {w["name"] for w in state["workloads"]} >= {"gemm", "conv2d_nchw", "softmax"}
    assert next(w for w in state["workloads"] if w["name"] == "gemm")["sizes"].keys() == {
        "M", "N", "K"}  # fmt: skip
    assert json.loads(state["trace"]["json"])["workload"]


def test_select_apply_undo_redo(session):
    state = session.state()
    i = _loop(state, "i")
    state = _act(session, "select", kind="loop", uid=i)
    assert state["selection"]["loop"] == i and state["selection"]["block"] is not None
    names = {p["name"] for p in state["palette"]}
    assert {"split", "fuse", "reorder", "parallel", "unroll"} <= names
    split = next(p for p in state["palette"] if p["name"] == "split")
    assert [a["name"] for a in split["args"]][0] == "factors"
    before_code = state["code"]["html"]
    state = _act(session, "apply", primitive="split", args={"factors": [None, 16]})
    assert state["message"] is None
    assert [c["name"] for c in state["loop_choices"]] == ["i_0", "i_1", "j", "k"]
    assert state["tree"][0]["extent"] == "3" and state["tree"][0]["children"][0]["extent"] == "16"
    assert state["code"]["html"] != before_code
    assert state["steps"] == [
        {"index": 0, "label": "start"},
        {"index": 1, "label": "split(loop=i, factors=[None, 16])"},
    ]
    assert len(state["latency"]) == 2 and all(p["predicted"] for p in state["latency"])
    assert state["can_undo"] and not state["can_redo"]
    assert state["seq"] == session.seq
    state = _act(session, "undo")
    assert [c["name"] for c in state["loop_choices"]] == ["i", "j", "k"]
    assert state["can_redo"] and not state["can_undo"]
    state = _act(session, "redo")
    assert [c["name"] for c in state["loop_choices"]] == ["i_0", "i_1", "j", "k"]
    state = _act(session, "redo")
    assert state["message"]["level"] == "info" and "redo" in state["message"]["text"]
    state = _act(session, "dismiss")
    assert state["message"] is None


def test_illegal_primitive_shows_the_error_and_changes_nothing(session):
    state = session.state()
    k = _loop(state, "k")
    _act(session, "select", kind="loop", uid=k)
    before = session.state()
    state = _act(session, "apply", primitive="parallel", args={})
    message = state["message"]
    assert message["level"] == "error" and "parallel" in message["text"].lower()
    assert k in message["uids"]
    # the cause first, in a line; the function (the loop underlined) apart, for a fold
    assert "^^^" not in message["text"] and len(message["text"].splitlines()) == 1
    assert "^^^" in message["detail"] and "def gemm" in message["detail"]
    assert state["steps"] == before["steps"] and state["code"] == before["code"]
    # a wrong argument is an error too, naming the primitive
    state = _act(session, "apply", primitive="split", args={"factors": "sixteen"})
    assert state["message"]["level"] == "error" and "split" in state["message"]["text"]
    assert state["steps"] == before["steps"]


@pytest.mark.parametrize(
    "action, words",
    [
        ("not a dict", "must be an object"),
        ({"type": "explode"}, "unknown action type"),
        ({"type": "select", "kind": "loop", "uid": "seven"}, "uid must be an integer"),
        ({"type": "select", "kind": "loop", "uid": 99999}, "no loop with uid"),
        ({"type": "select", "kind": "tile", "uid": 1}, "kind must be"),
        ({"type": "apply", "primitive": "split", "args": [1, 2]}, "args must be an object"),
        (
            {"type": "load_workload", "name": "gemm", "sizes": {"M": "big"}},
            "M: expected a whole number >= 1, got 'big'",
        ),
        ({"type": "load_workload", "name": "nope"}, "nope"),
        ({"type": "open_function", "name": "missing"}, "no PrimFunc named"),
        ({"type": "set_target", "target": "tpu"}, "target must be one of"),
        ({"type": "diff", "a": 0, "b": 7}, "step b must be in 0..0"),
        ({"type": "compare", "a": "main", "b": "nope"}, "no branch"),
        ({"type": "fork", "name": "main"}, "already used"),
        ({"type": "load_onnx", "data_b64": "!!!", "filename": "x.onnx"}, "base64"),
        ({"type": "load_onnx", "data_b64": base64.b64encode(b"junk").decode()}, "onnx"),
        ({"type": "import_trace", "text": "{not json"}, "import_trace"),
    ],
)
def test_bad_actions_become_messages(session, action, words):
    before = session.state()
    state = session.handle(action)
    assert state["message"]["level"] == "error"
    assert words.lower() in state["message"]["text"].lower()
    assert state["steps"] == before["steps"] and state["func"] == before["func"]


def test_every_action_type_is_documented():
    doc = open("docs/explorer.md").read()
    for name in ACTIONS:
        assert f'type: "{name}"' in doc, name


def test_fork_switch_compare_and_diff(session):
    state = session.state()
    _act(session, "select", kind="loop", uid=_loop(state, "j"))
    _act(session, "fork", name="tiled")
    state = _act(session, "apply", primitive="split", args={"factors": [None, 8]})
    assert state["branch"] == "tiled" and state["branches"] == ["main", "tiled"]
    state = _act(session, "compare", a="main", b="tiled")
    compare = state["compare"]
    assert compare["a"] == "main" and "sl-add" in compare["html"] and "sl-del" in compare["html"]
    assert compare["predicted"]["tiled"].endswith("ms")
    assert compare["measured"]["main"] == "not measured"
    state = _act(session, "diff", a=0, b=1)
    assert state["diff"]["a"] == 0 and "j_0" in state["diff"]["html"]
    state = _act(session, "switch", name="main")
    assert state["branch"] == "main" and len(state["steps"]) == 1
    assert state["diff"] is None  # the diff was of the other branch's steps


def test_trace_export_and_import(session):
    state = session.state()
    _act(session, "select", kind="loop", uid=_loop(state, "i"))
    state = _act(session, "apply", primitive="split", args={"factors": [None, 8]})
    exported = state["trace"]["json"]
    assert state["trace"]["filename"] == "gemm.trace.json"
    assert "def apply_trace(sch)" in state["trace"]["python"]
    other = ExplorerSession(ExplorerModel())
    other.model.load_workload("gemm", **SIZES)
    state2 = other.handle({"seq": 1, "type": "import_trace", "text": exported})
    assert state2["message"]["level"] == "info"
    assert state2["script"]["html"] == state["script"]["html"]
    # a trace of another workload is refused with a clear error, nothing changes
    third = ExplorerSession(ExplorerModel())
    third.model.load_workload("gemm", M=8, N=8, K=8)
    state3 = third.handle({"seq": 1, "type": "import_trace", "text": exported,
                          "filename": "gemm.trace.json"})  # fmt: skip
    assert state3["message"]["level"] == "error"
    assert "gemm.trace.json was not imported" in state3["message"]["text"]
    assert len(state3["steps"]) == 1
    other.close()
    third.close()


def test_bundle_export(session, monkeypatch):
    state = session.state()
    _act(session, "select", kind="loop", uid=_loop(state, "i"))
    state = _act(session, "apply", primitive="split", args={"factors": [None, 8]})
    trace = state["trace"]
    assert trace["bundle_filename"] == "gemm.bundle.json" and trace["bundle_error"] == ""
    bundle = Bundle.from_json(trace["bundle"])  # validated: it rebuilds this step's kernel
    assert bundle.scheduled.script() == session.model.func.script()
    # a function that cannot travel as a bundle: the button is off and says why
    monkeypatch.setattr(ExplorerModel, "export_bundle", _refuse)
    trace = _act(session, "undo")["trace"]  # a step's bundle is made once: another step
    assert trace["bundle"] == "" and trace["bundle_error"] == "cannot travel"


def _refuse(self):
    raise BundleError("cannot travel")


def test_pipeline_records(session):
    state = _act(session, "pipeline")
    rows = state["pipeline"]
    assert rows and all({"name", "seconds", "depth", "changed", "before", "after"} <= r.keys()
                        for r in rows)  # fmt: skip
    assert any(r["changed"] and r["before"] != r["after"] for r in rows)
    json.dumps(rows)


def test_load_workload_and_onnx_model():
    onnx = pytest.importorskip("onnx")
    from tests.relax.test_end_to_end import mlp_model

    session = ExplorerSession(ExplorerModel())
    state = session.handle({"seq": 1, "type": "load_workload", "name": "softmax",
                            "sizes": {}})  # fmt: skip
    assert state["func"] == "softmax" and state["message"] is None
    data = base64.b64encode(mlp_model().SerializeToString()).decode()
    state = session.handle({"seq": 2, "type": "load_onnx", "data_b64": data,
                            "filename": "mlp.onnx"})  # fmt: skip
    assert state["source"] == "ONNX model mlp.onnx"
    kinds = {f["kind"] for f in state["functions"]}
    assert kinds == {"PrimFunc", "Function"}
    prims = [f["name"] for f in state["functions"] if f["kind"] == "PrimFunc"]
    assert state["func"] == prims[0]
    assert f'id="fn:{prims[0]}"' in state["graph_svg"]
    state = session.handle({"seq": 3, "type": "open_function", "name": prims[-1]})
    assert state["func"] == prims[-1] and state["message"] is None
    state = session.handle({"seq": 4, "type": "pipeline"})
    assert any("Legalize" in r["name"] or "legalize" in r["name"] for r in state["pipeline"])
    del onnx
    session.close()


def test_measure_runs_in_the_background_and_reports(session):
    updated = threading.Event()
    session.on_update = updated.set
    state = _act(session, "measure")
    assert state["measurement"]["status"] in ("running", "ok")
    assert updated.wait(120), "the measurement never finished"
    state = session.state()
    assert state["measurement"]["status"] == "ok", state["measurement"]
    assert state["measurement"]["text"].endswith("ms")
    assert state["latency"][-1]["measured"] > 0


def test_sessions_are_isolated():
    a, b = ExplorerSession(ExplorerModel()), ExplorerSession(ExplorerModel())
    for s in (a, b):
        s.model.load_workload("gemm", **SIZES)
    state = a.state()
    a.handle({"seq": 1, "type": "select", "kind": "loop", "uid": _loop(state, "i")})
    a.handle({"seq": 2, "type": "apply", "primitive": "split", "args": {"factors": [None, 4]}})
    assert len(a.state()["steps"]) == 2 and len(b.state()["steps"]) == 1
    assert [c["name"] for c in b.state()["loop_choices"]] == ["i", "j", "k"]
    a.close()
    b.close()


def test_load_workload_checks_every_size_field_at_once(session):
    state = _act(session, "load_workload", name="gemm", sizes="M=abc, N=-5, K=0, Q=3 junk")
    text = state["message"]["text"]
    assert text.startswith("load_workload: gemm was not loaded:")
    assert "M: expected a whole number >= 1, got 'abc'" in text
    assert "N: expected a whole number >= 1, got -5" in text
    assert "K: expected a whole number >= 1, got 0" in text
    assert "Q: gemm has no size Q (its sizes: M, N, K)" in text
    assert "'junk' is not NAME=VALUE" in text
    assert state["source"] == f"workload gemm(M={SIZES['M']}, N={SIZES['N']}, K={SIZES['K']})"
    # the next attempt replaces the message: only what is still wrong is listed
    state = _act(session, "load_workload", name="gemm", sizes="M=64 N=x; K=32")
    assert state["message"]["text"].splitlines()[1:] == ["  N: expected a whole number >= 1, "
                                                         "got 'x'"]  # fmt: skip
    state = _act(session, "load_workload", name="gemm", sizes="M=64, N=, K=32")
    assert "N: expected a whole number >= 1, got nothing" in state["message"]["text"]
    state = _act(session, "load_workload", name="gemm", sizes="M=64, N=48, K=32")
    assert state["message"] is None and state["source"] == "workload gemm(M=64, N=48, K=32)"
    # padding may be 0, an object's values are checked the same way, empty text = defaults
    state = _act(session, "load_workload", name="conv2d_nchw", sizes="H=8, W=8, padding=0")
    assert state["message"] is None
    state = _act(session, "load_workload", name="conv2d_nchw", sizes={"padding": -1, "H": 8})
    assert "padding: expected a whole number >= 0, got -1" in state["message"]["text"]
    state = _act(session, "load_workload", name="softmax", sizes="")
    assert state["message"] is None and state["func"] == "softmax"


def test_error_message_has_the_cause_and_the_function_apart(session):
    state = session.state()
    k = _loop(state, "k")
    _act(session, "select", kind="loop", uid=k)
    state = _act(session, "apply", primitive="split", args={"factors": [5, 3]})
    message = state["message"]
    assert message["text"].startswith("ScheduleError in split:") and "\n" not in message["text"]
    assert message["detail"].startswith("@T.prim_func") and "^^^" in message["detail"]
    assert message["uids"] == [k]
    state = _act(session, "undo")  # every message has a detail, "" when there is none
    assert state["message"] == {"level": "info", "text": "nothing to undo", "uids": [],
                                "detail": ""}  # fmt: skip


def test_set_target_to_a_gpu_preset_shows_its_cuda_source_and_keeps_tuning_on_the_host(session):
    state = _act(session, "set_target", target="sm_90")
    assert state["target"] == "sm_90" and "sm_90" in state["targets"]
    assert state["tune_targets"] == ["cpu"]
    assert state["code"]["error"] == "" and state["code"]["target"] == "cuda sm_90, CUDA C"
    assert "__global__" in state["code"]["html"]
    assert set(state["code"]["lines"]) == {str(c["uid"]) for c in state["loop_choices"]}
    tune = _act(session, "tune_start", trials=4, per_batch=2, target="sm_90")["tune"]
    assert "target must be one of ['cpu']" in tune["error"]
    assert _act(session, "set_target", target="cpu")["target"] == "cpu"


def test_a_gpu_target_shows_the_gpu_predicted_latency_with_its_kernels(session):
    state = _act(session, "set_target", target="h200")
    prediction = state["prediction"]
    assert prediction["available"] and prediction["text"].endswith("ms")
    notes = dict(prediction["assumptions"])
    assert "occupancy" in notes["kernel gemm_kernel"] and "peak DRAM bytes/s" in notes
    cpu = _act(session, "set_target", target="cpu")["prediction"]
    assert cpu["available"] and "kernel gemm_kernel" not in dict(cpu["assumptions"])


def test_an_extension_panel_runs_only_while_its_tab_is_shown(session):
    from schedlab.ui import panels

    runs = []

    def steps(model):
        runs.append(model.current_step)
        return f"{len(model.steps())} steps"

    panels.register_panel("steps-test", "Steps", steps)
    try:
        mine = lambda state: next(p for p in state["panels"] if p["name"] == "steps-test")  # noqa: E731
        state = session.state()
        assert mine(state) == {"name": "steps-test", "title": "Steps", "text": "1 steps",
                               "error": "", "stale": False}  # fmt: skip
        _act(session, "select", kind="loop", uid=_loop(state, "i"))
        state = _act(session, "apply", primitive="split", args={"factors": [None, 8]})
        assert mine(state)["stale"] and mine(state)["text"] == "" and runs == [0]
        state = _act(session, "show_tab", tab="panel-steps-test")
        assert mine(state)["text"] == "2 steps" and not mine(state)["stale"] and runs == [0, 1]
        state = _act(session, "undo")  # in view: run for every step
        assert mine(state)["text"] == "1 steps" and runs == [0, 1, 0]
        _act(session, "show_tab", tab="code")
        state = _act(session, "redo")
        assert mine(state)["stale"] and runs == [0, 1, 0]
    finally:
        panels.unregister_panel("steps-test")


def test_the_app_sends_only_the_fields_that_changed(session):
    pytest.importorskip("panel")
    from schedlab.ui.app import changed_fields

    before = session.state()
    state = _act(session, "select", kind="loop", uid=_loop(before, "i"))
    sent = changed_fields(before, state)
    assert sent["partial"] is True and sent["seq"] == state["seq"]
    assert {"selection", "palette"} <= set(sent) and not {"code", "script", "trace"} & set(sent)
    assert {**before, **sent, "partial": True} == {**state, "partial": True}
    assert changed_fields({}, state) is state  # nothing shown yet: the whole state

"""The explorer's ESM component (schedlab/ui/static/explorer.js) in a real browser, driven by a
fake anywidget model (tests/ui/component_harness.py): what it renders from `state` and which
`action` objects user gestures send (the contract in notes/UI_STATE.md)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from .component_harness import (
    BUNDLE_JSON,
    CHROMIUM,
    CHROMIUM_ARGS,
    CODE_LINES,
    TRACE_JSON,
    TRACE_PYTHON,
    UID_C,
    UID_I0,
    UID_I1,
    UID_J,
    UID_K,
    block_selected_state,
    compare_state,
    diff_state,
    error_state,
    gemm_state,
    pipeline_state,
    serve_harness,
)

pytestmark = [
    pytest.mark.ui,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"needs the Debian chromium browser at {CHROMIUM}"
    ),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (the dev extra)")
expect = sync_api.expect


class Explorer:
    """One harness page: mount/push states, read the actions the component sent."""

    def __init__(self, page):
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda err: self.errors.append(str(err)))

    def mount(self, state: dict) -> None:
        self.page.evaluate("state => window.__mount(state)", state)
        expect(self.testid("explorer")).to_be_visible()

    def push(self, state: dict) -> None:
        self.page.evaluate("state => window.__model.push(state)", state)

    def testid(self, name: str):
        return self.page.get_by_test_id(name)

    def node(self, uid: int):
        return self.page.locator(f'[data-testid="tree"] .sl-node[data-uid="{uid}"]')

    def actions(self) -> list[dict]:
        return self.page.evaluate("window.__model.actions")

    def last_action(self) -> dict:
        actions = self.actions()
        assert actions, "the component sent no action"
        return actions[-1]

    def code_line(self, pane: str, number: int):
        return self.page.locator(f'[data-testid="{pane}"] .sl-line[data-line="{number}"]')


@pytest.fixture(scope="module")
def harness_url():
    with serve_harness() as url:
        yield url


@pytest.fixture(scope="module")
def chromium_browser():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def explorer(chromium_browser, harness_url):
    context = chromium_browser.new_context(
        viewport={"width": 1280, "height": 800}, accept_downloads=True
    )
    page = context.new_page()
    page.goto(harness_url)
    page.wait_for_function("window.__ready === true")
    view = Explorer(page)
    yield view
    problems = page.evaluate("window.__model ? window.__model.problems : []")
    context.close()
    assert view.errors == [], f"page errors: {view.errors}"
    assert problems == [], f"contract breaches seen by the fake model: {problems}"


def test_tree_renders_and_click_selects(explorer):
    explorer.mount(gemm_state())
    tree = explorer.testid("tree")
    expect(tree.locator(".sl-node.sl-loop")).to_have_count(4)
    expect(tree.locator(".sl-node.sl-block")).to_have_count(1)
    expect(explorer.node(UID_I1)).to_have_class(_has("selected"))
    expect(explorer.node(UID_I0)).to_contain_text("i_0")
    expect(explorer.node(UID_I0)).to_contain_text("64")
    expect(explorer.node(UID_I0).locator(".sl-badge")).to_have_text("parallel")
    expect(explorer.node(UID_K)).to_contain_text("pragma_unroll_explicit=0")
    expect(explorer.node(UID_C)).to_contain_text("vi:S vj:S vk:R")

    explorer.node(UID_J).click()
    assert explorer.last_action() == {"seq": 1, "type": "select", "kind": "loop", "uid": UID_J}
    explorer.node(UID_C).click()
    assert explorer.last_action() == {"seq": 2, "type": "select", "kind": "block", "uid": UID_C}


def test_palette_split_form_sends_apply(explorer):
    explorer.mount(gemm_state())
    for name in ("split", "fuse", "reorder", "parallel", "vectorize"):
        expect(explorer.testid(f"prim-{name}")).to_be_visible()
    expect(explorer.testid("prim-split")).to_have_attribute(
        "title", "Split a loop into a list of consecutive loops."
    )
    expect(explorer.testid("primitive-form")).to_have_count(0)

    explorer.testid("prim-split").click()
    factors = explorer.testid("arg-factors")
    expect(factors).to_have_value("")
    expect(factors).to_have_attribute("placeholder", "None, 16")
    expect(explorer.testid("arg-preserve_unit_iters")).to_be_checked()
    factors.fill("None, 16")
    factors.press("Enter")
    # preserve_unit_iters stays at its default, so it is omitted (Python fills the default)
    assert explorer.last_action() == {
        "seq": 1,
        "type": "apply",
        "primitive": "split",
        "args": {"factors": [None, 16]},
    }


def test_required_argument_is_checked_before_sending(explorer):
    explorer.mount(gemm_state())
    explorer.testid("prim-split").click()
    explorer.testid("apply").click()
    expect(explorer.testid("primitive-form")).to_contain_text("required")
    explorer.testid("arg-factors").fill("4, x")
    explorer.testid("apply").click()
    expect(explorer.testid("primitive-form")).to_contain_text('"x" is not an integer')
    assert explorer.actions() == []


def test_form_argument_kinds(explorer):
    explorer.mount(gemm_state())
    # loops: checkboxes, kept in the order they were ticked
    explorer.testid("prim-reorder").click()
    loops = explorer.testid("arg-loops")
    loops.locator(f'input[value="{UID_K}"]').check()
    loops.locator(f'input[value="{UID_I1}"]').check()
    loops.locator(f'input[value="{UID_J}"]').check()
    loops.locator(f'input[value="{UID_J}"]').uncheck()
    expect(explorer.testid("primitive-form")).to_contain_text("order: k, i_1")
    explorer.testid("apply").click()
    assert explorer.last_action()["args"] == {"loops": [UID_K, UID_I1]}

    # int (required, prefilled with its default) and any (JSON when it parses, else text)
    explorer.testid("prim-rfactor").click()
    expect(explorer.testid("arg-factor_axis")).to_have_value("0")
    explorer.testid("arg-factor_axis").fill("1")
    explorer.testid("apply").click()
    assert explorer.last_action()["args"] == {"factor_axis": 1}
    explorer.testid("prim-annotate").click()
    explorer.testid("arg-ann_key").fill("pragma_auto_unroll_max_step")
    explorer.testid("arg-ann_val").fill("16")
    explorer.testid("arg-ann_val").press("Enter")
    assert explorer.last_action()["args"] == {
        "ann_key": "pragma_auto_unroll_max_step",
        "ann_val": 16,
    }
    explorer.testid("arg-ann_val").fill("unroll me")
    explorer.testid("apply").click()
    assert explorer.last_action()["args"]["ann_val"] == "unroll me"

    # block primitives: a loop select and a choice select
    explorer.push(block_selected_state())
    explorer.testid("prim-compute_at").click()
    explorer.testid("arg-loop").select_option(str(UID_J))
    explorer.testid("arg-preserve_unit_loops").check()
    explorer.testid("apply").click()
    assert explorer.last_action() == {
        "seq": len(explorer.actions()),
        "type": "apply",
        "primitive": "compute_at",
        "args": {"loop": UID_J, "preserve_unit_loops": True},
    }
    explorer.testid("prim-cache_write").click()
    explorer.testid("arg-storage_scope").select_option("shared")
    explorer.testid("arg-storage_scope").press("Enter")
    assert explorer.last_action()["args"] == {"write_buffer_index": 0, "storage_scope": "shared"}


def test_form_input_and_tab_survive_rerenders(explorer):
    explorer.mount(gemm_state())
    explorer.testid("prim-split").click()
    explorer.testid("arg-factors").fill("4, 8")
    explorer.testid("tab-script").click()
    explorer.push(gemm_state(measurement={"status": "running", "text": ""}))
    expect(explorer.testid("arg-factors")).to_have_value("4, 8")
    expect(explorer.testid("script")).to_be_visible()
    expect(explorer.testid("code")).to_be_hidden()

    # an apply rejected with an error keeps the form (to fix the input) ...
    explorer.testid("apply").click()
    explorer.push(error_state(seq=1))
    expect(explorer.testid("arg-factors")).to_have_value("4, 8")
    # ... one that succeeded closes it
    explorer.testid("apply").click()
    explorer.push(gemm_state(seq=2))
    expect(explorer.testid("primitive-form")).to_have_count(0)


def test_message_marks_offending_nodes(explorer):
    explorer.mount(gemm_state())
    expect(explorer.testid("message")).to_be_hidden()
    explorer.push(error_state())
    message = explorer.testid("message")
    expect(message).to_be_visible()
    expect(message).to_have_class(_has("sl-error"))
    expect(message.locator("pre")).to_contain_text("^^^^^^^^^^^^^^^^^")
    expect(message.locator("pre")).to_contain_text("not in a single chain")
    for uid in (UID_I0, UID_I1):
        expect(explorer.node(uid)).to_have_class(_has("offending"))
    expect(explorer.node(UID_J)).not_to_have_class(_has("offending"))
    explorer.testid("dismiss").click()
    assert explorer.last_action() == {"seq": 1, "type": "dismiss"}
    explorer.push(gemm_state(seq=1))
    expect(explorer.testid("message")).to_be_hidden()
    expect(explorer.node(UID_I0)).not_to_have_class(_has("offending"))


def _highlighted_lines(explorer, pane: str) -> list[int]:
    selector = f'[data-testid="{pane}"] .sl-line.sl-hl'
    return explorer.page.eval_on_selector_all(selector, "els => els.map(e => +e.dataset.line)")


def test_selection_highlights_code_and_script_lines(explorer):
    explorer.mount(gemm_state())
    first, last = CODE_LINES[str(UID_I1)]
    assert _highlighted_lines(explorer, "code") == list(range(first, last + 1))
    assert _highlighted_lines(explorer, "script") == [4]

    explorer.push(gemm_state(selection={"block": None, "loop": UID_K}))
    first, last = CODE_LINES[str(UID_K)]
    assert _highlighted_lines(explorer, "code") == list(range(first, last + 1))
    assert _highlighted_lines(explorer, "script") == [6]

    explorer.testid("tab-script").click()
    explorer.code_line("script", 5).click()  # `for j in range(1024):`
    assert explorer.last_action() == {"seq": 1, "type": "select", "kind": "loop", "uid": UID_J}
    explorer.code_line("script", 7).click()  # `with T.block("C"):`
    assert explorer.last_action() == {"seq": 2, "type": "select", "kind": "block", "uid": UID_C}
    explorer.code_line("script", 12).click()  # a body line: maps to no node, sends nothing
    assert len(explorer.actions()) == 2


def test_undo_redo_measure_and_steps(explorer):
    explorer.mount(gemm_state())
    expect(explorer.testid("redo")).to_be_disabled()
    explorer.testid("undo").click()
    assert explorer.last_action() == {"seq": 1, "type": "undo"}
    explorer.push(gemm_state(seq=1, current_step=1, can_redo=True))
    expect(explorer.testid("step-1")).to_have_class(_has("current"))
    explorer.testid("redo").click()
    assert explorer.last_action() == {"seq": 2, "type": "redo"}

    explorer.push(gemm_state(seq=2))
    expect(explorer.testid("step-2")).to_have_class(_has("current"))
    expect(explorer.testid("prediction")).to_have_text("12.34 ms")
    expect(explorer.testid("assumptions")).to_contain_text("L2 cache")
    explorer.testid("measure").click()
    assert explorer.last_action() == {"seq": 3, "type": "measure"}
    explorer.push(gemm_state(seq=3, measurement={"status": "running", "text": ""}))
    expect(explorer.testid("measure")).to_be_disabled()
    explorer.push(gemm_state(seq=3, measurement={"status": "ok", "text": "13.0 ms"}))
    expect(explorer.testid("measure")).to_be_enabled()
    expect(explorer.testid("measurement")).to_have_text("13.0 ms")


def test_step_click_diffs_against_current(explorer):
    explorer.mount(gemm_state())
    explorer.testid("step-0").click()
    assert explorer.last_action() == {"seq": 1, "type": "diff", "a": 0, "b": 2}
    expect(explorer.testid("diff")).to_be_visible()
    expect(explorer.testid("tab-diff")).to_have_class(_has("active"))
    expect(explorer.testid("diff-a")).to_have_value("0")
    expect(explorer.testid("diff-b")).to_have_value("2")

    explorer.push(diff_state(seq=1))
    expect(explorer.testid("diff").locator(".sl-line.sl-add")).to_have_count(1)
    expect(explorer.testid("diff").locator(".sl-line.sl-del")).to_contain_text("range(64)")
    explorer.testid("diff-a").select_option("1")
    explorer.testid("diff-run").click()
    assert explorer.last_action() == {"seq": 2, "type": "diff", "a": 1, "b": 2}


def test_branches_fork_switch_compare(explorer):
    explorer.mount(gemm_state())
    expect(explorer.testid("branch-select")).to_have_value("main")
    explorer.testid("fork-name").fill("vectorized")
    explorer.testid("fork").click()
    assert explorer.last_action() == {"seq": 1, "type": "fork", "name": "vectorized"}
    explorer.testid("branch-select").select_option("tiled")
    assert explorer.last_action() == {"seq": 2, "type": "switch", "name": "tiled"}

    explorer.testid("tab-compare").click()
    expect(explorer.testid("compare-a")).to_have_value("main")
    expect(explorer.testid("compare-b")).to_have_value("tiled")
    explorer.testid("compare-run").click()
    assert explorer.last_action() == {"seq": 3, "type": "compare", "a": "main", "b": "tiled"}
    explorer.push(compare_state(seq=3))
    expect(explorer.testid("compare")).to_contain_text("8.10 ms")
    expect(explorer.testid("compare").locator(".sl-line.sl-add")).to_have_count(1)


def test_toolbar_actions(explorer):
    explorer.mount(gemm_state())
    expect(explorer.testid("source")).to_have_text("workload gemm(M=1024, N=1024, K=1024)")
    expect(explorer.testid("workload-select")).to_have_value("gemm")
    expect(explorer.testid("workload-sizes")).to_have_value("M=1024, N=1024, K=1024")
    explorer.testid("workload-select").select_option("softmax")
    expect(explorer.testid("workload-sizes")).to_have_value("M=128, N=1024")
    explorer.testid("workload-sizes").fill("M=64, N=512")
    explorer.push(gemm_state())  # a state arriving meanwhile keeps what the user typed
    expect(explorer.testid("workload-sizes")).to_have_value("M=64, N=512")
    explorer.testid("load-workload").click()
    assert explorer.last_action() == {
        "seq": 1,
        "type": "load_workload",
        "name": "softmax",
        "sizes": "M=64, N=512",  # as typed: Python checks each field
    }

    explorer.testid("target-select").select_option("cuda")
    assert explorer.last_action() == {"seq": 2, "type": "set_target", "target": "cuda"}
    expect(explorer.testid("function-select").locator('option[value="main"]')).to_be_disabled()

    onnx_bytes = bytes(range(256)) * 3
    explorer.testid("onnx-upload").set_input_files(
        {"name": "mlp.onnx", "mimeType": "application/octet-stream", "buffer": onnx_bytes}
    )
    explorer.page.wait_for_function("window.__model.actions.length === 3")
    action = explorer.last_action()
    assert action["type"] == "load_onnx" and action["filename"] == "mlp.onnx"
    assert base64.b64decode(action["data_b64"]) == onnx_bytes


def test_function_select_opens_function(explorer):
    functions = [{"name": "fused_matmul", "kind": "PrimFunc"}, {"name": "relu", "kind": "PrimFunc"}]
    explorer.mount(gemm_state(functions=functions, func="fused_matmul"))
    explorer.testid("function-select").select_option("relu")
    assert explorer.last_action() == {"seq": 1, "type": "open_function", "name": "relu"}


def test_trace_export_and_import(explorer):
    explorer.mount(gemm_state())
    explorer.testid("tab-trace").click()
    expect(explorer.testid("trace-python")).to_have_text(TRACE_PYTHON)

    with explorer.page.expect_download() as download_info:
        explorer.testid("export-json").click()
    download = download_info.value
    assert download.suggested_filename == "gemm_trace.json"
    assert Path(download.path()).read_text() == TRACE_JSON
    with explorer.page.expect_download() as download_info:
        explorer.testid("export-python").click()
    download = download_info.value
    assert download.suggested_filename == "gemm_trace.py"
    assert Path(download.path()).read_text() == TRACE_PYTHON
    with explorer.page.expect_download() as download_info:
        explorer.testid("export-bundle").click()
    download = download_info.value
    assert download.suggested_filename == "gemm.bundle.json"
    assert Path(download.path()).read_text() == BUNDLE_JSON

    text = json.dumps({"version": 1, "insts": []})
    explorer.testid("import-trace").set_input_files(
        {"name": "old.json", "mimeType": "application/json", "buffer": text.encode()}
    )
    explorer.page.wait_for_function("window.__model.actions.length === 1")
    assert explorer.last_action() == {
        "seq": 1,
        "type": "import_trace",
        "text": text,
        "filename": "old.json",
    }


def test_graph_nodes_open_functions_and_select_blocks(explorer):
    explorer.mount(gemm_state())
    graph = explorer.testid("graph")
    expect(graph).to_be_visible()
    graph.locator('g.node[id="fn:gemm"]').click()
    assert explorer.last_action() == {"seq": 1, "type": "open_function", "name": "gemm"}
    graph.locator('g.node[id="block:2"]').click()
    assert explorer.last_action() == {"seq": 2, "type": "select", "kind": "block", "uid": UID_C}
    graph.locator('g.node[id="param:x"]').click()
    assert len(explorer.actions()) == 2

    explorer.push(gemm_state(graph_svg=""))
    expect(graph).to_be_hidden()


def test_pipeline_run_and_detail(explorer):
    explorer.mount(gemm_state())
    explorer.testid("tab-pipeline").click()
    explorer.testid("pipeline-run").click()
    assert explorer.last_action() == {"seq": 1, "type": "pipeline"}
    explorer.push(pipeline_state(seq=1))
    rows = explorer.testid("pipeline-row")
    expect(rows).to_have_count(3)
    expect(rows.nth(1)).to_contain_text("Simplify")
    expect(rows.nth(1)).to_contain_text("2.10")
    explorer.testid("pipeline-row").nth(1).click()
    detail = explorer.testid("pipeline-detail").locator("pre")
    expect(detail).to_have_count(2)
    expect(detail.nth(0)).to_have_text("x + 0")
    expect(detail.nth(1)).to_have_text("x")


def test_roundtrip_time_is_recorded(explorer):
    explorer.mount(gemm_state(seq=7))
    root = explorer.testid("explorer")
    expect(root).to_have_attribute("data-seq", "7")
    explorer.testid("undo").click()
    assert explorer.last_action() == {"seq": 8, "type": "undo"}  # seq continues from the state
    expect(root).not_to_have_attribute("data-roundtrip-ms", _anything())
    explorer.push(gemm_state(seq=8, current_step=1))
    expect(root).to_have_attribute("data-seq", "8")
    milliseconds = float(root.get_attribute("data-roundtrip-ms"))
    assert milliseconds >= 0
    roundtrips = explorer.page.evaluate("window.__schedlabRoundtrips")
    assert roundtrips[-1]["seq"] == 8 and roundtrips[-1]["type"] == "undo"
    assert roundtrips[-1]["ms"] == pytest.approx(milliseconds, abs=0.01)


def _has(css_class: str):
    """A class-attribute pattern matching one whole class name."""
    return re.compile(rf"(^|\s){re.escape(css_class)}(\s|$)")


def _anything():
    return re.compile(".*")


def test_error_cause_first_function_folded(explorer):
    message = {"level": "error", "text": "ScheduleError in split: the factors multiply to 25",
               "uids": [UID_K], "detail": "@T.prim_func\ndef gemm():\n    ^^^^^"}  # fmt: skip
    explorer.mount(gemm_state(message=message))
    expect(explorer.testid("message-text")).to_have_text(message["text"])
    detail = explorer.testid("message-detail")
    assert detail.evaluate("el => el.tagName") == "DETAILS"
    expect(detail.locator("pre")).to_be_hidden()  # folded
    detail.locator("summary").click()
    expect(detail.locator("pre")).to_be_visible()
    expect(detail.locator("pre")).to_contain_text("^^^^^")
    explorer.push(gemm_state(message={**message, "detail": ""}))
    expect(explorer.testid("message-detail")).to_have_count(0)
    expect(explorer.testid("message")).not_to_contain_text("null")


def test_diff_tab_opens_on_the_previous_step_against_the_current(explorer):
    explorer.mount(gemm_state())
    explorer.testid("tab-diff").click()
    assert explorer.last_action() == {"seq": 1, "type": "diff", "a": 1, "b": 2}
    expect(explorer.testid("diff-a")).to_have_value("1")
    expect(explorer.testid("diff-b")).to_have_value("2")
    explorer.push(diff_state(seq=1))
    # a new step: the tab follows it (the user has not picked steps yet)
    steps = [*gemm_state()["steps"], {"index": 3, "label": "vectorize(loop=j)"}]
    explorer.push(diff_state(seq=2, steps=steps, current_step=3))
    assert explorer.last_action() == {"seq": 3, "type": "diff", "a": 2, "b": 3}
    expect(explorer.testid("diff-a")).to_have_value("2")
    # the current step in the list: what it changed, not itself against itself
    explorer.push(gemm_state(seq=3, steps=steps, current_step=3))
    explorer.testid("tab-code").click()
    explorer.testid("step-3").click()
    expect(explorer.testid("diff-a")).to_have_value("2")
    expect(explorer.testid("diff-b")).to_have_value("3")
    assert [a for a in explorer.actions() if a["type"] == "diff"][-1] == {
        "seq": 4, "type": "diff", "a": 2, "b": 3}  # fmt: skip
    # steps the user picks stay picked
    explorer.testid("diff-a").select_option("0")
    explorer.testid("diff-run").click()
    assert explorer.last_action() == {"seq": 5, "type": "diff", "a": 0, "b": 3}


def test_busy_status_says_what_runs_and_clears(explorer):
    explorer.mount(gemm_state())
    busy = explorer.testid("busy")
    expect(busy).to_be_hidden()
    explorer.testid("onnx-upload").set_input_files(
        {"name": "alexnet.onnx", "mimeType": "application/octet-stream", "buffer": b"x" * 64}
    )
    expect(busy).to_be_visible()
    expect(busy).to_contain_text("Importing alexnet.onnx")
    expect(busy).to_contain_text(" 1 s", timeout=5000)  # it counts the seconds
    explorer.push(gemm_state(seq=1))
    expect(busy).to_be_hidden()
    # a measurement: from the click until the state says it is done
    explorer.testid("measure").click()
    expect(busy).to_contain_text("Measuring")
    explorer.push(gemm_state(seq=2, measurement={"status": "running", "text": "measuring..."}))
    expect(busy).to_contain_text("Measuring")
    explorer.push(gemm_state(seq=2, measurement={"status": "ok", "text": "13.0 ms"}))
    expect(busy).to_be_hidden()
    explorer.testid("tab-pipeline").click()
    explorer.testid("pipeline-run").click()
    expect(busy).to_contain_text("Compiling")
    explorer.push(gemm_state(seq=3))
    expect(busy).to_be_hidden()
    shown = explorer.page.evaluate("window.__schedlabBusy")
    assert [text.split(":")[0].split(" ")[0] for text in shown] == [
        "Importing", "Measuring", "Compiling"]  # fmt: skip

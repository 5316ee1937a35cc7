"""The Tune panel in a real browser (Debian's chromium through Playwright).

First the component alone on the fake anywidget model (tests/ui/component_harness.py): what it
draws from a hand-written `tune` state and which actions its controls send. Then `schedlab
serve` with the real tuner: a bad trial count, a run that is stopped and resumed, its chart
and top-k list (a screenshot is saved: SCHEDLAB_SCREENSHOTS, default .pytest_cache/screenshots),
and a tuned schedule opened as a branch beside the user's own."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from .component_harness import CHROMIUM, CHROMIUM_ARGS, gemm_state, serve_harness

pytestmark = [
    pytest.mark.ui,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"needs chromium at {CHROMIUM}"),
]
SCREENSHOTS = Path(os.environ.get("SCHEDLAB_SCREENSHOTS", ".pytest_cache/screenshots"))
sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (the dev extra)")
expect = sync_api.expect


def _task(name, points, trials, best):
    return {"name": name, "shapes": "A[64,64] -> C[64,64]", "weight": 1, "flops": 524288,
            "trials": trials, "best_s": best, "best": f"{best * 1e6:.1f} us",
            "remeasured_s": None, "gflops": 524288 / best / 1e9, "points": points}  # fmt: skip


def tune_state(status="running", **overrides) -> dict:
    """A two-kernel run at trial 9 of 24: its lines, and the top-2 of each kernel."""
    running = status in ("running", "stopping")
    top = [{"task": task, "rank": rank, "candidate": f"{task}-{rank}", "latency_s": secs,
            "text": f"{secs * 1e6:.1f} us", "gflops": 524288 / secs / 1e9}
           for task, rank, secs in (("dense", 1, 2e-5), ("dense", 2, 3e-5), ("relu", 1, 4e-6),
                                    ("relu", 2, 5e-6))]  # fmt: skip
    tune = {
        "status": status, "text": f"dense: trial 9/24 · best 20.0 us · ETA 12 s ({status})",
        "error": "", "running": running, "can_stop": status == "running",
        "can_resume": not running, "trials": 24, "per_batch": 4,
        "run": {"what": "2 kernels of ONNX model mlp.onnx", "target": "cpu", "trials": 24,
                "per_batch": 4, "work_dir": "/tmp/schedlab-tune-x/run-1"},
        "progress": {"trial": 9, "trials": 24, "eta_s": 12.0},
        "tasks": [_task("dense", [[1, 9e-4], [3, 1e-4], [5, 2e-5]], 5, 2e-5),
                  _task("relu", [[2, 6e-6], [4, 4e-6]], 4, 4e-6)],
        "top": top,
        "scopes": [{"value": "all", "label": "all 2 kernels of ONNX model mlp.onnx"},
                   {"value": "function", "label": "the open kernel, dense"}],
    }  # fmt: skip
    return gemm_state(tune={**tune, **overrides})


@pytest.fixture
def page():
    with serve_harness() as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.goto(url)
        page.wait_for_function("window.__ready === true")
        yield page
        browser.close()
        assert errors == [], f"page errors: {errors}"


def test_the_panel_draws_a_run_and_sends_its_actions(page):
    by = page.get_by_test_id
    page.evaluate("state => window.__mount(state)", tune_state())
    by("tab-tune").click()
    expect(by("tab-tune")).to_have_text("Tune 9/24")  # progress shows from any tab
    expect(by("tune-status")).to_contain_text("trial 9/24")
    assert by("tune-progress").evaluate("el => [el.value, el.max]") == [9, 24]
    expect(by("tune-chart").locator("polyline")).to_have_count(2)  # one line per kernel
    expect(by("tune-chart").locator("circle")).to_have_count(5)  # one dot per improvement
    expect(by("tune-chart")).to_contain_text("dense: 20.0 us")
    expect(by("tune-chart")).to_contain_text("log scale")
    expect(by("tune-top-row")).to_have_count(4)
    expect(by("tune-top-row").nth(2)).to_contain_text("relu")
    expect(by("tune-start")).to_be_disabled()
    expect(by("tune-resume")).to_be_disabled()
    expect(by("tune-trials")).to_be_disabled()
    by("tune-stop").click()
    actions = lambda: page.evaluate("window.__model.actions")  # noqa: E731
    assert actions()[-1] == {"seq": 1, "type": "tune_stop"}

    page.evaluate("state => window.__model.push(state)", tune_state("stopped", text="stopped"))
    expect(by("tab-tune")).to_have_text("Tune")
    expect(by("tune-stop")).to_be_disabled()
    by("tune-top-row").nth(3).get_by_test_id("tune-open").click()
    assert actions()[-1] == {"seq": 2, "type": "tune_open", "task": "relu", "candidate": "relu-2"}
    by("tune-resume").click()
    assert actions()[-1] == {"seq": 3, "type": "tune_resume", "trials": "24", "per_batch": "4"}

    # the fields travel as typed: Python says what is wrong with them, in the panel
    by("tune-scope").select_option("function")
    by("tune-trials").fill("abc")
    by("tune-workdir").fill("runs/mlp")
    by("tune-start").click()
    assert actions()[-1] == {"seq": 4, "type": "tune_start", "scope": "function",
                             "target": "cpu", "trials": "abc", "per_batch": "4",
                             "work_dir": "runs/mlp"}  # fmt: skip
    error = "trials must be a whole number of at least 1, got 'abc'"
    page.evaluate("state => window.__model.push(state)", tune_state("stopped", error=error))
    expect(by("tune-error")).to_have_text(error)
    expect(by("tune-trials")).to_have_value("abc")  # what the user typed stays to be fixed


# -- the app with the real tuner -------------------------------------------------------------------
async def _status(ex, pattern: str, timeout: float = 240.0) -> str:
    """Wait until the status line matches `pattern` (updates arrive without any click)."""
    deadline = asyncio.get_running_loop().time() + timeout
    text = ""
    while asyncio.get_running_loop().time() < deadline:
        text = await ex.text("tune-status")
        if re.search(pattern, text):
            return text
        if "failed" in text:
            break
        await asyncio.sleep(0.1)
    raise AssertionError(f"the status never matched {pattern!r}; it says {text!r}")


def test_tune_stop_resume_and_open_the_best_in_the_app():
    pytest.importorskip("panel")
    playwright_async = pytest.importorskip("playwright.async_api")
    pytest.importorskip("schedlab.tune.space", reason="the tuner's search space is not in yet")
    from schedlab.ui.browser import AppServer, RequestLog, launch
    from schedlab.ui.drive import ExplorerPage

    async def body(ex: ExplorerPage) -> None:
        await ex.show_tab("tune")
        assert await ex.text("tune-status") == "not started"
        assert "gemm(M=64, N=64, K=64)" in await ex.by("tune-scope").inner_text()
        await ex.by("tune-trials").fill("0")
        await ex.click("tune-start")
        assert "whole number of at least 1, got '0'" in await ex.text("tune-error")

        await ex.by("tune-trials").fill("12")
        await ex.by("tune-per-batch").fill("4")
        await ex.click("tune-start")
        await _status(ex, r"trial [1-9]\d*/12")  # the first candidates are measured
        assert re.fullmatch(r"Tune \d+/12", await ex.text("tab-tune"))
        await ex.click("tune-stop")
        stopped = await _status(ex, r"^stopped at trial \d+/12")
        assert await ex.by("tune-resume").is_enabled()
        await ex.click("tune-resume")
        done = await _status(ex, r"^done: 12 trials · best ")
        assert "GFLOP/s" in done, (stopped, done)
        assert await ex.by("tune-chart").locator("polyline").count() == 1
        rows = ex.by("tune-top-row")
        assert 1 <= await rows.count() <= 5
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        await ex.page.screenshot(path=str(SCREENSHOTS / "tune_panel.png"), full_page=True)

        await ex.act(lambda: rows.first.get_by_test_id("tune-open").click())
        assert await ex.by("branch-select").input_value() == "tuned-1"
        assert "tuned-1" in await ex.text("message")
        await ex.show_tab("compare")
        compare = await ex.text("compare")
        assert "main" in compare and "tuned-1" in compare

    async def main() -> RequestLog:
        with AppServer(size="M=64,N=64,K=64") as server:
            async with playwright_async.async_playwright() as p:
                browser = await launch(p)
                page = await browser.new_page(viewport={"width": 1400, "height": 1000})
                log = RequestLog().attach(page)
                try:
                    ex = await ExplorerPage(page).open(server.url)
                    await body(ex)
                finally:
                    await browser.close()
        return log

    log = asyncio.run(main())
    assert log.external == [], f"requests left the machine: {log.external}"

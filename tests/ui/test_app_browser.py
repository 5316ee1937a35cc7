"""The web app in a real browser: `schedlab serve` in a subprocess, Debian's chromium driven by
Playwright, every step a user takes (the issue's "Done when" list), and no request off the
machine. A screenshot of the final page is saved (SCHEDLAB_SCREENSHOTS, default
.pytest_cache/screenshots)."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib

import pytest

pytest.importorskip("panel")
playwright_async = pytest.importorskip("playwright.async_api")

from schedlab.ui.browser import AppServer, RequestLog, launch  # noqa: E402
from schedlab.ui.drive import ExplorerPage  # noqa: E402

pytestmark = pytest.mark.ui
SCREENSHOTS = pathlib.Path(os.environ.get("SCHEDLAB_SCREENSHOTS", ".pytest_cache/screenshots"))


@pytest.fixture(scope="module")
def server():
    with AppServer(size="M=96,N=80,K=64") as running:
        yield running


def _ms(text: str) -> float:
    value, unit = text.split()[:2]
    return float(value) * (1e-3 if unit == "us" else 1 if unit == "ms" else 1e3)


def run(coro):
    return asyncio.run(coro)


async def _with_page(url: str, body, downloads: bool = False):
    async with playwright_async.async_playwright() as p:
        browser = await launch(p)
        context = await browser.new_context(accept_downloads=downloads,
                                            viewport={"width": 1400, "height": 1000})  # fmt: skip
        page = await context.new_page()
        log = RequestLog().attach(page)
        try:
            return await body(ExplorerPage(page), log)
        finally:
            await browser.close()


def test_a_user_session_end_to_end(server, tmp_path):
    async def body(ex: ExplorerPage, log: RequestLog):
        await ex.open(server.url)
        # pick gemm (from the registry, at a small size) and see its loop nest
        await ex.load_workload("gemm", "M=64, N=48, K=32")
        assert "gemm" in await ex.text("source")
        assert await ex.loop_names() == ["i", "j", "k"]
        code_before = await ex.text("code")
        predicted_before = await ex.text("prediction")
        assert "ms" in predicted_before

        # split a loop: tree, code and predicted latency change
        await ex.select_loop("i")
        assert "selected" in (await ex.tree_node("i").get_attribute("class"))
        await ex.apply("split", factors="None, 16")
        assert await ex.loop_names() == ["i_0", "i_1", "j", "k"]
        await ex.show_tab("code")
        code_after = await ex.text("code")
        assert code_after != code_before and "i_1" in code_after
        assert len(await ex.steps()) == 2
        # run the outer tile in parallel: the predicted latency drops
        await ex.select_loop("i_0")
        await ex.apply("parallel")
        assert "omp parallel" in await ex.text("code")
        predicted_after = await ex.text("prediction")
        assert _ms(predicted_after) < _ms(predicted_before), (predicted_before, predicted_after)
        assert len(await ex.steps()) == 3
        # the selected loop's lines are highlighted in the code
        await ex.select_loop("i_1")
        assert await ex.by("code").locator(".sl-hl").count() >= 1

        # undo, redo
        await ex.click("undo")
        assert "omp parallel" not in await ex.text("code")
        await ex.click("undo")
        assert await ex.loop_names() == ["i", "j", "k"]
        assert await ex.text("prediction") == predicted_before
        await ex.click("redo")
        assert await ex.loop_names() == ["i_0", "i_1", "j", "k"]

        # export the trace (a real download), undo everything, import it back
        await ex.show_tab("trace")
        async with ex.page.expect_download() as info:
            await ex.by("export-json").click()
        download = await info.value
        saved = tmp_path / download.suggested_filename
        await download.save_as(saved)
        exported = json.loads(saved.read_text())
        assert exported["workload"] and any(inst[0] == "Split" for inst in exported["insts"])
        await ex.click("undo")
        assert await ex.loop_names() == ["i", "j", "k"]
        await ex.upload("import-trace", saved)
        assert await ex.loop_names() == ["i_0", "i_1", "j", "k"]
        assert "imported" in (await ex.text("message"))

        # an illegal primitive: its message shows, the loop is marked, nothing changes
        steps = await ex.steps()
        await ex.select_loop("k")  # a reduction loop: the palette offers no parallel/vectorize
        assert await ex.by("prim-parallel").count() == 0
        await ex.apply("split", factors="5, 5")  # 25 iterations, not 32
        message = await ex.text("message")
        assert "multiply to 25" in message and "^^^" in message
        assert "offending" in (await ex.tree_node("k").get_attribute("class"))
        assert await ex.steps() == steps

        # a trace for another workload is refused with a clear message
        other = tmp_path / "other.trace.json"
        exported["workload"] = "0" * len(exported["workload"])  # another workload's fingerprint
        other.write_text(json.dumps(exported))
        await ex.upload("import-trace", other)
        assert "not imported" in await ex.text("message")
        assert await ex.steps() == steps

        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / "explorer_app.png"
        await ex.page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        return log

    log = run(_with_page(server.url, body, downloads=True))
    assert log.urls, "no request was recorded"
    assert log.external == [], f"requests left the machine: {log.external}"


def test_graph_pipeline_measure_and_branches(server, tmp_path):
    onnx = pytest.importorskip("onnx")
    from tests.relax.test_end_to_end import mlp_model

    model_path = tmp_path / "mlp.onnx"
    onnx.save(mlp_model(), model_path)

    async def body(ex: ExplorerPage, log: RequestLog):
        await ex.open(server.url)
        # measure the current step (in the server's worker process)
        await ex.click("measure")
        for _ in range(600):
            text = await ex.text("measurement")
            if "ms" in text or "failed" in text:
                break
            await asyncio.sleep(0.2)
        assert text.endswith("ms"), text

        # branches: fork, change one branch, compare
        await ex.by("fork-name").fill("tiled")
        await ex.click("fork")
        await ex.select_loop("j")
        await ex.apply("split", factors="None, 8")
        await ex.show_tab("compare")
        await ex.by("compare-a").select_option("main")
        await ex.by("compare-b").select_option("tiled")
        await ex.click("compare-run")
        assert "j_0" in await ex.text("compare")

        # diff against the first step
        await ex.show_tab("diff")
        await ex.by("diff-a").select_option("0")
        await ex.by("diff-b").select_option("1")
        await ex.click("diff-run")
        assert "j_1" in await ex.text("diff")

        # the target's pipeline, pass by pass
        await ex.show_tab("pipeline")
        await ex.click("pipeline-run")
        rows = ex.by("pipeline-row")
        assert await rows.count() >= 3
        await rows.nth(1).click()
        assert await ex.by("pipeline-detail").inner_text()

        # an ONNX model: its graph; clicking a fused function opens its PrimFunc
        await ex.upload("onnx-upload", model_path)
        assert "mlp.onnx" in await ex.text("source")
        nodes = ex.by("graph").locator('g.node[id^="fn:"]')
        assert await nodes.count() >= 2
        target = (await nodes.nth(1).get_attribute("id"))[3:]
        await ex.act(lambda: nodes.nth(1).click())
        assert await ex.by("function-select").input_value() == target
        return log

    log = run(_with_page(server.url, body))
    assert log.external == [], f"requests left the machine: {log.external}"

"""`schedlab bench-explorer` end to end (real server, real chromium), at a small size: the apply
walk is timed and undone, 10 concurrent sessions each walk their own schedule (timed per
session) and stay isolated, nothing leaves the machine; and the isolation check really catches
a page that shows another schedule. The timing goal itself (every session's median < 300 ms
for gemm 1024) is the benchmark's to report, never a test's to assert."""

from __future__ import annotations

import asyncio
import math

import pytest

pytest.importorskip("panel")
playwright_async = pytest.importorskip("playwright.async_api")

from schedlab.cli import main  # noqa: E402
from schedlab.ui import bench  # noqa: E402
from schedlab.ui.browser import AppServer, RequestLog, launch  # noqa: E402

pytestmark = pytest.mark.ui
SMALL = "M=64,N=64,K=32"


def test_bench_runs_the_walk_and_ten_isolated_sessions():
    lines: list[str] = []
    result = bench.run_explorer_bench(rounds=1, sessions=10, size=SMALL, log=lines.append)
    assert len(result.apply_ms) == len(bench.WALK)
    assert all(math.isfinite(ms) and ms > 0 for ms in result.apply_ms)
    assert result.isolated, result.mismatches
    assert [len(times) for times in result.session_ms] == [len(bench.WALK)] * 10
    assert len(result.session_medians) == 10 and all(ms > 0 for ms in result.concurrent_ms)
    assert result.external_requests == []
    assert {"server", "browsers"} <= set(result.cpu_s) and result.cpu_s["browsers"] > 0
    machine = result.cpu_s.get("machine")  # the whole machine's busy CPU time (Linux)
    assert machine is None or machine >= 0.8 * (result.cpu_s["server"] + result.cpu_s["browsers"])
    report = "\n".join(lines)
    assert machine is None or "with other processes than the server and the browsers" in report
    assert "median" in report and "each shows only its own schedule" in report
    assert "median per session: " in report and "goal: every session's median < 300 ms" in report
    assert "machine: " in report and "CPUs" in report and "chromium" in report


def test_each_session_walks_its_own_schedule():
    walks = [bench.session_walk(n) for n in range(10)]
    assert all([step[:2] for step in walk] == [s[:2] for s in bench.WALK] for walk in walks)
    splits = {tuple(bench._expected(walk)) for walk in walks}
    assert len(splits) == 10  # no two sessions build the same nest
    assert bench._expected(walks[0]) == [("i_1", "2"), ("j_1", "4"), ("k_1", "4")]


def test_isolation_check_catches_a_foreign_schedule():
    async def body(url: str) -> tuple[list[str], list[str]]:
        async with playwright_async.async_playwright() as p:
            browser = await launch(p)
            try:
                ex = await bench._new_page(browser, url, RequestLog())
                await ex.select_loop("i")
                await ex.apply("split", factors="None, 4")
                own = await bench._check_own(0, ex, [("i_1", "4")])
                foreign = await bench._check_own(0, ex, [("i_1", "8")])
                return own, foreign
            finally:
                await browser.close()

    with AppServer(size=SMALL) as server:
        own, foreign = asyncio.run(body(server.url))
    assert own == []
    assert any("i_1 shows extent '4'" in problem for problem in foreign), foreign


def test_cli_rejects_bad_counts(capsys):
    assert main(["bench-explorer", "--rounds", "0"]) == 2
    assert "--rounds must be at least 1" in capsys.readouterr().err
    assert main(["bench-explorer", "--sessions", "99"]) == 2
    assert "--sessions must be in" in capsys.readouterr().err

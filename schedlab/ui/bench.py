"""`schedlab bench-explorer`: the explorer as a user meets it, in a real browser.

Two figures, both from `schedlab serve` in a subprocess driven by Debian's chromium:

- **apply latency**: one session schedules gemm (1024 by default) step by step — select a loop,
  fill the primitive's form, click Apply — and every click is timed in the page from the click
  to the rendered answer (updated code and predicted latency), `data-roundtrip-ms` (see
  docs/explorer.md). The steps are undone between rounds, so every round applies the same
  primitives to the same nest. Reported: min and median (goal: median < 300 ms).
- **isolation**: `sessions` browser contexts (separate Panel sessions) open at once and apply
  different schedules concurrently; afterwards every page must show its own schedule and no
  other's (loop names, extents and steps), in two rounds of concurrent applies. Reported: pass
  or the first mismatch, and the apply latency under that load.
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass, field

from .browser import AppServer, RequestLog, launch
from .drive import ExplorerPage

# One round of the single-session walk: (loop to select, primitive, form fields), a typical
# CPU gemm schedule: tile i, j, k, run the outer rows in parallel, vectorize the inner
# columns, unroll the inner reduction.
WALK = [
    ("i", "split", {"factors": "None, 32"}),
    ("j", "split", {"factors": "None, 64"}),
    ("k", "split", {"factors": "None, 4"}),
    ("i_0", "parallel", {}),
    ("j_1", "vectorize", {}),
    ("k_1", "unroll", {}),
]
# Session n splits loop i by FACTORS[n] in round one and loop j by FACTORS[n + 1] in round two:
# every session's nest differs from every other's (factors that do not divide the extent give
# a predicated split, still with an inner loop of that extent).
FACTORS = (2, 4, 8, 16, 32, 3, 5, 6, 7, 9, 10, 12, 14, 15, 18, 20, 24)


@dataclass
class ExplorerBenchResult:
    apply_ms: list[float] = field(default_factory=list)  # single session, one per apply click
    concurrent_ms: list[float] = field(default_factory=list)  # applies of the isolation rounds
    sessions: int = 0
    isolated: bool = False
    mismatches: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.apply_ms) if self.apply_ms else float("nan")

    @property
    def min_ms(self) -> float:
        return min(self.apply_ms) if self.apply_ms else float("nan")


def run_explorer_bench(rounds: int = 5, sessions: int = 10, workload: str = "gemm",
                       size: str | None = None, log=print) -> ExplorerBenchResult:  # fmt: skip
    """Run both parts against a fresh `schedlab serve`; prints and returns the figures."""
    if rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {rounds}")
    if not 1 <= sessions < len(FACTORS):
        raise ValueError(f"--sessions must be in 1..{len(FACTORS) - 1}, got {sessions}")
    label = f"{workload} {size or 'default size'}"
    log(f"starting schedlab serve ({label}) ...")
    with AppServer(workload=workload, size=size) as server:
        result = asyncio.run(_bench(server.url, rounds, sessions, log))
    _report(result, label, rounds, log)
    return result


async def _bench(url: str, rounds: int, sessions: int, log) -> ExplorerBenchResult:
    from playwright.async_api import async_playwright

    result = ExplorerBenchResult(sessions=sessions)
    async with async_playwright() as p:
        browser = await launch(p)
        try:
            requests = RequestLog()
            result.apply_ms = await _walk(browser, url, rounds, requests, log)
            log(f"isolation: {sessions} sessions applying different schedules at once ...")
            await _isolation(browser, url, sessions, requests, result)
            result.external_requests = requests.external
        finally:
            await browser.close()
    return result


async def _new_page(browser, url: str, requests: RequestLog) -> ExplorerPage:
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    requests.attach(page)
    return await ExplorerPage(page).open(url)


async def _walk(browser, url: str, rounds: int, requests: RequestLog, log) -> list[float]:
    """`rounds` times: apply every step of WALK, then undo them all; apply click times in ms."""
    ex = await _new_page(browser, url, requests)
    start = await ex.loop_names()
    times: list[float] = []
    for n in range(rounds):
        for loop, primitive, fields in WALK:
            await ex.select_loop(loop)
            times.append(await ex.apply(primitive, **fields))
            message = await ex.by("message").all_inner_texts()
            if any("rror" in text for text in message):
                raise RuntimeError(f"bench-explorer: {primitive} on {loop} failed: {message}")
        last = times[-len(WALK) :]
        log(f"  round {n + 1}: " + ", ".join(f"{ms:.0f}" for ms in last) + " ms")
        for _ in WALK:
            await ex.click("undo")
        if await ex.loop_names() != start:
            raise RuntimeError("bench-explorer: undo did not bring back the original loop nest")
    await ex.page.context.close()
    return times


async def _isolation(browser, url: str, sessions: int, requests: RequestLog,
                     result: ExplorerBenchResult) -> None:  # fmt: skip
    pages = await asyncio.gather(*(_new_page(browser, url, requests) for _ in range(sessions)))
    expected: list[list[tuple[str, str]]] = [[] for _ in pages]

    async def step(n: int, ex: ExplorerPage, loop: str, factor: int) -> float:
        await ex.select_loop(loop)
        ms = await ex.apply("split", factors=f"None, {factor}")
        expected[n].append((f"{loop}_1", str(factor)))
        return ms

    for loop, shift in (("i", 0), ("j", 1)):
        times = await asyncio.gather(
            *(step(n, ex, loop, FACTORS[n + shift]) for n, ex in enumerate(pages))
        )
        result.concurrent_ms += times
        await asyncio.sleep(0.5)  # a stray push from another session would have landed by now
        for n, ex in enumerate(pages):
            result.mismatches += await _check_own(n, ex, expected[n])
    result.isolated = not result.mismatches
    for ex in pages:
        await ex.page.context.close()


async def _check_own(n: int, ex: ExplorerPage, expected: list[tuple[str, str]]) -> list[str]:
    """What session n shows that is not its own schedule: inner loops and their extents, the
    number of steps (start + one per apply)."""
    extents = await ex.page.evaluate(
        """(sel) => {
             const find = (root) => root.querySelector(sel) ||
               [...root.querySelectorAll("*")].map((e) => e.shadowRoot && find(e.shadowRoot))
                 .find(Boolean) || null;
             const tree = find(document);
             return [...tree.querySelectorAll(".sl-node.sl-loop")].map((node) => [
               node.querySelector(".sl-name").textContent.trim(),
               node.querySelector(".sl-extent").textContent.replace("in", "").trim()]);
           }""",
        '[data-testid="tree"]',
    )
    shown = dict(extents)
    problems = [
        f"session {n}: loop {name} shows extent {shown.get(name)!r}, its own schedule has {ext}"
        for name, ext in expected
        if shown.get(name) != ext
    ]
    steps = await ex.steps()
    if len(steps) != len(expected) + 1:
        problems.append(f"session {n}: {len(steps)} steps shown, its own schedule has "
                        f"{len(expected) + 1}: {steps}")  # fmt: skip
    return problems


def _report(result: ExplorerBenchResult, label: str, rounds: int, log) -> None:
    ms = result.apply_ms
    log(f"\napply, click to rendered code + predicted latency ({label}, {len(ms)} applies "
        f"in {rounds} rounds): min {result.min_ms:.0f} ms, median {result.median_ms:.0f} ms "
        f"(goal: median < 300 ms)")  # fmt: skip
    if result.concurrent_ms:
        log(f"apply with {result.sessions} sessions applying at once: median "
            f"{statistics.median(result.concurrent_ms):.0f} ms, max "
            f"{max(result.concurrent_ms):.0f} ms")  # fmt: skip
    verdict = "each shows only its own schedule" if result.isolated else "NOT ISOLATED"
    log(f"isolation, {result.sessions} concurrent sessions: {verdict}")
    for problem in result.mismatches:
        log(f"  {problem}")
    if result.external_requests:
        log(f"requests that left the machine: {result.external_requests}")
    else:
        log("requests that left the machine: none")

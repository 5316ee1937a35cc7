"""`schedlab bench-explorer`: the explorer as a user meets it, in a real browser.

Two figures, both from `schedlab serve` in a subprocess driven by Debian's chromium:

- **apply latency**: one session schedules gemm (1024 by default) step by step — select a loop,
  fill the primitive's form, click Apply — and every click is timed in the page from the click
  to the rendered answer (updated code and predicted latency), `data-roundtrip-ms` (see
  docs/explorer.md). The steps are undone between rounds, so every round applies the same
  primitives to the same nest. Reported: min and median (goal: median < 300 ms).
- **concurrent sessions**: `sessions` browser contexts (separate Panel sessions) open at once
  and each walks the same six steps with split factors no other session uses, all at the same
  time, `rounds` times (undone between rounds); every apply is timed in its page as above.
  Reported: each session's median apply time (goal: every one < 300 ms), the CPU time the
  server and the browsers used meanwhile, and isolation: after every round each page must show
  its own schedule and no other's (loop names, extents, steps), and after the undo its start.

The browsers run on the server's machine, so under load they share its CPUs with the server;
the report names the machine and its load average, and splits the CPU time between them.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .browser import AppServer, RequestLog, launch
from .drive import ExplorerPage
from .offload import TIMINGS_ENV

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
# Under concurrent load session n splits loop i by FACTORS[n] and loop j by FACTORS[n + 1]:
# every session's nest differs from every other's (factors that do not divide the extent give
# a predicated split, still with an inner loop of that extent).
FACTORS = (2, 4, 8, 16, 32, 3, 5, 6, 7, 9, 10, 12, 14, 15, 18, 20, 24)
GOAL_MS = 300.0


@dataclass
class ExplorerBenchResult:
    apply_ms: list[float] = field(default_factory=list)  # single session, one per apply click
    session_ms: list[list[float]] = field(default_factory=list)  # per concurrent session
    sessions: int = 0
    isolated: bool = False
    mismatches: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    server_walk_ms: list[float] = field(default_factory=list)  # in the server: the walk's
    server_apply_ms: list[float] = field(default_factory=list)  # and the concurrent applies
    cpu_s: dict[str, float] = field(default_factory=dict)  # while the sessions applied at once
    wall_s: float = 0.0  # of those concurrent walks
    machine: str = ""

    @property
    def median_ms(self) -> float:
        return statistics.median(self.apply_ms) if self.apply_ms else float("nan")

    @property
    def min_ms(self) -> float:
        return min(self.apply_ms) if self.apply_ms else float("nan")

    @property
    def concurrent_ms(self) -> list[float]:
        """Every apply of the concurrent sessions."""
        return [ms for times in self.session_ms for ms in times]

    @property
    def session_medians(self) -> list[float]:
        return [statistics.median(times) for times in self.session_ms if times]

    @property
    def goal_met(self) -> bool:
        """Every concurrent session's median apply under GOAL_MS."""
        medians = self.session_medians
        return bool(medians) and max(medians) < GOAL_MS


def run_explorer_bench(rounds: int = 5, sessions: int = 10, workload: str = "gemm",
                       size: str | None = None, log=print) -> ExplorerBenchResult:  # fmt: skip
    """Run both parts against a fresh `schedlab serve`; prints and returns the figures."""
    if rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {rounds}")
    if not 1 <= sessions < len(FACTORS):
        raise ValueError(f"--sessions must be in 1..{len(FACTORS) - 1}, got {sessions}")
    label = f"{workload} {size or 'default size'}"
    log(f"starting schedlab serve ({label}) ...")
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="schedlab-bench-") as tmp:
        times = Path(tmp) / "answers.jsonl"  # the server's time per action (AnswerTimes)
        with AppServer(workload=workload, size=size, env={TIMINGS_ENV: str(times)}) as server:
            try:
                result = asyncio.run(_bench(server, rounds, sessions, log, times))
            except Exception as err:
                _raise_if_server_died(server, err)
                raise
    result.machine = machine_line(load_before, _load(), result.machine)
    _report(result, label, rounds, log)
    return result


def _raise_if_server_died(server: AppServer, err: Exception) -> None:
    """A page that waits in vain for its answer is often a server that is gone: say so."""
    process = server.process
    if process is None or process.poll() is None:
        return
    tail = process.stdout.read()[-3000:] if process.stdout else ""
    raise RuntimeError(f"bench-explorer: schedlab serve exited ({process.returncode}) while the "
                       f"sessions ran; its output ends:\n{tail}") from err  # fmt: skip


async def _bench(server: AppServer, rounds: int, sessions: int, log,
                 times: Path) -> ExplorerBenchResult:  # fmt: skip
    from playwright.async_api import async_playwright

    result = ExplorerBenchResult(sessions=sessions)
    async with async_playwright() as p:
        browser = await launch(p)
        try:
            result.machine = f"chromium {browser.version}"
            requests = RequestLog()
            result.apply_ms = await _walk(browser, server.url, rounds, requests, log)
            result.server_walk_ms = _answer_times(times, "apply")
            log(f"{sessions} sessions applying different schedules at once ...")
            await _concurrent(browser, server, rounds, sessions, requests, result, log)
            result.server_apply_ms = _answer_times(times, "apply")[len(result.server_walk_ms) :]
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
            if "rror" in (ex.message or ""):  # the message as the answer was rendered
                raise RuntimeError(f"bench-explorer: {primitive} on {loop} failed: {ex.message}")
        last = times[-len(WALK) :]
        log(f"  round {n + 1}: " + ", ".join(f"{ms:.0f}" for ms in last) + " ms")
        for _ in WALK:
            await ex.click("undo")
        if await ex.loop_names() != start:
            raise RuntimeError("bench-explorer: undo did not bring back the original loop nest")
    await ex.page.context.close()
    return times


def session_walk(n: int) -> list[tuple[str, str, dict]]:
    """Session n's version of WALK: loops i and j split by factors no other session uses."""
    factors = {"i": FACTORS[n], "j": FACTORS[n + 1]}
    return [(loop, primitive, {"factors": f"None, {factors[loop]}"} if loop in factors else fields)
            for loop, primitive, fields in WALK]  # fmt: skip


def _expected(walk: list[tuple[str, str, dict]]) -> list[tuple[str, str]]:
    """(inner loop, extent) each split of `walk` leaves."""
    return [(f"{loop}_1", fields["factors"].split(",")[-1].strip())
            for loop, primitive, fields in walk if primitive == "split"]  # fmt: skip


async def _concurrent(browser, server: AppServer, rounds: int, sessions: int,
                      requests: RequestLog, result: ExplorerBenchResult, log) -> None:  # fmt: skip
    """`rounds` times: every session walks its own schedule, all at once; then each page must
    show its own schedule, and after the undo its start."""
    opening = (_new_page(browser, server.url, requests) for _ in range(sessions))
    pages = await asyncio.gather(*opening)
    start = await pages[0].loop_names()
    walks = [session_walk(n) for n in range(sessions)]
    result.session_ms = [[] for _ in pages]
    meter = CpuMeter(server.process.pid if server.process else None)

    async def walk(n: int, ex: ExplorerPage) -> None:
        for loop, primitive, fields in walks[n]:
            await ex.select_loop(loop)
            result.session_ms[n].append(await ex.apply(primitive, **fields))
            if "rror" in (ex.message or ""):
                raise RuntimeError(f"bench-explorer: session {n}: {primitive} on {loop} failed: "
                                   f"{ex.message}")  # fmt: skip

    for r in range(rounds):
        with meter:
            await asyncio.gather(*(walk(n, ex) for n, ex in enumerate(pages)))
        await asyncio.sleep(0.5)  # a stray push from another session would have landed by now
        for n, ex in enumerate(pages):
            result.mismatches += await _check_own(n, ex, _expected(walks[n]), len(WALK) + 1)
        medians = [statistics.median(times[-len(WALK) :]) for times in result.session_ms]
        log(f"  round {r + 1}: per-session median " + ", ".join(f"{ms:.0f}" for ms in medians)
            + " ms")  # fmt: skip
        await asyncio.gather(*(_undo_walk(n, ex, start, result) for n, ex in enumerate(pages)))
    result.isolated = not result.mismatches
    result.cpu_s, result.wall_s = meter.cpu_s, meter.wall_s
    for ex in pages:
        await ex.page.context.close()


def _answer_times(path: Path, kind: str) -> list[float]:
    """The server's answer times (ms) of actions of type `kind`, in order (AnswerTimes)."""
    if not path.exists():
        return []
    entries = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return [entry["ms"] for entry in entries if entry.get("type") == kind]


async def _undo_walk(n: int, ex: ExplorerPage, start: list[str],
                     result: ExplorerBenchResult) -> None:  # fmt: skip
    for _ in WALK:
        await ex.click("undo")
    shown = await ex.loop_names()
    if shown != start:
        result.mismatches.append(f"session {n}: after undoing its walk it shows loops {shown}, "
                                 f"not its start {start}")  # fmt: skip


async def _check_own(n: int, ex: ExplorerPage, expected: list[tuple[str, str]],
                     steps: int | None = None) -> list[str]:  # fmt: skip
    """What session n shows that is not its own schedule: inner loops and their extents, the
    number of steps (`steps`; by default start + one per expected split)."""
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
    want = len(expected) + 1 if steps is None else steps
    shown_steps = await ex.steps()
    if len(shown_steps) != want:
        problems.append(f"session {n}: {len(shown_steps)} steps shown, its own schedule has "
                        f"{want}: {shown_steps}")  # fmt: skip
    return problems


def _report(result: ExplorerBenchResult, label: str, rounds: int, log) -> None:
    ms = result.apply_ms
    log(f"\nmachine: {result.machine}")
    log(f"apply, click to rendered code + predicted latency ({label}, {len(ms)} applies "
        f"in {rounds} rounds): min {result.min_ms:.0f} ms, median {result.median_ms:.0f} ms "
        f"(goal: median < {GOAL_MS:.0f} ms)")  # fmt: skip
    _report_server(result.server_walk_ms, log)
    medians = result.session_medians
    if medians:
        every = result.concurrent_ms
        verdict = "met" if result.goal_met else "NOT met"
        log(f"apply with {_sessions(result.sessions)} applying at once ({len(WALK)}-step walks, "
            f"{rounds} round(s): {len(every) // len(medians)} applies a session), median per "
            f"session: " + ", ".join(f"{m:.0f}" for m in medians) + " ms")  # fmt: skip
        log(f"  slowest session's median {max(medians):.0f} ms, all applies: median "
            f"{statistics.median(every):.0f} ms, max {max(every):.0f} ms (goal: every "
            f"session's median < {GOAL_MS:.0f} ms: {verdict})")  # fmt: skip
    _report_server(result.server_apply_ms, log)
    if result.cpu_s:
        cpu = result.cpu_s
        log(f"  CPU time while they applied: server {cpu['server']:.1f} s, browsers (chromium "
            f"and Playwright) {cpu['browsers']:.1f} s, in {result.wall_s:.1f} s wall on "
            f"{os.cpu_count()} CPUs")  # fmt: skip
        if "machine" in cpu:  # what else ran meanwhile: others' work on a shared machine
            other = max(0.0, cpu["machine"] - cpu["server"] - cpu["browsers"])
            log(f"  the machine's CPUs were busy {cpu['machine'] / result.wall_s:.2f} of "
                f"{os.cpu_count()} on average, {other / result.wall_s:.2f} of them with other "
                f"processes than the server and the browsers")  # fmt: skip
    verdict = "each shows only its own schedule" if result.isolated else "NOT ISOLATED"
    log(f"isolation, {_sessions(result.sessions)} at once: {verdict}")
    for problem in result.mismatches:
        log(f"  {problem}")
    if result.external_requests:
        log(f"requests that left the machine: {result.external_requests}")
    else:
        log("requests that left the machine: none")


def _sessions(n: int) -> str:
    return f"{n} session" if n == 1 else f"{n} sessions"


def _report_server(ms: list[float], log) -> None:
    if ms:
        log(f"  of that in the server (the apply's arrival to its state handed to Bokeh): "
            f"median {statistics.median(ms):.0f} ms, max {max(ms):.0f} ms")  # fmt: skip


# -- the machine -----------------------------------------------------------------------------------
def machine_line(load_before: float | None, load_after: float | None, browser: str = "") -> str:
    """What the figures were measured on: CPU model, CPUs, memory, load average, browser."""
    from schedlab.target import Target

    attrs = Target("cpu").attrs
    parts = [f"{attrs.get('model', platform.processor() or '?')} {platform.machine()}",
             f"{os.cpu_count()} CPUs"]  # fmt: skip
    memory = _memory_gib()
    if memory:
        parts.append(f"{memory:.1f} GiB memory")
    if load_before is not None and load_after is not None:
        parts.append(f"load average {load_before:.1f} before, {load_after:.1f} after")
    if browser:
        parts.append(f"{browser} on the same machine")
    return ", ".join(parts)


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover - platforms without a load average
        return None


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:  # pragma: no cover - off Linux
        pass
    return None


class CpuMeter:
    """CPU seconds the server's process tree and the browsers (this process's other children:
    Playwright's driver and chromium) use inside `with meter:` blocks, summed, from /proc
    (nothing off Linux)."""

    def __init__(self, server_pid: int | None):
        self.server_pid = server_pid
        self.cpu_s: dict[str, float] = {}
        self.wall_s = 0.0
        self._start: tuple | None = None

    def __enter__(self) -> CpuMeter:
        self._start = (time.perf_counter(), self._sample())
        return self

    def __exit__(self, *exc) -> None:
        t0, before = self._start
        self.wall_s += time.perf_counter() - t0
        for who, seconds in self._sample().items():
            self.cpu_s[who] = self.cpu_s.get(who, 0.0) + seconds - before.get(who, 0.0)

    def _sample(self) -> dict[str, float]:
        stats = _proc_stats()
        if not stats:
            return {}
        children: dict[int, list[int]] = {}
        for pid, (ppid, _cpu) in stats.items():
            children.setdefault(ppid, []).append(pid)
        server = _tree(self.server_pid, children) if self.server_pid else set()
        browsers = _tree(os.getpid(), children) - server - {os.getpid()}
        sample = {"server": sum(stats[p][1] for p in server),
                  "browsers": sum(stats[p][1] for p in browsers)}  # fmt: skip
        machine = _machine_busy_s()
        return sample if machine is None else {**sample, "machine": machine}


def _proc_stats() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds so far, children that ended included)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    stats = {}
    for entry in Path("/proc").glob("[0-9]*/stat") if Path("/proc").is_dir() else ():
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        ppid, times = int(fields[1]), sum(int(v) for v in fields[11:15])
        stats[int(entry.parent.name)] = (ppid, times / tick)
    return stats


def _machine_busy_s() -> float | None:
    """CPU seconds all the machine's CPUs have been busy (not idle, not waiting for I/O)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):  # off Linux
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return (sum(fields[:8]) - fields[3] - fields[4]) / tick


def _tree(root: int, children: dict[int, list[int]]) -> set[int]:
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found

"""Driving the explorer in a real browser: the app server as a subprocess, Debian's chromium
through Playwright, and a log of every request the page makes (the browser tests and
`schedlab bench-explorer` share these).

Playwright drives the system chromium (`executable_path`); `playwright install`, which
downloads browsers, is never needed.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def chromium_path() -> str:
    """The system chromium, or a clear error saying how to get it."""
    path = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if not path:
        raise RuntimeError(
            "chromium not found: the browser tests drive Debian's chromium "
            "(`make test` installs it; by hand: apt-get install chromium)"
        )
    return path


def launch(playwright, **kwargs):
    """A headless chromium (sync or async Playwright object)."""
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS,
                                      headless=True, **kwargs)  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AppServer:
    """`schedlab serve` in a subprocess on a free loopback port; stopped by handle.

    with AppServer(size="M=128,N=128,K=128") as server:
        page.goto(server.url)
    """

    def __init__(self, workload: str = "gemm", size: str | None = None, port: int | None = None,
                 startup_timeout: float = 120.0, env: dict[str, str] | None = None):  # fmt: skip
        self.port = port or free_port()
        self.env = {**os.environ, **env} if env else None  # None: this process's environment
        self.url = f"http://127.0.0.1:{self.port}/"
        self.command = [sys.executable, "-m", "schedlab.cli", "serve", "--port", str(self.port),
                        "--address", "127.0.0.1", "--workload", workload]  # fmt: skip
        if size:
            self.command += ["--size", size]
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None
        self.log = ""

    def __enter__(self) -> AppServer:
        self.process = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True, env=self.env,
        )  # fmt: skip
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                out = self.process.stdout.read() if self.process.stdout else ""
                raise RuntimeError(f"schedlab serve exited ({self.process.returncode}):\n{out}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.__exit__(None, None, None)
        raise RuntimeError(f"schedlab serve did not listen on {self.port} within "
                           f"{self.startup_timeout:.0f} s")  # fmt: skip

    def __exit__(self, *exc) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.process.stdout is not None:
            self.log = self.process.stdout.read()
            self.process.stdout.close()
        self.process = None


@dataclass
class RequestLog:
    """Every request a page makes; `external` are those that would leave the machine."""

    urls: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def attach(self, page) -> RequestLog:
        page.on("request", lambda request: self.urls.append(request.url))
        page.on("requestfailed", lambda request: self.failed.append(request.url))
        return self

    @property
    def external(self) -> list[str]:
        return [url for url in self.urls if not _is_local(url)]


def _is_local(url: str) -> bool:
    parsed = urlparse(url)
    if parsed.scheme in ("data", "blob", "about", "chrome", "devtools"):
        return True
    return parsed.hostname in LOOPBACK

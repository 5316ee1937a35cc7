"""Session work off the web server's event loop (`schedlab serve`).

Every session of the app shares one Tornado event loop, and work done in a callback there holds
up every other session's clicks. `SessionQueue` runs one session's work (its actions, and the
state refreshes that a finished measurement or a tuning run asks for) in order, one job at a
time, on a small thread pool shared by all sessions, and hands each result to `deliver`; the
app passes a function that schedules the document update on the event loop with
`doc.add_next_tick_callback` (the one Bokeh Document method that may be called from another
thread). The event loop itself only reads messages and writes the finished states.

The pool is small on purpose: the work is Python under one interpreter lock, so more threads
would not run it sooner, only share it out so that every queued action finishes late; two let
a long action (an ONNX import, the pipeline view) run beside other sessions' clicks. A session
with several jobs queued goes back to the end of the pool's queue after each one, so one busy
session does not hold a thread.

`AnswerTimes` logs, when asked to, how long the server took to answer each action.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

WORKERS = 2
TIMINGS_ENV = "SCHEDLAB_SERVE_TIMINGS"
log = logging.getLogger(__name__)
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def shared_pool() -> ThreadPoolExecutor:
    """The threads every session's queue runs on (started on first use)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="schedlab-session")
        return _pool


class SessionQueue:
    """One session's jobs, run in the order submitted and never two at once.

    queue = SessionQueue(deliver=lambda state: ...)   # called on a pool thread, in order
    queue.submit(partial(session.handle, action))
    queue.submit(session.state, coalesce=True)        # a refresh: skipped if one is waiting
    queue.close()                                     # drops what has not started
    """

    def __init__(self, deliver: Callable[[Any], None], pool: Executor | None = None):
        self._deliver = deliver
        self._pool = pool
        self._jobs: deque[Callable[[], Any]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False  # a pool task for this queue is waiting or running
        self._closed = False

    def submit(self, job: Callable[[], Any], coalesce: bool = False) -> None:
        """Run `job()` after the jobs submitted before it and pass its result to `deliver`.
        With `coalesce`, a job equal to one still waiting is not queued again."""
        with self._lock:
            if self._closed or (coalesce and job in self._jobs):
                return
            self._jobs.append(job)
            if self._scheduled:
                return
            self._scheduled = True
        self._schedule()

    def _schedule(self) -> None:
        (self._pool or shared_pool()).submit(self._run_one)

    def _run_one(self) -> None:
        with self._lock:
            job = self._jobs.popleft() if self._jobs and not self._closed else None
        if job is not None:
            try:
                result = job()
                if not self._closed:
                    self._deliver(result)
            except Exception:  # a bug in one session's action must not stop its queue
                log.exception("schedlab serve: a session's job failed")
        with self._lock:
            self._scheduled = bool(self._jobs) and not self._closed
            again = self._scheduled
        if again:
            self._schedule()  # behind the other sessions' jobs already waiting

    @property
    def pending(self) -> int:
        """Jobs submitted and not started yet."""
        with self._lock:
            return len(self._jobs)

    def close(self) -> None:
        """Drop the jobs not started; later submits are ignored (the session is gone)."""
        with self._lock:
            self._closed = True
            self._jobs.clear()


class AnswerTimes:
    """With a file `path` (`$SCHEDLAB_SERVE_TIMINGS`), one JSON line per action answered,
    {"type": ..., "ms": ...}: from the action reaching the app to its state handed to Bokeh,
    the server's part of a click's time (`schedlab bench-explorer` reads them). Else nothing."""

    def __init__(self, path: str | None):
        self.path = path
        self._received: dict[int, tuple[str, float]] = {}  # seq -> (type, when it came)

    def received(self, action) -> None:
        if self.path and isinstance(action, dict) and isinstance(action.get("seq"), int):
            self._received[action["seq"]] = (str(action.get("type")), time.perf_counter())

    def answered(self, seq: int) -> None:
        if not self.path or seq not in self._received:
            return
        kind, since = self._received.pop(seq)
        for older in [n for n in self._received if n < seq]:  # answered by this state too
            del self._received[older]
        line = json.dumps({"type": kind, "ms": (time.perf_counter() - since) * 1e3})
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(line + "\n")

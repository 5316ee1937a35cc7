"""Measurement in a worker process: a crashing or hanging kernel must not take down the app.

    worker = MeasureWorker()
    outcome = worker.run(measure_func, func, "cpu", timeout=30)   # WorkerOutcome
    outcome.ok, outcome.value, outcome.reason                    # "failed: <reason>" when not ok
    worker.close()

One process (spawn context, so no state is inherited from the UI process) is started lazily and
reused for every job: start-up (importing schedlab) costs about a second. When a job crashes the
process or runs past its timeout, the process is killed and the next job starts a fresh one.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WorkerOutcome:
    """What one job gave: `value` when `ok`, otherwise `reason` (one line for people)."""

    ok: bool
    value: Any = None
    reason: str = ""

    @property
    def message(self) -> str:
        return "ok" if self.ok else f"failed: {self.reason}"


def _serve(conn) -> None:
    """The worker's loop: run each (fn, args, kwargs) job, send back ("ok", value) or
    ("error", text); a None job stops it."""
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        fn, args, kwargs = job
        try:
            conn.send(("ok", fn(*args, **kwargs)))
        except BaseException as err:  # any failure of the job is reported, the worker lives on
            last = traceback.format_exception_only(type(err), err)[-1].strip()
            conn.send(("error", last))


class MeasureWorker:
    """A reusable worker process running picklable jobs with a timeout (see module doc)."""

    def __init__(self):
        self._ctx = multiprocessing.get_context("spawn")
        self._process = None
        self._conn = None
        self._lock = threading.Lock()  # one job at a time per worker

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_serve, args=(child,), daemon=True)
        with _sigint_blocked():
            process.start()
        child.close()
        self._process, self._conn = process, parent

    def run(self, fn: Callable, *args, timeout: float = 60.0, **kwargs) -> WorkerOutcome:
        """Run `fn(*args, **kwargs)` in the worker; wait at most `timeout` seconds (start-up of
        a fresh worker included). Never raises for a failing job: returns a failed outcome."""
        if timeout <= 0:
            raise ValueError(f"MeasureWorker.run: timeout must be > 0 seconds, got {timeout}")
        with self._lock:
            if not self.alive:
                self._start()
            try:
                self._conn.send((fn, args, kwargs))
            except Exception as err:  # e.g. the job cannot be pickled
                return WorkerOutcome(False, reason=f"could not send the job: {err}")
            try:
                if not self._conn.poll(timeout):
                    self._kill()
                    return WorkerOutcome(False, reason=f"timed out after {timeout:g} s")
                status, value = self._conn.recv()
            except (EOFError, OSError):
                return WorkerOutcome(False, reason=self._crash_reason())
            except BaseException:  # Ctrl-C while waiting: the job's late reply would be read
                self._kill()  # as the next job's, so the worker goes with the interrupted job
                raise
        if status == "ok":
            return WorkerOutcome(True, value)
        return WorkerOutcome(False, reason=value)

    def _crash_reason(self) -> str:
        self._process.join(5)
        code = self._process.exitcode
        self._kill()
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the kernel crashed the worker process ({name})"
        return f"the worker process exited (exit code {code})"

    def _kill(self) -> None:
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(5)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None

    def close(self) -> None:
        """Stop the worker process (a later `run` starts a new one)."""
        with self._lock:
            if self.alive:
                try:
                    self._conn.send(None)
                    self._process.join(2)
                except OSError:
                    pass
            self._kill()

    def __del__(self):
        try:
            self._kill()
        except Exception:
            pass


@contextlib.contextmanager
def _sigint_blocked():
    """Block SIGINT in this thread while a worker starts: the child inherits the signal mask,
    so a Ctrl-C or a notebook's shutdown interrupt sent to the whole process group never
    reaches it, not even while it is still importing (it would print a KeyboardInterrupt
    traceback). The worker's lifetime is this process's to manage (`close`, timeouts)."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no process-group SIGINT to fear
        yield
        return
    from multiprocessing import resource_tracker

    # spawning starts multiprocessing's resource tracker the first time, and unblocks SIGINT
    # right after: start it now, so the mask below still holds when the worker is spawned
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def measure_func(func, target: str = "cpu", repeat: int = 3, min_repeat_ms: float = 20.0,
                 seed: int = 0) -> dict:  # fmt: skip
    """The measurement job (runs inside the worker): build `func` for `target`, make random
    arguments of its shapes, benchmark; returns {"median", "min", "std"} seconds per call."""
    import schedlab
    from schedlab.workloads import make_args

    kernel = schedlab.build(func, target)
    args = make_args(func, seed=seed)
    timings = kernel.benchmark(*args, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return {"median": timings.median, "min": timings.min, "std": timings.std}

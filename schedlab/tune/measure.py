"""Measuring candidates: a builder that compiles in parallel, a runner that times in isolation.

    inputs = [MeasureInput.from_schedule(sch) for sch in candidates]
    with Measurer() as measurer:
        results = measurer.measure(inputs, on_result=print)   # MeasureResult per input, in order
    results[0].run_secs, results[0].error

`LocalBuilder` (TVM's LocalBuilder) lowers, generates C and runs gcc for a batch at once, one
worker process per core; the library lands in the kernel cache (`backend/cpu/compiler.py`).
`LocalRunner` (TVM's LocalRunner) then times the candidates one at a time in a worker process
that loads each library from that cache, makes random inputs (`make_args`) and calls
`Kernel.benchmark`. A kernel that crashes its worker, or runs past `timeout_s`, becomes a
failed result ("run: worker crashed (signal 11)", "run: timed out after 10 s"); the worker is
started again and the batch goes on. Nothing a candidate does raises out of a batch.

Workers are `python -c` subprocesses talking over a socket pair, not multiprocessing children:
they start clean whatever threads the parent has (no fork), never re-import the caller's
`__main__`, and may be started from daemonic processes (dask workers). A worker exits when its
parent does, even in the middle of a kernel that never returns. Inputs travel pickled (a
PrimFunc pickles exactly; an IRModule does not, so an input holds the function).

Builder and runner share the kernel cache through the environment (`SCHEDLAB_CACHE_DIR`), so
the runner never runs gcc for a built candidate; if the cache was emptied in between, the
runner builds it again under its load timeout.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from queue import LifoQueue
from typing import Any, Protocol

from schedlab.ir.function import PrimFunc
from schedlab.target import Target

_STARTUP_TIMEOUT_S = 120.0  # a cold `import schedlab` on a loaded machine
_LOAD_TIMEOUT_S = 120.0  # loading a built kernel (gcc again only if the cache was emptied)
_JOBS_PER_WORKER = 200  # a runner worker keeps every library it loaded: restart it now and then
# (two jobs per candidate: load, then bench)
_MAX_ERROR_CHARS = 4000  # compiler output can be long; records keep its start


class StopFlag(Protocol):
    def is_set(self) -> bool: ...


OnResult = Callable[[int, "MeasureResult"], None]


@dataclass(frozen=True)
class MeasureInput:
    """What one candidate needs to be built and run: the scheduled function, its target, a
    name (used in messages and the generated file's name)."""

    func: PrimFunc
    target: Target
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.func, PrimFunc):
            raise TypeError(
                f"MeasureInput: func must be a PrimFunc, got {type(self.func).__name__} "
                "(for a Schedule use MeasureInput.from_schedule)"
            )
        object.__setattr__(self, "target", Target(self.target))
        object.__setattr__(self, "name", self.name or self.func.name)

    @staticmethod
    def from_schedule(sch, target=None, name: str | None = None) -> MeasureInput:
        """The schedule's current function, for `target` (default: the schedule's own)."""
        target = target if target is not None else sch.target
        return MeasureInput(sch.func, Target(target), name or sch.func.name)


@dataclass(frozen=True)
class BuildResult:
    """A built candidate: the library's path, or the error that stopped the build."""

    artifact: str | None
    error: str | None
    build_secs: float


@dataclass(frozen=True)
class MeasureResult:
    """Seconds per call for each repeat (None when the candidate failed, with `error` saying
    why), the seconds its build took and the wall-clock seconds its run took."""

    run_secs: tuple[float, ...] | None
    error: str | None = None
    build_secs: float = 0.0
    run_wall_secs: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.run_secs)

    @property
    def median_secs(self) -> float:
        """Median seconds per call; inf for a failure."""
        return statistics.median(self.run_secs) if self.ok else float("inf")

    def to_record(self, task, trace):
        """A `TuningRecord` of this measurement of `task` (a TuneTask) scheduled by `trace`."""
        from .database import TuningRecord

        return TuningRecord.new(task, trace, self.run_secs, self.error)


# -- worker processes ---------------------------------------------------------------------------
_BOOT = "import sys; from schedlab.tune.measure import _serve; _serve(int(sys.argv[1]))"


class _Failure(Exception):
    """A worker call that produced no value: a job error, a crash or a timeout (the message)."""


class _Worker:
    """One worker subprocess; `call(job, args, timeout_s)` runs a job in it and returns its
    value, or raises _Failure. After a crash or a timeout the process is gone; `alive` says so."""

    def __init__(self) -> None:
        parent, child = Pipe()
        self._log = tempfile.TemporaryFile()  # the worker's stderr, quoted if it dies
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(child.fileno())],
            pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._log, env=_worker_env(),
        )  # fmt: skip
        child.close()
        self._conn: Connection = parent
        self._started = False
        self.jobs = 0

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def call(self, job: str, args: tuple, timeout_s: float) -> Any:
        if not self._started:
            try:
                self._receive(_STARTUP_TIMEOUT_S)
            except _Failure as failure:
                raise _Failure(f"worker did not start: {failure}") from None
            self._started = True
        try:
            self._conn.send((job, args))
        except OSError:
            raise self._died() from None
        self.jobs += 1
        status, value = self._receive(timeout_s)
        if status != "ok":
            raise _Failure(value)
        return value

    def _receive(self, timeout_s: float):
        if not self._conn.poll(timeout_s):
            self.close()
            raise _Failure(f"timed out after {timeout_s:g} s")
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            raise self._died() from None

    def _died(self) -> _Failure:
        code = self._proc.wait()
        self.close()
        if code < 0:
            return _Failure(f"worker crashed (signal {-code})")
        self._log.seek(0)
        tail = self._log.read().decode(errors="replace").strip().splitlines()[-3:]
        return _Failure(
            f"worker exited with code {code}" + (": " + " | ".join(tail) if tail else "")
        )

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()  # a hung kernel ignores anything gentler
            self._proc.wait()
        self._conn.close()
        self._log.close()


def _worker_env() -> dict[str, str]:
    """The parent's environment, with schedlab importable even when it is not installed."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}


class _Pool:
    """Up to `size` workers shared by threads: a call takes an idle worker (starting one when
    none is left or the last one died) and puts it back afterwards. The idle stack is last in,
    first out, so calls one after another reuse one worker instead of starting `size`."""

    def __init__(self, size: int, jobs_per_worker: int | None = None):
        self._idle: LifoQueue[_Worker | None] = LifoQueue()
        for _ in range(size):
            self._idle.put(None)
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._jobs_per_worker = jobs_per_worker

    def call(self, job: str, args: tuple, timeout_s: float) -> Any:
        with self.worker() as worker:
            return worker.call(job, args, timeout_s)

    @contextmanager
    def worker(self, fresh: bool = False) -> Iterator[_Worker]:
        """A healthy worker for several calls in a row (`fresh`: a newly started one)."""
        worker = self._idle.get()
        try:
            if fresh or worker is None or not worker.alive or self._worn(worker):
                worker = self._replace(worker)
            yield worker
        finally:
            self._idle.put(worker)

    def _worn(self, worker: _Worker) -> bool:
        return self._jobs_per_worker is not None and worker.jobs >= self._jobs_per_worker

    def _replace(self, worker: _Worker | None) -> _Worker:
        with self._lock:
            if worker is not None:
                worker.close()
                if worker in self._all:  # not after close(), which forgot every worker
                    self._all.remove(worker)
            worker = _Worker()
            self._all.append(worker)
            return worker

    def close(self) -> None:
        with self._lock:
            for worker in self._all:
                worker.close()
            self._all.clear()


def _serve(fd: int) -> None:
    """The worker's main loop: receive (job, args), send ("ok", value) or ("error", message)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    conn = Connection(fd)
    _exit_with_parent()
    import schedlab  # noqa: F401  (import before "start", so no job pays for it)

    conn.send(("ok", "start"))
    state: dict[str, Any] = {}
    while True:
        try:
            job, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = ("ok", _job_function(job)(state, *args))
        except Exception as err:
            reply = ("error", _describe(err))
        conn.send(reply)


def _exit_with_parent() -> None:
    # a kernel that never returns would outlive the tuner: poll for the parent (ctypes releases
    # the GIL while a kernel runs, so this thread keeps running)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _describe(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}"
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + " [...]"


# -- jobs (run inside a worker) -----------------------------------------------------------------
def _job_build(state: dict, inp: MeasureInput) -> str | None:
    import schedlab

    kernel = schedlab.build(inp.func, inp.target, name=inp.func.name)
    return str(getattr(kernel, "library_path", "")) or None


def _job_load(state: dict, inp: MeasureInput, seed: int) -> None:
    import schedlab
    from schedlab.workloads.registry import make_args

    state.clear()
    state["kernel"] = schedlab.build(inp.func, inp.target, name=inp.func.name)
    state["args"] = make_args(inp.func, seed)


def _job_bench(
    state: dict, number: int | None, repeat: int, min_repeat_ms: float, flush_cache: bool = False
) -> tuple:
    kernel, args = state["kernel"], state["args"]
    timings = kernel.benchmark(
        *args, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, flush_cache=flush_cache
    )
    return tuple(timings.all)


_JOBS: dict[str, Callable[..., Any]] = {
    "build": _job_build, "load": _job_load, "bench": _job_bench,
}  # fmt: skip


def _job_function(job: str) -> Callable[..., Any]:
    """One of _JOBS, or "schedlab.module:function" of another part of the tuner (the search's
    replays: `candidates._worker_job`), imported on first use."""
    if job in _JOBS:
        return _JOBS[job]
    module, _, name = job.partition(":")
    if not module.startswith("schedlab.") or not name:
        raise ValueError(f"unknown worker job {job!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


# -- builder ------------------------------------------------------------------------------------
class LocalBuilder:
    """Builds candidates in parallel worker processes (lowering, C generation, gcc). A build
    error, crash or timeout becomes a BuildResult with `error` ("build: ...")."""

    def __init__(self, max_workers: int | None = None, timeout_s: float = 60.0):
        max_workers = max_workers or os.cpu_count() or 1
        if max_workers < 1:
            raise ValueError(f"LocalBuilder: max_workers must be >= 1, got {max_workers}")
        _check_positive("LocalBuilder", "timeout_s", timeout_s)
        self.max_workers = max_workers
        self.timeout_s = timeout_s
        self._pool = _Pool(max_workers)

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """One BuildResult per input, in order."""
        if len(inputs) <= 1:
            return [self.build_one(inp) for inp in inputs]
        with ThreadPoolExecutor(min(self.max_workers, len(inputs))) as threads:
            return list(threads.map(self.build_one, inputs))

    def build_one(self, inp: MeasureInput) -> BuildResult:
        start = time.perf_counter()
        try:
            artifact = self._pool.call("build", (inp,), self.timeout_s)
        except _Failure as failure:
            return BuildResult(None, f"build: {failure}", time.perf_counter() - start)
        return BuildResult(artifact, None, time.perf_counter() - start)

    def close(self) -> None:
        self._pool.close()


# -- runner -------------------------------------------------------------------------------------
class LocalRunner:
    """Times built candidates in worker processes, `max_workers` at a time (one by default, so
    candidates do not disturb each other), with `Kernel.benchmark(number=, repeat=,
    min_repeat_ms=, flush_cache=)` on `make_args(func, seed)`. A worker is reused while it is
    healthy. `flush_cache` times every call with its arguments but the first evicted from the
    caches (TVM's `enable_cpu_cache_flush`): True, False, or "auto" (only candidates whose
    constant weights outgrow the caches, `flushes_caches`)."""

    def __init__(
        self,
        number: int | None = None,
        repeat: int = 3,
        min_repeat_ms: float = 20.0,
        timeout_s: float = 10.0,
        max_workers: int = 1,
        seed: int = 0,
        flush_cache: bool | str = False,
    ):
        if number is not None and number < 1:
            raise ValueError(f"LocalRunner: number must be >= 1 or None, got {number}")
        if repeat < 1 or max_workers < 1:
            raise ValueError(
                f"LocalRunner: repeat and max_workers must be >= 1, got {repeat}, {max_workers}"
            )
        _check_positive("LocalRunner", "timeout_s", timeout_s)
        self.number, self.repeat, self.min_repeat_ms = number, repeat, min_repeat_ms
        self.timeout_s, self.max_workers, self.seed = timeout_s, max_workers, seed
        self.flush_cache = flush_policy(flush_cache)
        self._pool = _Pool(max_workers, jobs_per_worker=_JOBS_PER_WORKER)

    def run(
        self,
        inputs: Sequence[MeasureInput],
        builds: Sequence[BuildResult],
        on_result: OnResult | None = None,
        stop: StopFlag | None = None,
    ) -> list[MeasureResult]:
        """Run every successfully built input (a failed build passes its error through).
        `on_result(index, result)` is called as each finishes; when `stop` is set, no further
        candidate starts and the results so far (a prefix of the inputs) are returned."""
        if len(inputs) != len(builds):
            raise ValueError(f"run: {len(inputs)} inputs but {len(builds)} build results")
        if self.max_workers == 1:
            return _in_order(list(zip(inputs, builds)), self._run_pair, on_result, stop)
        with ThreadPoolExecutor(self.max_workers) as threads:
            return _in_order(list(zip(inputs, builds)), self._run_pair, on_result, stop, threads)

    def _run_pair(self, pair: tuple[MeasureInput, BuildResult]) -> MeasureResult:
        return self.run_one(*pair)

    def run_one(
        self, inp: MeasureInput, build: BuildResult, repeat: int | None = None, fresh: bool = False
    ) -> MeasureResult:
        """Time one candidate (`fresh`: in a newly started worker process)."""
        if build.error is not None:
            return MeasureResult(None, build.error, build.build_secs, 0.0)
        start = time.perf_counter()
        flush = flushes_caches(self.flush_cache, inp.func, inp.target)
        settings = (self.number, repeat or self.repeat, self.min_repeat_ms, flush)
        try:
            with self._pool.worker(fresh) as worker:
                worker.call("load", (inp, self.seed), _LOAD_TIMEOUT_S)
                secs = worker.call("bench", settings, self.timeout_s)
        except _Failure as failure:
            return MeasureResult(None, f"run: {failure}", build.build_secs, _since(start))
        return MeasureResult(tuple(secs), None, build.build_secs, _since(start))

    def close(self) -> None:
        self._pool.close()


def flush_policy(flush_cache) -> bool | str:
    """`flush_cache` checked: True, False or "auto" (ValueError otherwise)."""
    if flush_cache == "auto":
        return "auto"
    if isinstance(flush_cache, bool):
        return flush_cache
    raise ValueError(f"flush_cache: expected True, False or 'auto', got {flush_cache!r}")


def flushes_caches(policy: bool | str, func: PrimFunc, target) -> bool:
    """Whether a candidate of `func` is timed with its arguments flushed from the caches.

    "auto" flushes where the kernel's constant weights (its `layout_free_buffers`) are larger
    than the L2 caches of all the cores together: in a model such a weight comes from memory
    at every call, and the tuner should rank the schedules that stream it well. Smaller
    weights are timed warm, because on light_resnet50 (Intel Xeon, 2 cores, 2 MiB L2 each)
    cold tuning made the 1-2 MiB-weight layers 10-25% slower in the model while a cold-tuned
    run's 8-9 MiB-weight layers were 12-26% faster there; a second run tuned that way found
    no better schedules for those layers than the warm run (docs/tuning.md, "Warm or cold
    caches"), so it is not the default."""
    if policy != "auto":
        return bool(policy)
    target = Target(target)
    if target.kind != "cpu":
        return False
    attrs = target.attrs
    caches = int(attrs.get("l2_bytes", 0)) * max(1, int(attrs.get("num_cores", 1) or 1))
    return caches > 0 and constant_weight_bytes(func) > caches


def constant_weight_bytes(func: PrimFunc) -> int:
    """The bytes of `func`'s parameters every call passes a constant (its
    `layout_free_buffers`, set by the graph pipeline on a model's kernels); 0 for none."""
    from schedlab.dlight.cpu.packing import layout_free_params, nbytes

    return sum(nbytes(buffer) for buffer in layout_free_params(func))


def _in_order(items: list, work: Callable, on_result, stop, threads=None) -> list:
    """`work(item)` for each item, results in order; stops starting new items once `stop` is
    set. With `threads`, up to their count run at once."""
    results: list = []
    pending = []
    for index, item in enumerate(items):
        if stop is not None and stop.is_set():
            break
        if threads is None:
            results.append(work(item))
            _notify(on_result, index, results[-1])
        else:
            pending.append(threads.submit(_unless_stopped, work, item, stop))
    for index, future in enumerate(pending):
        result = future.result()
        if result is None:
            break
        results.append(result)
        _notify(on_result, index, result)
    return results


def _unless_stopped(work: Callable, item, stop):
    return None if stop is not None and stop.is_set() else work(item)


def _notify(on_result: OnResult | None, index: int, result: MeasureResult) -> None:
    if on_result is not None:
        on_result(index, result)


def _since(start: float) -> float:
    return time.perf_counter() - start


def _check_positive(owner: str, name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive number of seconds, got {value!r}")


# -- facade -------------------------------------------------------------------------------------
class Measurer:
    """Build a batch in parallel, then run it one candidate at a time (TVM's builder + runner).

    `measure(inputs)` returns one MeasureResult per input, in order; `close()` (or leaving a
    `with` block) ends the worker processes."""

    def __init__(self, builder: LocalBuilder | None = None, runner: LocalRunner | None = None):
        self.builder = builder or LocalBuilder()
        self.runner = runner or LocalRunner()

    def measure(
        self,
        inputs: Sequence[MeasureInput],
        on_result: OnResult | None = None,
        stop: StopFlag | None = None,
    ) -> list[MeasureResult]:
        """Results for `inputs`, in order. `on_result(index, result)` is called as each
        candidate finishes; `stop` (a threading.Event) is checked between candidates, and when
        it is set the results so far (a prefix of `inputs`) are returned."""
        inputs = list(inputs)
        if stop is not None and stop.is_set():
            return []
        builds = self.builder.build(inputs)
        return self.runner.run(inputs, builds, on_result, stop)

    def remeasure_in_fresh_process(
        self, inp: MeasureInput, repeat: int | None = None
    ) -> MeasureResult:
        """Time `inp` again in a newly started worker (a long-lived one can overstate a
        winner: warm caches, a favourable heap layout)."""
        build = self.builder.build_one(inp)
        return self.runner.run_one(inp, build, repeat=repeat, fresh=True)

    def close(self) -> None:
        self.builder.close()
        self.runner.close()

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["MeasureInput", "BuildResult", "MeasureResult", "LocalBuilder", "LocalRunner",
           "Measurer"]  # fmt: skip

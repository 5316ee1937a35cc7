"""Measuring candidates on a dask.distributed cluster: `DaskMeasurer`, the `Measurer` interface.

    measurer = DaskMeasurer("tcp://scheduler:8786")      # or a distributed.Client
    results = measurer.measure(inputs)                   # MeasureResult per input, in order
    measurer.close()

Builds are dask tasks, all submitted at once, so they spread over the cluster's workers. Runs
follow, one task at a time, each holding the cluster-wide `distributed.Lock` named `RUN_LOCK`,
so no two measurements overlap even when several tuners share the cluster. Inside a dask worker
a task does what the local measurer does: builds in `LocalBuilder` worker processes, runs in a
`LocalRunner` worker process (kept across tasks), so a kernel that crashes or hangs fails its
candidate and leaves the dask worker alive.

A run may land on another machine than its build: the runner then compiles the kernel into its
own cache first, outside the timed part. dask is an optional extra (`pip install
'schedlab[tune]'`); importing this module does not import it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from .measure import (
    BuildResult,
    LocalBuilder,
    LocalRunner,
    MeasureInput,
    MeasureResult,
    OnResult,
    StopFlag,
)

RUN_LOCK = "schedlab.tune.measure"  # the cluster-wide lock every run task holds


def _import_distributed():
    try:
        import distributed
    except ImportError as err:
        raise ImportError(
            "DaskMeasurer needs dask.distributed, which is not installed: "
            "pip install 'schedlab[tune]' (or dask[distributed])"
        ) from err
    return distributed


class DaskMeasurer:
    """Builds and runs candidates as tasks on a dask cluster (a scheduler address or a
    `distributed.Client`). Runner settings as in `LocalRunner`; builds time out after
    `build_timeout_s`. A client made here from an address is closed by `close()`."""

    def __init__(
        self,
        scheduler_address_or_client,
        *,
        build_timeout_s: float = 60.0,
        number: int | None = None,
        repeat: int = 3,
        min_repeat_ms: float = 20.0,
        timeout_s: float = 10.0,
        seed: int = 0,
        flush_cache: bool | str = False,
    ):
        distributed = _import_distributed()
        LocalRunner(number, repeat, min_repeat_ms, timeout_s, 1, seed, flush_cache)  # checks
        if isinstance(scheduler_address_or_client, distributed.Client):
            self.client, self._owns_client = scheduler_address_or_client, False
        elif isinstance(scheduler_address_or_client, str):
            self.client, self._owns_client = distributed.Client(scheduler_address_or_client), True
        else:
            raise TypeError(
                "DaskMeasurer: expected a scheduler address or a distributed.Client, got "
                f"{type(scheduler_address_or_client).__name__}"
            )
        self.build_timeout_s = build_timeout_s
        self.runner_settings = {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms,
                                "timeout_s": timeout_s, "seed": seed,
                                "flush_cache": flush_cache}  # fmt: skip

    def measure(
        self,
        inputs: Sequence[MeasureInput],
        on_result: OnResult | None = None,
        stop: StopFlag | None = None,
    ) -> list[MeasureResult]:
        """As `Measurer.measure`: results in order, `on_result(index, result)` as each
        finishes, and a prefix of the results when `stop` is set."""
        inputs = list(inputs)
        if not inputs or (stop is not None and stop.is_set()):
            return []
        futures = self.client.map(_build_task, inputs, timeout_s=self.build_timeout_s, pure=False)
        builds = self.client.gather(futures)
        results: list[MeasureResult] = []
        for index, (inp, build) in enumerate(zip(inputs, builds)):
            if stop is not None and stop.is_set():
                break
            results.append(self._run(inp, build))
            if on_result is not None:
                on_result(index, results[-1])
        return results

    def _run(self, inp: MeasureInput, build: BuildResult) -> MeasureResult:
        if build.error is not None:
            return MeasureResult(None, build.error, build.build_secs, 0.0)
        return self.client.submit(_run_task, inp, build, self.runner_settings, pure=False).result()

    def remeasure_in_fresh_process(
        self, inp: MeasureInput, repeat: int | None = None
    ) -> MeasureResult:
        """Time `inp` again in a newly started runner process on the cluster."""
        build = self.client.submit(_build_task, inp, self.build_timeout_s, pure=False).result()
        if build.error is not None:
            return MeasureResult(None, build.error, build.build_secs, 0.0)
        future = self.client.submit(_run_task, inp, build, self.runner_settings, repeat, True,
                                    pure=False)  # fmt: skip
        return future.result()

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> DaskMeasurer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- tasks (run inside dask workers) ------------------------------------------------------------
# one builder and one runner per dask worker process and settings, kept across tasks: starting a
# worker process costs a Python start and `import schedlab`
_tools: dict[tuple, Any] = {}
_tools_lock = threading.Lock()


def _tool(key: tuple, make):
    with _tools_lock:
        if key not in _tools:
            _tools[key] = make()
        return _tools[key]


def _build_task(inp: MeasureInput, timeout_s: float) -> BuildResult:
    builder = _tool(("build", timeout_s), lambda: LocalBuilder(timeout_s=timeout_s))
    return builder.build_one(inp)


def _run_task(
    inp: MeasureInput,
    build: BuildResult,
    settings: dict,
    repeat: int | None = None,
    fresh: bool = False,
) -> MeasureResult:
    distributed = _import_distributed()
    runner = _tool(("run", *sorted(settings.items())), lambda: LocalRunner(**settings))
    with distributed.Lock(RUN_LOCK):
        return runner.run_one(inp, build, repeat=repeat, fresh=fresh)


__all__ = ["DaskMeasurer", "RUN_LOCK"]

"""LocalBuilder / LocalRunner / Measurer on real kernels: gcc builds, timed runs in worker
processes, and candidates that fail to build, crash their worker or never return."""

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import schedlab
from schedlab import workloads
from schedlab.schedule.schedule import Schedule
from schedlab.script import from_source
from schedlab.target import Target
from schedlab.tune.database import TuningRecord
from schedlab.tune.measure import (
    BuildResult,
    LocalBuilder,
    LocalRunner,
    MeasureInput,
    Measurer,
    MeasureResult,
)
from schedlab.tune.task import TuneTask
from schedlab.workloads.registry import make_args

from .conftest import SEGV

GEMM, GEMM_REF = workloads.get("gemm", M=64, N=64, K=64)
TARGET = Target("cpu")

# 2**62 dependent iterations: never returns
HANG = """
@T.prim_func
def hang(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({"global_symbol": "hang"})
    for i in range(T.int64(4611686018427387904)):
        B[i % T.int64(64)] = B[(i + T.int64(1)) % T.int64(64)] + A[0]
"""


@pytest.fixture(scope="module")
def measurer(_private_kernel_cache):
    with Measurer(LocalBuilder(max_workers=2), LocalRunner(timeout_s=2.0)) as measurer:
        yield measurer


def _gemm(factor: int, vectorize: bool = False) -> Schedule:
    sch = Schedule(GEMM, target=TARGET)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, factor])
    if vectorize:
        j0, j1 = sch.split(j, [None, 16])
        sch.reorder(i0, j0, k, i1, j1)
        sch.vectorize(j1)
    return sch


def _check_correct(inp: MeasureInput) -> None:
    kernel = schedlab.build(inp.func, inp.target)  # from the cache the builder filled
    args = make_args(inp.func)
    kernel(*args)
    np.testing.assert_allclose(args[2], GEMM_REF(args[0], args[1]), rtol=1e-4, atol=1e-4)


def test_measures_scheduled_gemms(measurer):
    inputs = [MeasureInput.from_schedule(_gemm(4)), MeasureInput.from_schedule(_gemm(8, True))]
    builds = measurer.builder.build(inputs)
    assert all(b.error is None and Path(b.artifact).exists() for b in builds)
    results = measurer.measure(inputs)
    for inp, result in zip(inputs, results):
        assert result.ok and result.error is None and len(result.run_secs) == 3
        assert all(0 < s < 1e-2 for s in result.run_secs) and result.median_secs > 0
        assert result.build_secs > 0 and result.run_wall_secs > 0
        _check_correct(inp)


def test_the_runner_times_with_flushed_caches_when_asked(measurer):
    inp = MeasureInput.from_schedule(_gemm(4))
    [build] = measurer.builder.build([inp])
    runner = LocalRunner(repeat=2, min_repeat_ms=1.0, flush_cache=True)
    try:
        result = runner.run_one(inp, build)
    finally:
        runner.close()
    assert result.ok and len(result.run_secs) == 2 and all(s > 0 for s in result.run_secs)


def test_build_error_is_a_result_and_the_batch_goes_on(measurer):
    broken = MeasureInput(GEMM, Target("cpu", cflags=["-fno-such-flag"]))
    results = measurer.measure([broken, MeasureInput.from_schedule(_gemm(2))])
    assert results[0].error.startswith("build: CompileError: gcc failed compiling")
    assert "-fno-such-flag" in results[0].error and results[0].run_secs is None
    assert not results[0].ok and results[0].median_secs == float("inf")
    assert results[1].ok


def test_build_timeout_then_the_builder_recovers():
    builder = LocalBuilder(max_workers=2, timeout_s=0.01)
    try:
        inp = MeasureInput.from_schedule(_gemm(16))  # not built yet: gcc takes far longer
        result = builder.build_one(inp)
        assert result.error == "build: timed out after 0.01 s" and result.artifact is None
        builder.timeout_s = 60.0
        assert builder.build_one(inp).error is None
        assert builder.build_one(inp).error is None
        assert len(builder._pool._all) == 1  # calls one after another reuse the live worker
    finally:
        builder.close()


def test_crashing_and_hanging_kernels_fail_and_the_next_candidate_measures(measurer):
    segv, hang = MeasureInput(from_source(SEGV), TARGET), MeasureInput(from_source(HANG), TARGET)
    gemms = [MeasureInput.from_schedule(_gemm(4)), MeasureInput.from_schedule(_gemm(8))]
    inputs = [segv, gemms[0], hang, gemms[1]]
    seen = []
    results = measurer.measure(inputs, on_result=lambda i, r: seen.append(i))
    assert results[0].error == "run: worker crashed (signal 11)" and results[0].run_secs is None
    assert results[2].error == "run: timed out after 2 s" and results[2].run_secs is None
    assert results[2].run_wall_secs >= 2.0
    assert results[1].ok and results[3].ok
    assert seen == [0, 1, 2, 3]


def test_a_job_error_names_the_cause(measurer):
    text = GEMM.script().replace("(64, 64)", "(n, 64)", 1)
    text = text.replace("A: T.Buffer", "n: T.int32, A: T.Buffer")
    symbolic = MeasureInput(from_source(text), TARGET)
    [result] = measurer.measure([symbolic])
    assert result.error.startswith("run: ValueError: make_args: parameter n is a scalar")


def test_stop_flag_and_progress(measurer):
    stop = threading.Event()
    inputs = [MeasureInput.from_schedule(_gemm(f)) for f in (2, 4, 8)]
    seen = []

    def on_result(index: int, result: MeasureResult) -> None:
        seen.append((index, result.ok))
        stop.set()

    assert len(measurer.measure(inputs, on_result=on_result, stop=stop)) == 1
    assert seen == [(0, True)]
    assert measurer.measure(inputs, stop=stop) == []


def test_remeasure_in_fresh_process(measurer):
    inp = MeasureInput.from_schedule(_gemm(4))
    measurer.measure([inp])
    before = list(measurer.runner._pool._all)
    result = measurer.remeasure_in_fresh_process(inp, repeat=5)
    assert result.ok and len(result.run_secs) == 5
    assert not set(map(id, before)) & set(map(id, measurer.runner._pool._all))


def test_runner_with_two_workers_keeps_order():
    inputs = [MeasureInput(from_source(SEGV), TARGET), MeasureInput.from_schedule(_gemm(4))]
    builds = [BuildResult(None, None, 0.0)] * 2
    runner = LocalRunner(max_workers=2, repeat=1)
    try:
        results = runner.run(inputs, builds)
    finally:
        runner.close()
    assert results[0].error == "run: worker crashed (signal 11)" and results[1].ok


def test_result_to_record():
    task = TuneTask("gemm", GEMM, TARGET)
    record = MeasureResult((1e-6, 2e-6)).to_record(task, _gemm(4).trace)
    assert isinstance(record, TuningRecord) and record.ok and record.target == str(TARGET)
    assert MeasureResult(None, "run: x").to_record(task, _gemm(4).trace).error == "run: x"


def test_bad_arguments():
    with pytest.raises(TypeError, match="MeasureInput: func must be a PrimFunc, got Schedule"):
        MeasureInput(_gemm(4), TARGET)
    # a schedule made without a target is for the host CPU, and measured there
    assert MeasureInput.from_schedule(Schedule(GEMM)).target == Target("cpu")
    with pytest.raises(ValueError, match="LocalRunner: timeout_s must be a positive number"):
        LocalRunner(timeout_s=0)
    with pytest.raises(ValueError, match="LocalBuilder: max_workers must be >= 1, got -1"):
        LocalBuilder(max_workers=-1)
    with pytest.raises(ValueError, match="run: 1 inputs but 0 build results"):
        LocalRunner().run([MeasureInput(GEMM, TARGET)], [])


ORPHAN_SCRIPT = f"""
import os, sys, threading, time
from schedlab.script import from_source
from schedlab.tune.measure import BuildResult, LocalRunner, MeasureInput
runner = LocalRunner(timeout_s=60)
inp = MeasureInput(from_source({HANG!r}), "cpu")
built = [BuildResult(None, None, 0.0)]
threading.Thread(target=runner.run, args=([inp], built), daemon=True).start()
while not runner._pool._all:
    time.sleep(0.05)
print(runner._pool._all[0]._proc.pid, flush=True)
time.sleep(1.5)  # the worker is inside the kernel now
os._exit(0)  # dies without closing anything
"""


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status  # a zombie has exited, whoever reaps it


def test_a_worker_stuck_in_a_kernel_exits_with_its_parent():
    out = subprocess.run([sys.executable, "-c", ORPHAN_SCRIPT], capture_output=True, text=True,
                         timeout=60, check=True).stdout  # fmt: skip
    pid = int(out.split()[0])
    deadline = time.monotonic() + 5
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid)


def test_a_closed_measurer_starts_new_workers_when_used_again():
    measurer = Measurer(LocalBuilder(max_workers=1), LocalRunner())
    inp = MeasureInput.from_schedule(_gemm(4))
    assert measurer.measure([inp])[0].ok
    measurer.close()
    try:
        assert measurer.measure([inp])[0].ok
    finally:
        measurer.close()


def test_auto_flush_is_for_cpu_kernels_whose_constant_weights_outgrow_the_l2_caches():
    from schedlab.tune.measure import constant_weight_bytes, flush_policy, flushes_caches

    func = workloads.get("gemm", M=8, N=256, K=512)[0]  # B: 512 KiB
    weighted = func.with_attr("layout_free_buffers", (1,))
    assert constant_weight_bytes(func) == 0 and constant_weight_bytes(weighted) == 512 * 1024
    small_l2 = Target("cpu", l2_bytes=128 * 1024, num_cores=2)  # 256 KiB in all
    large_l2 = Target("cpu", l2_bytes=512 * 1024, num_cores=2)
    assert flushes_caches("auto", weighted, small_l2)
    assert not flushes_caches("auto", weighted, large_l2)
    assert not flushes_caches("auto", func, small_l2)  # no constant weights: warm
    assert not flushes_caches("auto", weighted, Target("cuda"))
    assert flushes_caches(True, func, large_l2) and not flushes_caches(False, weighted, small_l2)
    assert flush_policy("auto") == "auto" and flush_policy(True) is True
    with pytest.raises(ValueError, match="flush_cache: expected True, False or 'auto', got 'cold'"):
        flush_policy("cold")
    with pytest.raises(ValueError, match="flush_cache"):
        LocalRunner(flush_cache="sometimes")

"""Measurement in the worker process: success, a crashing kernel, a hanging job; the model keeps
working after each. One worker is shared by the module (its start-up is the slow part)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schedlab import te
from schedlab.ui import ExplorerModel, MeasureWorker


@pytest.fixture(scope="module")
def worker():
    w = MeasureWorker()
    yield w
    w.close()


def _segfaulting_func():
    """Reads ~0.4-1.3 GB past the end of a 4-element buffer: the compiled C segfaults."""
    A = te.placeholder((4,), "float32", name="A")
    B = te.compute((4,), lambda i: A[i * 300000000 + 100000000], name="B")
    return te.create_prim_func([A, B])


def test_measure_reports_latency_and_fills_history(worker):
    m = ExplorerModel(worker=worker, measure_timeout=120)
    m.load_workload("gemm", M=17, N=9, K=11)
    seen = []
    m.subscribe(seen.append, kinds=["measurement"])
    result = m.measure()
    assert result.ok, result.reason
    assert result.seconds > 0 and result.message.endswith("ms")
    assert m.latency_history()[0].measured == result.seconds
    assert seen and seen[0].data["result"] is result


def test_crashing_kernel_gives_failed_and_model_keeps_working(worker):
    m = ExplorerModel(worker=worker, measure_timeout=120)
    m.load_func(_segfaulting_func(), name="oob")
    result = m.measure()
    assert not result.ok
    assert result.message.startswith("failed: ") and "SIGSEGV" in result.reason
    assert m.latency_history()[0].measure_failure == result.reason
    m.load_workload("gemm", M=8, N=8, K=8)  # the worker restarts for the next job
    assert m.measure(timeout=120).ok


def test_hanging_job_times_out(worker):
    start = time.monotonic()
    outcome = worker.run(time.sleep, 30, timeout=0.5)
    assert not outcome.ok and "timed out after 0.5 s" in outcome.reason
    assert outcome.message.startswith("failed: ")
    assert time.monotonic() - start < 15
    assert worker.run(sum, [1, 2, 3], timeout=60).value == 6


def test_job_exception_is_a_failed_outcome(worker):
    outcome = worker.run(int, "not a number", timeout=60)
    assert not outcome.ok and "ValueError" in outcome.reason
    assert worker.alive  # an exception does not cost a restart


def test_timeout_must_be_positive(worker):
    with pytest.raises(ValueError, match="timeout must be > 0"):
        worker.run(sum, [], timeout=0)


def test_measure_in_background(worker):
    m = ExplorerModel(worker=worker, measure_timeout=120)
    m.load_workload("gemm", M=9, N=7, K=5)
    future = m.measure_in_background()
    assert future.result(timeout=150).ok
    with pytest.raises(IndexError):
        m.measure_in_background(step=4)
    m.close()


# A notebook kernel's interrupt and shutdown send SIGINT to its whole process group, worker
# included: first while the worker is still starting (importing schedlab), then while it idles.
INTERRUPTED_SESSION = """
import threading, time
from schedlab.ui.worker import MeasureWorker

worker = MeasureWorker()
results = []
job = threading.Thread(target=lambda: results.append(worker.run(sum, [1, 2], timeout=120)))
job.start()
print("starting", flush=True)
for phase in ("starting", "idle"):
    try:
        time.sleep(120)
    except KeyboardInterrupt:
        pass
    if phase == "starting":
        job.join()
        print("idle", results[0].value, flush=True)
worker.close()
print("closed", flush=True)
"""


def test_interrupt_and_shutdown_print_no_traceback():
    proc = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_SESSION], cwd=str(Path(__file__).parents[2]),
        start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout.readline() == "starting\n"
        time.sleep(0.3)  # the worker is importing schedlab now
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.stdout.readline() == "idle 3\n"  # the job still ran
        time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out == "closed\n"
    assert err == ""  # no "KeyboardInterrupt" traceback from the worker


def test_an_interrupted_wait_does_not_hand_the_late_reply_to_the_next_job(worker):
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        assert worker.run(sum, [1], timeout=60).ok  # started
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            worker.run(time.sleep, 1.5, timeout=60)  # Ctrl-C while waiting for it
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    time.sleep(1.5)  # the sleep's reply (None) would be waiting now, had the worker lived
    assert worker.run(sum, [1, 2, 3], timeout=120).value == 6

"""SessionQueue: a session's jobs run in order, one at a time, off the caller's thread; a long
job in one session does not hold up another's; refreshes coalesce; a closed queue drops its
work; a failing job is logged and the queue goes on. AnswerTimes logs the server's part."""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from schedlab.ui.offload import AnswerTimes, SessionQueue


@pytest.fixture
def pool():
    with ThreadPoolExecutor(2) as executor:
        yield executor


class Sink:
    """Collects delivered results; `wait(n)` until n have come."""

    def __init__(self):
        self.items: list = []
        self.threads: set[str] = set()
        self._cond = threading.Condition()

    def __call__(self, item) -> None:
        with self._cond:
            self.items.append(item)
            self.threads.add(threading.current_thread().name)
            self._cond.notify_all()

    def wait(self, n: int, timeout: float = 10.0) -> list:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.items) >= n, timeout), self.items
            return list(self.items)


def test_jobs_run_in_order_one_at_a_time_off_the_caller(pool):
    sink, running, overlap = Sink(), [], []

    def job(n: int):
        def run():
            running.append(n)
            overlap.append(len(running))
            time.sleep(0.002 * (n % 3))
            running.remove(n)
            return n

        return run

    queue = SessionQueue(sink, pool)
    for n in range(20):
        queue.submit(job(n))
    assert sink.wait(20) == list(range(20))
    assert max(overlap) == 1
    assert threading.current_thread().name not in sink.threads


def test_a_long_job_does_not_hold_up_another_session(pool):
    release = threading.Event()
    slow, fast = Sink(), Sink()
    SessionQueue(slow, pool).submit(lambda: release.wait(10) and "slow")
    SessionQueue(fast, pool).submit(lambda: "fast")
    assert fast.wait(1) == ["fast"]  # while the other session's job still runs
    assert slow.items == []
    release.set()
    assert slow.wait(1) == ["slow"]


def test_a_busy_session_goes_back_in_line_after_each_job():
    order: list[str] = []
    with ThreadPoolExecutor(1) as one:
        gate = threading.Event()
        busy, other = SessionQueue(order.append, one), SessionQueue(order.append, one)
        busy.submit(lambda: gate.wait(10) and "busy 1")
        busy.submit(lambda: "busy 2")
        other.submit(lambda: "other")
        gate.set()
        deadline = time.monotonic() + 10
        while len(order) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert order == ["busy 1", "other", "busy 2"]


def test_refreshes_coalesce_and_a_closed_queue_drops_its_work(pool):
    sink, gate, calls = Sink(), threading.Event(), []

    def refresh():
        calls.append(1)
        return "state"

    queue = SessionQueue(sink, pool)
    queue.submit(lambda: gate.wait(10) and "first")
    for _ in range(5):
        queue.submit(refresh, coalesce=True)
    assert queue.pending == 1
    gate.set()
    assert sink.wait(2) == ["first", "state"] and calls == [1]

    gate.clear()
    queue.submit(lambda: gate.wait(10) and "running")
    queue.submit(lambda: "dropped")
    queue.close()
    queue.submit(lambda: "after close")
    gate.set()
    time.sleep(0.2)
    assert sink.items == ["first", "state"]  # the running job's result is not delivered


def test_a_failing_job_is_logged_and_the_queue_goes_on(pool, caplog):
    sink = Sink()
    queue = SessionQueue(sink, pool)
    with caplog.at_level(logging.ERROR, logger="schedlab.ui.offload"):
        queue.submit(lambda: 1 / 0)
        queue.submit(lambda: "next")
        assert sink.wait(1) == ["next"]
    assert "a session's job failed" in caplog.text and "ZeroDivisionError" in caplog.text


def test_answer_times_log_the_servers_part_of_each_action(tmp_path):
    path = tmp_path / "answers.jsonl"
    times = AnswerTimes(str(path))
    times.received({"type": "select", "seq": 1})
    times.received({"type": "apply", "seq": 2})
    times.answered(2)  # one state answers both
    times.answered(2)
    times.received("not an action")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["type"] for line in lines] == ["apply"] and lines[0]["ms"] >= 0

    off = AnswerTimes(None)
    off.received({"type": "apply", "seq": 1})
    off.answered(1)  # writes nothing anywhere

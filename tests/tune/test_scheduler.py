"""Task schedulers: round robin order, TVM's gradient formula, the first pass, dead tasks."""

import math

import pytest

from schedlab.tune.scheduler import (
    GradientBased,
    RoundRobin,
    TaskProgress,
    make_task_scheduler,
)


def _task(weight=1, max_trials=64, trials=0, history=(), done=False):
    progress = TaskProgress(weight, max_trials, trials=trials, done=done)
    for best in history:
        progress.best = best
        progress.end_round()
    return progress


def test_round_robin_cycles_over_alive_tasks():
    tasks = [_task(), _task(done=True), _task(), _task(trials=64)]
    scheduler = RoundRobin()
    assert [scheduler.next_task(tasks) for _ in range(4)] == [0, 2, 0, 2]
    for task in tasks:
        task.done = True
    assert scheduler.next_task(tasks) is None


def test_gradient_visits_every_task_once_first():
    tasks = [_task(history=[1.0]), _task(), _task()]
    scheduler = GradientBased()
    assert scheduler.next_task(tasks) == 1
    tasks[1].end_round()
    assert scheduler.next_task(tasks) == 2


def test_gradient_prefers_heavy_slow_improving_tasks():
    # g2 = latest / n; the weighted slow task wins
    slow = _task(weight=1, history=[4.0, 4.0])
    heavy = _task(weight=10, history=[1.0, 1.0])
    assert GradientBased().next_task([slow, heavy]) == 1
    # with alpha = 1 only the recent gain counts: the improving task wins
    flat = _task(history=[2.0, 2.0, 2.0, 2.0])
    improving = _task(history=[3.0, 2.5, 2.0, 1.0])
    assert GradientBased(alpha=1.0, window_size=3).next_task([flat, improving]) == 1


def test_gradient_formula_matches_tvm():
    task = _task(weight=2, history=[8.0, 6.0, 5.0, 4.0])
    alpha, window = 0.2, 3
    g1 = (8.0 - 4.0) / window
    g2 = 4.0 / 4
    assert GradientBased(alpha, window)._score(task) == pytest.approx(
        (alpha * g1 + (1 - alpha) * g2) * 2
    )


def test_task_without_valid_latency_comes_last():
    failed = _task(history=[math.inf])
    working = _task(history=[1e-6])
    assert GradientBased().next_task([failed, working]) == 1


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="alpha"):
        GradientBased(alpha=2.0)
    with pytest.raises(ValueError, match="window_size"):
        GradientBased(window_size=0)
    with pytest.raises(ValueError, match="task_scheduler"):
        make_task_scheduler("fastest")
    assert isinstance(make_task_scheduler("round-robin"), RoundRobin)

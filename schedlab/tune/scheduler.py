"""Task schedulers: which task gets the next batch of trials (TVM's TaskScheduler).

`RoundRobin` cycles through the tasks still alive. `GradientBased` (the default) first gives
every task one batch, then the batch goes to the task whose weighted expected gain is largest,
with TVM's formula over each task's history of best latencies h (n entries):

    g1 = (h[n-1-w] - h[n-1]) / w   when n >= w + 1, else 0   (recent improvement per round)
    g2 = h[n-1] / n                                          (what is left to gain)
    score = (alpha * g1 + (1 - alpha) * g2) * weight

so a task that is slow, called often, or still improving gets the trials.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass
class TaskProgress:
    """What the scheduler knows of one task."""

    weight: int
    max_trials: int
    trials: int = 0
    best_history: list[float] = field(default_factory=list)  # best latency after each round
    best: float = math.inf  # best latency so far (updated per measured candidate)
    done: bool = False

    def end_round(self) -> None:
        self.best_history.append(self.best)

    @property
    def alive(self) -> bool:
        return not self.done and self.trials < self.max_trials


class TaskScheduler:
    """`next_task(progress)` -> the index of the task to tune next, or None when none is alive."""

    def next_task(self, progress: list[TaskProgress]) -> int | None:
        raise NotImplementedError


class RoundRobin(TaskScheduler):
    def __init__(self) -> None:
        self._last = -1

    def next_task(self, progress: list[TaskProgress]) -> int | None:
        count = len(progress)
        for step in range(1, count + 1):
            index = (self._last + step) % count
            if progress[index].alive:
                self._last = index
                return index
        return None


class GradientBased(TaskScheduler):
    def __init__(self, alpha: float = 0.2, window_size: int = 3, seed: int = 0):
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"GradientBased: alpha must be in [0, 1], got {alpha}")
        if window_size < 1:
            raise ValueError(f"GradientBased: window_size must be >= 1, got {window_size}")
        self.alpha, self.window_size = alpha, window_size
        self.rng = random.Random(seed)

    def next_task(self, progress: list[TaskProgress]) -> int | None:
        alive = [i for i, p in enumerate(progress) if p.alive]
        if not alive:
            return None
        unvisited = [i for i in alive if not progress[i].best_history]
        if unvisited:  # the first round-robin pass
            return unvisited[0]
        scores = {i: self._score(progress[i]) for i in alive}
        top = max(scores.values())
        return self.rng.choice([i for i, s in scores.items() if s == top])

    def _score(self, task: TaskProgress) -> float:
        history = [h for h in task.best_history if math.isfinite(h)]
        if not history:
            return -1e9
        n, w = len(history), self.window_size
        g1 = (history[n - 1 - w] - history[n - 1]) / w if n >= w + 1 else 0.0
        g2 = history[n - 1] / n
        return (self.alpha * g1 + (1 - self.alpha) * g2) * task.weight


def make_task_scheduler(name_or_scheduler, seed: int = 0) -> TaskScheduler:
    """A scheduler from its name ("gradient", "round-robin") or the object itself."""
    if isinstance(name_or_scheduler, TaskScheduler):
        return name_or_scheduler
    if name_or_scheduler == "gradient":
        return GradientBased(seed=seed)
    if name_or_scheduler == "round-robin":
        return RoundRobin()
    raise ValueError(
        f"task_scheduler must be 'gradient', 'round-robin' or a TaskScheduler, got "
        f"{name_or_scheduler!r}"
    )

"""What a tuning run tells people while it runs and when it ends.

Every measured candidate becomes a `TrialEvent` (task, op and shapes, trial counts, latency,
best so far, ETA); `on_event` callbacks receive them (the explorer's Tune panel draws its
convergence chart from them), `TqdmReporter` shows a bar in the terminal, and `summary_table`
is TVM's task-scheduler table: one row per task, FLOPs, weight, GFLOP/s, latency, trials.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
from dataclasses import dataclass

from schedlab.ir.expr import Add, Div, Mul, Sub
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import Block, BlockRealize, BufferStore, For

from .task import TuneTask


@dataclass(frozen=True)
class TrialEvent:
    """One measured candidate. Latencies in seconds; None for a failed candidate (`error`
    says why). `best_s` is the task's best so far, `eta_s` the estimated time left."""

    task: str
    shapes: str
    task_trial: int
    task_trials: int
    trial: int
    trials: int
    latency_s: float | None
    best_s: float | None
    error: str | None
    elapsed_s: float
    eta_s: float | None
    flops: int = 0

    @property
    def best_gflops(self) -> float | None:
        if not self.best_s or not self.flops:
            return None
        return self.flops / self.best_s / 1e9


@dataclass(frozen=True)
class TaskSummary:
    """One task at the end: its best latency as re-measured in a fresh process (None when
    nothing ran), and the best the tuning runs saw."""

    task: TuneTask
    trials: int
    best_s: float | None
    remeasured_s: float | None
    flops: int

    @property
    def latency_s(self) -> float | None:
        return self.remeasured_s if self.remeasured_s is not None else self.best_s


def describe_shapes(func) -> str:
    """`A[1024,1024], B[1024,1024] -> C[1024,1024]`-style text of a function's buffers."""
    parts = []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None:
            parts.append(param.name)
            continue
        dims = ",".join(str(getattr(d, "value", d)) for d in buffer.shape)
        parts.append(f"{buffer.name}[{dims}]")
    outputs = int(func.attrs.get("schedlab.num_outputs", 1))
    head, tail = parts[: len(parts) - outputs], parts[len(parts) - outputs :]
    return f"{', '.join(head)} -> {', '.join(tail)}"


def flop_count(func) -> int:
    """Floating-point add/sub/mul/div operations of one call (a multiply-add counts 2), from
    each block's stored value times the block's iteration count; 0 when a loop is symbolic."""
    total = 0

    def visit(node) -> None:
        nonlocal total
        if isinstance(node, BlockRealize):
            total += _block_flops(node.block)

    post_order_visit(func.body, visit)
    return total


def _block_flops(block: Block) -> int:
    count = 0
    stores: list[BufferStore] = []
    post_order_visit(block.body, lambda n: stores.append(n) if isinstance(n, BufferStore) else 0)
    if _loops_in(block.body) or not stores:
        return 0  # an opaque block with loops inside: its blocks are counted on their own

    def visit(node) -> None:
        nonlocal count
        if isinstance(node, (Add, Sub, Mul, Div)) and node.dtype.is_float:
            count += 1

    for store in stores:
        post_order_visit(store.value, visit)
    iterations = 1
    for iter_var in block.iter_vars:
        extent = getattr(iter_var.dom.extent, "value", None)
        if extent is None:
            return 0
        iterations *= int(extent)
    return count * iterations


def _loops_in(stmt) -> list:
    found = []
    post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, For) else 0)
    return found


def summary_table(rows: list[TaskSummary], target, timing: dict | None = None) -> str:
    """TVM's table: ID, name, FLOP, weight, GFLOP/s, latency (us), weighted latency, trials;
    `timing` ({"search": s, "measure": s}) adds where the time went."""
    header = (f"{'ID':>3}  {'Name':<28} {'FLOP':>12} {'Weight':>6} {'GFLOP/s':>9} "
              f"{'Latency(us)':>12} {'Weighted(us)':>13} {'Trials':>6}")  # fmt: skip
    described = target.describe() if hasattr(target, "describe") else str(target)
    lines = [f"tuned for {described}", header, "-" * len(header)]
    total = 0.0
    for index, row in enumerate(rows):
        latency = row.latency_s
        speed = row.flops / latency / 1e9 if latency and row.flops else math.nan
        micro = latency * 1e6 if latency else math.nan
        weighted = micro * row.task.weight
        total += 0.0 if math.isnan(weighted) else weighted
        lines.append(f"{index:>3}  {row.task.name[:28]:<28} {row.flops:>12} "
                     f"{row.task.weight:>6} {speed:>9.1f} {micro:>12.1f} {weighted:>13.1f} "
                     f"{row.trials:>6}")  # fmt: skip
    how = ("re-measured in a fresh process" if any(r.remeasured_s for r in rows)
           else "the best measured while tuning")  # fmt: skip
    lines.append(f"total weighted latency: {total:.1f} us (latencies {how})")
    if timing:
        lines.append("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in timing.items()))
    return "\n".join(lines)


@contextlib.contextmanager
def stop_on_sigint():
    """An Event that Ctrl-C (SIGINT) sets while the block runs, instead of raising
    KeyboardInterrupt wherever the main thread happens to be: a tuning run then ends after
    the candidate being measured, with everything measured stored (`schedlab tune`,
    `schedlab bench-tune`). Outside the main thread, where no handler can be set, the Event
    is only set by the caller."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


class TqdmReporter:
    """A tqdm progress bar over all trials: task, best GFLOP/s, ETA (on stderr)."""

    def __init__(self, total: int, file=None):
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="trial", file=file or sys.stderr, dynamic_ncols=True)

    def __call__(self, event: TrialEvent) -> None:
        best = event.best_gflops
        status = "failed" if event.error else f"{event.latency_s * 1e3:.3f} ms"
        self.bar.set_postfix_str(
            f"{event.task} {status}, best {best:.1f} GFLOP/s" if best else f"{event.task} {status}"
        )
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()

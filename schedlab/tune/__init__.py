"""schedlab.tune: the tuner, in the shape of TVM's MetaSchedule.

    db = schedlab.tune.tune_tir(func, target="cpu", max_trials=64, work_dir="tune_gemm")
    best = db.query_best(func, "cpu")            # a TuningRecord: trace + measurements

Pieces (one module each, one owner each):
  task.py          TuneTask: a PrimFunc, its target, its weight, its workload key
  space/           the design space: schedule rules applied in post order, postprocessors,
                   mutators (every candidate is a Trace)
  search.py        evolutionary search and replay-trace
  features.py      per-store features of a scheduled loop nest
  cost_model.py    the learned cost model (xgboost) with the analytical model as its prior
  measure.py       builder (parallel compiles) and runner (isolated worker processes)
  dask_measure.py  the same on a dask.distributed cluster
  database.py      JSON-lines records, resumable, query_best
  scheduler.py     task scheduler across tasks (gradient, round robin)
  tuner.py         tune_tir / tune_relax / tune_tasks: the loop
  progress.py      trial events, the progress bar, the summary table
  relax_integration.py  tasks of a relax module, ApplyDatabase (used by schedlab.compile)
  command.py, bench.py  `schedlab tune` and `schedlab bench-tune`
"""

from .database import Database, TuningRecord
from .task import TuneTask, workload_key
from .tuner import TuneResult, tune_relax, tune_tasks, tune_tir

__all__ = ["Database", "TuningRecord", "TuneTask", "TuneResult", "tune_relax", "tune_tasks",
           "tune_tir", "workload_key"]  # fmt: skip

"""The tuning loop end to end on small kernels: records, events, the best schedule is correct,
resume measures nothing twice, stop ends a run cleanly, a kill -9 loses only the in-flight
record, the CLI tunes a workload."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import schedlab
from schedlab import workloads
from schedlab.tune import TuneTask
from schedlab.tune.database import Database
from schedlab.tune.tuner import check_flush_cache, tune_tasks, tune_tir

SIZES = {"M": 64, "N": 48, "K": 40}
FAST = {"num_trials_per_iter": 4, "progress": False, "log": None, "cost_model": "analytical"}


@pytest.fixture(scope="module")
def gemm():
    return workloads.get("gemm", **SIZES)


def _check_best(db, func, reference):
    sch = db.query_schedule(func, "cpu")
    assert sch is not None
    kernel = schedlab.build(sch.mod, target="cpu")
    args = workloads.make_args(func, seed=3)
    kernel(*args)
    np.testing.assert_allclose(args[-1], reference(*args[:-1]), rtol=1e-4, atol=1e-4)


def test_tune_tir_records_every_trial_and_the_best_is_correct(gemm, tmp_path):
    func, reference = gemm
    events = []
    db = tune_tir(func, "cpu", max_trials=8, work_dir=tmp_path, on_event=events.append, **FAST)
    records = db.records()
    assert len(records) == 8 and len(events) == 8
    assert len({r.candidate for r in records}) == 8  # never the same schedule twice
    assert [e.trial for e in events] == list(range(1, 9))
    assert all(e.task == "gemm" and "A[64,40]" in e.shapes for e in events)
    best = min(r.median_secs for r in records if r.ok)
    assert events[-1].best_s == pytest.approx(best)
    assert events[-1].eta_s == pytest.approx(0.0, abs=1e-9)
    _check_best(db, func, reference)


def test_resume_counts_stored_trials_and_measures_nothing_twice(gemm, tmp_path):
    func, _ = gemm
    task = TuneTask("gemm", func, "cpu")
    first = tune_tasks([task], tmp_path, 8, remeasure=False, **FAST)
    assert len(first.database) == 8
    events = []
    again = tune_tasks([task], tmp_path, 8, on_event=events.append, remeasure=False, **FAST)
    assert events == [] and len(again.database) == 8
    more = tune_tasks([task], tmp_path, 12, on_event=events.append, remeasure=False, **FAST)
    assert len(events) == 4 and len(more.database) == 12
    assert len({r.candidate for r in more.database.records()}) == 12


def test_stop_ends_the_run_after_the_current_candidate(gemm, tmp_path):
    func, _ = gemm
    stop = threading.Event()

    def on_event(event):
        if event.trial == 3:
            stop.set()

    result = tune_tasks([TuneTask("gemm", func, "cpu")], tmp_path, 16, on_event=on_event,
                        stop=stop, **FAST)  # fmt: skip
    assert result.stopped
    assert len(Database(tmp_path)) == 3


def test_summary_row_is_remeasured_in_a_fresh_process(gemm, tmp_path):
    func, _ = gemm
    lines = []
    result = tune_tasks([TuneTask("gemm", func, "cpu")], tmp_path, 4,
                        **{**FAST, "log": lines.append})  # fmt: skip
    (row,) = result.summaries
    assert row.trials == 4 and row.best_s > 0 and row.remeasured_s > 0
    assert row.flops == 2 * 64 * 48 * 40
    assert "gemm" in lines[0] and "GFLOP/s" in lines[0]


def test_two_tasks_share_the_budget(tmp_path):
    tasks = [
        TuneTask("gemm", workloads.get("gemm", **SIZES)[0], "cpu"),
        TuneTask("softmax", workloads.get("softmax", M=16, N=24)[0], "cpu", weight=2),
    ]
    result = tune_tasks(tasks, tmp_path, 12, remeasure=False, **FAST)
    trials = {row.task.name: row.trials for row in result.summaries}
    assert sum(trials.values()) == 12 and min(trials.values()) >= 4


def test_bad_budget_is_named(gemm, tmp_path):
    with pytest.raises(ValueError, match="max_trials_global"):
        tune_tasks([TuneTask("gemm", gemm[0], "cpu")], tmp_path, 0, **FAST)
    with pytest.raises(ValueError, match="no tasks"):
        tune_tasks([], tmp_path, 4, **FAST)


def test_tuning_can_time_with_flushed_caches(gemm, tmp_path):
    task = TuneTask("gemm", gemm[0], "cpu")
    assert check_flush_cache([task], True) is True and check_flush_cache([task], False) is False
    gpu = TuneTask("gemm", gemm[0], "cuda")
    assert check_flush_cache([gpu], False) is False
    assert check_flush_cache([gpu], "auto") == "auto"  # auto: only where the host can flush
    with pytest.raises(ValueError, match="flush_cache: expected True, False or 'auto'"):
        check_flush_cache([task], "cold")
    with pytest.raises(ValueError, match="flush_cache is for CPU targets; the tasks' target is "
                       "cuda"):  # fmt: skip
        check_flush_cache([gpu], True)
    result = tune_tasks([task], tmp_path, 4, flush_cache=True, **FAST)
    records = result.database.records()
    assert len(records) == 4 and all(r.ok and len(r.run_secs) == 3 for r in records)
    assert result.summaries[0].remeasured_s > 0


def _cli(*args, **kw):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "schedlab.cli", *args]
    out = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    return subprocess.Popen(command, env=env, **out, **kw)


def test_cli_tunes_a_workload_and_kill_9_loses_only_the_inflight_record(tmp_path):
    work = tmp_path / "run"
    args = ["tune", "gemm", "--size", "M=64,N=48,K=40", "--trials", "24", "--per-iter", "4",
            "--cost-model", "analytical", "--work-dir", str(work)]  # fmt: skip
    proc = _cli(*args)
    records = work / "records.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if records.exists() and len(records.read_text().splitlines()) >= 5:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stored = len(Database(work))
    assert stored >= 5
    finished = _cli(*args)
    out, _ = finished.communicate(timeout=300)
    assert finished.returncode == 0, out
    db = Database(work)
    assert len(db) == 24
    keys = [r.candidate for r in db.records()]
    assert len(set(keys)) == 24  # what was stored before the kill was not measured again
    assert "gemm" in out and "GFLOP/s" in out
    assert "(warm caches)" in out  # the default
    json.loads((work / "records.jsonl").read_text().splitlines()[-1])


def test_a_dask_cluster_run_gives_records_like_a_local_run(gemm, tmp_path):
    distributed = pytest.importorskip("distributed")
    from schedlab.tune.dask_measure import DaskMeasurer

    task = TuneTask("gemm", gemm[0], "cpu")
    local = tune_tasks([task], tmp_path / "local", 4, remeasure=False, **FAST).database
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:  # fmt: skip
        with DaskMeasurer(cluster.scheduler_address) as measurer:
            result = tune_tasks([task], tmp_path / "dask", 4, measurer=measurer, **FAST)
    remote = result.database.records()
    assert len(remote) == 4 and all(r.ok for r in remote)
    for mine, theirs in zip(remote, local.records()):
        assert mine.to_json().keys() == theirs.to_json().keys()
        assert (mine.workload, mine.target, mine.task_name) == (
            theirs.workload, theirs.target, theirs.task_name)  # fmt: skip
        assert len(mine.run_secs) == len(theirs.run_secs)
    assert result.summaries[0].remeasured_s > 0  # the winner re-measured on the cluster too


def _mlp_onnx(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((24, 16)).astype("float32"), "w"),
               numpy_helper.from_array(rng.standard_normal(16).astype("float32"), "b")]  # fmt: skip
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["z"]),
        helper.make_node("Relu", ["z"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [8, 24])], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, [8, 16])], weights)  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_cli_tunes_a_model_and_run_uses_the_records(tmp_path):
    model = _mlp_onnx(tmp_path / "mlp.onnx")
    work = tmp_path / "tuned"
    tuned = _cli("tune", str(model), "--trials", "4", "--per-iter", "4", "--cost-model",
                 "analytical", "--work-dir", str(work), "--flush-cache")  # fmt: skip
    out, _ = tuned.communicate(timeout=300)
    assert tuned.returncode == 0, out
    assert "tuning 1 task(s) for cpu: " in out and "fused_matmul_add_nn_relu" in out
    assert "(caches flushed before each call)" in out
    assert len(Database(work)) == 4
    assert "in-model selection: 1 task(s) with several candidates" in out  # after the tuning
    run = _cli("run", str(model), "--database", str(work), "--repeat", "2")
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 0, out
    assert "max abs difference vs onnxruntime" in out
    diff = float(out.split("max abs difference vs onnxruntime:")[1].split()[0])
    assert diff < 1e-3


def test_the_table_says_where_its_latencies_come_from(gemm, tmp_path):
    lines = []
    task = TuneTask("gemm", gemm[0], "cpu")
    tune_tasks([task], tmp_path, 4, remeasure=False, **{**FAST, "log": lines.append})
    assert "latencies the best measured while tuning" in lines[-1]
    assert "time: search" in lines[-1]


def test_the_default_schedule_is_the_first_trial_and_never_measured_again(tmp_path):
    """The dlight schedule leads the first batch (tuning is never worse than not tuning); a
    resumed run does not propose it again."""
    from schedlab.tune.search import Candidate
    from schedlab.tune.space import PostOrderApply
    from schedlab.tune.tuner import default_candidate

    func, reference = workloads.get("conv2d_nchw", CI=4, H=12, W=14, CO=32)
    task = TuneTask("conv", func, "cpu")
    default = default_candidate(task)
    assert default is not None
    first = tune_tasks([task], tmp_path, 4, remeasure=False, **FAST)
    records = first.database.records()
    replayed = PostOrderApply().apply_trace(func, task.target, schedlab.schedule.Trace.from_json(
        records[0].trace))  # fmt: skip
    assert Candidate.of(replayed).key == default.key and records[0].ok
    more = tune_tasks([task], tmp_path, 8, remeasure=False, **FAST)
    keys = [r.candidate for r in more.database.records()]
    assert len(keys) == 8 and len(set(keys)) == 8
    _check_best(more.database, func, reference)


def test_bench_tune_names_its_cases_models_included():
    import argparse

    from schedlab.tune.bench import run_tune_bench

    args = argparse.Namespace(
        only="light_resnet50,speed", trials=1, work_dir=None, seed=0, select_in_model=4
    )
    with pytest.raises(ValueError, match="unknown case.*speed; known: gemm, dense, softmax, "
                       "models, light_squeezenet, light_resnet50, cost-model"):  # fmt: skip
        run_tune_bench(args)


def test_cli_flush_cache_choices():
    from schedlab.cli import _parser
    from schedlab.tune.command import _FLUSH_CHOICES

    def parsed(*extra):
        args = _parser().parse_args(["tune", "gemm", *extra])
        return _FLUSH_CHOICES[args.flush_cache]

    assert parsed() is False and parsed("--flush-cache") is True
    assert parsed("--flush-cache", "auto") == "auto" and parsed("--flush-cache", "none") is False
    with pytest.raises(SystemExit):
        parsed("--flush-cache", "cold")


def test_cli_select_in_model_takes_zero_or_a_count_of_two_or_more():
    from schedlab.cli import _parser
    from schedlab.tune.command import run_tune_command

    assert _parser().parse_args(["tune", "m.onnx"]).select_in_model == 4
    args = _parser().parse_args(["tune", "m.onnx", "--select-in-model", "1"])
    with pytest.raises(ValueError, match="--select-in-model must be 0 .off. or a count >= 2, "
                       "got 1"):  # fmt: skip
        run_tune_command(args)


def test_bench_tune_stops_on_ctrl_c_keeping_what_it_measured(tmp_path, capsys):
    """Ctrl-C (SIGINT) during `schedlab bench-tune` ends the run after the candidate being
    measured: exit status 130, the results so far printed, the records kept in --work-dir."""
    import argparse
    import os
    import signal
    import threading

    from schedlab.tune.bench import run_tune_bench

    records = tmp_path / "gemm" / "records.jsonl"
    done = threading.Event()

    def interrupt_once_a_record_is_stored():
        while not done.wait(0.05):
            if records.exists() and records.read_text().strip():
                os.kill(os.getpid(), signal.SIGINT)
                return

    poller = threading.Thread(target=interrupt_once_a_record_is_stored, daemon=True)
    poller.start()
    args = argparse.Namespace(only="gemm,dense", trials=64, work_dir=str(tmp_path), seed=0,
                              select_in_model=4)  # fmt: skip
    try:
        status = run_tune_bench(args)
    finally:
        done.set()
        poller.join()
    out = capsys.readouterr().out
    assert status == 130
    assert f"stopped (Ctrl-C); the records are in {tmp_path} to resume" in out
    stored = records.read_text().splitlines()
    assert 1 <= len(stored) < 64
    assert not (tmp_path / "dense").exists()  # the next case never started

"""The Tune panel without a browser: TuneController (a run on a background thread, its status,
convergence lines, stop/resume, top-k) and the session's tune_* actions. A stand-in for
`tune_tasks` writes real records (real traces, made-up latencies) so these tests take
milliseconds; the last test runs the real tuner on a tiny gemm."""

from __future__ import annotations

import json
import threading
import time

import pytest

from schedlab.ir.functor import pre_order_visit
from schedlab.ir.stmt import Block
from schedlab.schedule import Schedule
from schedlab.tune.database import Database, TuningRecord
from schedlab.tune.progress import TaskSummary, TrialEvent
from schedlab.tune.tuner import TuneResult
from schedlab.ui import tune_panel as TP
from schedlab.ui.model import ExplorerModel
from schedlab.ui.session import ExplorerSession

SIZES = {"M": 48, "N": 40, "K": 24}
FACTORS = [(a, b) for a in (1, 2, 3, 4, 6, 8, 12, 16, 24) for b in (1, 2, 4, 5, 8, 10, 20)]


class FakeTuner:
    """`tune_tasks`' contract: resumes from work_dir, one event per record, honours `stop`.
    Trial n splits the first two loops by FACTORS[n]; its latency falls with n, noisily."""

    def __init__(self, delay: float = 0.0, fail: str | None = None):
        self.delay, self.fail = delay, fail
        self.calls: list[dict] = []
        self.measured = 0

    def __call__(self, tasks, work_dir, max_trials_global, *, num_trials_per_iter, on_event,
                 stop, progress, log, **options):  # fmt: skip
        self.calls.append({"trials": max_trials_global, "per_batch": num_trials_per_iter,
                           "progress": progress, "log": log, **options})  # fmt: skip
        if self.fail:
            raise RuntimeError(self.fail)
        db = Database(work_dir)
        for task in tasks:
            db.commit_workload(task.func, task.name)
        counts = {t.name: len(db.records(t.workload, str(t.target))) for t in tasks}
        best = {t.name: None for t in tasks}
        for trial in range(sum(counts.values()), max_trials_global):
            if stop.is_set():
                return TuneResult(db, self._summaries(tasks, counts, best), True)
            time.sleep(self.delay)
            task = tasks[trial % len(tasks)]
            latency = 1e-3 / (1 + trial) * (1.5 if trial % 3 == 1 else 1.0)
            db.commit_record(TuningRecord.new(task, _trace(task, trial), run_secs=(latency,)))
            self.measured += 1
            counts[task.name] += 1
            best[task.name] = min(latency, best[task.name] or latency)
            eta = 0.1 * (max_trials_global - trial)
            on_event(TrialEvent(task.name, "shapes", counts[task.name], max_trials_global,
                                trial + 1, max_trials_global, latency, best[task.name], None,
                                0.1 * trial, eta, 2 * 48 * 40 * 24))  # fmt: skip
        return TuneResult(db, self._summaries(tasks, counts, best), False)

    @staticmethod
    def _summaries(tasks, counts, best):
        return [TaskSummary(t, counts[t.name], best[t.name], best[t.name] and best[t.name] * 1.1,
                            0) for t in tasks]  # fmt: skip


def _trace(task, trial: int) -> dict:
    sch = Schedule(task.func, target=task.target)
    loops = sch.get_loops(sch.get_block(_first_block(task.func)))
    if task.name == "gemm" and trial < len(FACTORS):
        a, b = FACTORS[trial]
        sch.split(loops[0], [None, a])
        sch.split(loops[1], [None, b])
    else:  # a kernel of odd sizes: split its outer loop by 1, once more each trial
        outer = loops[0]
        for _ in range(trial // 2 + 1):
            outer = sch.split(outer, [None, 1])[0]
    return sch.trace.as_json()


def _first_block(func) -> str:
    names = []
    pre_order_visit(func.body, lambda n: names.append(n.name_hint) if isinstance(n, Block) else 0)
    return next(n for n in names if n != "root")


@pytest.fixture
def make_session():
    made = []

    def make(tuner=None, interval=0.05, on_update=None):
        tune = TP.TuneController(tune_fn=tuner or FakeTuner(), interval=interval)
        session = ExplorerSession(ExplorerModel(), on_update=on_update, tune=tune)
        session.model.load_workload("gemm", **SIZES)
        made.append(session)
        return session

    yield make
    for session in made:
        session.close()


def _act(session, type, **fields):
    return session.handle({"seq": session.seq + 1, "type": type, **fields})


def _wait(session, timeout=30.0) -> dict:
    assert session.tune.join(timeout), "the run did not end"
    return session.state()["tune"]


def test_count_reads_whole_numbers_and_says_what_is_wrong():
    assert TP.count(64, "trials") == 64 and TP.count(" 8 ", "trials") == 8
    for bad in (0, -3, "1.5", "abc", "", True, None, 2.0):
        with pytest.raises(TP.TuneInputError, match="trials must be a whole number"):
            TP.count(bad, "trials")


def test_the_panel_before_a_run(make_session):
    state = make_session().state()
    json.dumps(state)
    tune = state["tune"]
    assert tune["status"] == "idle" and tune["text"] == "not started"
    assert (tune["trials"], tune["per_batch"]) == (TP.DEFAULT_TRIALS, TP.DEFAULT_PER_BATCH)
    assert not tune["can_stop"] and not tune["can_resume"] and tune["run"] is None
    assert tune["scopes"] == [{"value": "all", "label": "workload gemm(M=48, N=40, K=24)"}]


@pytest.mark.parametrize(("field", "value"), [("trials", 0), ("trials", "abc"),
                                              ("per_batch", "1.5"), ("per_batch", -2)])  # fmt: skip
def test_bad_input_is_refused_in_the_panel(make_session, field, value):
    session = make_session()
    tune = _act(session, "tune_start", **{"trials": 8, "per_batch": 4, field: value})["tune"]
    assert "must be a whole number of at least 1" in tune["error"] and repr(value) in tune["error"]
    assert tune["status"] == "idle" and session.tune.job is None
    assert session.state()["message"] is None  # the panel says it, not the explorer's box


def test_a_run_reports_progress_convergence_and_top_k(make_session):
    tuner = FakeTuner()
    updates = []
    session = make_session(tuner, on_update=lambda: updates.append(1))
    tune = _act(session, "tune_start", trials="12", per_batch="4", scope="all")["tune"]
    assert tune["status"] in ("running", "done") and tune["error"] == ""
    tune = _wait(session)
    assert tuner.calls == [{"trials": 12, "per_batch": 4, "progress": False, "log": None}]
    assert tune["status"] == "done" and not tune["can_stop"] and tune["can_resume"]
    assert tune["text"].startswith("done: 12 trials · best ") and "GFLOP/s" in tune["text"]
    assert "re-measured" in tune["text"]
    assert tune["progress"]["trial"] == 12 and tune["progress"]["trials"] == 12
    (task,) = tune["tasks"]
    assert task["name"] == "gemm" and task["trials"] == 12 and task["flops"] == 2 * 48 * 40 * 24
    best = [p[1] for p in task["points"]]
    assert best == sorted(best, reverse=True) and len(best) >= 2  # improvements only
    assert task["best_s"] == best[-1] and task["gflops"] > 0
    top = tune["top"]
    assert [e["rank"] for e in top] == [1, 2, 3, 4, 5]
    assert [e["latency_s"] for e in top] == sorted(e["latency_s"] for e in top)
    assert top[0]["latency_s"] == task["best_s"] and top[0]["text"].endswith("us")
    assert tune["run"]["work_dir"] and updates  # the shell was told to push the new state


def test_stop_then_resume_measures_nothing_twice(make_session):
    tuner = FakeTuner(delay=0.02)
    session = make_session(tuner)
    _act(session, "tune_start", trials=200, per_batch=4)
    deadline = time.monotonic() + 20
    while session.state()["tune"]["progress"]["trial"] < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    tune = _act(session, "tune_stop")["tune"]
    assert tune["status"] in ("stopping", "stopped") and not tune["can_stop"]
    tune = _wait(session)
    assert tune["status"] == "stopped" and tune["can_resume"]
    done = tune["progress"]["trial"]
    assert 3 <= done < 200 and f"stopped at trial {done}/200" in tune["text"]
    assert tuner.measured == done
    tune = _act(session, "tune_resume", trials=done + 5)["tune"]
    assert tune["error"] == "" and tune["run"]["trials"] == done + 5
    tune = _wait(session)
    assert tune["status"] == "done" and tune["progress"]["trial"] == done + 5
    assert tuner.measured == done + 5  # the stored trials were counted, not measured again
    assert len(tune["tasks"][0]["points"]) >= 2
    # the budget is spent: resuming again needs a higher trial count
    tune = _act(session, "tune_resume", trials=done + 5)["tune"]
    assert f"already holds {done + 5} trials" in tune["error"] and tune["status"] == "done"


def test_open_a_top_k_schedule_as_a_branch_and_compare(make_session):
    session = make_session()
    _act(session, "tune_start", trials=10, per_batch=5)
    top = _wait(session)["top"]
    state = _act(session, "tune_open", task="gemm", candidate=top[1]["candidate"])
    assert state["tune"]["error"] == ""
    assert state["branches"] == ["main", "tuned-2"] and state["branch"] == "tuned-2"
    assert len(state["loop_choices"]) == 5  # two splits: i_0, i_1, j_0, j_1, k
    assert state["compare"]["a"] == "main" and state["compare"]["b"] == "tuned-2"
    assert "i_1" in state["compare"]["html"]
    assert "tuned-2" in state["message"]["text"] and state["message"]["level"] == "info"
    state = _act(session, "tune_open", task="gemm", candidate=top[1]["candidate"])
    assert state["branches"] == ["main", "tuned-2", "tuned-2.2"]
    state = _act(session, "tune_open", task="gemm", candidate="0" * 64)
    assert "not in the top-k list" in state["tune"]["error"]
    assert state["branch"] == "tuned-2.2"


def test_opening_after_loading_something_else_says_why_not(make_session):
    session = make_session()
    _act(session, "tune_start", trials=3, per_batch=3)
    top = _wait(session)["top"]
    session.model.load_workload("softmax")
    state = _act(session, "tune_open", task="gemm", candidate=top[0]["candidate"])
    assert "has no kernel 'gemm' open any more" in state["tune"]["error"]


def test_a_failed_run_says_why(make_session):
    session = make_session(FakeTuner(fail="build: gcc not found\nthe whole log"))
    _act(session, "tune_start", trials=4, per_batch=2)
    tune = _wait(session)
    assert tune["status"] == "failed" and tune["text"] == "failed: build: gcc not found"
    assert tune["can_resume"]


def test_one_run_at_a_time_and_closing_stops_it(make_session):
    tuner = FakeTuner(delay=0.05)
    session = make_session(tuner)
    _act(session, "tune_start", trials=500, per_batch=4)
    tune = _act(session, "tune_start", trials=8, per_batch=4)["tune"]
    assert "a run is going on" in tune["error"] and tune["running"]
    root = session.tune.job.work_dir.parent
    session.close()  # a closed tab or a stopped server
    assert session.tune.join(10) and tuner.measured < 500
    deadline = time.monotonic() + 10
    while root.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not root.exists()  # the temporary folders went with the session


def test_a_named_folder_is_used_and_kept(make_session, tmp_path):
    session = make_session()
    folder = tmp_path / "gemm-runs"
    _act(session, "tune_start", trials=4, per_batch=2, work_dir=str(folder))
    assert _wait(session)["run"]["work_dir"] == str(folder)
    session.close()
    assert len(Database(folder).records()) == 4
    (tmp_path / "afile").write_text("")
    other = make_session()
    tune = _act(other, "tune_start", trials=4, per_batch=2, work_dir=str(tmp_path / "afile"))
    assert "is not a folder" in tune["tune"]["error"]


def test_a_stored_run_draws_its_line_from_the_start(make_session, tmp_path):
    first = make_session()
    _act(first, "tune_start", trials=6, per_batch=3, work_dir=str(tmp_path / "db"))
    points = _wait(first)["tasks"][0]["points"]
    second = make_session()
    _act(second, "tune_start", trials=9, per_batch=3, work_dir=str(tmp_path / "db"))
    tune = _wait(second)
    assert tune["tasks"][0]["points"][: len(points)] == points
    assert tune["tasks"][0]["trials"] == 9


def test_updates_are_throttled_but_the_last_one_arrives():
    calls = []
    throttle = TP._Throttle(lambda: calls.append(time.monotonic()), 0.2)
    for _ in range(50):
        throttle()
    assert len(calls) == 1
    time.sleep(0.35)
    assert len(calls) == 2  # the calls inside the interval became one, later
    throttle(now=True)
    assert len(calls) == 3


def test_a_graph_model_tunes_its_kernels_and_opens_the_right_one():
    pytest.importorskip("onnx")
    from tests.relax.test_end_to_end import mlp_model

    tune = TP.TuneController(tune_fn=FakeTuner(), interval=0.05)
    session = ExplorerSession(ExplorerModel(), tune=tune)
    try:
        session.model.load_onnx(mlp_model())
        scopes = session.state()["tune"]["scopes"]
        assert [s["value"] for s in scopes] == ["all", "function"]
        tasks, what = TP.tasks_for(session.model, "all", "cpu")
        assert len(tasks) >= 2 and what.startswith(f"{len(tasks)} kernels of ONNX model")
        (only,), _ = TP.tasks_for(session.model, "function", "cpu")
        assert only.workload in TP.kernel_key(session.model.module[session.model.func_name])
        _act(session, "tune_start", trials=2 * len(tasks), per_batch=2)
        tune_state = _wait(session)
        assert {t["name"] for t in tune_state["tasks"]} == {t.name for t in tasks}
        assert all(len(t["points"]) >= 1 for t in tune_state["tasks"])
        # then each kernel chosen among its (2) records by its time in the model
        assert tune_state["status"] == "done" and " · in the model: " in tune_state["text"]
        assert tune_state["selection"].startswith(
            f"in-model selection: {len(tasks)} task(s) with several candidates")  # fmt: skip
        last = tune_state["top"][-1]  # a kernel that is not the open one
        state = _act(session, "tune_open", task=last["task"], candidate=last["candidate"])
        assert state["tune"]["error"] == "" and state["branch"] == f"tuned-{last['rank']}"
        assert TP.kernel_key(session.model.module[state["func"]])[1] in {
            t.workload for t in tasks if t.name == last["task"]}  # fmt: skip
    finally:
        session.close()


def test_stop_in_the_in_model_choice_then_resume_redoes_it(monkeypatch):
    """Stop during the choice after a model's trials: the run is stopped with nothing chosen;
    Resume (all trials stored) measures nothing and makes the choice again."""
    pytest.importorskip("onnx")
    from schedlab.tune import in_model
    from tests.relax.test_end_to_end import mlp_model

    started, calls = threading.Event(), []

    def select(graph, target, database, *, stop, **options):
        calls.append(options["top_k"])
        started.set()
        stopped = stop.wait(10) if len(calls) == 1 else False
        return in_model.SelectionResult(stopped=stopped)

    monkeypatch.setattr(in_model, "select_in_model", select)
    tuner = FakeTuner()
    tune = TP.TuneController(tune_fn=tuner, interval=0.05, select_top_k=3)
    session = ExplorerSession(ExplorerModel(), tune=tune)
    try:
        session.model.load_onnx(mlp_model())
        tasks, _ = TP.tasks_for(session.model, "all", "cpu")
        _act(session, "tune_start", trials=len(tasks), per_batch=2)
        assert started.wait(10)
        assert "choosing each kernel among its 3 fastest" in session.state()["tune"]["text"]
        _act(session, "tune_stop")
        stopped = _wait(session)
        assert stopped["status"] == "stopped" and stopped["can_resume"]
        measured = tuner.measured
        resumed = _act(session, "tune_resume")["tune"]
        assert resumed["error"] == ""
        done = _wait(session)
        assert done["status"] == "done" and calls == [3, 3] and tuner.measured == measured
    finally:
        session.close()


def test_the_real_tuner_on_a_tiny_gemm(tmp_path):
    """A few seconds of real tuning: events arrive, the best improves, a schedule opens."""
    seen = threading.Event()
    tune = TP.TuneController(
        options={"remeasure": False, "cost_model": "random", "strategy": "replay-trace"},
        interval=0.05,
    )
    session = ExplorerSession(ExplorerModel(), on_update=seen.set, tune=tune)
    try:
        session.model.load_workload("gemm", M=64, N=64, K=64)
        _act(session, "tune_start", trials=8, per_batch=4, work_dir=str(tmp_path / "run"))
        tune_state = _wait(session, timeout=300)
        assert tune_state["status"] == "done", tune_state["text"]
        assert tune_state["progress"]["trial"] == 8 and seen.is_set()
        assert tune_state["top"] and tune_state["tasks"][0]["points"]
        state = _act(session, "tune_open", task="gemm", candidate=tune_state["top"][0]["candidate"])
        assert state["tune"]["error"] == "" and state["branch"] == "tuned-1"
        assert state["code"]["error"] == ""
    finally:
        session.close()

"""The tuning database: records round trip, queries, resuming, torn lines, bad input, and the
in-model selections that query_best honours until the workload is tuned again."""

import json
import math

import pytest

from schedlab import workloads
from schedlab.schedule.schedule import Schedule
from schedlab.target import Target
from schedlab.tune.database import (
    RECORDS_FILE,
    SELECTIONS_FILE,
    WORKLOADS_FILE,
    Database,
    DatabaseError,
    TuningRecord,
    candidate_key,
)
from schedlab.tune.task import TuneTask, workload_key

GEMM = workloads.get("gemm", M=32, N=32, K=32)[0]
TARGET = Target("cpu")


def _schedule(factor: int) -> Schedule:
    sch = Schedule(GEMM, target=TARGET)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, factor])
    return sch


def _record(factor: int, secs=(2e-6, 1e-6, 3e-6), error=None, task_name="gemm") -> TuningRecord:
    task = TuneTask(task_name, GEMM, TARGET)
    return TuningRecord.new(task, _schedule(factor).trace, secs, error)


@pytest.fixture
def db(tmp_path):
    database = Database(tmp_path / "db")
    database.commit_workload(GEMM, "gemm")
    return database


def test_record_json_round_trip():
    record = _record(4)
    back = TuningRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert back == record
    assert back.run_secs == (2e-6, 1e-6, 3e-6) and back.median_secs == 2e-6 and back.ok
    assert set(back.versions) == {"schedlab", "python", "numpy", "compiler"}
    assert back.target == str(TARGET) and back.workload == workload_key(GEMM)


def test_failed_record_sorts_last():
    record = _record(4, secs=None, error="run: timed out after 10 s")
    assert not record.ok and math.isinf(record.median_secs)
    assert TuningRecord.from_json(record.to_json()).error == "run: timed out after 10 s"


def test_candidate_key_ignores_workload_and_target_and_names_the_schedule():
    trace = _schedule(4).trace
    data = trace.as_json()
    assert candidate_key(trace) == candidate_key(data)
    assert candidate_key({**data, "target": None, "workload": None}) == candidate_key(data)
    assert candidate_key(_schedule(8).trace) != candidate_key(trace)
    with pytest.raises(TypeError, match="candidate_key: expected a Trace"):
        candidate_key([1, 2])


def test_queries(db):
    for factor, secs in ((2, (3e-6,)), (4, (1e-6, 1.2e-6)), (8, (2e-6,))):
        db.commit_record(_record(factor, secs))
    db.commit_record(_record(16, None, "build: CompileError: no"))
    assert len(db) == 4 and len(db.records(workload_key(GEMM), "cpu")) == 4
    top = db.get_top_k(GEMM, TARGET, 2)
    assert [r.median_secs for r in top] == [1.1e-6, 2e-6]
    best = db.query_best(workload_key(GEMM), str(TARGET))
    assert best == top[0] and best.trace == _schedule(4).trace.as_json()
    assert db.query_best(workloads.get("gemm", M=8, N=8, K=8)[0], TARGET) is None
    failed = _record(16).candidate
    assert db.has_candidate(GEMM, TARGET, failed)
    assert not db.has_candidate(GEMM, TARGET, _record(32).candidate)


def test_query_schedule_replays_the_best_trace(db):
    assert db.query_schedule(GEMM, TARGET) is None
    db.commit_record(_record(4))
    sch = db.query_schedule(GEMM, "cpu")
    assert sch.mod.script() == _schedule(4).mod.script()
    assert str(sch.target) == str(TARGET)


def test_resume_loads_everything(db, tmp_path):
    db.commit_record(_record(4))
    db.commit_record(_record(8, (5e-7,)))
    again = Database(tmp_path / "db")
    assert len(again) == 2 and again.records() == db.records()
    assert [w.key for w in again.workloads()] == [workload_key(GEMM)]
    assert workload_key(again.workloads()[0].func) == workload_key(GEMM)
    assert again.query_best(GEMM, TARGET).run_secs == (5e-7,)
    assert again.commit_workload(GEMM) == workload_key(GEMM)
    assert len((tmp_path / "db" / WORKLOADS_FILE).read_text().splitlines()) == 1


def test_torn_last_line_is_skipped_and_the_next_append_starts_fresh(db, tmp_path):
    db.commit_record(_record(4))
    path = tmp_path / "db" / RECORDS_FILE
    whole = json.dumps(_record(8).to_json())
    with open(path, "a") as file:
        file.write(whole[: len(whole) // 2])  # a writer killed mid-line
    with pytest.warns(UserWarning, match=r"records.jsonl:2: skipped a damaged line"):
        resumed = Database(tmp_path / "db")
    assert len(resumed) == 1
    resumed.commit_record(_record(16))
    with pytest.warns(UserWarning, match="damaged line"):
        again = Database(tmp_path / "db")
    assert len(again) == 2 and again.records()[-1].candidate == _record(16).candidate


def test_appends_are_whole_lines(db, tmp_path):
    for factor in (2, 4, 8):
        db.commit_record(_record(factor))
    text = (tmp_path / "db" / RECORDS_FILE).read_text()
    assert text.endswith("\n") and len(text.splitlines()) == 3
    assert all(json.loads(line)["candidate"] for line in text.splitlines())


def test_bad_input_gets_clear_errors(db, tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    with pytest.raises(DatabaseError, match="work_dir .*file' is not a folder"):
        Database(not_a_folder)
    other = TuningRecord.new(TuneTask("g", workloads.get("gemm", M=8, N=8, K=8)[0], TARGET),
                             _schedule(4).trace, (1e-6,))  # fmt: skip
    with pytest.raises(DatabaseError, match=r"commit_record: workload .* \(commit_workload"):
        db.commit_record(other)
    with pytest.raises(TypeError, match="commit_record: expected a TuningRecord, got dict"):
        db.commit_record(other.to_json())
    with pytest.raises(ValueError, match="get_top_k: k must be an int >= 0, got -1"):
        db.get_top_k(GEMM, TARGET, -1)
    with pytest.raises(TypeError, match="workload: expected a PrimFunc or a workload key"):
        db.query_best(3, TARGET)


def test_bad_files_name_the_line(tmp_path):
    folder = tmp_path / "db"
    Database(folder).commit_workload(GEMM)
    (folder / RECORDS_FILE).write_text(json.dumps({"workload": "x"}) + "\n")
    with pytest.raises(DatabaseError, match=r"records.jsonl:1: .*missing field\(s\) target"):
        Database(folder)
    (folder / RECORDS_FILE).write_text(json.dumps(_record(4).to_json() | {"workload": "x"}) + "\n")
    with pytest.raises(DatabaseError, match=r"records.jsonl:1: record of workload x.*not in"):
        Database(folder)
    (folder / WORKLOADS_FILE).write_text("[1, 2]\n")
    with pytest.raises(DatabaseError, match=r"workloads.jsonl:1: expected a workload"):
        Database(folder)


def test_unreadable_file_is_named(tmp_path):
    folder = tmp_path / "db"
    (folder / WORKLOADS_FILE).mkdir(parents=True)  # unreadable as a file, even for root
    with pytest.raises(DatabaseError, match=r"cannot read .*workloads.jsonl: Is a directory"):
        Database(folder)


# -- selections (schedlab.tune.in_model) --------------------------------------------------------
def test_a_selection_is_the_best_until_the_workload_is_tuned_again(db, tmp_path):
    fast, slow = _record(4, secs=(1e-6,)), _record(8, secs=(2e-6,))
    db.commit_record(fast)
    db.commit_record(slow)
    assert db.query_best(GEMM, TARGET) == fast and db.selected(GEMM, TARGET) is None
    db.commit_selection(GEMM, TARGET, slow.candidate, [3e-6], "a model")
    assert db.query_best(GEMM, TARGET) == slow and db.selected(GEMM, TARGET) == slow
    assert db.get_top_k(GEMM, TARGET, 2) == [fast, slow]  # the search still ranks by time alone
    assert db.query_schedule(GEMM, TARGET).trace.as_json() == slow.trace
    # resumed from disk: the choice holds
    again = Database(tmp_path / "db")
    assert again.query_best(workload_key(GEMM), TARGET) == slow
    line = json.loads((tmp_path / "db" / SELECTIONS_FILE).read_text().splitlines()[-1])
    assert line["candidate"] == slow.candidate and line["records"] == 2
    assert line["in_model_secs"] == [3e-6] and line["context"] == "a model"
    # another target's records are unaffected
    assert db.query_best(GEMM, "cuda") is None
    # a new record of the workload: the choice was made among fewer candidates, so it lapses
    again.commit_record(_record(16, secs=(5e-6,)))
    assert again.selected(GEMM, TARGET) is None and again.query_best(GEMM, TARGET) == fast
    assert Database(tmp_path / "db").query_best(GEMM, TARGET) == fast


def test_a_null_selection_undoes_the_choice(db, tmp_path):
    fast, slow = _record(4, secs=(1e-6,)), _record(8, secs=(2e-6,))
    db.commit_record(fast)
    db.commit_record(slow)
    db.commit_selection(GEMM, TARGET, slow.candidate)
    db.commit_selection(GEMM, TARGET, None)
    assert db.query_best(GEMM, TARGET) == fast
    assert Database(tmp_path / "db").query_best(GEMM, TARGET) == fast  # the latest line wins


def test_selection_errors(db, tmp_path):
    failed = _record(4, secs=None, error="run: crashed")
    db.commit_record(failed)
    with pytest.raises(DatabaseError, match="no successful record of candidate"):
        db.commit_selection(GEMM, TARGET, failed.candidate)
    with pytest.raises(DatabaseError, match="no successful record of candidate 'nope'"):
        db.commit_selection(GEMM, TARGET, "nope")
    assert not (tmp_path / "db" / SELECTIONS_FILE).exists()  # nothing written
    (tmp_path / "db" / SELECTIONS_FILE).write_text('{"workload": 3}\n')
    with pytest.raises(DatabaseError, match=r"selections.jsonl:1: expected a selection"):
        Database(tmp_path / "db")

"""select_in_model: candidates timed inside the compiled model decide, the choice is stored only
when the whole model is faster with it, compile then takes it (numerics checked against numpy),
and stop / bad input leave the database as it was."""

import threading

import numpy as np
import pytest

import schedlab
from schedlab.ir.structural import assert_structural_equal
from schedlab.relax import BlockBuilder, R, TensorStructInfo, Var, VirtualMachine
from schedlab.schedule import Schedule
from schedlab.target import Target
from schedlab.tune.database import SELECTIONS_FILE, Database, DatabaseError, TuningRecord
from schedlab.tune.in_model import select_in_model
from schedlab.tune.relax_integration import extract_tasks

TARGET = Target("cpu")
DENSE = "fused_matmul_add_nn_relu"


def model():
    """A dense + bias + ReLU layer (64x256 @ 256x256), then a softmax (a kernel left to the
    default schedule)."""
    x, w, b = (Var("x", TensorStructInfo((64, 256), "float32")),
               Var("w", TensorStructInfo((256, 256), "float32")),
               Var("b", TensorStructInfo((256,), "float32")))  # fmt: skip
    bb = BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            h = bb.emit(R.nn.relu(R.add(R.matmul(x, w), b)))
            gv = bb.emit_output(R.nn.softmax(h))
        bb.emit_func_output(gv)
    return bb.get()


def slow_schedule(func) -> Schedule:
    """The dense layer with its row loop innermost: every access strided, no vectors."""
    sch = Schedule(func, target=TARGET)
    i, j, k = sch.get_loops(sch.get_block("matmul"))
    sch.reorder(j, k, i)
    return sch


def fast_schedule(func) -> Schedule:
    """16 columns in a vector, bias and ReLU in the write-back; serial, like the slow one, so
    that other work on the cores (the test suite's other processes) slows both alike."""
    sch = Schedule(func, target=TARGET)
    sch.compute_inline(sch.get_block("T_add"))
    i, j, k = sch.get_loops(sch.get_block("matmul"))
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i, j0, k, j1)
    sch.vectorize(j1)
    return sch


@pytest.fixture
def claimed(tmp_path):
    """A database whose records claim the slow schedule is the fastest alone (1 us against the
    fast one's 1 ms): only a measurement in the model tells them apart."""
    task = next(t for t in extract_tasks(model(), TARGET) if t.name == DENSE)
    db = Database(tmp_path / "db")
    db.commit_workload(task.func, task.name)
    slow, fast = slow_schedule(task.func), fast_schedule(task.func)
    db.commit_record(TuningRecord.new(task, slow.trace, run_secs=(1e-6,)))
    db.commit_record(TuningRecord.new(task, fast.trace, run_secs=(1e-3,)))
    return db, task, slow, fast


def _expected(x, w, b):
    h = np.maximum(x @ w + b, 0)
    e = np.exp(h - h.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_the_model_chooses_what_runs_fastest_in_place(claimed):
    db, task, slow, fast = claimed
    mod = model()
    assert_structural_equal(schedlab.compile(mod, TARGET, database=db).mod[DENSE]
                            .replace(attrs={}), slow.func.replace(attrs={}))  # fmt: skip
    result = select_in_model(mod, TARGET, db, top_k=2, rounds=3, progress=False, log=None,
                             context="dense")  # fmt: skip
    assert not result.stopped and len(result.choices) == 1
    choice = result.choices[0]
    assert choice.name == DENSE and choice.calls == 1 and choice.workload == task.workload
    assert choice.alone_secs == [1e-6, 1e-3]
    assert choice.chosen == 1, choice.in_model_secs
    assert choice.in_model_secs[1] < choice.in_model_secs[0] / 2, choice.in_model_secs
    assert result.stored and result.changed == [choice]
    assert np.median(result.selected_secs) < np.median(result.base_secs)
    assert db.selected(task.workload, TARGET).candidate == choice.records[1].candidate
    assert "1 changed" in result.table() and "stored" in result.table()
    # a fresh Database on the work dir, and compile, take the choice
    exe = schedlab.compile(mod, TARGET, database=str(db.work_dir))
    assert_structural_equal(exe.mod[DENSE].replace(attrs={}), fast.func.replace(attrs={}))
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((64, 256), (256, 256), (256,)))
    got = VirtualMachine(exe)["main"](x, w, b)
    np.testing.assert_allclose(got, _expected(x, w, b), rtol=1e-4, atol=1e-6)


def test_a_task_with_one_candidate_leaves_nothing_to_choose(tmp_path):
    task = next(t for t in extract_tasks(model(), TARGET) if t.name == DENSE)
    db = Database(tmp_path / "db")
    db.commit_workload(task.func, task.name)
    db.commit_record(TuningRecord.new(task, fast_schedule(task.func).trace, run_secs=(1e-3,)))
    lines = []
    result = select_in_model(model(), TARGET, db, progress=False, log=lines.append)
    assert result.choices == [] and not result.stored and not result.base_secs
    assert lines == [result.table()] and "0 task(s) with several candidates" in lines[0]
    assert not (tmp_path / "db" / SELECTIONS_FILE).exists()


def test_stop_stores_nothing(claimed):
    db, *_ = claimed
    stop = threading.Event()
    stop.set()
    result = select_in_model(model(), TARGET, db, top_k=2, stop=stop, progress=False, log=None)
    assert result.stopped and result.choices == [] and "stopped, nothing stored" in result.table()
    assert not (db.work_dir / SELECTIONS_FILE).exists()


def test_bad_input_names_the_argument(claimed, tmp_path):
    db, *_ = claimed
    for name, value in (("top_k", 1), ("top_k", 2.0), ("rounds", 0), ("rounds", True)):
        with pytest.raises(ValueError, match=rf"select_in_model: {name} must be an int >= "):
            select_in_model(model(), TARGET, db, **{name: value}, progress=False, log=None)
    with pytest.raises(TypeError, match="select_in_model: mod must be an IRModule, got str"):
        select_in_model("model.onnx", TARGET, db, progress=False, log=None)
    with pytest.raises(DatabaseError, match="no tuning database at .*missing"):
        select_in_model(model(), TARGET, tmp_path / "missing", progress=False, log=None)
    assert not (db.work_dir / SELECTIONS_FILE).exists()


def test_compile_reuses_the_kernels_of_its_cache(claimed):
    db, *_ = claimed
    cache: dict = {}
    first = schedlab.compile(model(), TARGET, database=db, kernel_cache=cache)
    again = schedlab.compile(model(), TARGET, database=db, kernel_cache=cache)
    assert set(cache) and all(again.kernels[n] is first.kernels[n] for n in first.kernels)
    assert schedlab.compile(model(), TARGET).kernels[DENSE] is not first.kernels[DENSE]

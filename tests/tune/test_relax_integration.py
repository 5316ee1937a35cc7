"""Tuning a graph model: extract_tasks (dedupe, weights, unscheduled kernels), ApplyDatabase in
the target's pipeline (tuned kernels from a real Database, dlight for the rest), compile with a
database or its work_dir, the static_shape_tuning pipeline, and the errors."""

import numpy as np
import pytest

import schedlab
from schedlab.ir.function import PrimFunc
from schedlab.ir.structural import assert_structural_equal, structural_equal
from schedlab.ir.transform import Sequential
from schedlab.relax import BlockBuilder, R, TensorStructInfo, Var, VirtualMachine
from schedlab.relax.interpreter import run
from schedlab.relax.pipeline import (
    get_default_pipeline,
    get_pipeline,
    pre_schedule_passes,
    schedule_point,
)
from schedlab.schedule import Schedule
from schedlab.target import Target
from schedlab.tune.database import Database, DatabaseError, TuningRecord
from schedlab.tune.relax_integration import (
    FROM_DATABASE_ATTR,
    ApplyDatabase,
    TuneIRModule,
    extract_tasks,
    tasks_of,
    workload_func,
)
from schedlab.tune.task import workload_key

MATMUL = "fused_matmul_add_nn_relu"  # FuseTIR's names for the model's kernels
MATMUL_2 = "fused_matmul_add_nn_relu1"


def _param(name, shape):
    return Var(name, TensorStructInfo(shape, "float32"))


def model():
    """Two dense + bias + relu layers of the same shapes (one kernel, called twice) and a
    padded conv + relu, returned together."""
    x, w1, b1, w2, b2 = (_param("x", (5, 12)), _param("w1", (12, 12)), _param("b1", (12,)),
                         _param("w2", (12, 12)), _param("b2", (12,)))  # fmt: skip
    d, k = _param("d", (1, 3, 7, 5)), _param("k", (4, 3, 3, 3))
    bb = BlockBuilder()
    with bb.function("main", [x, w1, b1, w2, b2, d, k]):
        with bb.dataflow():
            h = bb.emit(R.nn.relu(R.add(R.matmul(x, w1), b1)))
            h = bb.emit(R.nn.relu(R.add(R.matmul(h, w2), b2)))
            c = bb.emit(R.nn.relu(R.nn.conv2d(d, k, padding=1)))
            gv = bb.emit_output(R.tuple(h, c))
        bb.emit_func_output(gv)
    return bb.get()


def inputs(mod, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.struct_info_.static_shape()).astype("float32")
            for p in mod["main"].params]  # fmt: skip


def schedule_by_hand(func: PrimFunc, target) -> Schedule:
    """The "tuned" schedule: bias folded into relu, relu computed per 4-column tile of the
    matmul, rows parallel."""
    sch = Schedule(func, target=Target(target))
    sch.compute_inline(sch.get_block("T_add"))
    i, j, k = sch.get_loops(sch.get_block("matmul"))
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i, j0, k, j1)
    sch.reverse_compute_at(sch.get_block("T_relu"), j0)
    sch.parallel(i)
    return sch


def measured_secs(func: PrimFunc) -> tuple[float, ...]:
    kernel = schedlab.build(func, "cpu")
    rng = np.random.default_rng(1)
    args = [rng.standard_normal([int(s) for s in func.buffer_map[p].shape]).astype("float32")
            for p in func.params]  # fmt: skip
    return kernel.benchmark(*args, repeat=3, min_repeat_ms=1.0).all


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A Database holding one measured record: the hand schedule of the matmul task."""
    task = extract_tasks(model(), "cpu")[0]
    sch = schedule_by_hand(task.func, task.target)
    db = Database(tmp_path_factory.mktemp("tuned"))
    db.commit_workload(task.func, task.name)
    db.commit_record(TuningRecord.new(task, sch.trace, run_secs=measured_secs(sch.func)))
    return db, sch


# -- extract_tasks -----------------------------------------------------------------------------
def test_extract_tasks_dedupes_weights_and_keeps_kernels_unscheduled():
    tasks = extract_tasks(model(), "cpu")
    assert [(t.name, t.weight) for t in tasks] == [(MATMUL, 2), ("fused_nn_conv2d_nn_relu1", 1)]
    for task in tasks:
        assert "tir.is_scheduled" not in task.func.attrs and "global_symbol" not in task.func.attrs
        assert task.workload == workload_key(task.func) and task.target == Target("cpu")
        loops = task.func.script()
        assert "T.parallel" not in loops and "T.block" in loops  # straight from legalization
    again = extract_tasks(model(), Target("cpu"))
    assert [(t.name, t.workload) for t in again] == [(t.name, t.workload) for t in tasks]


def test_tasks_are_the_kernels_the_pipeline_would_schedule():
    lowered = Sequential(pre_schedule_passes("cpu"))(model())
    kernels = {k: f for k, f in lowered.items() if isinstance(f, PrimFunc)}
    assert set(kernels) == {MATMUL, MATMUL_2, "fused_nn_conv2d_nn_relu1"}
    assert workload_key(workload_func(kernels[MATMUL])) == workload_key(
        workload_func(kernels[MATMUL_2])
    )
    assert [t.workload for t in tasks_of(lowered, "cpu")] == [
        t.workload
        for t in extract_tasks(lowered, "cpu")  # the passes are idempotent
    ]
    marked = lowered.update({MATMUL: kernels[MATMUL].with_attr("tir.is_scheduled", True)})
    assert [(t.name, t.weight) for t in tasks_of(marked, "cpu")] == [
        (MATMUL_2, 1), ("fused_nn_conv2d_nn_relu1", 1)
    ]  # fmt: skip


def test_extract_tasks_rejects_a_function():
    with pytest.raises(TypeError, match="extract_tasks: mod must be an IRModule, got PrimFunc"):
        extract_tasks(extract_tasks(model())[0].func, "cpu")


# -- the pipeline ------------------------------------------------------------------------------
def test_apply_database_sits_after_fusion_before_the_default_schedule(tuned):
    plain = [p.name for p in get_default_pipeline("cpu").passes]
    names = [p.name for p in get_default_pipeline("cpu", database=tuned[0]).passes]
    at = names.index("ApplyDatabase")
    assert names[:at] == [p.name for p in pre_schedule_passes("cpu")]
    assert names[at - 2 : at + 2] == ["DeadCodeElimination", "AttachLayoutFreeBuffers",
                                      "ApplyDatabase", "ApplyDefaultSchedule"]  # fmt: skip
    assert names[:at] + names[at + 1 :] == plain


def test_compile_uses_the_tuned_schedule(tuned):
    db, sch = tuned
    mod = model()
    exe = schedlab.compile(mod, "cpu", database=db)
    for name in (MATMUL, MATMUL_2):
        func = exe.mod[name]
        assert func.attrs[FROM_DATABASE_ATTR] is True and func.attrs["tir.is_scheduled"] is True
        assert func.attrs["global_symbol"] == name and func.attrs["op_pattern"] == 4
        assert "dlight.rules" not in func.attrs
        assert_structural_equal(func.replace(attrs={}), sch.func.replace(attrs={}))
    conv = exe.mod["fused_nn_conv2d_nn_relu1"]
    assert FROM_DATABASE_ATTR not in conv.attrs and "dlight.rules" in conv.attrs
    arrays = inputs(mod)
    got, want = VirtualMachine(exe)["main"](*arrays), run(mod, *arrays)
    x, w1, b1, w2, b2 = arrays[:5]
    dense = np.maximum(np.maximum(x @ w1 + b1, 0) @ w2 + b2, 0)
    np.testing.assert_allclose(got[0], dense, rtol=1e-5, atol=1e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_compile_opens_a_work_dir(tuned):
    db, sch = tuned
    exe = schedlab.compile(model(), "cpu", database=str(db.work_dir))
    assert exe.mod[MATMUL].attrs[FROM_DATABASE_ATTR] is True
    exe = schedlab.compile(model(), "cpu", database=db.work_dir)  # a Path
    assert exe.mod[MATMUL_2].attrs[FROM_DATABASE_ATTR] is True


def test_empty_database_changes_nothing(tmp_path):
    default = schedlab.compile(model(), "cpu")
    with_db = schedlab.compile(model(), "cpu", database=Database(tmp_path))
    assert list(with_db.mod) == list(default.mod)
    for name, func in default.mod.items():
        assert structural_equal(with_db.mod[name], func), name
    assert {n: k.source for n, k in with_db.kernels.items()} == {
        n: k.source for n, k in default.kernels.items()
    }


def test_apply_database_warns_about_kernels_it_lacks(tuned):
    lowered = Sequential(pre_schedule_passes("cpu"))(model())
    with pytest.warns(UserWarning, match="no tuning record of kernel 'fused_nn_conv2d_nn_relu1'"):
        out = ApplyDatabase(tuned[0], "cpu", enable_warning=True)(lowered)
    assert out[MATMUL].attrs[FROM_DATABASE_ATTR] and out[MATMUL_2].attrs[FROM_DATABASE_ATTR]
    assert out["fused_nn_conv2d_nn_relu1"] is lowered["fused_nn_conv2d_nn_relu1"]
    assert ApplyDatabase(tuned[0], "cpu")(out) is out  # scheduled kernels are left alone


def test_a_record_for_another_target_is_not_used(tuned):
    lowered = Sequential(pre_schedule_passes("cpu"))(model())
    other = Target("cpu").with_attrs(num_cores=64)
    with other:
        out = ApplyDatabase(tuned[0])(lowered)
    assert out is lowered


# -- static_shape_tuning -----------------------------------------------------------------------
def test_static_shape_tuning_applies_the_work_dir_then_compile_finishes(tuned):
    db, sch = tuned
    mod = model()
    seq = get_pipeline("static_shape_tuning", target="cpu", total_trials=0, work_dir=db.work_dir)
    assert [p.name for p in seq.passes][-2:] == ["AttachLayoutFreeBuffers", "ApplyDatabase"]
    tuned_mod = seq(mod)
    assert tuned_mod[MATMUL].attrs[FROM_DATABASE_ATTR]
    assert "tir.is_scheduled" not in tuned_mod["fused_nn_conv2d_nn_relu1"].attrs
    exe = schedlab.compile(tuned_mod, "cpu")
    assert_structural_equal(exe.mod[MATMUL_2].replace(attrs={}), sch.func.replace(attrs={}))
    assert "dlight.rules" in exe.mod["fused_nn_conv2d_nn_relu1"].attrs
    arrays = inputs(mod, seed=2)
    for g, w in zip(VirtualMachine(exe)["main"](*arrays), run(mod, *arrays)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_static_shape_tuning_with_trials_puts_the_tuner_first():
    seq = get_pipeline("static_shape_tuning", target="cpu", total_trials=8, work_dir="unused")
    assert [p.name for p in seq.passes][-2:] == ["TuneIRModule", "ApplyDatabase"]


def test_tune_ir_module_skips_a_module_with_nothing_to_tune(tmp_path):
    scheduled = get_default_pipeline("cpu")(model())
    assert TuneIRModule("cpu", tmp_path / "db", 8)(scheduled) is scheduled
    assert not (tmp_path / "db").exists()  # no tuning run was started


# -- errors ------------------------------------------------------------------------------------
def test_errors_name_the_argument(tmp_path, tuned):
    with pytest.raises(TypeError, match="database must be a Database or a work_dir path, got int"):
        ApplyDatabase(3)
    with pytest.raises(DatabaseError, match="no tuning database at .*missing.*: no such folder"):
        schedlab.compile(model(), "cpu", database=tmp_path / "missing")
    with pytest.raises(ValueError, match="compile: give database= with the default pipeline"):
        schedlab.compile(model(), "cpu", pipeline="zero", database=tuned[0])
    with pytest.raises(TypeError, match=r"get_pipeline\('static_shape_tuning'\): missing"):
        get_pipeline("static_shape_tuning", target="cpu")
    with pytest.raises(TypeError, match=r"get_pipeline\('zero'\): got an unexpected keyword"):
        get_pipeline("zero", target="cpu")
    with pytest.raises(ValueError, match="max_trials_global must be a positive int, got -1"):
        TuneIRModule("cpu", tmp_path, -1)


def test_schedule_point_is_the_first_default_schedule():
    from schedlab import dlight
    from schedlab.relax import transform as T

    rules = dlight.cpu.default_rules()
    rounds = [T.LegalizeOps(), T.FuseTIR(), dlight.ApplyDefaultSchedule(*rules),
              dlight.ApplyDefaultSchedule(rules[-1])]  # fmt: skip
    assert schedule_point(rounds) == 2  # several rounds (TVM's Adreno): before the first
    assert schedule_point(rounds[:2]) == 2  # none: after fusion, at the end

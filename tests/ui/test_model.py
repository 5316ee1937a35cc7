"""ExplorerModel: loading, selection, primitives, undo/redo, branches, views, traces, events."""

import json
import subprocess
import sys

import pytest

from schedlab.ir.function import IRModule
from schedlab.schedule.errors import TraceError
from schedlab.ui import ExplorerModel, Selection
from schedlab.workloads import get


@pytest.fixture
def model():
    m = ExplorerModel(target="cpu")
    m.load_workload("gemm", M=33, N=17, K=19)
    yield m
    m.close()


def _select_outer(m):
    m.select_block("C")
    i, j, k = m.loops()
    m.select_loop(i)
    return i, j, k


def test_import_pulls_no_ui_library():
    code = (
        "import sys, schedlab.ui.model\n"
        "bad = [m for m in ('panel', 'bokeh', 'ipywidgets', 'anywidget') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_load_workload_lists_and_opens_the_function(model):
    assert model.functions() == [("gemm", "PrimFunc")]
    assert model.func_name == "gemm"
    assert model.selection == Selection(func="gemm")
    assert model.current_step == 0 and model.steps()[0].label == "start"


def test_load_module_and_open_another_function():
    gemm, _ = get("gemm", M=8, N=8, K=8)
    small, _ = get("gemm", M=4, N=4, K=4)
    m = ExplorerModel()
    m.load_module(IRModule({"a": gemm, "b": small}))
    assert [n for n, _ in m.functions()] == ["a", "b"] and m.func_name == "a"
    m.select_block("C")
    m.select_loop(m.loops()[0])
    assert m.apply("split", factors=[None, 2]).ok
    m.open_function("b")
    assert m.current_step == 0
    m.open_function("a")  # its schedule was kept
    assert m.current_step == 1
    with pytest.raises(ValueError, match="no PrimFunc named 'zzz'"):
        m.open_function("zzz")


def test_load_func_rejects_non_primfunc():
    with pytest.raises(TypeError, match="expected a PrimFunc"):
        ExplorerModel().load_func("not a func")


def test_selection_by_uid_and_name(model):
    i, j, k = _select_outer(model)
    assert model.selection.loop == i and model.selection.block is not None
    model.select_loop(None)
    assert model.selection.loop is None
    with pytest.raises(ValueError, match="no loop with uid"):
        model.select_loop(987654)
    with pytest.raises(ValueError, match="blocks are named 'nope'"):
        model.select_block("nope")


def test_applicable_primitives_depend_on_selection(model):
    _select_outer(model)
    loop_names = {s.name for s in model.applicable_primitives()}
    assert {"split", "fuse", "reorder", "parallel"} <= loop_names
    split = next(s for s in model.applicable_primitives() if s.name == "split")
    assert [a.name for a in split.args][0] == "factors" and split.args[0].kind == "ints"
    model.select_loop(None)
    block_names = {s.name for s in model.applicable_primitives()}
    assert "decompose_reduction" in block_names and "cache_write" in block_names
    assert "compute_inline" not in block_names  # gemm's only block cannot be inlined
    assert model.applicable_primitives(Selection(func="gemm")) == []


def test_apply_split_changes_code_and_steps(model):
    i, _, _ = _select_outer(model)
    before = model.code()
    result = model.apply("split", factors=[None, 8])
    assert result.ok and len(result.outputs) == 2
    assert model.current_step == 1 and "split" in model.steps()[1].label
    after = model.code()
    assert after.source != before.source and not after.error
    assert set(result.outputs) <= set(after.loop_lines)
    assert i not in after.loop_lines
    assert model.selection.loop is None  # the split loop is gone


def test_illegal_primitive_reports_and_changes_nothing(model):
    i, j, k = _select_outer(model)
    text = model.script()
    result = model.apply("fuse", loops=[k])  # i and k are not adjacent
    assert not result.ok
    assert "ScheduleError" in result.message and result.uids
    assert model.current_step == 0 and model.script() == text
    assert len(model.schedule.trace) == 0  # not even the look-ups were kept


def test_bad_arguments_are_results_not_crashes(model):
    _select_outer(model)
    assert "missing argument 'factors'" in model.apply("split").message
    assert "unknown argument" in model.apply("split", factors=[2, None], bogus=1).message
    assert "does not apply to a loop" in model.apply("compute_inline").message
    model.select_loop(None)
    bad = model.apply("compute_at", loop=123456)
    assert not bad.ok and "no loop with uid 123456" in bad.message
    assert model.current_step == 0


def test_undo_redo(model):
    _select_outer(model)
    model.apply("split", factors=[None, 4])
    model.select_loop(model.loops()[1])
    model.apply("parallel")
    assert model.current_step == 2
    assert model.undo() and model.current_step == 1
    assert model.undo() and model.current_step == 0
    assert not model.undo()
    assert model.redo() and model.current_step == 1
    assert model.redo() and model.current_step == 2
    assert not model.redo()
    model.undo()
    model.select_block("C")
    model.select_loop(model.loops()[0])
    model.apply("unroll")  # a new step drops the redo
    assert not model.redo() and model.current_step == 2


def test_branches_fork_switch_compare(model):
    _select_outer(model)
    model.fork("tiled")
    assert model.branch == "tiled" and model.branches() == ["main", "tiled"]
    model.select_block("C")
    model.select_loop(model.loops()[0])
    assert model.apply("split", factors=[None, 8]).ok
    model.switch("main")
    assert model.current_step == 0
    cmp = model.compare("main", "tiled")
    assert "+" in cmp["diff"] and "split" in cmp["traces"]["tiled"]
    assert set(cmp["predicted"]) == {"main", "tiled"}
    with pytest.raises(ValueError, match="already used"):
        model.fork("tiled")
    with pytest.raises(ValueError, match="no branch 'x'"):
        model.switch("x")


def test_diff_against_earlier_step(model):
    _select_outer(model)
    model.apply("split", factors=[None, 8])
    text = model.diff(0)
    assert text.startswith("--- step 0\n+++ step 1")
    assert "-    for i, j, k in T.grid(33, 17, 19):" in text
    assert model.diff(1) == ""
    with pytest.raises(IndexError):
        model.diff(5)


def test_prediction_per_step_and_history(model):
    _select_outer(model)
    first = model.prediction()
    model.apply("split", factors=[None, 8])
    if first.available:
        assert first.seconds > 0
    else:
        assert first.reason
    points = model.latency_history()
    assert [p.step for p in points] == [0, 1]
    assert all(p.measured is None for p in points)


def test_prediction_unavailable_without_cost_module(model, monkeypatch):
    monkeypatch.setitem(sys.modules, "schedlab.cost", None)  # import now fails
    result = model.prediction()
    assert not result.available and result.seconds is None
    assert "no cost model" in result.reason


def test_pipeline_records_of_lowering(model):
    records = model.pipeline_records()
    assert records and all(r.seconds >= 0 for r in records)
    names = [r.name for r in records]
    assert any("Flatten" in n for n in names)
    assert any(r.changed and r.before is not r.after for r in records)


def test_trace_export_import_round_trip(model):
    _select_outer(model)
    model.apply("split", factors=[None, 8])
    data = model.export_trace_json()
    assert "def apply_trace(sch):" in model.export_trace_python()
    other = ExplorerModel()
    other.load_workload("gemm", M=33, N=17, K=19)
    other.import_trace(json.dumps(data))
    assert other.script() == model.script() and other.current_step == 1


def test_trace_import_errors(model):
    _select_outer(model)
    model.apply("split", factors=[None, 8])
    data = model.export_trace_json()
    wrong = ExplorerModel()
    wrong.load_workload("gemm", M=32, N=17, K=19)
    with pytest.raises(TraceError, match="different workload"):
        wrong.import_trace(data)
    assert wrong.current_step == 0
    with pytest.raises(TraceError, match="target 'cuda'"):
        model.import_trace({**data, "target": json.dumps({"kind": "cuda"})})
    other_cpu = json.loads(str(model.target)) | {"num_cores": 977}
    with pytest.raises(TraceError, match="num_cores: 977 vs"):
        model.import_trace({**data, "target": json.dumps(other_cpu)})
    with pytest.raises(TraceError):
        model.import_trace('{"schema": "nope"}')
    assert model.current_step == 1


def test_trace_import_bare_kinds_and_retarget(model):
    _select_outer(model)
    model.apply("split", factors=[None, 8])
    data, script = model.export_trace_json(), model.script()
    other = ExplorerModel()
    other.load_workload("gemm", M=33, N=17, K=19)
    other.import_trace({**data, "target": "cpu"})  # a bare kind fits any CPU target
    assert other.script() == script
    other.undo()
    with pytest.raises(TraceError, match="this trace is for target 'cuda'"):
        other.import_trace({**data, "target": "cuda"})
    assert other.current_step == 0
    other.import_trace({**data, "target": "cuda"}, retarget=True)
    assert other.script() == script and other.schedule.trace.target == str(other.target)


def test_a_failing_trace_import_changes_nothing(model):
    _select_outer(model)
    model.apply("split", factors=[None, 8])
    data = model.export_trace_json()
    data["insts"][-1][1][-1] = 0  # the split's factor: not a positive int
    model.undo()
    with pytest.raises(TraceError, match=r"instruction \d+ \(Split\) failed"):
        model.import_trace(data)
    assert model.current_step == 0 and model.can_redo  # the undone split is still there
    assert len(model.schedule.trace) == 0


def test_events_reach_observers(model):
    seen = []
    stop = model.subscribe(seen.append)
    _select_outer(model)
    model.apply("split", factors=[None, 8])
    model.undo()
    kinds = [e.kind for e in seen]
    assert "selection" in kinds and kinds.count("step") == 2
    only = []
    model.subscribe(only.append, kinds=["step"])
    model.subscribe(lambda e: 1 / 0)  # a broken observer does not break the model
    model.redo()
    assert [e.kind for e in only] == ["step"] and model.observer_errors
    stop()
    count = len(seen)
    model.undo()
    assert len(seen) == count


def test_sessions_are_isolated():
    a, b = ExplorerModel(), ExplorerModel()
    for m in (a, b):
        m.load_workload("gemm", M=16, N=16, K=16)
    _select_outer(a)
    a.apply("split", factors=[None, 4])
    assert a.current_step == 1 and b.current_step == 0
    assert "split" not in b.export_trace_python()


def _mlp_onnx():
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Relu", ["h"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4, 3])],
        [numpy_helper.from_array(rng.standard_normal((5, 3)).astype("float32"), name="w")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert onnx.checker.check_model(model) is None
    return model


def test_load_onnx_lists_functions_and_records_graph_pipeline():
    m = ExplorerModel()
    m.load_onnx(_mlp_onnx())
    prims = [name for name, kind in m.functions() if kind == "PrimFunc"]
    assert prims and m.func_name == prims[0]
    assert any(kind != "PrimFunc" for _, kind in m.functions())  # the graph's main
    block = m.schedule.state.child_blocks(m.func.body.block)[0]
    m.select_block(block.uid)
    m.select_loop(m.loops()[0])
    assert m.apply("split", factors=[None, 2]).ok
    assert not m.code().error
    records = m.pipeline_records()
    assert records and any(r.name == "LegalizeOps" for r in records)


def test_block_primitives_with_loop_arguments(model):
    i, j, k = _select_outer(model)
    assert model.apply("reorder", loops=[j, i]).ok
    assert model.loops()[:2] == [j, i]
    model.select_block("C")
    assert model.apply("cache_write", write_buffer_index=0, storage_scope="local").ok
    bad = model.apply("cache_write", write_buffer_index=0, storage_scope="texture")
    assert not bad.ok and "storage_scope must be one of" in bad.message
    model.select_block("C")
    result = model.apply("decompose_reduction", loop=k)
    assert result.ok and len(result.outputs) == 1
    assert "C_init" in model.script()
    assert model.current_step == 3
    assert not model.code().error


def test_fuse_defaults_to_the_child_loop(model):
    _select_outer(model)
    result = model.apply("fuse")
    assert result.ok and len(model.loops()) == 2


def test_undo_skips_trailing_lookups_of_an_imported_trace(model):
    _select_outer(model)
    model.apply("split", factors=[None, 8])
    sch = model.schedule
    sch.get_block("C")  # a trailing look-up, as an imported trace may end with
    assert model.current_step == 1
    assert model.undo() and model.current_step == 0 and len(model.schedule.trace) == 0


def test_import_trace_into_new_branch(model):
    _select_outer(model)
    model.apply("split", factors=[None, 8])
    data = model.export_trace_json()
    model.undo()
    model.import_trace(data, branch="imported")
    assert model.branch == "imported" and model.branches() == ["main", "imported"]
    assert model.current_step == 1
    model.switch("main")
    assert model.current_step == 0


def test_compute_at_on_a_two_stage_workload():
    m = ExplorerModel()
    m.load_workload("matmul_bias_relu", M=9, N=7, K=5)
    m.select_block("T_relu")
    i, j = m.loops()
    m.select_block("matmul")
    names = {s.name for s in m.applicable_primitives()}
    assert {"compute_at", "compute_inline"} & names == {"compute_at"}
    result = m.apply("compute_at", loop=i)
    assert result.ok, result.message
    assert len(m.loops("matmul")) == 3 and m.loops("matmul")[0] == i
    m.select_block("T_relu")
    assert "reverse_compute_inline" not in {s.name for s in m.applicable_primitives()}
    assert not m.code().error


def test_scheduled_step_computes_the_reference(model):
    import numpy as np

    import schedlab
    from schedlab.workloads import make_args

    i, _, _ = _select_outer(model)
    model.apply("split", factors=[None, 8])
    model.select_loop(model.loops()[0])
    model.apply("parallel")
    _, reference = get("gemm", M=33, N=17, K=19)
    args = make_args(model.func)
    schedlab.build(model.func)(*args)
    np.testing.assert_allclose(args[-1], reference(*args[:-1]), rtol=1e-4)


def test_set_target_emits_and_is_used(model):
    seen = []
    model.subscribe(seen.append, kinds=["target"])
    model.set_target("cpu")
    assert seen and seen[0].data["target"] == str(model.target)
    assert model.code(target="cpu").target == "cpu"


def test_switching_to_sm_90_shows_the_cuda_source(model):
    """A GPU target's code is its dialect's source, rendered without a GPU, NVRTC or a driver:
    CUDA C for sm_90, HIP for gfx942, OpenCL C for adreno740; the loops keep their lines."""
    i, _, _ = _select_outer(model)
    model.apply("split", factors=[None, 8])
    model.set_target("sm_90")
    code = model.code()
    assert not code.error and code.target == "cuda sm_90, CUDA C"
    assert 'extern "C" __global__ void' in code.source and "gemm_kernel(" in code.source
    # NVRTC's dialect: no C library headers (included only in the branch nvcc compiles)
    nvrtc = code.source.split("#if defined(__CUDACC_RTC__)", 1)[1].split("#else", 1)[0]
    assert "#include" not in nvrtc and "typedef" in nvrtc
    lines = code.source.splitlines()
    span = next(iter(code.loop_lines.values()))
    assert lines[span.header - 1].lstrip().startswith("for (")
    hip = model.code(target="gfx942")
    assert hip.target == "rocm gfx942, HIP" and "#include <hip/hip_runtime.h>" in hip.source
    assert "__global__" in hip.source
    opencl = model.code(target="adreno740")
    assert "__kernel void gemm_kernel(" in opencl.source and "__global__" not in opencl.source
    model.set_target("cpu")
    assert "__global__" not in model.code().source


def test_the_target_menu_offers_the_gpu_presets_and_shows_the_chosen_one():
    from schedlab.target import Target
    from schedlab.ui.session import TARGETS, target_choice

    assert {"cpu", "sm_90", "h200", "sm_80", "gfx942", "gfx90a", "adreno740"} <= set(TARGETS)
    for name in TARGETS:
        assert target_choice(Target(name)) == name
    assert target_choice(Target("h100")) == "sm_90"  # the same device
    assert target_choice(Target("zen3")) == "cpu"  # a CPU preset: its kind


def _walk_to_a_tiled_gemm(m):
    """split i and j, reorder, parallel, vectorize: each loop picked by the name the tree
    shows, as a user clicks."""
    uid = {}

    def pick(name):
        uid.update({n.loop_var.name: n.uid for n in _loops_of(m)})
        m.select_loop(uid[name])

    m.select_block("C")
    pick("i")
    assert m.apply("split", factors=[None, 8]).ok
    pick("j")
    assert m.apply("split", factors=[None, 4]).ok
    pick("i_0")
    assert m.apply("reorder", loops=[uid["i_0"], uid["j_0"], uid["k"], uid["i_1"]]).ok
    pick("i_0")
    assert m.apply("parallel").ok
    pick("j_1")
    assert m.apply("vectorize").ok


def _loops_of(m):
    from schedlab.ir.functor import pre_order_visit
    from schedlab.ir.stmt import For

    found = []
    pre_order_visit(m.func.body, lambda n: found.append(n) if isinstance(n, For) else None)
    return found


def test_steps_and_exported_python_use_the_names_the_tree_shows(model):
    _walk_to_a_tiled_gemm(model)
    assert [s.label for s in model.steps()] == [
        "start",
        "split(loop=i, factors=[None, 8])",
        "split(loop=j, factors=[None, 4])",
        "reorder(i_0, j_0, k, i_1)",
        "parallel(loop=i_0)",
        "vectorize(loop=j_1)",
    ]
    # each handle is fetched once (later steps reuse the split's outputs), variables are
    # named after the loops and blocks
    assert model.export_trace_python() == (
        "def apply_trace(sch):\n"
        "    C = sch.get_block(name='C', func_name='gemm')\n"
        "    i, j, k = sch.get_loops(block=C)\n"
        "    i_0, i_1 = sch.split(loop=i, factors=[None, 8])\n"
        "    j_0, j_1 = sch.split(loop=j, factors=[None, 4])\n"
        "    sch.reorder(i_0, j_0, k, i_1)\n"
        "    sch.parallel(loop=i_0)\n"
        "    sch.vectorize(loop=j_1)\n"
    )


def test_exported_python_replays_to_the_same_module(model):
    from schedlab.ir.structural import structural_equal
    from schedlab.schedule import Schedule
    from schedlab.script import tir as T

    _walk_to_a_tiled_gemm(model)
    model.undo()  # an undone step is not exported
    source = model.export_trace_python()
    assert "vectorize" not in source
    namespace = {"T": T}
    exec(source, namespace)  # our own generated text
    fresh = Schedule(IRModule({"gemm": get("gemm", M=33, N=17, K=19)[0]}))
    namespace["apply_trace"](fresh)
    assert structural_equal(fresh.mod, model.schedule.mod)


def test_a_step_after_undo_and_an_imported_trace_reuse_live_handles(model):
    _walk_to_a_tiled_gemm(model)
    model.undo()
    model.undo()
    # i_0 again, after undo: its handle from the split is still the one used
    model.select_loop(next(n.uid for n in _loops_of(model) if n.loop_var.name == "i_0"))
    assert model.apply("unroll").ok
    lines = model.export_trace_python().splitlines()
    assert sum("get_loops" in line for line in lines) == 1
    assert lines[-1] == "    sch.unroll(loop=i_0)"
    other = ExplorerModel()
    other.load_workload("gemm", M=33, N=17, K=19)
    other.import_trace(json.dumps(model.export_trace_json()))
    other.select_loop(next(n.uid for n in _loops_of(other) if n.loop_var.name == "k"))
    assert other.apply("unroll").ok
    assert other.export_trace_python().splitlines()[-1] == "    sch.unroll(loop=k)"
    assert sum("get_loops" in line for line in other.export_trace_python().splitlines()) == 1
    other.close()


def test_an_illegal_step_gives_its_cause_and_the_marked_function_apart(model):
    _, _, k = _select_outer(model)
    model.select_loop(k)
    result = model.apply("split", factors=[2, 2])  # 4 iterations, k has 19
    assert not result.ok and result.uids == (k,)
    assert result.message.startswith("ScheduleError in split:") and "\n" not in result.message
    assert "multiply to 4" in result.message
    assert result.detail.startswith("@T.prim_func") and "^^^" in result.detail
    bad = model.apply("split", factors=[2, 2], bogus=1)  # no function to show for this
    assert not bad.ok and "unknown argument" in bad.message and bad.detail == ""


def test_palette_docs_are_whole_sentences():
    from schedlab.ui.primitives import all_specs

    docs = {spec.name: spec.doc for spec in all_specs()}
    assert docs["reorder"] == (
        "Reorder loops of one chain: the given loops take the given order, every other loop "
        "of the chain between them stays where it is."
    )
    assert all(doc.endswith((".", ")")) and "\n" not in doc for doc in docs.values()), docs


def test_an_illegal_steps_function_survives_distributed_being_imported(model):
    """distributed installs tblib's exception pickling, after which copy.copy of an exception
    shares its __dict__: the cause must not be made by silencing a copy (the function went
    missing from every later error in a test run that had imported distributed)."""
    pytest.importorskip("distributed")
    import distributed  # noqa: F401

    for _ in range(2):  # the second error too: nothing was silenced by the first
        _, _, k = _select_outer(model)
        model.select_loop(k)
        result = model.apply("split", factors=[2, 2])
        assert not result.ok and result.message.startswith("ScheduleError in split:")
        assert result.detail.startswith("@T.prim_func") and "^^^" in result.detail

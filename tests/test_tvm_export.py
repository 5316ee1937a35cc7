"""Export to and import from Apache TVM's formats without TVM installed (docs/tvm.md): the
expected texts below were written by TVM 0.27 itself for the same schedules. The tests that run
TVM live in test_tvm_interop.py."""

from __future__ import annotations

import base64
import doctest
import json

import numpy as np
import pytest

import schedlab
from schedlab import workloads
from schedlab.export import (
    TVMExportError,
    TVMImportError,
    read_tvm_database,
    read_tvm_record,
    to_tvm_script,
    trace_from_tvm_json,
    trace_to_tvm_json,
    trace_to_tvm_python,
    tvm_json_graph,
    tvm_python,
    tvm_script,
)
from schedlab.ir.stmt import Allocate
from schedlab.schedule import Schedule
from schedlab.schedule.index_map import IndexMap
from schedlab.script import from_source

# TVM 0.27's `json.dumps(trace.as_json())` (FFI values made plain) and `print(trace)` body for
# the schedule `_gemm_schedule` makes, recorded with tvm.s_tir.Schedule.
TVM_GEMM_JSON = [
    [
        ["GetSBlock", [], ["C", "main"], ["b0"]],
        ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
        ["Split", ["l1", "None", 8], [True, False], ["l4", "l5"]],
        ["Split", ["l2", "None", 8], [True, False], ["l6", "l7"]],
        ["Reorder", ["l4", "l6", "l3", "l5", "l7"], [], []],
        ["CacheWrite", ["b0", []], [0, "local"], ["b8"]],
        ["ReverseComputeAt", ["b8", "l6"], [0, -1], []],
        ["Fuse", ["l4", "l6"], [1], ["l9"]],
        ["Parallel", ["l9"], [], []],
        ["Vectorize", ["l7"], [], []],
        ["Unroll", ["l5"], [], []],
        ["Annotate", ["b0", 16], ["pragma_auto_unroll_max_step"], []],
        ["DecomposeReduction", ["b0", "l3"], [], ["b10"]],
    ],
    [],
]
TVM_GEMM_PYTHON = """\
b0 = sch.get_sblock(name="C", func_name="main")
l1, l2, l3 = sch.get_loops(block=b0)
l4, l5 = sch.split(loop=l1, factors=[None, 8], preserve_unit_iters=True, disable_predication=False)
l6, l7 = sch.split(loop=l2, factors=[None, 8], preserve_unit_iters=True, disable_predication=False)
sch.reorder(l4, l6, l3, l5, l7)
b8 = sch.cache_write(block=b0, write_buffer_index=0, storage_scope="local")
sch.reverse_compute_at(block=b8, loop=l6, preserve_unit_loops=False, index=-1)
l9 = sch.fuse(l4, l6, preserve_unit_iters=True)
sch.parallel(loop=l9)
sch.vectorize(loop=l7)
sch.unroll(loop=l5)
sch.annotate(block_or_loop=b0, ann_key="pragma_auto_unroll_max_step", ann_val=16)
b10 = sch.decompose_reduction(block=b0, loop=l3)"""

# A MetaSchedule JSONDatabase tuning record written by TVM 0.27 (llvm, gemm 37x29x23): the
# first design space of PostOrderApply plus the default CPU postprocessors.
TVM_GEMM_RECORD = (
    '[0,[[[["GetSBlock",[],["C","main"],["b0"]],["GetSBlock",[],["root","main"],["b1"]],'
    '["Annotate",["b0","\\"SSRSRS\\""],["meta_schedule.tiling_structure"],[]],'
    '["GetLoops",["b0"],[],["l2","l3","l4"]],["SamplePerfectTile",["l2"],[4,64],'
    '["v5","v6","v7","v8"]],["Split",["l2","v5","v6","v7","v8"],[1,0],["l9","l10","l11","l12"]],'
    '["SamplePerfectTile",["l3"],[4,64],["v13","v14","v15","v16"]],'
    '["Split",["l3","v13","v14","v15","v16"],[1,0],["l17","l18","l19","l20"]],'
    '["SamplePerfectTile",["l4"],[2,64],["v21","v22"]],["Split",["l4","v21","v22"],[1,0],'
    '["l23","l24"]],["Reorder",["l9","l17","l10","l18","l23","l11","l19","l24","l12","l20"],[],'
    '[]],["GetConsumers",["b0"],[],[]],["CacheWrite",["b0",[]],[0,"global"],["b25"]],'
    '["ReverseComputeAt",["b25","l18"],[1,-1],[]],["Annotate",["b1",32],'
    '["meta_schedule.parallel"],[]],["Annotate",["b1",64],["meta_schedule.vectorize"],[]],'
    '["SampleCategorical",[],[[0,16,64,512],[0.25,0.25,0.25,0.25]],["v26"]],'
    '["Annotate",["b1","v26"],["meta_schedule.unroll_explicit"],[]],["EnterPostproc",[],[],[]],'
    '["GetSBlock",[],["root","main"],["b27"]],["Unannotate",["b27"],["meta_schedule.parallel"],'
    '[]],["Unannotate",["b27"],["meta_schedule.vectorize"],[]],["Unannotate",["b27"],'
    '["meta_schedule.unroll_explicit"],[]],["GetChildBlocks",["b27"],[],["b28","b29"]],'
    '["GetLoops",["b28"],[],["l30","l31","l32","l33","l34","l35","l36","l37","l38","l39"]],'
    '["Annotate",["l30",512],["pragma_auto_unroll_max_step"],[]],["Annotate",["l30",1],'
    '["pragma_unroll_explicit"],[]],["GetLoops",["b29"],[],["l40","l41","l42","l43","l44",'
    '"l45"]],["Fuse",["l45"],[1],["l46"]],["Vectorize",["l46"],[],[]],["GetSBlock",[],'
    '["C","main"],["b47"]],["GetLoops",["b47"],[],["l48","l49","l50","l51","l52","l53","l54",'
    '"l55","l56","l57"]],["DecomposeReduction",["b47","l52"],[],["b58"]]],[[4,[1,1,1,37]],'
    "[6,[1,1,29,1]],[8,[1,23]],[16,3]]],[2.5000000000000001198e-05,2.699999999999999899e-05],"
    '{"keys":["cpu"],"kind":"llvm","mtriple":"x86_64-conda-linux-gnu","num-cores":2,"tag":""},'
    '[["TENSOR","float32",[37,23]],["TENSOR","float32",[23,29]],["TENSOR","float32",[37,29]]]]]'
)

# TVM's JSON graph of IndexMap.from_func(lambda i, j: (i // 4, j, i % 4)) over int32 indices
TVM_INDEX_MAP_GRAPH = {
    "root_index": 13,
    "nodes": [
        {"type": "None"},
        {"type": "ir.PrimType", "data": {"span": 0, "dtype": "int32"}},
        {"type": "ffi.String", "data": "i"},
        {"type": "ir.Var", "data": {"span": 0, "ty": 1, "name": 2}},
        {"type": "ffi.String", "data": "j"},
        {"type": "ir.Var", "data": {"span": 0, "ty": 1, "name": 4}},
        {"type": "ffi.Array", "data": [3, 5]},
        {"type": "int", "data": 4},
        {"type": "ir.IntImm", "data": {"span": 0, "ty": 1, "value": 7}},
        {"type": "prim.FloorDiv", "data": {"span": 0, "ty": 1, "a": 3, "b": 8}},
        {"type": "ir.IntImm", "data": {"span": 0, "ty": 1, "value": 7}},
        {"type": "prim.FloorMod", "data": {"span": 0, "ty": 1, "a": 3, "b": 10}},
        {"type": "ffi.Array", "data": [9, 5, 11]},
        {
            "type": "tirx.IndexMap",
            "data": {"initial_indices": 6, "final_indices": 12, "inverse_index_map": 0},
        },
    ],
    "metadata": {"tvm_version": "0.27.0.post1"},
}


def _gemm_schedule() -> tuple[Schedule, object]:
    func, reference = workloads.get("gemm", M=37, N=29, K=23)
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    sch.reverse_compute_at(sch.cache_write(block, 0, "local"), j0)
    sch.parallel(sch.fuse(i0, j0))
    sch.vectorize(j1)
    sch.unroll(i1)
    sch.annotate(block, "pragma_auto_unroll_max_step", 16)
    sch.decompose_reduction(block, k)
    return sch, reference


def _check_numerics(func, reference) -> None:
    args = workloads.make_args(func)
    expected = reference(*args[:-1])
    schedlab.build(func)(*args)
    np.testing.assert_allclose(args[-1], expected, rtol=1e-5, atol=1e-5)


# -- TVMScript ------------------------------------------------------------------------------
def test_script_uses_tvm_spellings():
    func = workloads.get("softmax", M=3, N=5)[0]
    sch = Schedule(func)
    sch.cache_write(sch.get_block("T_softmax_norm"), 0, "local")
    sch.annotate(sch.get_block("T_softmax_exp"), "pragma_x", 4)
    text = to_tvm_script(sch.func)
    assert text.startswith("# from tvm.script import tirx as T\n\n@T.prim_func(s_tir=True)\n")
    assert '"tirx.noalias": True' in text and '"tir.noalias"' not in text
    assert 'T_softmax_maxelem = T.sblock_alloc_buffer((3,), "float32")' in text
    assert 'scope="local"' in text
    assert 'with T.sblock("T_softmax_exp"):' in text and "T.block(" not in text
    assert 'T.sblock_attr({"pragma_x": 4})' in text
    assert "T.exp(" in text


def test_script_of_a_module_and_keywords():
    src = """
@T.prim_func
def f(a: T.handle, n: T.int32, b: T.handle):
    A = T.match_buffer(a, (n,), "float32", data_alignment=32)
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = T.Cast("float32", T.call_intrin("float16", "exp", A[vi]))
"""
    func = from_source(src)
    text = to_tvm_script(func)
    # A's shape needs n, a later parameter: TVM's parser reads parameters in order
    assert 'def main(a: T.handle, n: T.int32, B: T.Buffer((n,), "float32")):' in text
    assert 'A = T.match_buffer(a, (n,), "float32", align=32)' in text
    assert 'T.call_intrin("float16", "tirx.exp", A[vi])' in text
    module = schedlab.IRModule({"main": func})
    text = to_tvm_script(module)
    assert text.startswith("# from tvm.script import ir as I\n# from tvm.script import tirx as T")
    assert "@I.ir_module\nclass Module:\n    @T.prim_func(s_tir=True)\n    def main(" in text


def test_script_refuses_lowered_ir_and_other_nodes():
    func = workloads.get("gemm", M=2, N=2, K=2)[0]
    with pytest.raises(TVMExportError, match="expected a PrimFunc or an IRModule"):
        to_tvm_script(func.body)
    from schedlab.ir.buffer import decl_buffer

    lowered = func.replace(body=Allocate(decl_buffer((4,), "float32", "tmp"), func.body))
    with pytest.raises(TVMExportError, match="Allocate .lowered IR."):
        to_tvm_script(lowered)
    src = """
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("A"):
            vi = T.axis.spatial(4, i)
            x = A[vi] + T.float32(1)
            A[vi] = x * x
"""
    with pytest.raises(TVMExportError, match="let binding of x .LetStmt."):
        to_tvm_script(from_source(src))


# -- traces to TVM ----------------------------------------------------------------------------
def test_trace_json_is_what_tvm_writes():
    sch, _ = _gemm_schedule()
    assert trace_to_tvm_json(sch.trace) == TVM_GEMM_JSON
    json.dumps(trace_to_tvm_json(sch.trace))  # plain JSON


def test_trace_python_is_what_tvm_prints():
    sch, _ = _gemm_schedule()
    script = trace_to_tvm_python(sch.trace)
    header = "from tvm import s_tir\n\n\ndef apply(sch: s_tir.Schedule) -> None:\n"
    assert script.startswith(header)
    body = [line.removeprefix("    ") for line in script[len(header) :].splitlines()]
    assert body == TVM_GEMM_PYTHON.splitlines()
    compile(script, "<apply>", "exec")


def test_trace_export_conversions():
    func = workloads.get("gemm", M=8, N=12, K=4)[0]
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.sample_perfect_tile(i, n=2, max_innermost_factor=4, decision=[2, 4])
    sch.reindex(block, ("read", 0))
    sch.transform_layout(block, ("read", 1), lambda k, j: (j // 4, k, j % 4))
    sch.annotate(block, "n", schedlab.tir.const(3, "int64"))
    sch.loop_partition(j, [4, None])
    data = trace_to_tvm_json(sch.trace, func_name="gemm", remove_postproc=True)
    insts = {inst[0]: inst for inst in data[0]}
    assert insts["GetSBlock"][2] == ["C", "gemm"]
    assert insts["LoopPartition"][1:3] == [["l2", 4, "None"], [1]]
    assert insts["ReIndex"][2] == [0, 0]
    layout = insts["TransformLayout"]
    assert layout[2] == [1, 0, None, False]
    imap = tvm_json_graph.index_map_from_graph(layout[1][1])
    assert imap.is_equivalent_to(IndexMap.from_func(lambda k, j: (j // 4, k, j % 4)))
    assert insts["Annotate"][1] == ["b0", 3]
    assert data[1] == [[2, [2, 4]]]
    script = trace_to_tvm_python(sch.trace)
    assert 'sch.reindex(block=b0, buffer=("read", 0))' in script
    assert "index_map=lambda k, j: (j // 4, k, j % 4)" in script
    assert "decision=[2, 4]" in script


def test_trace_export_refuses_what_tvm_lacks():
    func = workloads.get("gemm", M=8, N=8, K=8)[0]
    sch = Schedule(func)
    block = sch.get_block("C")
    sch.set_axis_separator(block, ("write", 0), [1])
    with pytest.raises(TVMExportError, match=r"instruction 1 \(SetAxisSeparator\).*no TVM"):
        trace_to_tvm_json(sch.trace)
    sch = Schedule(func)
    sch.reindex(sch.get_block("C"), "A")
    with pytest.raises(TVMExportError, match=r"instruction 1 \(ReIndex\).*buffer 'A'"):
        trace_to_tvm_python(sch.trace)


# -- traces from TVM ----------------------------------------------------------------------------
def test_tvm_trace_replays_in_schedlab():
    sch, reference = _gemm_schedule()
    for data in (TVM_GEMM_JSON, json.dumps(TVM_GEMM_JSON)):
        replayed = Schedule(_gemm_func())
        trace_from_tvm_json(data).apply_to_schedule(replayed)
        assert schedlab.ir.structural_equal(replayed.func, sch.func)
    _check_numerics(replayed.func, reference)


def _gemm_func():
    return workloads.get("gemm", M=37, N=29, K=23)[0]


def test_metaschedule_record_replays_in_schedlab():
    record = read_tvm_record(TVM_GEMM_RECORD)
    assert record.mean_run_secs == pytest.approx(2.6e-5)
    assert record.target["kind"] == "llvm"
    func, reference = workloads.get("gemm", M=37, N=29, K=23)
    assert record.matches(func)
    assert not record.matches(workloads.get("gemm", M=37, N=29, K=24)[0])
    sch = Schedule(func)
    record.trace.apply_to_schedule(sch)
    _check_numerics(sch.func, reference)
    without = Schedule(func)
    record.trace.apply_to_schedule(without, remove_postproc=True)
    _check_numerics(without.func, reference)


def test_import_names_the_first_unsupported_instruction():
    data = [
        [
            ["GetSBlock", [], ["C", "main"], ["b0"]],
            ["RollingBuffer", ["b0"], [0], []],
            ["DecomposePadding", ["b0", "l1"], [], ["b2"]],
        ],
        [],
    ]
    with pytest.raises(TVMImportError, match=r"instruction 1 \(RollingBuffer\) has no schedlab"):
        trace_from_tvm_json(data)


@pytest.mark.parametrize(
    "data, message",
    [
        ("[[", "malformed"),
        ({"insts": []}, r"expected \[instructions, decisions\]"),
        ([[["Split"]], []], r"instruction 0 must be \[kind"),
        ([[["ReIndex", ["b0"], [0, 7], ["b1"]]], []], "neither 0 .read. nor 1"),
        ([[["GetLoops", ["b0"], [], ["l1"]]], []], "b0 is used before it is defined"),
        ([[["TransformBlockLayout", ["b0"], ["{}"], []]], []], "not a TVM JSON node graph"),
    ],
)
def test_import_errors(data, message):
    with pytest.raises(TVMImportError, match=message):
        trace_from_tvm_json(data)


def test_index_map_graphs():
    imap = tvm_json_graph.index_map_from_graph(json.dumps(TVM_INDEX_MAP_GRAPH))
    assert imap.to_text() == "lambda i, j: (i // 4, j, i % 4)"
    again = tvm_json_graph.index_map_from_graph(tvm_json_graph.index_map_to_graph(imap))
    assert again.is_equivalent_to(imap)
    pad = tvm_json_graph.constant_map_to_graph(0.5, 3, "float32")
    assert tvm_json_graph.constant_from_graph(pad) == 0.5
    # TVM 0.26 wrote `tirx.` op keys and inline integer values
    older = {"root_index": 6, "nodes": [
        {"type": "None"}, {"type": "ir.PrimType", "data": {"span": 0, "dtype": "int32"}},
        {"type": "ffi.String", "data": "i"},
        {"type": "ir.Var", "data": {"span": 0, "ty": 1, "name": 2}},
        {"type": "ir.IntImm", "data": {"span": 0, "ty": 1, "value": 4}},
        {"type": "tirx.FloorDiv", "data": {"span": 0, "ty": 1, "a": 3, "b": 4}},
        {"type": "tirx.IndexMap", "data": {"initial_indices": 7, "final_indices": 8,
                                           "inverse_index_map": 0}},
        {"type": "ffi.Array", "data": [3]}, {"type": "ffi.Array", "data": [5]},
    ]}  # fmt: skip
    assert tvm_json_graph.index_map_from_graph(older).to_text() == "lambda i: (i // 4,)"
    bad = dict(TVM_INDEX_MAP_GRAPH, nodes=[*TVM_INDEX_MAP_GRAPH["nodes"][:9],
               {"type": "prim.Call", "data": {}}, *TVM_INDEX_MAP_GRAPH["nodes"][10:]])  # fmt: skip
    with pytest.raises(TVMImportError, match="node 9 is a prim.Call"):
        tvm_json_graph.index_map_from_graph(bad)


def _workload_line(name: str) -> str:
    graph = {"root_index": 3, "nodes": [
        {"type": "None"}, {"type": "ir.Type", "data": {"span": 0}},
        {"type": "ffi.String", "data": name},
        {"type": "ir.GlobalVar", "data": {"span": 0, "ty": 1, "name_hint": 2}},
    ]}  # fmt: skip
    text = json.dumps(graph).encode()
    blob = len(text).to_bytes(8, "little") + text
    return json.dumps(["123", base64.b64encode(blob).decode()])


def test_read_tvm_database(tmp_path):
    (tmp_path / "database_workload.json").write_text(_workload_line("main") + "\n")
    slow = json.loads(TVM_GEMM_RECORD)
    slow[1][1] = [1e-3]
    lines = [json.dumps(slow), TVM_GEMM_RECORD, ""]
    (tmp_path / "database_tuning_record.json").write_text("\n".join(lines))
    records = read_tvm_database(tmp_path)
    assert [r.mean_run_secs for r in records] == [pytest.approx(2.6e-5), 1e-3]
    assert records[0].function_names == ("main",) and records[0].workload_hash == "123"
    assert len(read_tvm_database(tmp_path, func=_gemm_func())) == 2
    assert read_tvm_database(tmp_path, func=workloads.get("gemm", M=2, N=2, K=2)[0]) == []
    (tmp_path / "database_tuning_record.json").write_text("[0, [[[], []]]]\n[5, [[[], []]]]\n")
    with pytest.raises(TVMImportError, match="line 2: workload 5 is not in the workload file"):
        read_tvm_database(tmp_path)
    with pytest.raises(TVMImportError, match="cannot read"):
        read_tvm_database(tmp_path / "missing")


def test_docs_name_the_api():
    import pathlib
    import re

    import schedlab.export

    docs = (pathlib.Path(__file__).parent.parent / "docs" / "tvm.md").read_text()
    imported = re.search(r"from schedlab.export import \(([^)]*)\)", docs).group(1)
    for name in re.findall(r"\w+", imported):
        assert hasattr(schedlab.export, name), name
    for name in re.findall(r"`(\w+)\(", docs):
        if name.startswith(("to_tvm", "trace_", "read_tvm", "supported")):
            assert hasattr(schedlab.export, name), name


def test_docstring_examples():
    for module in (tvm_script, tvm_python):
        assert doctest.testmod(module).failed == 0


def test_pad_value_dtype_comes_from_the_function():
    func = workloads.get("gemm", dtype="float16", M=16, N=12, K=8)[0]
    sch = Schedule(func)
    sch.transform_layout(sch.get_block("C"), ("write", 0), lambda i, j: (i // 5, j, i % 5), 0.0)
    pad = trace_to_tvm_json(sch.trace, func=func)[0][1][2][2]
    assert '"dtype": "float16"' in pad
    assert '"dtype": "float32"' in trace_to_tvm_json(sch.trace)[0][1][2][2]
    mixed = from_source(
        """
@T.prim_func
def f(A: T.Buffer((10,), "float16"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            B[vi] = T.Cast("float32", A[vi])
"""
    )
    sch = Schedule(mixed)
    sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i: (i // 4, i % 4), 0.0)
    with pytest.raises(TVMExportError, match=r"one of \['float16', 'float32'\]"):
        trace_to_tvm_json(sch.trace, func=mixed)

"""Traces as people use them: JSON round trips (schedlab's schema and TVM's bare form), the
generated Python, decisions, simplification, post-processing markers, replay onto the wrong
workload, and malformed input (which is rejected as data, never executed)."""

import json
import re

import numpy as np
import pytest

from schedlab import workloads
from schedlab.ir import assert_structural_equal
from schedlab.ir.expr import FloatImm, IntImm
from schedlab.schedule import Schedule, ScheduleError, Trace, TraceError
from schedlab.schedule.values import decode_value, encode_value, python_value
from schedlab.script import tir as T
from schedlab.target import Target

from .helpers import assert_script_equal, assert_trace_roundtrip


def _gemm(m=12, n=10, k=8):
    return workloads.get("gemm", M=m, N=n, K=k)[0]


def _tiled(func=None, seed=3) -> Schedule:
    """gemm with i split by sampled factors, j split by a constant, and a sampled category."""
    func = func if func is not None else _gemm()
    sch = Schedule(func, seed=seed)
    block = sch.get_block("C")
    i, j, _ = sch.get_loops(block)
    factors = sch.sample_perfect_tile(i, n=2, max_innermost_factor=4)
    sch.split(i, factors)
    sch.split(j, [None, 4])
    sch.sample_categorical([1, 2, 4], [0.3, 0.3, 0.4])
    return sch


def _replay(trace: Trace, func, **kwargs) -> Schedule:
    sch = Schedule(func)
    trace.apply_to_schedule(sch, **kwargs)
    return sch


def _roundtrip(trace: Trace) -> Trace:
    return Trace.from_json(json.dumps(trace.as_json()))


# -- JSON --------------------------------------------------------------------------------------
def test_json_roundtrip_replays_to_the_same_ir():
    func = _gemm()
    sch = _tiled(func)
    assert_trace_roundtrip(sch, func)
    again = _replay(_roundtrip(sch.trace), func)
    assert_structural_equal(again.mod, sch.mod)
    assert again.trace.as_json() == sch.trace.as_json()


def test_json_schema_fields():
    data = _tiled().trace.as_json()
    assert data["schema"] == "schedlab.trace" and data["version"] == 1
    assert isinstance(data["workload"], str)
    assert data["target"] == "cpu"  # no target given: the host CPU, recorded as a bare kind
    assert data["insts"][0] == ["GetBlock", [], ["C", None], ["b0"]]
    assert data["insts"][1] == ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]]
    sample_index = next(i for i, x in enumerate(data["insts"]) if x[0] == "SamplePerfectTile")
    assert [d[0] for d in data["decisions"]] == [sample_index, len(data["insts"]) - 1]
    json.dumps(data)  # plain JSON all the way down


def test_json_text_and_bytes_are_accepted():
    trace = _tiled().trace
    text = json.dumps(trace.as_json())
    for form in (text, text.encode()):
        assert Trace.from_json(form).as_json() == trace.as_json()


def test_tvm_bare_form_roundtrip():
    func = _gemm()
    sch = _tiled(func)
    bare = json.loads(json.dumps(sch.trace.as_tvm_json()))
    assert isinstance(bare, list) and len(bare) == 2
    read = Trace.from_json(bare)
    assert read.workload is None  # TVM's form carries no fingerprint
    assert_structural_equal(_replay(read, func).mod, sch.mod)


def test_tvm_bare_form_written_by_hand():
    text = """[[["GetBlock", [], ["C", null], ["b0"]],
                ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
                ["SamplePerfectTile", ["l1"], [2, 4], ["v4", "v5"]]],
               [[2, [3, 4]]]]"""
    sch = _replay(Trace.from_json(text), _gemm())
    sample = sch.trace.insts[2]
    assert sch.trace.get_decision(sample) == [3, 4]
    assert [sch.get(v) for v in sample.outputs] == [3, 4]


# TVM 0.27's trace of a 128^3 matmul (TVM_INVENTORY.md section 2), verbatim but for the function
# name: TVM calls the function "main", schedlab keeps its global symbol (null: the only one).
TVM_TRACE = """[[["GetSBlock", [], ["C", null], ["b0"]],
  ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
  ["Split", ["l1", "None", 16], [true, false], ["l4", "l5"]],
  ["SamplePerfectTile", ["l2"], [2, 16], ["v6", "v7"]],
  ["Split", ["l2", "v6", "v7"], [true, false], ["l8", "l9"]],
  ["Reorder", ["l4", "l8", "l5", "l3", "l9"], [], []],
  ["Fuse", ["l4", "l8"], [1], ["l10"]],
  ["Parallel", ["l10"], [], []],
  ["Vectorize", ["l9"], [], []]],
 [[3, [16, 8]]]]"""


def test_a_trace_written_by_tvm_replays_to_tvms_loop_nest():
    func = _gemm(128, 128, 128)
    sch = _replay(Trace.from_json(TVM_TRACE), func)
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def gemm(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
         C: T.Buffer((128, 128), "float32")):
    for i_0_j_0_fused in T.parallel(128):
        for i_1, k in T.grid(16, 128):
            for j_1 in T.vectorized(8):
                with T.block("C"):
                    vi = T.axis.spatial(128, i_0_j_0_fused // 16 * 16 + i_1)
                    vj = T.axis.spatial(128, i_0_j_0_fused % 16 * 8 + j_1)
                    vk = T.axis.reduce(128, k)
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    )
    written = sch.trace.as_tvm_json()[0]
    tvm = json.loads(TVM_TRACE)[0]
    assert written[2:6] == tvm[2:6]  # Split/SamplePerfectTile/Split/Reorder: TVM's spread form
    assert written[6][1] == ["l4", "l8"]


def test_spread_and_nested_list_inputs_both_read():
    func = _gemm()
    data = _tiled(func).trace.as_json()
    split = next(x for x in data["insts"] if x[0] == "Split")
    loop, *factors = split[1]
    split[1] = [loop, factors]  # the nested form
    assert_structural_equal(_replay(Trace.from_json(data), func).mod, _tiled(func).mod)
    split[1] = []
    with pytest.raises(TraceError, match="expected at least 1 inputs, got 0"):
        Trace.from_json(data)


# -- Python ------------------------------------------------------------------------------------
def test_as_python_runs_and_reproduces_the_ir():
    func = _gemm()
    sch = _tiled(func)
    source = sch.trace.as_python()
    assert source.startswith("def apply_trace(sch):\n")
    assert "sch.split(" in source and "decision=" in source
    namespace = {"T": T}
    exec(source, namespace)  # our own generated text
    fresh = Schedule(func)
    namespace["apply_trace"](fresh)
    assert_structural_equal(fresh.mod, sch.mod)
    assert str(sch.trace) == source


def test_as_python_of_an_empty_trace():
    assert Schedule(_gemm()).trace.as_python() == "def apply_trace(sch):\n    pass\n"


def test_as_python_writes_constant_values_as_script_constants():
    assert python_value(IntImm("int32", 16)) == "T.int32(16)"
    assert python_value([IntImm("int64", 2), {"k": FloatImm("float32", 0.5)}]) == (
        "[T.int64(2), {'k': T.float32(0.5)}]"
    )


# -- decisions, simplification, post-processing ------------------------------------------------
def test_with_decision_changes_the_replayed_choice():
    func = _gemm()
    sch = _tiled(func)
    sample = next(i for i in sch.trace.insts if i.kind == "SamplePerfectTile")
    changed = sch.trace.with_decision(sample, [6, 2])
    assert sch.trace.get_decision(sample) != [6, 2] or sch.trace is not changed
    replayed = _replay(_roundtrip(changed), func)
    loops = replayed.get_loops(replayed.get_block("C"))
    assert [int(replayed.get(loop).extent) for loop in loops[:2]] == [6, 2]


def test_with_decision_errors():
    sch = _tiled()
    split = next(i for i in sch.trace.insts if i.kind == "Split")
    with pytest.raises(TraceError, match="Split is not a sampling instruction"):
        sch.trace.with_decision(split, [1])
    stranger = Schedule(_gemm()).copy()
    stranger.sample_categorical([1, 2], [0.5, 0.5])
    with pytest.raises(TraceError, match="is not in this trace"):
        sch.trace.with_decision(stranger.trace.insts[0], 0)


def test_decision_provider_overrides_decisions():
    func = _gemm()
    trace = _tiled(func).trace
    seen = []

    def provider(inst, inputs, attrs, decision):  # called for every instruction, as in TVM
        seen.append((inst.kind, decision))
        return [2, 6] if inst.kind == "SamplePerfectTile" else decision

    sch = Schedule(func)
    trace.apply_to_schedule(sch, decision_provider=provider)
    assert [kind for kind, _ in seen] == [inst.kind for inst in trace.insts]
    decided = [kind for kind, decision in seen if decision is not None]
    assert decided == ["SamplePerfectTile", "SampleCategorical"]
    assert int(sch.get(sch.get_loops(sch.get_block("C"))[1]).extent) == 6


def test_simplified_drops_unused_pure_instructions():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    sch.get_loops(block)  # unused
    sch.sample_categorical([1, 2], [0.5, 0.5])  # unused
    i = sch.get_loops(block)[0]
    sch.split(i, [None, 4])
    simple = sch.trace.simplified()
    assert [inst.kind for inst in simple.insts] == ["GetBlock", "GetLoops", "Split"]
    assert simple.decisions == {}
    assert_structural_equal(_replay(simple, _gemm()).mod, sch.mod)


def test_simplified_keeps_used_samples_and_their_decisions():
    trace = _tiled().trace.simplified()
    assert [inst.kind for inst in trace.insts] == [
        "GetBlock", "GetLoops", "SamplePerfectTile", "Split", "Split",
    ]  # fmt: skip
    assert list(trace.decisions.values()) == [trace.get_decision(trace.insts[2])]


def test_remove_postproc():
    func = _gemm()
    sch = Schedule(func)
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.split(i, [None, 4])
    before = sch.mod
    sch.enter_postproc()
    sch.sample_categorical([1, 2], [0.5, 0.5])
    j = sch.get_loops(sch.get_block("C"))[2]
    sch.split(j, [None, 2])
    trace = sch.trace
    assert len(trace.as_json(remove_postproc=True)["insts"]) == 3
    assert "enter_postproc" in trace.as_python()
    assert "sample_categorical" not in trace.as_python(remove_postproc=True)
    assert_structural_equal(_replay(trace, func, remove_postproc=True).mod, before)
    assert_structural_equal(_replay(_roundtrip(trace), func).mod, sch.mod)
    assert len(trace.simplified(remove_postproc=True)) == 3
    late_sample = trace.insts[4]
    with pytest.raises(TraceError, match="after EnterPostproc"):
        trace.with_decision(late_sample, 0, remove_postproc=True)


# -- replay errors -----------------------------------------------------------------------------
def test_replay_on_a_different_workload_says_so():
    trace = _tiled().trace
    for other in (_gemm(12, 10, 9), workloads.get("softmax", M=5, N=7)[0]):
        with pytest.raises(TraceError, match="recorded on a different workload"):
            _roundtrip(trace).apply_to_schedule(Schedule(other))


def test_replay_on_a_different_target_says_so():
    func = _gemm()
    sch = Schedule(func, target="cpu")
    sch.get_block("C")
    data = sch.trace.as_json()
    assert data["target"] == "cpu"  # a bare kind: portable to any CPU
    with pytest.raises(
        TraceError, match="recorded for target 'cpu: .*', the schedule is for 'cuda.*retarget=True"
    ):
        Trace.from_json(data).apply_to_schedule(Schedule(func, target="cuda"))
    Trace.from_json(data).apply_to_schedule(Schedule(func, target=Target("cpu", num_cores=64)))
    exact = Schedule(func, target=Target("cpu"))
    exact.get_block("C")
    data = exact.trace.as_json()
    assert Target(data["target"]) == Target("cpu")  # a Target object: recorded in full
    Trace.from_json(data).apply_to_schedule(Schedule(func, target="cpu"))
    with pytest.raises(TraceError, match="recorded for target"):
        Trace.from_json(data).apply_to_schedule(Schedule(func, target=Target("cpu", num_cores=64)))
    with pytest.raises(TraceError, match="recorded for target"):
        Trace.from_json(data).apply_to_schedule(Schedule(func, target="cuda"))
    Trace.from_json(data).apply_to_schedule(Schedule(func))  # no target: this host's CPU


def test_a_schedule_without_target_is_for_the_host_cpu():
    func = _gemm()
    sch = Schedule(func)
    assert sch.target == Target("cpu")
    sch.get_block("C")
    assert sch.trace.target == "cpu"  # portable: replays on any CPU target
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(
        Schedule(func, target=Target("cpu", num_cores=3))
    )


def test_a_trace_for_another_target_kind_needs_retarget():
    func = _gemm()
    cuda = Schedule(func, target="cuda")
    cuda.split(cuda.get_loops(cuda.get_block("C"))[0], [None, 4])
    data = cuda.trace.as_json()
    assert data["target"] == "cuda"
    host = Schedule(func)
    with pytest.raises(TraceError, match=r"recorded for target 'cuda.*the schedule is for 'cpu"):
        Trace.from_json(data).apply_to_schedule(host)
    assert len(host.trace) == 0 and host.history[-1].index == 0  # refused before any step
    Trace.from_json(data).apply_to_schedule(host, retarget=True)
    assert_structural_equal(host.mod, cuda.mod)
    assert host.trace.target == "cpu"  # the replayed trace is now the host's
    # a trace of no target (TVM's bare form) replays anywhere
    Trace.from_json(cuda.trace.as_tvm_json()).apply_to_schedule(Schedule(func))


# -- atomic replay: a failing instruction leaves the schedule as it was ------------------------
def _nine_steps(func) -> dict:
    """The JSON of a legal 9-instruction trace: get, get, split, split, reorder, sample,
    get, parallel, split (instruction 8)."""
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 2])
    sch.reorder(i0, j0, i1, j1)
    sch.sample_categorical([1, 2], [0.5, 0.5])
    sch.get_loops(block)
    sch.parallel(i0)
    sch.split(k, [None, 2])
    assert len(sch.trace) == 9
    return sch.trace.as_json()


def _used_schedule(func) -> Schedule:
    """A schedule with history: one step applied, one undone (redo must survive a failure)."""
    sch = Schedule(func)
    block = sch.get_block("C")
    sch.split(sch.get_loops(block)[1], [None, 5])
    sch.undo()
    return sch


def _snapshot(sch: Schedule):
    return (sch.mod, sch.trace, sch.trace.as_json(), [s.mod for s in sch.history],
            [s.mod for s in sch.undone], sch.seed)  # fmt: skip


def _assert_unchanged(sch: Schedule, before) -> None:
    mod, trace, data, history, undone, seed = before
    assert sch.mod is mod and sch.trace is trace and sch.trace.as_json() == data
    assert [s.mod for s in sch.history] == history and [s.mod for s in sch.undone] == undone
    assert sch.seed == seed


@pytest.mark.parametrize("index, kind", [(8, "Split"), (2, "Split")])
def test_a_failing_replay_applies_nothing(index, kind):
    func = _gemm()
    data = _nine_steps(func)
    data["insts"][index][1][-1] = 0  # factor 0: not a positive int
    sch = _used_schedule(func)
    before = _snapshot(sch)
    with pytest.raises(
        TraceError, match=rf"replaying instruction {index} \({kind}\) failed: .*factors\[1\]"
    ):
        Trace.from_json(data).apply_to_schedule(sch)
    _assert_unchanged(sch, before)  # not even the GetBlock/GetLoops before it stay
    assert sch.redo() and len(sch.trace) == 3  # the undone split can still be redone
    data["insts"][index][1][-1] = 2  # the same trace, legal: replays whole
    fresh = Schedule(func)
    Trace.from_json(data).apply_to_schedule(fresh)
    assert len(fresh.trace) == 9


def test_an_interrupted_replay_applies_nothing():
    func = _gemm()
    sch = _used_schedule(func)
    before = _snapshot(sch)

    def provider(inst, inputs, attrs, decision):
        if inst.kind == "SampleCategorical":
            raise KeyboardInterrupt  # Ctrl-C half way through
        return decision

    with pytest.raises(KeyboardInterrupt):
        Trace.from_json(_nine_steps(func)).apply_to_schedule(sch, decision_provider=provider)
    _assert_unchanged(sch, before)


def test_a_decision_providers_error_is_its_own_and_applies_nothing():
    func = _gemm()
    sch = _used_schedule(func)
    before = _snapshot(sch)

    def provider(inst, inputs, attrs, decision):
        if inst.kind == "Reorder":
            raise ValueError("no reorder today")
        return decision

    with pytest.raises(ValueError, match="^no reorder today$"):
        Trace.from_json(_nine_steps(func)).apply_to_schedule(sch, decision_provider=provider)
    _assert_unchanged(sch, before)


def test_the_tuners_replay_of_a_failing_trace_gives_none():
    from schedlab.tune.space.replay import replay

    func = _gemm()
    data = _nine_steps(func)
    data["insts"][8][1][-1] = 0
    assert replay(func, "cpu", Trace.from_json(data)) is None


def test_a_failing_instruction_names_its_index_and_kind():
    func = _gemm()
    data = _tiled(func).trace.as_json()
    data["insts"][0][2] = ["D", None]  # a block that does not exist
    with pytest.raises(
        TraceError, match=r"instruction 0 \(GetBlock\) failed: .*no block named 'D'"
    ):
        Trace.from_json(data).apply_to_schedule(Schedule(func))


def test_a_bad_decision_fails_on_replay():
    func = _gemm()
    data = _tiled(func).trace.as_json()
    data["decisions"][0][1] = [5, 5]  # product 25 != 12
    with pytest.raises(TraceError, match="SamplePerfectTile.*product 12"):
        Trace.from_json(data).apply_to_schedule(Schedule(func))


# -- malformed input is data, never code -------------------------------------------------------
def _valid() -> dict:
    """A trace of retrieval and sampling only (instructions 0-3, decisions for 2 and 3)."""
    sch = Schedule(_gemm(), seed=3)
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.sample_perfect_tile(i, n=2, max_innermost_factor=4)
    sch.sample_categorical([1, 2, 4], [0.3, 0.3, 0.4])
    return sch.trace.as_json()


def _with(path, value) -> dict:
    data = _valid()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


MALFORMED = {
    "not json": "{'schema': 1",
    "bad utf-8": b"\xff\xfe[",
    "too deep": "[" * 100_000,
    "a number": 7,
    "wrong schema": _with(["schema"], "tvm.trace"),
    "wrong version": _with(["version"], 2),
    "insts not a list": _with(["insts"], {"0": 1}),
    "short instruction": _with(["insts", 0], ["GetBlock", [], []]),
    "unknown kind": _with(["insts", 0, 0], "os.system"),
    "kind not a string": _with(["insts", 0, 0], ["GetBlock"]),
    "inputs not a list": _with(["insts", 1, 1], "b0"),
    "attrs not a list": _with(["insts", 0, 2], 5),
    "bad output name": _with(["insts", 0, 3], ["b0; import os"]),
    "output defined twice": _with(["insts", 1, 3], ["l1", "l1", "l3"]),
    "handle used before defined": _with(["insts", 1, 1], ["b7"]),
    "too many inputs": _with(["insts", 1, 1], ["b0", "b0"]),
    "unquoted string input": _with(["insts", 1, 1], ["__import__('os')"]),
    "broken quoted string": _with(["insts", 1, 1], ['"C']),
    "decisions not a list": _with(["decisions"], {}),
    "decision index out of range": _with(["decisions", 0, 0], 99),
    "decision index not an int": _with(["decisions", 0, 0], True),
    "unknown value type": _with(["insts", 0, 2], [{"__type__": "Lambda", "value": "x"}, None]),
    "malformed constant": _with(["insts", 0, 2], [{"__type__": "IntImm", "value": 3}, None]),
    "workload not a string": _with(["workload"], 12),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_json_raises_trace_error(name):
    with pytest.raises(TraceError):
        Trace.from_json(MALFORMED[name])


@pytest.mark.parametrize("depth", [62, 900])
def test_deep_nesting_inside_an_instruction_names_where(depth):
    data = _valid()
    data["insts"][1][2] = [json.loads("[" * depth + "]" * depth)]
    where = re.escape('instruction 1 (GetLoops), attrs: nested more than 64 levels deep '
                      '(at ["insts"][1][2][0][0][0]...)')  # fmt: skip
    for form in (data, json.dumps(data)):  # data as given, and text json.loads can read
        with pytest.raises(TraceError, match=where):
            Trace.from_json(form)


@pytest.mark.parametrize("depth", [5000, 200_000])
def test_json_too_deep_to_load_gives_line_and_column(depth):
    text = json.dumps(_valid())
    head, tail = text.split('["GetLoops", ["b0"], [', 1)
    text = head + '["GetLoops", ["b0"], [\n  ' + "[" * depth + "]" * depth + tail
    # line 1 opens 4 levels (trace, insts, the instruction, its attrs): the 61st bracket of
    # line 2 (column 2 + 61) is the 65th level
    with pytest.raises(TraceError, match="malformed: line 2, column 63: nested more than 64"):
        Trace.from_json(text)


def test_a_deep_index_map_in_a_trace_is_a_trace_error():
    data = _valid()
    text = "lambda i, j: (" + " + ".join(["i"] * 200_000) + ", j)"
    data["insts"][1][2] = [{"__type__": "IndexMap", "value": {"lambda": text}}]
    with pytest.raises(TraceError, match=r"instruction 1 .*nested too deeply .*column 15"):
        Trace.from_json(data)


def test_python_code_in_a_trace_is_only_a_string(tmp_path):
    marker = tmp_path / "executed"
    code = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    data = _with(["insts", 0, 2], [code, None])
    trace = Trace.from_json(json.dumps(data))
    assert trace.insts[0].attrs[0] == code
    func = _gemm()
    with pytest.raises(TraceError, match="no block named"):
        trace.apply_to_schedule(Schedule(func))
    namespace = {"T": T}
    exec(trace.as_python(), namespace)  # the code is a string literal in the source
    with pytest.raises(ScheduleError, match="no block named"):
        namespace["apply_trace"](Schedule(func))
    assert not marker.exists()


# -- value codecs ------------------------------------------------------------------------------
def test_values_roundtrip_through_json():
    values = [1, 2.5, True, None, "x", [1, [2]], {"a": 1}, IntImm("int32", 7),
              FloatImm("float32", 0.25), np.int64(3)]  # fmt: skip
    decoded = [decode_value(json.loads(json.dumps(encode_value(v)))) for v in values]
    assert decoded[:7] == values[:7]
    assert isinstance(decoded[7], IntImm) and decoded[7].value == 7
    assert str(decoded[7].dtype) == "int32"
    assert isinstance(decoded[8], FloatImm) and decoded[8].value == 0.25
    assert decoded[9] == 3


def test_unrecordable_values_are_refused():
    with pytest.raises(TraceError, match="cannot record a object"):
        encode_value(object())
    with pytest.raises(TraceError, match="dict keys must be strings"):
        encode_value({1: 2})

"""Replaying schedlab's exports in Apache TVM and TVM's traces in schedlab (docs/tvm.md).

Needs the `tvm` extra (`pip install -e '.[tvm]'`, part of `dev`): gemm, conv2d_nchw and softmax
are scheduled in schedlab at odd sizes, exported (function and trace), parsed and replayed by
TVM, compiled for TVM's llvm target and compared with numpy; TVM-made traces (MetaSchedule's
design space and postprocessors) replay in schedlab. Skipped with a reason without TVM."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

try:
    tvm = pytest.importorskip(
        "tvm", reason="Apache TVM is not installed (pip install -e '.[tvm]' runs these tests)"
    )
except OSError as err:  # a wheel built against another apache-tvm-ffi: its library won't load
    pytest.skip(f"Apache TVM is installed but does not load: {err}", allow_module_level=True)
if not hasattr(tvm, "s_tir"):
    pytest.skip(
        f"TVM {tvm.__version__} predates the s_tir / tirx namespaces schedlab exports to",
        allow_module_level=True,
    )

import schedlab  # noqa: E402
from schedlab import workloads  # noqa: E402
from schedlab.export import (  # noqa: E402
    read_tvm_database,
    to_tvm_script,
    trace_from_tvm_json,
    trace_to_tvm_json,
    trace_to_tvm_python,
)
from schedlab.ir import structural_equal  # noqa: E402
from schedlab.schedule import Schedule  # noqa: E402
from schedlab.script import from_source  # noqa: E402


# -- schedules made in schedlab ---------------------------------------------------------------
def _gemm():
    func, reference = workloads.get("gemm", M=37, N=29, K=23)
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=8))
    sch.reorder(i0, j0, k, i1, j1)
    sch.reverse_compute_at(sch.cache_write(block, 0, "local"), j0)
    sch.parallel(sch.fuse(i0, j0))
    sch.vectorize(j1)
    sch.unroll(i1)
    sch.decompose_reduction(block, k)
    return sch, reference


def _conv2d():
    func, reference = workloads.get(
        "conv2d_nchw", N=1, CI=5, H=13, W=11, CO=7, kernel=3, stride=1, padding=1, dilation=1
    )
    sch = Schedule(func)
    conv = sch.get_block("conv2d_nchw")
    n, co, y, x, rc, ry, rx = sch.get_loops(conv)
    x0, x1 = sch.split(x, [None, 4])
    sch.reorder(n, co, y, x0, rc, ry, rx, x1)
    sch.parallel(co)
    sch.compute_at(sch.get_block("pad_temp"), rc)
    sch.vectorize(x1)
    sch.reverse_compute_at(sch.cache_write(conv, 0, "local"), x0)
    return sch, reference


def _softmax():
    func, reference = workloads.get("softmax", M=7, N=37)
    sch = Schedule(func)
    norm = sch.get_block("T_softmax_norm")
    i, j = sch.get_loops(norm)
    j0, j1 = sch.split(j, [None, 8])
    sch.compute_inline(sch.get_block("T_softmax_exp"))
    for name in ("T_softmax_expsum", "T_softmax_maxelem"):
        sch.compute_at(sch.get_block(name), i)
    sch.annotate(j0, "pragma_auto_unroll_max_step", sch.sample_categorical([0, 16], [0.5, 0.5]))
    sch.parallel(i)
    sch.vectorize(j1)
    return sch, reference


WORKLOADS = {"gemm": _gemm, "conv2d_nchw": _conv2d, "softmax": _softmax}


def _tvm_func(func):
    return tvm.script.from_source(to_tvm_script(func))


def _original(sch: Schedule):
    """The unscheduled function (the schedule's first version)."""
    (func,) = sch.history[0].mod.functions().values()
    return func


def _run_in_tvm(mod, args: list[np.ndarray]) -> list[np.ndarray]:
    lib = tvm.compile(mod, target="llvm")
    tensors = [tvm.runtime.tensor(a, tvm.cpu()) for a in args]
    lib["main"](*tensors)
    return [t.numpy() for t in tensors]


def _check(func, reference, run) -> None:
    """`run(args)` (the arrays, outputs last) computes what numpy's reference does."""
    args = workloads.make_args(func)
    expected = reference(*args[:-1])
    np.testing.assert_allclose(run([a.copy() for a in args])[-1], expected, rtol=1e-5, atol=1e-5)


def _replay_in_tvm(sch: Schedule, form: str):
    """A TVM schedule of the exported unscheduled function, the exported trace replayed."""
    tvm_sch = tvm.s_tir.Schedule(_tvm_func(_original(sch)))
    if form == "json":
        data = trace_to_tvm_json(sch.trace, func=_original(sch))
        tvm.s_tir.Trace.apply_json_to_schedule(data, tvm_sch)
    else:
        namespace: dict = {}
        exec(trace_to_tvm_python(sch.trace), namespace)  # the exported script, run as it is
        namespace["apply"](tvm_sch)
    return tvm_sch


def _in_schedlab(func, trace) -> Schedule:
    sch = Schedule(func)
    trace.apply_to_schedule(sch)
    return sch


@pytest.fixture(scope="module", params=list(WORKLOADS))
def scheduled(request):
    return WORKLOADS[request.param]()


@pytest.mark.parametrize("form", ["json", "python"])
def test_exported_trace_replays_in_tvm_and_matches_numpy(scheduled, form):
    sch, reference = scheduled
    tvm_sch = _replay_in_tvm(sch, form)
    # TVM's result is the function schedlab made, as TVM parses schedlab's export of it
    tvm.ir.assert_structural_equal(tvm_sch.mod["main"], _tvm_func(sch.func))
    _check(sch.func, reference, lambda args: _run_in_tvm(tvm_sch.mod, args))


def test_tvm_trace_round_trips_into_schedlab(scheduled):
    sch, reference = scheduled
    tvm_sch = _replay_in_tvm(sch, "python")
    back = _in_schedlab(_original(sch), trace_from_tvm_json(tvm_sch.trace.as_json()))
    assert structural_equal(back.func, sch.func)
    _check(back.func, reference, lambda args: (schedlab.build(back.func)(*args), args)[1])


def _small(name: str):
    sizes = {"gemm": {"M": 16, "N": 12, "K": 8}, "softmax": {"M": 6, "N": 10}}[name]
    return workloads.get(name, **sizes)


def _sampling(s):
    b = s.get_block("C")
    i, j, k = s.get_loops(b)
    s.split(i, s.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    s.annotate(b, "pragma_auto_unroll_max_step", s.sample_categorical([0, 16], [0.5, 0.5]))
    s.sample_compute_location(b)


def _rfactor(s):
    k0, k1 = s.split(s.get_loops(s.get_block("C"))[2], [2, 4])
    s.rfactor(k1, 0)


def _cache_read(s):
    b = s.get_block("C")
    cache = s.cache_read(b, 1, "shared")
    s.compute_at(cache, s.get_loops(b)[2])
    s.storage_align(cache, 0, 0, 16, 1)
    s.set_scope(cache, 0, "local")


def _layouts(s):
    b = s.get_block("C")
    s.reindex(b, ("read", 0))
    s.transform_layout(b, ("read", 1), lambda k, j: (j // 4, k, j % 4))
    s.transform_block_layout(b, lambda i, j, k: (j, i, k))


def _pad_einsum(s):
    s.pad_einsum(s.get_block("C"), [32, 16, 8])


def _annotations(s):
    b = s.get_block("C")
    i, j, k = s.get_loops(b)
    fused = s.fuse(i, j)
    s.reorder(k, fused)
    s.annotate(b, "a", 1.5)
    s.annotate(fused, "b", "text")
    s.annotate(k, "c", [1, 2])
    s.annotate(b, "d", {"x": 1})
    s.unannotate(b, "a")
    s.enter_postproc()
    s.unroll(k)


def _bind(s):
    i, j, k = s.get_loops(s.get_block("C"))
    s.bind(i, "blockIdx.x")
    s.bind(j, "threadIdx.x")


def _softmax_stages(s):
    s.compute_inline(s.get_block("T_softmax_exp"))
    s.get_producers(s.get_block("T_softmax_norm"))
    s.get_child_blocks(s.get_block("root"))
    first = s.get_loops(s.get_block("T_softmax_maxelem"))[0]
    s.merge(first, s.get_loops(s.get_block("T_softmax_expsum"))[0])


# Schedules whose TVM replay is the IR schedlab makes; the second group gives equivalent IR of
# another shape (TVM keeps unit-loop bindings after compute_at, wraps loop_partition's parts
# in blocks, lists the updated buffer among blockize's reads, pads by predicating the
# producer), so only numerics are compared there.
EQUAL_IR = {
    "sampling": ("gemm", _sampling), "rfactor": ("gemm", _rfactor),
    "layouts": ("gemm", _layouts), "pad_einsum": ("gemm", _pad_einsum),
    "annotations": ("gemm", _annotations), "bind": ("gemm", _bind),
    "softmax_stages": ("softmax", _softmax_stages),
}  # fmt: skip


def _loop_partition(s):
    s.loop_partition(s.get_loops(s.get_block("C"))[0], [4, None])


def _blockize(s):
    s.blockize(s.get_loops(s.get_block("C"))[1])


def _padded_layout(s):
    s.transform_layout(s.get_block("C"), ("write", 0), lambda i, j: (i // 5, j, i % 5), 0.0)


SAME_NUMERICS = {
    "cache_read": ("gemm", _cache_read), "loop_partition": ("gemm", _loop_partition),
    "blockize": ("gemm", _blockize), "padded_layout": ("gemm", _padded_layout),
}  # fmt: skip


def _schedule(table: dict, name: str):
    workload, apply = table[name]
    func, reference = _small(workload)
    sch = Schedule(func)
    apply(sch)
    return sch, reference


@pytest.mark.parametrize("name", list(EQUAL_IR))
def test_primitives_replay_in_tvm_as_in_schedlab(name):
    sch, _ = _schedule(EQUAL_IR, name)
    for form in ("json", "python"):
        tvm_sch = _replay_in_tvm(sch, form)
        tvm.ir.assert_structural_equal(tvm_sch.mod["main"], _tvm_func(sch.func))
        back = _in_schedlab(_original(sch), trace_from_tvm_json(tvm_sch.trace.as_json()))
        assert structural_equal(back.func, sch.func)


@pytest.mark.parametrize("name", list(SAME_NUMERICS))
def test_primitives_replay_in_tvm_with_the_same_numerics(name):
    sch, reference = _schedule(SAME_NUMERICS, name)
    tvm_sch = _replay_in_tvm(sch, "json")
    ours, theirs = workloads.make_args(sch.func), workloads.make_args(sch.func)
    schedlab.build(sch.func)(*ours)
    theirs = _run_in_tvm(tvm_sch.mod, theirs)
    np.testing.assert_allclose(ours[-1], theirs[-1], rtol=1e-5, atol=1e-5)
    if ours[-1].shape == reference(*ours[:-1]).shape:  # not re-laid out: numpy agrees too
        _check(sch.func, reference, lambda args: _run_in_tvm(tvm_sch.mod, args))


def _metaschedule(func, seed: int):
    """MetaSchedule's first CPU design space for `func` with the postprocessors applied: a
    trace as TVM's tuner writes it (sampling, meta_schedule annotations, EnterPostproc)."""
    from tvm.s_tir import meta_schedule as ms

    mod = tvm.IRModule({"main": _tvm_func(func)})
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    context = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                             task_name="task", num_threads=1, rand_state=seed)  # fmt: skip
    tvm_sch = context.generate_design_space()[0]
    tvm_sch.enter_postproc()
    for postproc in context.space_generator.postprocs:
        assert postproc.apply(tvm_sch), type(postproc).__name__
    return tvm_sch


@pytest.mark.slow  # the first TuneContext registers TVM's tensor intrinsics (~15 s)
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_metaschedule_trace_replays_in_schedlab(name):
    sch, reference = WORKLOADS[name]()
    func = _original(sch)
    tvm_sch = _metaschedule(func, seed=3)
    ours = _in_schedlab(func, trace_from_tvm_json(tvm_sch.trace.as_json()))
    _check(func, reference, lambda args: (schedlab.build(ours.func)(*args), args)[1])
    _check(func, reference, lambda args: _run_in_tvm(tvm_sch.mod, args))


_WRITE_DATABASE = """
import json, sys, tvm
from tvm.s_tir import meta_schedule as ms
mod = tvm.IRModule({"main": tvm.script.from_source(open(sys.argv[2]).read())})
sch = tvm.s_tir.Schedule(mod)
tvm.s_tir.Trace.apply_json_to_schedule(json.load(open(sys.argv[3])), sch)
db = ms.database.JSONDatabase(work_dir=sys.argv[1])
workload = db.commit_workload(mod)
args = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
target = tvm.target.Target("llvm")
db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, [3e-5], target, args))
"""


def test_metaschedule_database_records_replay_in_schedlab(tmp_path):
    """A JSONDatabase written by TVM (in a child process: apache-tvm-ffi 0.1.15 crashes while
    serializing workloads, see docs/tvm.md) is read back and its record replayed."""
    sch, reference = _gemm()
    func = _original(sch)
    (tmp_path / "func.py").write_text(to_tvm_script(func))
    (tmp_path / "trace.json").write_text(json.dumps(trace_to_tvm_json(sch.trace)))
    script = tmp_path / "write.py"
    script.write_text(_WRITE_DATABASE)
    argv = [sys.executable, str(script), str(tmp_path), str(tmp_path / "func.py"),
            str(tmp_path / "trace.json")]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode < 0 or "Segfault" in done.stderr:
        import tvm_ffi

        pytest.skip(f"TVM's JSONDatabase crashes with apache-tvm-ffi {tvm_ffi.__version__}")
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = read_tvm_database(tmp_path, func=func)
    assert record.function_names == ("main",) and record.run_secs == (3e-5,)
    ours = _in_schedlab(func, record.trace)
    assert structural_equal(ours.func, sch.func)
    _check(func, reference, lambda args: (schedlab.build(ours.func)(*args), args)[1])


# -- TVMScript constructs ---------------------------------------------------------------------
_CONSTRUCTS = {
    "expressions": """
@T.prim_func
def f(A: T.Buffer((16, 8), "float32"), I: T.Buffer((16,), "int32"), B: T.Buffer((16, 8))):
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = (
                T.exp(A[vi, vj]) + T.sqrt(T.abs(A[vi, vj])) * T.float32(2.5)
                - T.max(A[vi, vj], T.float32(0)) / T.min(A[vi, vj], T.float32(-1))
                + T.Select(vi < vj, T.float32(1), T.float32(-1))
                + T.if_then_else(vi >= 1 and vj < 7 or not vi == 3, A[vi, vj], T.float32("-inf"))
                + T.Cast("float32", I[vi] // 3 + I[vi] % 5 + T.truncdiv(I[vi], 2))
                + T.Cast("float32", T.truncmod(I[vi], 3)) + T.tanh(A[vi, vj])
                + T.sigmoid(A[vi, vj]) + T.pow(T.abs(A[vi, vj]), T.float32(2))
                + T.floor(A[vi, vj]) + T.Cast("float32", T.Cast("float16", A[vi, vj]))
            )
""",
    "loops": """
@T.prim_func
def g(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for i in T.parallel(16):
        for j in T.serial(2, 8, annotations={"pragma_x": 1}):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                vj = T.axis.spatial((2, 8), j)
                T.where(i < 15)
                T.block_attr({"k": 16, "s": "x", "f": 1.5})
                B[vi, vj] = A[vi, vj] * T.float32(2)
    for i in T.vectorized(4):
        for j in T.unroll(2):
            with T.block("C"):
                vi = T.axis.spatial(16, i * 4 + 1)
                vj = T.axis.opaque(8, j)
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                if vi < 3:
                    B[vi, vj] = A[vi, vj]
                else:
                    B[vi, vj] = T.float32(-1)
""",
    "buffers": """
@T.prim_func
def h(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (n, 8), "float32")
    B = T.match_buffer(b, (n, 8), "float32", data_alignment=32)
    for i in range(n):
        with T.block("outer"):
            vi = T.axis.spatial(n, i)
            T.reads(A[vi, 0:8])
            T.writes(B[vi, 0:8])
            W = T.alloc_buffer((8,), "float32", scope="local")
            Asub = T.match_buffer(A[vi, 0:8], (8,), "float32")
            for j in range(8):
                with T.block("inner"):
                    vj = T.axis.spatial(8, j)
                    W[vj] = Asub[vj] * T.float32(2)
            for j, k in T.grid(8, 3):
                with T.block("out"):
                    vj, vk = T.axis.remap("SR", [j, k])
                    with T.init():
                        B[vi, vj] = T.float32(0)
                    B[vi, vj] = B[vi, vj] + W[vj]
""",
    "tiles": """
@T.prim_func
def t(A: T.Buffer((8, 12), "float32"), B: T.Buffer((8, 12), "float32")):
    for i, j in T.grid(2, 3):
        with T.block("tile"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi * 4 : vi * 4 + 4, vj * 4 : vj * 4 + 4])
            T.writes(B[vi * 4 : vi * 4 + 4, vj * 4 : vj * 4 + 4])
            At = T.match_buffer(A[vi * 4 : vi * 4 + 4, vj * 4 : vj * 4 + 4], (4, 4), "float32")
            Bt = T.match_buffer(B[vi * 4 : vi * 4 + 4, vj * 4 : vj * 4 + 4], (4, 4), "float32")
            for x, y in T.grid(4, 4):
                with T.block("inner"):
                    vx, vy = T.axis.remap("SS", [x, y])
                    Bt[vx, vy] = At[vy, vx] + T.float32(vi * 10 + vj)
""",
}


@pytest.mark.parametrize("name", list(_CONSTRUCTS))
def test_tvm_runs_exported_constructs_as_the_interpreter_does(name):
    func = from_source(textwrap.dedent(_CONSTRUCTS[name]))
    tvm_func = _tvm_func(func)
    rng = np.random.default_rng(0)
    args = []
    for buffer in func.buffers:
        shape = [int(getattr(d, "value", 5)) for d in buffer.shape]  # n = 5
        values = rng.uniform(-2, 2, shape) if buffer.dtype.is_float else rng.integers(-9, 9, shape)
        args.append(values.astype(str(buffer.dtype)))
    scalars = [5] * (len(func.params) - len(args))
    ours = [a.copy() for a in args]
    schedlab.interpret(func, *ours, *scalars)
    theirs = [tvm.runtime.tensor(a, tvm.cpu()) for a in args]
    tvm.compile(tvm_func, target="llvm")["main"](*theirs, *scalars)
    for mine, their in zip(ours, theirs):
        np.testing.assert_allclose(mine, their.numpy(), rtol=1e-5, atol=1e-5)


def test_module_of_several_functions():
    funcs = {"gemm": workloads.get("gemm", M=4, N=5, K=6), "softmax": _small("softmax")}
    module = schedlab.IRModule({name: func for name, (func, _) in funcs.items()})
    lib = tvm.compile(tvm.script.from_source(to_tvm_script(module)), target="llvm")
    for name, (func, reference) in funcs.items():

        def run(args, name=name):
            tensors = [tvm.runtime.tensor(a, tvm.cpu()) for a in args]
            lib[name](*tensors)
            return [t.numpy() for t in tensors]

        _check(func, reference, run)


def test_pad_value_takes_the_buffers_dtype():
    sch = Schedule(workloads.get("gemm", dtype="float16", M=16, N=12, K=8)[0])
    _padded_layout(sch)
    for form in ("json", "python"):
        tvm_sch = _replay_in_tvm(sch, form)
        assert 'C: T.Buffer((4, 12, 5), "float16")' in tvm_sch.mod.script()

"""The Dlight GPU rules (schedlab.dlight.gpu): every workload at odd sizes, scheduled for a GPU
by the Fallback rule (and by the default rules), matches numpy in the interpreter (thread loops
run as loops), compiles to PTX through NVRTC, and runs through OpenCL (PoCL, or the Oclgrind
simulator where PoCL cannot build for the host) matching numpy."""

from __future__ import annotations

import numpy as np
import pytest

import schedlab
from schedlab import dlight, workloads
from schedlab.dlight import gpu
from schedlab.dlight.base import schedule_func
from schedlab.ir.function import IRModule
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import For
from schedlab.target import Target
from schedlab.transform import lower

from .test_default_schedule import ODD_SIZES

H100 = Target("h100")


def _nvrtc_ready() -> bool:
    from schedlab.backend.cuda import nvrtc

    return nvrtc.available()


def _opencl_ready() -> bool:
    try:
        from schedlab.backend.opencl import runtime
    except ImportError:
        return False
    return runtime.available()


needs_nvrtc = pytest.mark.skipif(
    not _nvrtc_ready(), reason="NVRTC not installed: pip install 'schedlab[cuda]'"
)
needs_opencl = pytest.mark.skipif(
    not _opencl_ready(), reason="no OpenCL device: pip install 'schedlab[opencl]'"
)


def check(func, reference, name: str, run) -> None:
    args = workloads.make_args(func, seed=5)
    run(func, args)
    outputs = workloads.spec(name).num_outputs
    expected = reference(*args[: len(args) - outputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(args[len(args) - outputs :], expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def fallback_schedule(name: str, target=H100):
    func, reference = workloads.get(name, **ODD_SIZES[name])
    sch, fired = schedule_func(func, (gpu.Fallback(),), target, debug=True)
    return sch.func, reference, fired


def thread_tags(func) -> set[str]:
    tags = set()
    post_order_visit(func.body, lambda n: tags.add(n.thread_tag) if isinstance(n, For) else None)
    return tags - {None}


@pytest.mark.parametrize("name", sorted(ODD_SIZES))
def test_fallback_schedule_interpreted_compiled_to_ptx_and_run_on_opencl(name):
    func, reference, fired = fallback_schedule(name)
    assert set(fired.values()) <= {"Fallback", "Inline"}
    if name != "norm":  # a 0-d reduction: one thread of one block
        assert {"blockIdx.x", "threadIdx.x"} <= thread_tags(func)
    check(func, reference, name, lambda f, args: schedlab.interpret(f, *args))
    if _nvrtc_ready():
        kernel = schedlab.build(func, H100)
        for launch in kernel.launches:
            assert f".entry {launch.symbol}(" in kernel.ptx
    if _opencl_ready():
        check(func, reference, name, lambda f, args: schedlab.build(f, "opencl")(*args))


def test_fallback_splits_by_the_target_thread_limit():
    small = Target("opencl", max_threads_per_block=64)
    func, _, _ = fallback_schedule("transpose", small)
    kernel = lower(func, small)
    (launch,) = [f.attrs["gpu.launch"] for f in kernel.functions().values()]
    assert launch["threadIdx.x"].value == 64
    func, _, _ = fallback_schedule("transpose", H100)
    (launch,) = [f.attrs["gpu.launch"] for f in lower(func, H100).functions().values()]
    assert launch["threadIdx.x"].value == 256 and launch["blockIdx.x"].value == 2  # 481 / 256


def default_gpu_schedule(func, target=H100):
    mod = IRModule.from_expr(func, "main")
    return dlight.ApplyDefaultSchedule(*gpu.default_rules(), target=target)(mod)["main"]


@pytest.mark.parametrize(
    "name, rules",
    [
        ("gemm", {"C": "Matmul"}),
        ("batch_matmul", {"C": "Matmul"}),
        ("transpose", {"T_transpose": "Elementwise"}),
        ("softmax", {"T_softmax_maxelem": "Fallback", "T_softmax_norm": "Elementwise"}),
    ],
)
def test_default_gpu_rules(name, rules):
    func, reference = workloads.get(name, **ODD_SIZES[name])
    scheduled = default_gpu_schedule(func)
    fired = dlight.rules_of(scheduled)
    for block, rule in rules.items():
        assert fired.get(block) == rule, fired
    check(scheduled, reference, name, lambda f, args: schedlab.interpret(f, *args))
    if _opencl_ready():
        check(scheduled, reference, name, lambda f, args: schedlab.build(f, "opencl")(*args))


@needs_nvrtc
def test_matmul_rule_stages_tiles_in_shared_memory():
    func, _ = workloads.get("gemm", **ODD_SIZES["gemm"])
    kernel = schedlab.build(default_gpu_schedule(func), H100)
    assert "__shared__ float A_shared[512];" in kernel.source
    assert "__shared__ float B_shared[512];" in kernel.source
    assert kernel.source.count("__syncthreads();") == 2
    assert "float C_local[4];" in kernel.source
    shared = [line for line in kernel.ptx.splitlines() if line.strip().startswith(".shared")]
    assert len(shared) == 2 and all("[2048]" in line for line in shared)
    assert ".entry main_kernel(" in kernel.ptx or ".entry gemm_kernel(" in kernel.ptx


def test_gpu_default_pipeline_schedules_with_the_gpu_rules():
    from schedlab.relax.pipeline import get_default_pipeline

    for kind in ("cuda", "rocm", "opencl", "adreno"):
        names = [p.name for p in get_default_pipeline(kind).passes]
        assert "ApplyDefaultSchedule" in names and "FoldLayoutRewrite" not in names


def test_symbolic_sizes_give_a_grid_computed_at_launch():
    from schedlab import te

    n = te.var("n")
    A = te.placeholder((n, 3), name="A")
    B = te.compute((n, 3), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    sch, fired = schedule_func(te.create_prim_func([A, B]), gpu.default_rules(), H100)
    assert fired == {"B": "Elementwise"}
    (kernel,) = lower(sch.func, H100).functions().values()
    assert str(kernel.attrs["gpu.launch"]["blockIdx.x"]) == "(n * 3 + 255) // 256"
    if _opencl_ready():
        built = schedlab.build(sch.func, "opencl")
        for size in (5, 300):
            a = np.random.default_rng(size).random((size, 3), dtype="float32")
            b = np.zeros_like(a)
            built(a, b)
            np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)

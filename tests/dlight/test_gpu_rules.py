"""The Dlight GPU rules (schedlab.dlight.gpu): every workload at odd sizes, scheduled for a GPU
by the Fallback rule (and by the default rules), matches numpy in the interpreter (thread loops
run as loops), compiles to PTX through NVRTC, and runs through OpenCL (PoCL, or the Oclgrind
simulator where PoCL cannot build for the host) matching numpy."""

from __future__ import annotations

import numpy as np
import pytest

import schedlab
from schedlab import dlight, workloads
from schedlab.backend.gpu import CudaRenderer, HipRenderer, OpenCLRenderer
from schedlab.dlight import gpu
from schedlab.dlight.base import schedule_func
from schedlab.ir.function import IRModule
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import For
from schedlab.schedule import Schedule
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
        ("gemv", {"y": "GEMV"}),
        ("transpose", {"T_transpose": "Transpose"}),
        (
            "softmax",
            {"T_softmax_maxelem": "GeneralReduction", "T_softmax_norm": "GeneralReduction"},
        ),
        ("layer_norm", {"T_sum": "GeneralReduction", "T_var_sum": "GeneralReduction"}),
        ("rms_norm", {"T_sq_sum": "GeneralReduction", "T_rms_norm": "GeneralReduction"}),
        ("reduce_sum", {"A_red": "Reduction"}),
        ("max_pool2d_nchw", {"pool_max": "Fallback"}),  # a 3x3 window: too short to share
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
    # sm_90: a 64 x 64 tile, clipped to the 37 x 45 matrix (37 x 16 of A, 16 x 45 of B)
    assert "__shared__ float A_shared[592];" in kernel.source
    assert "__shared__ float B_shared[720];" in kernel.source
    assert kernel.source.count("__syncthreads();") == 2
    assert "float C_local[16];" in kernel.source
    shared = [line for line in kernel.ptx.splitlines() if line.strip().startswith(".shared")]
    assert len(shared) == 2 and "[2368]" in shared[0] and "[2880]" in shared[1]
    assert ".entry main_kernel(" in kernel.ptx or ".entry gemm_kernel(" in kernel.ptx


@pytest.mark.parametrize(
    "target, block, tile_n",
    [("h100", (16, 16), 64), ("a100", (16, 16), 64), ("mi300x", (16, 16), 64),
     ("opencl", (16, 16), 32), ("adreno740", (16, 8), 32)],
)  # fmt: skip
def test_matmul_tiles_per_target_and_the_init_before_the_k_loop(target, block, tile_n):
    func, reference = workloads.get("gemm", M=70, N=67, K=20)
    scheduled = default_gpu_schedule(func, Target(target))
    assert dlight.rules_of(scheduled) == {"C": "Matmul"}
    (kernel,) = lower(scheduled, Target(target)).functions().values()
    launch = {tag: e.value for tag, e in kernel.attrs["gpu.launch"].items()}
    assert (launch["threadIdx.x"], launch["threadIdx.y"]) == block
    assert launch["blockIdx.x"] == -(-67 // tile_n)  # N = 67 in tiles of tile_n columns
    text = kernel.script()
    assert "k_0 == 0" not in text  # decompose_reduction: zeroed once, outside the K loop
    assert text.index("C_local[0] = T.float32(0)") < text.index("for k_0 in range(")
    if target == "h100":
        check(scheduled, reference, "gemm", lambda f, args: schedlab.interpret(f, *args))
        if _opencl_ready():
            check(scheduled, reference, "gemm", lambda f, a: schedlab.build(f, "opencl")(*a))


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


# -- the rules whose threads cooperate on a reduction -------------------------------------------
def default_scheduled(name: str, target=H100, **sizes):
    func, reference = workloads.get(name, **(sizes or ODD_SIZES[name]))
    sch, fired = schedule_func(func, gpu.default_rules(), target, debug=True)
    return sch.func, reference, fired


@pytest.mark.parametrize("name", sorted(ODD_SIZES))
def test_default_gpu_rules_on_every_workload(name):
    """Every workload at odd sizes, scheduled by the default GPU rules: the interpreter and
    OpenCL match numpy, and the CUDA schedule compiles to PTX."""
    func, reference, _ = default_scheduled(name)
    check(func, reference, name, lambda f, args: schedlab.interpret(f, *args))
    if _nvrtc_ready():
        kernel = schedlab.build(func, H100)
        assert all(f".entry {launch.symbol}(" in kernel.ptx for launch in kernel.launches)
    if _opencl_ready():
        check(func, reference, name, lambda f, args: schedlab.build(f, "opencl")(*args))


@pytest.mark.parametrize(
    "name, sizes, threads",
    [
        ("reduce_sum", dict(M=3, N=37), 64),  # two warps, the second partly empty
        ("reduce_max", dict(M=2, N=300), 256),  # 8 warps: shuffles, shared, shuffles
        ("norm", dict(M=5, N=7), 64),  # a 0-d result of 35 elements: one block
    ],
)
def test_cross_thread_reduction_with_rows_not_a_multiple_of_the_threads(name, sizes, threads):
    func, reference, fired = default_scheduled(name, **sizes)
    assert "Reduction" in fired.values()
    kernels = list(lower(func, H100).functions().values())
    launched = [getattr(k.attrs["gpu.launch"].get("threadIdx.x"), "value", 0) for k in kernels]
    assert threads in launched
    check(func, reference, name, lambda f, args: schedlab.interpret(f, *args))
    cuda = CudaRenderer(H100).render(lower(func, H100)).source
    assert "__shfl_down_sync(0xffffffffu, " in cuda
    opencl = OpenCLRenderer(Target("opencl")).render(lower(func, "opencl")).source
    assert "shfl" not in opencl and "barrier(CLK_LOCAL_MEM_FENCE);" in opencl
    if _nvrtc_ready():
        assert "shfl.sync.down" in schedlab.build(func, H100).ptx
    if _opencl_ready():  # the shared-memory tree
        check(func, reference, name, lambda f, args: schedlab.build(f, "opencl")(*args))


def test_shuffles_use_the_target_warp():
    func, _, _ = default_scheduled("reduce_sum", M=3, N=300)
    mi300x = Target("mi300x")  # 64-wide wavefronts: HIP's __shfl_down without a mask
    hip = HipRenderer(mi300x).render(lower(func, mi300x)).source
    assert "__shfl_down(" in hip and ", 32, 64)" in hip and "__shfl_down_sync" not in hip
    func, reference = workloads.get("reduce_sum", M=3, N=100)
    sch = Schedule(func)
    i, k = sch.get_loops(sch.get_block("A_red"))
    ko, tx = sch.split(k, [None, 48])  # 48 threads: not whole warps -> the shared tree
    sch.reorder(tx, ko)
    sch.bind(i, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    source = CudaRenderer(H100).render(lower(sch.func, H100)).source
    assert "shfl" not in source and source.count("__syncthreads();") == 7  # 64 -> 1: 6 steps
    if _opencl_ready():
        check(sch.func, reference, "reduce_sum", lambda f, a: schedlab.build(f, "opencl")(*a))


def test_gemv_tiles_outputs_and_splits_k():
    func, reference, fired = default_scheduled("gemv", M=37, K=100)
    assert fired == {"y": "GEMV"}
    (kernel,) = lower(func, H100).functions().values()
    launch = {tag: e.value for tag, e in kernel.attrs["gpu.launch"].items()}
    assert launch == {"blockIdx.x": 5, "threadIdx.x": 32, "threadIdx.y": 8}  # 37 rows / 8
    check(func, reference, "gemv", lambda f, args: schedlab.interpret(f, *args))
    if _opencl_ready():  # one shared-memory row per threadIdx.y group
        check(func, reference, "gemv", lambda f, args: schedlab.build(f, "opencl")(*args))


def test_low_batch_gemm_is_a_gemv_and_larger_batches_a_matmul():
    func, reference, fired = default_scheduled("gemm", M=3, N=21, K=40)
    assert fired == {"C": "GEMV"}
    check(func, reference, "gemm", lambda f, args: schedlab.interpret(f, *args))
    if _opencl_ready():
        check(func, reference, "gemm", lambda f, args: schedlab.build(f, "opencl")(*args))
    assert default_scheduled("gemm", M=5, N=45, K=40)[2] == {"C": "Matmul"}


def test_transpose_goes_through_a_padded_shared_tile():
    func, reference, fired = default_scheduled("transpose", M=45, N=37)
    assert fired == {"T_transpose": "Transpose"}
    source = CudaRenderer(H100).render(lower(func, H100)).source
    assert "__shared__ float A_shared[1055];" in source  # rows 33 apart: no bank conflicts
    assert "// launch: grid (2, 2, 1), block (32, 8, 1)" in source
    check(func, reference, "transpose", lambda f, args: schedlab.interpret(f, *args))
    if _opencl_ready():
        check(func, reference, "transpose", lambda f, args: schedlab.build(f, "opencl")(*args))


def test_a_spatial_loop_under_a_thread_bound_reduction_is_refused():
    from schedlab.errors import LoweringError

    func, _ = workloads.get("reduce_sum", M=4, N=64)
    sch = Schedule(func)
    i, k = sch.get_loops(sch.get_block("A_red"))
    ko, tx = sch.split(k, [None, 32])
    sch.reorder(tx, i, ko)
    sch.bind(tx, "threadIdx.x")
    with pytest.raises(LoweringError, match="loop i is inside the reduction loop k_1 bound"):
        lower(sch.func, H100)

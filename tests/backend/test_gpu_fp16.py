"""float16 in the GPU codegens (schedlab/backend/gpu/half.py).

CUDA computes in `__half` (<cuda_fp16.h>) and is compiled to PTX by NVRTC (and by nvcc
-arch=sm_90 -ptx where nvcc is installed); HIP's source uses <hip/hip_fp16.h> (no hipcc here).
OpenCL on a device without cl_khr_fp16 (Oclgrind and PoCL on x86 advertise none, and
Oclgrind's interpreter cannot execute half arithmetic: "Unsupported float size: 2 bytes") keeps
half in memory only and computes in float rounded to float16 after each operation: those
kernels run here and match numpy and the interpreter. The native OpenCL form (Adreno's
cl_khr_fp16) is built by the driver here but not run."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import schedlab
from schedlab import te, workloads
from schedlab.backend.gpu import CudaRenderer, HipRenderer, OpenCLRenderer
from schedlab.dlight import gpu
from schedlab.dlight.base import schedule_func
from schedlab.errors import CompileError, ToolchainMissingError
from schedlab.target import Target
from schedlab.transform import lower

from ..dlight.test_gpu_rules import H100, _nvrtc_ready, _opencl_ready, needs_nvrtc, needs_opencl

SIZES = {
    "gemm": dict(M=37, N=45, K=29),
    "gemv": dict(M=37, K=29),
    "softmax": dict(M=7, N=77),
    "layer_norm": dict(M=5, N=37),
    "rms_norm": dict(M=5, N=37),
    "reduce_sum": dict(M=13, N=37),
    "reduce_max": dict(M=13, N=37),
    "transpose": dict(M=13, N=37),
}


def scheduled(name: str, target=H100, **sizes):
    func, reference = workloads.get(name, dtype="float16", **(sizes or SIZES[name]))
    sch, _ = schedule_func(func, gpu.default_rules(), target)
    return sch.func, reference


def inputs_and_expected(func, reference, name):
    args = workloads.make_args(func, seed=3)
    outputs = workloads.spec(name).num_outputs
    expected = reference(*args[: len(args) - outputs])
    return args, expected if isinstance(expected, tuple) else (expected,)


def assert_f16_close(got, want, tol=2e-2):
    """float16 results against a reference computed wide and rounded once: a few float16 ulps
    (each kernel rounds every operation to float16, in another order)."""
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol)


def nvcc_ptx(source: str, tmp_path) -> str:
    """nvcc -arch=sm_90 -ptx of a CUDA source (the CUDA toolkit's own headers)."""
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    run = subprocess.run(
        ["nvcc", "-arch=sm_90", "-ptx", str(path), "-o", str(tmp_path / "kernel.ptx")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return (tmp_path / "kernel.ptx").read_text()


@pytest.mark.parametrize("name", sorted(SIZES))
def test_float16_workloads_interpreted_compiled_and_run(name):
    """Each float16 workload, scheduled by the default GPU rules: the interpreter matches
    numpy; NVRTC compiles the __half CUDA; OpenCL (half in memory) matches numpy."""
    func, reference = scheduled(name)
    args, expected = inputs_and_expected(func, reference, name)
    schedlab.interpret(func, *args)
    for got, want in zip(args[len(args) - len(expected) :], expected):
        assert_f16_close(got, want)
    source = CudaRenderer(H100).render(lower(func, H100)).source
    assert "#include <cuda_fp16.h>" in source and "__half* __restrict__" in source
    assert "uint16_t*" not in source and "sl_round_f16" not in source
    if _nvrtc_ready():
        kernel = schedlab.build(func, H100)
        assert all(f".entry {launch.symbol}(" in kernel.ptx for launch in kernel.launches)
    if _opencl_ready():
        args, expected = inputs_and_expected(func, reference, name)
        schedlab.build(func, "opencl")(*args)
        for got, want in zip(args[len(args) - len(expected) :], expected):
            assert_f16_close(got, want)


def test_cuda_half_arithmetic_and_float_math():
    func, _ = scheduled("softmax", M=3, N=77)
    source = CudaRenderer(H100).render(lower(func, H100)).source
    # subtraction in half, exp in float rounded once; the sums add halves
    exp = "__float2half_rn(expf(__half2float(A[i * 77 + ax0_1_1] - T_softmax_maxelem_shared[0])))"
    assert f"T_softmax_expsum_in_thread[0] = T_softmax_expsum_in_thread[0] + {exp};" in source
    assert "__shfl_down_sync(0xffffffffu, T_softmax_expsum_in_thread[0], 16, 32)" in source
    assert "__shared__ __half T_softmax_expsum_cross_thread[4];" in source
    hip = HipRenderer(Target("mi300x")).render(lower(func, Target("mi300x"))).source
    assert "#include <hip/hip_fp16.h>" in hip and "const __half* __restrict__ A" in hip


@needs_nvrtc
def test_nvrtc_ptx_has_half_instructions_and_nvcc_agrees(tmp_path):
    func, _ = scheduled("gemv", M=37, K=100)
    kernel = schedlab.build(func, H100)
    assert ".f16" in kernel.ptx  # half loads, adds, multiplies (fma.rn.f16 or mul/add .f16)
    if shutil.which("nvcc"):
        ptx = nvcc_ptx(kernel.source, tmp_path)
        assert ".target sm_90" in ptx and ".f16" in ptx


def _mixed_gemm(M, N, K):
    """float16 inputs and output, float32 accumulation: what a rule asks for by writing the
    reduction in float32 and casting once."""
    A = te.placeholder((M, K), "float16", name="A")
    B = te.placeholder((K, N), "float16", name="B")
    k = te.reduce_axis((0, K), name="k")
    acc = te.compute(
        (M, N), lambda i, j: te.sum(A[i, k].astype("float32") * B[k, j].astype("float32"), axis=k),
        name="acc",
    )  # fmt: skip
    C = te.compute((M, N), lambda i, j: acc[i, j].astype("float16"), name="C")
    return te.create_prim_func([A, B, C])


def test_float32_accumulation_is_kept():
    func = _mixed_gemm(37, 45, 300)
    sch, fired = schedule_func(func, gpu.default_rules(), H100)
    assert fired["acc"] == "Matmul"
    source = CudaRenderer(H100).render(lower(sch.func, H100)).source
    assert "float acc_local[" in source and "__half2float(A_shared[" in source
    assert "__float2half_rn(acc[" in source  # the cast back: its own kernel
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (37, 300)).astype(np.float16)
    b = rng.uniform(-1, 1, (300, 45)).astype(np.float16)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)
    got = np.zeros((37, 45), np.float16)
    schedlab.interpret(sch.func, a, b, got)
    assert_f16_close(got, want, tol=3e-3)  # float32 sums of 300 terms: one float16 rounding
    if _nvrtc_ready():
        assert ".entry" in schedlab.build(sch.func, H100).ptx
    if _opencl_ready():
        got = np.zeros((37, 45), np.float16)
        schedlab.build(sch.func, "opencl")(a, b, got)
        assert_f16_close(got, want, tol=3e-3)


@needs_opencl
def test_opencl_half_in_memory_matches_the_interpreter_exactly_on_elementwise():
    """Without cl_khr_fp16 each operation is computed in float and rounded to float16: the
    same values numpy's float16 (and the interpreter) give."""
    A = te.placeholder((301,), "float16", name="A")
    B = te.compute((301,), lambda i: A[i] * A[i] + te.exp(A[i]) / 3.0, name="B")
    sch, _ = schedule_func(te.create_prim_func([A, B]), gpu.default_rules(), Target("opencl"))
    source = OpenCLRenderer(Target("opencl")).render(lower(sch.func, "opencl")).source
    assert "cl_khr_fp16" not in source
    assert "vload_half(" in source and "vstore_half_rte(" in source
    a = np.random.default_rng(1).uniform(-2, 2, 301).astype(np.float16)
    want, got = np.zeros(301, np.float16), np.zeros(301, np.float16)
    schedlab.interpret(sch.func, a, want)
    schedlab.build(sch.func, "opencl")(a, got)
    np.testing.assert_array_equal(got, want)


@needs_opencl
def test_opencl_native_half_builds_and_is_refused_by_a_device_without_it():
    from schedlab.backend.opencl import runtime

    adreno = Target("adreno740")
    func, _ = scheduled("softmax", target=adreno, M=3, N=77)
    source = OpenCLRenderer(adreno).render(lower(func, adreno)).source
    assert source.count(runtime.FP16_PRAGMA) == 1
    assert "__global half* restrict A" in source and "vload_half" not in source
    assert "(half)(expf(" in source or "(half)(exp(" in source
    if runtime.supports_fp16():
        runtime.build_program(source)  # the driver's compiler accepts it
    else:  # some PoCL builds compile `half` without cl_khr_fp16, others refuse it: we refuse first
        with pytest.raises(CompileError, match="does not support: build for a target with fp16"):
            schedlab.build(func, adreno)


def test_missing_cuda_headers_say_what_to_install(monkeypatch):
    from schedlab.backend.cuda import nvrtc

    monkeypatch.setattr(nvrtc, "include_dir", lambda: None)
    with pytest.raises(ToolchainMissingError, match="nvidia-cuda-runtime-cu12"):
        nvrtc.compile_to_ptx("#include <cuda_fp16.h>\n", "sm_90")

"""The GPU dialects of the C-family renderer (CUDA C, HIP, OpenCL C), NVRTC's PTX, and the
OpenCL and CUDA kernel drivers."""

from __future__ import annotations

import numpy as np
import pytest

import schedlab
from schedlab.backend.gpu import CudaRenderer, HipRenderer, OpenCLRenderer
from schedlab.errors import CompileError, ToolchainMissingError
from schedlab.target import Target
from schedlab.transform import lower

from ..transform.test_gpu_lowering import opencl_ready, tiled_gemm


def nvrtc_ready() -> bool:
    from schedlab.backend.cuda import nvrtc

    return nvrtc.available()


needs_nvrtc = pytest.mark.skipif(
    not nvrtc_ready(), reason="NVRTC not installed: pip install 'schedlab[cuda]'"
)


@pytest.fixture(scope="module")
def gemm():
    func, reference = tiled_gemm()
    return func, reference, lower(func, Target("h100"))


def test_cuda_dialect(gemm):
    source = CudaRenderer(Target("h100")).render(gemm[2]).source
    assert 'extern "C" __global__ void __launch_bounds__(256) gemm_kernel(' in source
    assert "const float* __restrict__ A" in source and "float* __restrict__ C" in source
    assert "__shared__ float A_shared[256];" in source
    assert "int32_t j_1 = (int32_t)threadIdx.x;" in source
    assert "int32_t i_0 = (int32_t)blockIdx.y;" in source
    assert source.count("__syncthreads();") == 2
    assert "// launch: grid (3, 3, 1), block (16, 16, 1)" in source
    # NVRTC has no standard headers: typedefs there, the C headers under nvcc
    rtc = source.index("#if defined(__CUDACC_RTC__)")
    assert rtc < source.index("typedef int int32_t;") < source.index("#else\n#include <stdint.h>")
    assert "#include" not in source[:rtc]  # no float16: no <cuda_fp16.h>


def test_hip_dialect_is_cuda_with_the_hip_header(gemm):
    source = HipRenderer(Target("mi300x")).render(gemm[2]).source
    assert source.startswith("#include <hip/hip_runtime.h>")
    assert "__shared__ float A_shared[256];" in source and "__syncthreads();" in source
    with pytest.raises(ToolchainMissingError, match="renders HIP .*hipcc"):
        schedlab.build(gemm[0], "mi300x")


def test_opencl_dialect(gemm):
    source = OpenCLRenderer(Target("opencl")).render(gemm[2]).source
    assert "__kernel void gemm_kernel(const __global float* restrict A," in source
    assert "__local float A_shared[256];" in source
    assert "(int32_t)get_group_id(1)" in source and "(int32_t)get_local_id(0)" in source
    assert source.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    assert "__syncthreads" not in source and "__global__" not in source


def test_opencl_math_names_are_overloaded():
    from schedlab import workloads
    from schedlab.dlight import gpu
    from schedlab.dlight.base import schedule_func

    func, _ = workloads.get("softmax", M=3, N=5)
    sch, _ = schedule_func(func, (gpu.Fallback(),), Target("opencl"))
    low = lower(sch.func, "opencl")
    assert "exp(" in OpenCLRenderer(Target("opencl")).render(low).source
    assert "expf(" in CudaRenderer(Target("cuda")).render(lower(sch.func, "cuda")).source


@needs_nvrtc
def test_nvrtc_compiles_to_ptx_with_the_entry_and_shared_memory(gemm):
    kernel = schedlab.build(gemm[0], Target("h100"))
    assert ".target sm_90" in kernel.ptx
    assert ".visible .entry gemm_kernel(" in kernel.ptx
    shared = [line for line in kernel.ptx.splitlines() if line.strip().startswith(".shared")]
    assert len(shared) == 1 and "A_shared[1024]" in shared[0]
    assert "bar.sync" in kernel.ptx
    a100 = schedlab.build(gemm[0], Target("a100"))
    assert ".target sm_80" in a100.ptx


@needs_nvrtc
def test_nvrtc_errors_show_the_log_and_the_line():
    from schedlab.backend.cuda import nvrtc

    with pytest.raises(CompileError, match=r"NVRTC .*rejected.*\n.*undefined.*\n.*\|.*oops"):
        nvrtc.compile_to_ptx('extern "C" __global__ void k() { oops(); }', "sm_80")


@needs_nvrtc
def test_running_cuda_without_a_gpu_says_what_is_missing(gemm):
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy is installed: this machine may run CUDA kernels")
    except ImportError:
        pass
    kernel = schedlab.build(gemm[0], "cuda")
    A, B = np.ones((37, 29), "float32"), np.ones((29, 45), "float32")
    with pytest.raises(ToolchainMissingError, match="cupy"):
        kernel(A, B, np.zeros((37, 45), "float32"))


@pytest.mark.skipif(not opencl_ready(), reason="no OpenCL device: pip install 'schedlab[opencl]'")
def test_opencl_kernel_runs_and_times(gemm):
    func, reference = gemm[:2]
    kernel = schedlab.build(func, "opencl")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((37, 29)).astype("float32")
    B = rng.standard_normal((29, 45)).astype("float32")
    C = np.zeros((37, 45), "float32")
    kernel(A, B, C)
    np.testing.assert_allclose(C, reference(A, B), rtol=1e-4, atol=1e-4)
    assert kernel.written_params() == {"C"}
    timings = kernel.benchmark(A, B, C, number=1, repeat=1)
    assert timings.median > 0

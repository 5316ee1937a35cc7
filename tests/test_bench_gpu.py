"""`schedlab bench-gpu` without a GPU: it names the target, compiles every kernel it would run to
PTX through NVRTC, reports fp16 cases the rules cannot make yet as "not supported yet" (never as a
number), measures nothing and exits 0; the GPU found maps to its preset."""

from __future__ import annotations

import pytest

from schedlab import bench_gpu, cli
from schedlab.backend.cuda import nvrtc


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(bench_gpu, "cupy_device", lambda: (None, "no CUDA device (test)"))


needs_nvrtc = pytest.mark.skipif(
    not nvrtc.available(), reason="NVRTC not installed: pip install 'schedlab[cuda]'"
)


@needs_nvrtc
def test_without_a_gpu_every_kernel_compiles_to_ptx_and_no_figure_is_measured(no_gpu, capsys):
    assert cli.main(["bench-gpu", "--target", "sm_90", "--size", "100"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("target: cuda: NVIDIA H100") and "sm_90" in out.splitlines()[0]
    assert "no GPU here: no CUDA device (test)" in out
    lines = {line.split("  ")[1].strip(): line for line in out.splitlines()
             if line.startswith("  gem")}  # fmt: skip
    assert set(lines) >= {"gemm fp32", "gemm fp16 NN", "gemm fp16 NT"}
    assert "PTX" in lines["gemm fp32"] and "entry gemm_kernel" in lines["gemm fp32"]
    for name in ("gemm fp16 NN", "gemm fp16 NT"):
        assert "not supported yet (" in lines[name] or "entry" in lines[name]
    gemv = lines.get("gemv fp16") or lines["gemv fp32"]
    assert "entry gemv_kernel" in gemv
    if "gemv fp32" in lines:
        assert "fp16 is not supported yet" in gemv
    assert out.rstrip().endswith("no figures were measured (no GPU)")
    measured = out.split("\n", 1)[1]  # the target line names the peak rates
    assert "TFLOP/s" not in measured and "TB/s" not in measured and "cuBLAS" not in measured


def test_the_default_target_without_a_gpu_is_the_h200_preset(no_gpu, monkeypatch, capsys):
    monkeypatch.setattr(bench_gpu, "build_cases", lambda target, size: [])
    assert cli.main(["bench-gpu"]) == 0
    assert "NVIDIA H200" in capsys.readouterr().out.splitlines()[0]


def test_a_non_cuda_target_is_refused(capsys):
    assert cli.main(["bench-gpu", "--target", "opencl"]) == 2
    assert "bench-gpu runs CUDA targets" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name, major, minor, arch, model",
    [("NVIDIA H200", 9, 0, "sm_90", "H200"), ("NVIDIA H100 80GB HBM3", 9, 0, "sm_90", "H100"),
     ("NVIDIA A100-SXM4-80GB", 8, 0, "sm_80", "A100"),
     ("NVIDIA GeForce RTX 4090", 8, 9, "sm_89", "RTX 4090")],
)  # fmt: skip
def test_the_gpu_found_maps_to_its_preset(name, major, minor, arch, model):
    target = bench_gpu.target_for_device(name, major, minor)
    assert target.kind == "cuda" and target.arch == arch and model in target.model


def _opencl_ready() -> bool:
    try:
        from schedlab.backend.opencl import runtime
    except ImportError:
        return False
    return runtime.available()


@pytest.mark.skipif(not _opencl_ready(), reason="no OpenCL device: pip install 'schedlab[opencl]'")
def test_device_call_launches_on_device_arrays_without_copies():
    """The timed callable of the GPU path (cupy there) runs the NT gemm here through OpenCL."""
    import numpy as np

    kernel = bench_gpu.default_build(bench_gpu.gemm_func(40, "float32", "NT"), "opencl")
    rng = np.random.default_rng(0)
    A, B = (rng.standard_normal((40, 40)).astype("float32") for _ in range(2))
    host = [A, B, np.zeros((40, 40), "float32")]
    device = [kernel.device.upload(a) for a in host]
    bench_gpu.device_call(kernel, host, device)()
    kernel.device.synchronize()
    out = np.zeros((40, 40), "float32")
    kernel.device.download(device[2], out)
    np.testing.assert_allclose(out, A @ B.T, rtol=1e-4, atol=1e-4)
    assert not host[2].any()  # the host array was not written: nothing copied back

"""Models and workloads through the GPU pipelines (issue #13): the MLP, the ResNet-style CNN and
the transformer encoder block of test_end_to_end compiled for OpenCL run on the VM and match
onnxruntime; compiled for CUDA every kernel is PTX from NVRTC, and the CUDA-scheduled kernels
run by the interpreter (no GPU here) match onnxruntime too; for ROCm every kernel lowers,
passes VerifyGPUCode and renders as HIP. Every workload's default GPU schedule lowers and
renders for ROCm and Adreno (the CUDA and OpenCL runs are in tests/dlight/test_gpu_rules.py)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import schedlab  # noqa: E402
from schedlab import workloads  # noqa: E402
from schedlab.backend.gpu import HipRenderer, OpenCLRenderer  # noqa: E402
from schedlab.dlight import gpu  # noqa: E402
from schedlab.dlight.base import schedule_func  # noqa: E402
from schedlab.ir.function import PrimFunc  # noqa: E402
from schedlab.ir.functor import post_order_visit  # noqa: E402
from schedlab.ir.stmt import For  # noqa: E402
from schedlab.relax.frontend.onnx import from_onnx  # noqa: E402
from schedlab.relax.pipeline import get_default_pipeline  # noqa: E402
from schedlab.target import Target  # noqa: E402
from schedlab.transform import lower  # noqa: E402
from tests.dlight.test_default_schedule import ODD_SIZES  # noqa: E402
from tests.relax.test_end_to_end import (  # noqa: E402
    cnn_model,
    input_arrays,
    mlp_model,
    transformer_model,
)


def _ready(module: str) -> bool:
    if module == "nvrtc":
        from schedlab.backend.cuda import nvrtc

        return nvrtc.available()
    from schedlab.backend.opencl import runtime

    return runtime.available()


MODELS = {"mlp": mlp_model, "cnn": cnn_model, "transformer": transformer_model}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    model = MODELS[request.param]()
    feeds = input_arrays(model)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    return request.param, model, feeds, expected


def _check(outputs, expected) -> None:
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    for got, want in zip(outputs, expected):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not _ready("opencl"), reason="no OpenCL device")
def test_opencl_pipeline_runs_the_model(model):
    _, onnx_model, feeds, expected = model
    ex = schedlab.compile(from_onnx(onnx_model), target="opencl")
    _check(schedlab.relax.VirtualMachine(ex)["main"](*feeds.values()), expected)


@pytest.mark.skipif(not _ready("nvrtc"), reason="NVRTC not installed")
def test_cuda_pipeline_compiles_and_its_schedules_interpret_correctly(model):
    _, onnx_model, feeds, expected = model
    ex = schedlab.compile(from_onnx(onnx_model), target="h100")
    assert ex.kernels
    for kernel in ex.kernels.values():
        assert all(f".entry {launch.symbol}(" in kernel.ptx for launch in kernel.launches)
        assert "gpu.launch" not in kernel.func.attrs  # the scheduled function, not a kernel
        assert "blockIdx.x" in _thread_tags(kernel.func)
    ex.kernels = {name: _interpreted(kernel.func) for name, kernel in ex.kernels.items()}
    _check(schedlab.relax.VirtualMachine(ex)["main"](*feeds.values()), expected)


def _thread_tags(func: PrimFunc) -> set[str]:
    tags: set[str] = set()
    post_order_visit(func.body, lambda n: tags.add(n.thread_tag) if isinstance(n, For) else None)
    return tags


def _interpreted(func: PrimFunc):
    def run(*arrays):
        schedlab.interpret(func, *arrays)

    return run


def test_rocm_pipeline_kernels_pass_the_verifier_and_render_as_hip(model):
    _, onnx_model, _, _ = model
    target = Target("mi300x")
    mod = get_default_pipeline(target)(from_onnx(onnx_model))
    funcs = [f for f in mod.functions().values() if isinstance(f, PrimFunc)]
    assert funcs and all("threadIdx.x" in _thread_tags(f) for f in funcs)
    for func in funcs:
        source = HipRenderer(target).render(lower(func, target)).source  # VerifyGPUCode ran
        assert source.startswith("#include <hip/hip_runtime.h>") and "__global__" in source


@pytest.mark.parametrize("name", sorted(ODD_SIZES))
def test_workload_schedules_lower_for_rocm_and_adreno(name):
    func, _ = workloads.get(name, **ODD_SIZES[name])
    for preset, renderer in (("mi300x", HipRenderer), ("adreno740", OpenCLRenderer)):
        target = Target(preset)
        sch, _ = schedule_func(func, gpu.default_rules(), target)
        source = renderer(target).render(lower(sch.func, target)).source
        assert "__global__" in source or "__kernel" in source

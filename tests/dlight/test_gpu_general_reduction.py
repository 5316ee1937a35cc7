"""The GeneralReduction GPU rule: softmax, layer_norm and rms_norm become one kernel with one
thread block per row; checked at odd row lengths (777, 1000, 37) in the interpreter (the
GPU-scheduled TIR), on OpenCL (Oclgrind: the shared-memory tree) and compiled by NVRTC (warp
shuffles), against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import schedlab
from schedlab import dlight, te, workloads
from schedlab.backend.gpu import CudaRenderer, OpenCLRenderer
from schedlab.dlight import gpu
from schedlab.dlight.base import schedule_func
from schedlab.target import Target
from schedlab.transform import lower

from .test_gpu_rules import H100, _nvrtc_ready, _opencl_ready

STAGES = {
    "softmax": ["T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"],
    "layer_norm": ["T_sum", "T_var_sum", "T_layer_norm"],
    "rms_norm": ["T_sq_sum", "T_rms_norm"],
}


def scheduled(name: str, M: int, N: int, dtype: str = "float32", target=H100):
    func, reference = workloads.get(name, M=M, N=N, dtype=dtype)
    sch, fired = schedule_func(func, gpu.default_rules(), target, debug=True)
    return sch.func, reference, fired


def check(func, reference, rtol=1e-5, atol=1e-6, seed=2):
    """The interpreter, and OpenCL where a device exists, against numpy."""
    runs = [lambda f, args: schedlab.interpret(f, *args)]
    if _opencl_ready():
        runs.append(lambda f, args: schedlab.build(f, "opencl")(*args))
    for run in runs:
        args = workloads.make_args(func, seed=seed)
        run(func, args)
        want = reference(*args[:-1])
        np.testing.assert_allclose(
            args[-1].astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol
        )


@pytest.mark.parametrize("name", sorted(STAGES))
@pytest.mark.parametrize("M, N, threads", [(3, 777, 256), (2, 1000, 256), (5, 37, 64)])
def test_one_kernel_one_block_per_row(name, M, N, threads):
    func, reference, fired = scheduled(name, M, N)
    assert fired == {stage: "GeneralReduction" for stage in STAGES[name]}
    (kernel,) = lower(func, H100).functions().values()  # one kernel, not one per stage
    launch = {tag: e.value for tag, e in kernel.attrs["gpu.launch"].items()}
    assert launch == {"blockIdx.x": M, "threadIdx.x": threads}
    check(func, reference)
    if _nvrtc_ready():
        ptx = schedlab.build(func, H100).ptx
        assert ptx.count(".entry ") == 1 and "shfl.sync.down" in ptx


def test_softmax_source_keeps_each_row_result_in_shared_memory():
    func, _, _ = scheduled("softmax", 4, 777)
    cuda = CudaRenderer(H100).render(lower(func, H100)).source
    # the row's max and sum: one shared value each, read by every thread after a barrier
    assert "__shared__ float T_softmax_maxelem_shared[1];" in cuda
    assert "__shared__ float T_softmax_expsum_shared[1];" in cuda
    assert "T_softmax_exp[" not in cuda  # exp inlined: recomputed, never stored
    assert "expf(A[i * 777 + " in cuda and cuda.count("__syncthreads();") >= 4
    opencl = OpenCLRenderer(Target("opencl")).render(lower(func, "opencl")).source
    assert opencl.count("__kernel void") == 1 and "__local float T_softmax_expsum_shared[1];" in (
        opencl
    )


def test_float16_rows():
    for name in STAGES:
        func, reference, fired = scheduled(name, 3, 777, dtype="float16")
        assert set(fired.values()) == {"GeneralReduction"}
        check(func, reference, rtol=2e-2, atol=2e-2)  # float16 sums of 777 terms
        if _nvrtc_ready():
            assert "__half" in schedlab.build(func, H100).source


def test_targets_thread_limits():
    adreno = Target("opencl", max_threads_per_block=64)
    func, reference, fired = scheduled("layer_norm", 3, 1000, target=adreno)
    assert set(fired.values()) == {"GeneralReduction"}
    (kernel,) = lower(func, adreno).functions().values()
    assert kernel.attrs["gpu.launch"]["threadIdx.x"].value == 64
    check(func, reference)


def test_declines_what_is_not_a_row_chain():
    # a lone reduction: the Reduction rule's
    func, _ = workloads.get("reduce_sum", M=3, N=777)
    assert dlight.rules_of(_default(func)) == {"A_red": "Reduction"}
    # a reduction followed by a stage over other rows (a column broadcast): not one chain
    A = te.placeholder((8, 300), name="A")
    k = te.reduce_axis((0, 300), name="k")
    total = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="total")
    B = te.compute((300, 8), lambda j, i: A[i, j] / total[i], name="B")
    fired = dlight.rules_of(_default(te.create_prim_func([A, B])))
    assert fired["total"] == "Reduction" and fired["B"] != "GeneralReduction"
    # too short a row (a pooling window): one thread per output
    func, _ = workloads.get("softmax", M=40, N=9)
    assert "GeneralReduction" not in dlight.rules_of(_default(func)).values()


def _default(func):
    from schedlab.ir.function import IRModule

    mod = IRModule.from_expr(func, "main")
    return dlight.ApplyDefaultSchedule(*gpu.default_rules(), target=H100)(mod)["main"]

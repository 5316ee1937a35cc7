"""The GPU predicted latency (schedlab.cost.gpu): per-SM roofline with occupancy, read from the
lowered kernels and the target's description."""

from __future__ import annotations

import pytest

from schedlab import dlight, workloads
from schedlab.cost.gpu import predict_gpu
from schedlab.dlight import gpu
from schedlab.ir.function import IRModule
from schedlab.target import Target

H200 = Target("h200")


def scheduled(name, target=H200, **sizes):
    func, _ = workloads.get(name, **sizes)
    mod = dlight.ApplyDefaultSchedule(*gpu.default_rules(), target=target)(
        IRModule.from_expr(func, "main")
    )
    return mod["main"]


@pytest.fixture(scope="module")
def gemm_4096():
    return predict_gpu(scheduled("gemm", M=4096, N=4096, K=4096), H200)


def test_matmul_rule_gemm_counts_its_flops_and_is_bound_by_shared_memory(gemm_4096):
    p = gemm_4096
    assert p.flops == 2 * 4096**3
    (kernel,) = p.kernels
    assert (kernel.grid, kernel.block) == (64 * 64, 256)
    assert kernel.shared_bytes == 2 * 64 * 16 * 4  # the A and B tiles
    # a 4 x 4 register tile: 8 distinct shared loads (32 bytes) per 16 FMAs
    assert kernel.bound == "shared" and kernel.terms["shared"] == pytest.approx(
        2 * kernel.terms["compute"], rel=0.05
    )
    assert kernel.limiter == "registers" and 0 < kernel.occupancy <= 1
    assert kernel.waves == -(-kernel.grid // (132 * kernel.blocks_per_sm))
    # slower than the fp32 roofline, within reach of it (cuBLAS runs near 0.8 of it)
    assert p.roofline_seconds < p.seconds < 4 * p.roofline_seconds
    assert "registers-limited" in p.notes()[0][1]


def test_gemv_is_dram_bound_and_no_faster_than_the_bandwidth():
    p = predict_gpu(scheduled("gemv", M=4096, K=4096), H200)
    assert p.bound == "DRAM"
    assert p.bytes_moved["DRAM"] >= 4096 * 4096 * 4
    assert p.seconds >= p.bytes_moved["DRAM"] / (H200.mem_bandwidth_gbs * 1e9)


def test_an_unscheduled_function_is_one_thread_and_far_slower():
    func, _ = workloads.get("gemm", M=64, N=64, K=64)
    serial = predict_gpu(func, H200)
    (kernel,) = serial.kernels
    assert (kernel.grid, kernel.block, kernel.resident_blocks) == (1, 1, 1)
    assert kernel.occupancy == pytest.approx(1 / 64)  # one warp of 64 slots
    assert serial.seconds > 50 * predict_gpu(scheduled("gemm", M=64, N=64, K=64), H200).seconds


def test_fewer_registers_per_sm_lower_occupancy_and_a_block_that_does_not_fit_is_named(gemm_4096):
    func = scheduled("gemm", M=4096, N=4096, K=4096)
    p = predict_gpu(func, Target("h200", registers_per_sm=16384))
    (kernel,) = p.kernels
    assert kernel.blocks_per_sm == 1 and kernel.limiter == "registers"
    assert kernel.occupancy < gemm_4096.kernels[0].occupancy
    assert kernel.waves == 32  # 4096 blocks, one per SM at a time
    with pytest.raises(ValueError, match="256 threads does not fit on an SM .registers"):
        predict_gpu(func, Target("h200", registers_per_sm=8192))


def test_every_kernel_of_a_function_adds_up():
    # padding and convolution: two kernels (softmax is one since the GeneralReduction rule)
    p = predict_gpu(scheduled("conv2d_nchw", CI=5, H=13, W=11, CO=7), H200)
    assert len(p.kernels) > 1
    assert p.seconds == pytest.approx(sum(k.seconds for k in p.kernels))


def test_a_cpu_target_is_refused():
    func, _ = workloads.get("gemm", M=8, N=8, K=8)
    with pytest.raises(ValueError, match="not a GPU target"):
        predict_gpu(func, "cpu")

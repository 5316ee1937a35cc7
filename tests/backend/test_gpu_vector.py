"""Vector loads and stores from vectorized loops in the GPU codegens
(schedlab/backend/gpu/vector.py): float4 / __half2 / aligned structs on CUDA (compiled by NVRTC
and nvcc, the PTX checked for v4/v2 accesses), vloadN/vstoreN and vload_halfN on OpenCL (run on
Oclgrind against numpy and the interpreter), lane by lane where alignment is not proven."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import schedlab
from schedlab import te
from schedlab.backend.gpu import CudaRenderer, HipRenderer, OpenCLRenderer
from schedlab.backend.gpu.vector import constant_divisor
from schedlab.ir import expr as E
from schedlab.schedule import Schedule
from schedlab.target import Target
from schedlab.transform import lower

from ..dlight.test_gpu_rules import H100, _nvrtc_ready, _opencl_ready
from .test_gpu_fp16 import nvcc_ptx

OPENCL = Target("opencl")


def vectorized(n: int, dtype: str, lanes: int, compute, threads: int = 50, inputs: int = 2):
    """B = compute(A, C) over n elements, split (blocks, threads, lanes), lanes vectorized."""
    size = 2 * n + 8  # room for shifted and strided reads
    placeholders = [te.placeholder((size,), dtype, name=name) for name in "AC"[:inputs]]
    B = te.compute((n,), lambda i: compute(*placeholders, i), name="B")
    sch = Schedule(te.create_prim_func([*placeholders, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx, v = sch.split(i, [None, threads, lanes])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(v)
    return sch.func


def sources(func):
    cuda = CudaRenderer(H100).render(lower(func, H100)).source
    opencl = OpenCLRenderer(OPENCL).render(lower(func, OPENCL)).source
    return cuda, opencl


def run_and_compare(func, n: int, dtype: str, inputs: int = 2):
    """OpenCL (where there is a device) and the interpreter against numpy's float16/32."""
    rng = np.random.default_rng(n)
    args = [rng.uniform(-1, 1, 2 * n + 8).astype(dtype) for _ in range(inputs)]
    want = np.zeros(n, dtype)
    schedlab.interpret(func, *args, want)
    if _opencl_ready():
        got = np.zeros(n, dtype)
        schedlab.build(func, OPENCL)(*args, got)
        np.testing.assert_array_equal(got, want)
    return args, want


def test_float4_loads_and_stores():
    func = vectorized(1000, "float32", 4, lambda A, C, i: A[i] * 2.0 + C[i])
    cuda, opencl = sources(func)
    assert "float4 sl_v = *(const float4*)(A + i_0 * 200 + i_1 * 4);" in cuda
    assert "sl_r.w = sl_v.w * 2.0f + sl_v_1.w;" in cuda
    assert "*(float4*)(B + i_0 * 200 + i_1 * 4) = sl_r;" in cuda
    assert "float4 sl_v = vload4(0, A + i_0 * 200 + i_1 * 4);" in opencl
    assert "vstore4(sl_r, 0, B + i_0 * 200 + i_1 * 4);" in opencl
    args, want = run_and_compare(func, 1000, "float32")
    np.testing.assert_allclose(want, args[0][:1000] * 2 + args[1][:1000], rtol=1e-6)
    if _nvrtc_ready():
        ptx = schedlab.build(func, H100).ptx
        assert ptx.count("ld.global.nc.v4.f32") == 2 and ptx.count("st.global.v4.f32") == 1
    hip = HipRenderer(Target("mi300x")).render(lower(func, Target("mi300x"))).source
    assert "*(const float4*)(A + " in hip


def test_half2_and_half_x8_vectors():
    func = vectorized(600, "float16", 2, lambda A, C, i: A[i] * C[i] - A[i], threads=60)
    cuda, opencl = sources(func)
    assert "__half2 sl_v = *(const __half2*)(A + i_0 * 120 + i_1 * 2);" in cuda
    assert "sl_r.y = sl_v.y * sl_v_1.y - sl_v.y;" in cuda
    # no cl_khr_fp16 here: half in memory, float2 in registers, each operation rounded
    assert "float2 sl_v = vload_half2(0, A + i_0 * 120 + i_1 * 2);" in opencl
    assert "vstore_half2_rte(sl_r, 0, B + i_0 * 120 + i_1 * 2);" in opencl
    args, want = run_and_compare(func, 600, "float16")
    a, c = (x[:600] for x in args)
    np.testing.assert_array_equal(want, a * c - a)  # numpy's float16: rounded per operation
    wide = vectorized(800, "float16", 8, lambda A, C, i: A[i] + C[i])
    cuda, _ = sources(wide)
    assert "struct __align__(16) sl_float16x8 { __half s[8]; };" in cuda
    run_and_compare(wide, 800, "float16")
    if _nvrtc_ready():
        assert "ld.global.nc.v4.u32" in schedlab.build(wide, H100).ptx  # 8 halves: 16 bytes
        ptx = schedlab.build(func, H100).ptx  # a __half2: one 4-byte access of two halves
        assert "ld.global.nc.v2.u16" in ptx and "st.global.v2.u16" in ptx


def test_unaligned_and_strided_accesses_go_lane_by_lane_on_cuda_only_where_needed():
    shifted = vectorized(1000, "float32", 4, lambda A, i: A[i + 1] + 1.0, inputs=1)
    cuda, opencl = sources(shifted)
    assert "// lane by lane: A (index i_0 * 200 + i_1 * 4 + 1 not provably a multiple of 4" in (
        cuda
    )
    assert "*(float4*)(B + i_0 * 200 + i_1 * 4) = sl_r;" in cuda  # the store still is one
    assert "sl_r.y = A[i_0 * 200 + i_1 * 4 + 2] + 1.0f;" in cuda
    assert "vload4(0, A + i_0 * 200 + i_1 * 4 + 1)" in opencl  # vloadN: element alignment
    args, want = run_and_compare(shifted, 1000, "float32", inputs=1)
    np.testing.assert_allclose(want, args[0][1:1001] + 1, rtol=1e-6)
    strided = vectorized(400, "float32", 4, lambda A, i: A[i * 2], inputs=1)
    cuda, opencl = sources(strided)
    assert "// lane by lane: A strided" in cuda and "// lane by lane: A strided" in opencl
    assert "sl_r.w = A[i_0 * 400 + i_1 * 8 + 6];" in cuda
    args, want = run_and_compare(strided, 400, "float32", inputs=1)
    np.testing.assert_array_equal(want, args[0][:800:2])
    if _nvrtc_ready():
        ptx = schedlab.build(shifted, H100).ptx
        assert "ld.global.nc.v4.f32" not in ptx and "st.global.v4.f32" in ptx


def test_a_guarded_vector_loop_stays_a_loop_and_stays_correct():
    """1001 elements in vectors of 4: the tail test depends on the lane, so the loop is not
    vectorized (as in TVM) and runs lane by lane."""
    func = vectorized(1001, "float32", 4, lambda A, C, i: A[i] - C[i])
    cuda, _ = sources(func)
    assert "float4" not in cuda and "vectorized kind runs as a plain loop" in cuda
    args, want = run_and_compare(func, 1001, "float32")
    np.testing.assert_allclose(want, args[0][:1001] - args[1][:1001], rtol=1e-6)


def test_shared_arrays_read_as_vectors_are_aligned():
    n = 1024
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    sch = Schedule(te.create_prim_func([A, B]))
    block = sch.get_block("B")
    (i,) = sch.get_loops(block)
    bx, tx, v = sch.split(i, [None, 64, 4])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(shared, bx)
    (copy,) = sch.get_loops(shared)[1:]
    ctx, cv = sch.split(copy, [64, 4])
    sch.bind(ctx, "threadIdx.x")
    sch.vectorize(cv)
    sch.vectorize(v)
    cuda, opencl = sources(sch.func)
    assert "__shared__ float __align__(16) A_shared[256];" in cuda
    assert "*(float4*)(A_shared + " in cuda and "*(const float4*)(A_shared + " in cuda
    assert "vload4(0, A_shared + " in opencl
    a = np.random.default_rng(0).uniform(-1, 1, n).astype("float32")
    want = np.zeros(n, "float32")
    schedlab.interpret(sch.func, a, want)
    np.testing.assert_allclose(want, a * 3, rtol=1e-6)
    if _opencl_ready():
        got = np.zeros(n, "float32")
        schedlab.build(sch.func, OPENCL)(a, got)
        np.testing.assert_array_equal(got, want)
    if _nvrtc_ready():
        ptx = schedlab.build(sch.func, H100).ptx
        # each thread reads back its own 16 bytes: NVVM forwards them, the global ones remain
        loads = [line for line in ptx.splitlines() if "ld.global" in line]
        assert loads and all(".v4." in line for line in loads) and "st.global.v4.f32" in ptx


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc not installed")
def test_nvcc_compiles_the_vector_kernels(tmp_path):
    func = vectorized(800, "float16", 8, lambda A, C, i: A[i] * C[i])
    ptx = nvcc_ptx(sources(func)[0], tmp_path)
    assert ".target sm_90" in ptx and "ld.global.nc.v4" in ptx


def test_constant_divisor():
    i = E.Var("i", "int32")
    assert constant_divisor(i * 4 + 8) == 4
    assert constant_divisor(i * 4 + 2) == 2
    assert constant_divisor((i + 1) * 6) == 6
    assert constant_divisor(i) == 1

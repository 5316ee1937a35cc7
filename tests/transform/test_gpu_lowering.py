"""The GPU lowering passes: thread binding -> kernels with launch sizes, shared tiles sized per
thread block, barriers between shared-memory phases, limits checked with errors that name the
loop and the limit; and the interpreter running GPU-scheduled IR (barriers as no-ops)."""

from __future__ import annotations

import numpy as np
import pytest

import schedlab
from schedlab import workloads
from schedlab.errors import LoweringError
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import Allocate, Evaluate
from schedlab.schedule import Schedule
from schedlab.script import from_source
from schedlab.target import Target
from schedlab.transform import lower
from schedlab.transform.thread_binding import BARRIER

REVERSE = """
@T.prim_func
def rev(A: T.Buffer((40,), "float32"), B: T.Buffer((40,), "float32")):
    S = T.alloc_buffer((40,), "float32", scope="shared")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(40, thread="threadIdx.x"):
            with T.block("load"):
                v = T.axis.spatial(40, tx)
                S[v] = A[v] * T.float32(2)
        for tx in T.thread_binding(40, thread="threadIdx.x"):
            {barrier}
            with T.block("store"):
                v = T.axis.spatial(40, tx)
                B[v] = S[39 - v]
"""
EXPLICIT = 'T.evaluate(T.call_intrin("int32", "tvm_storage_sync", "shared"))'


def reverse(explicit_barrier: bool = False):
    return from_source(REVERSE.format(barrier=EXPLICIT if explicit_barrier else "T.evaluate(0)"))


def opencl_ready() -> bool:
    from schedlab.backend.opencl import runtime

    return runtime.available()


def barriers(func) -> int:
    found = []
    post_order_visit(
        func.body,
        lambda n: (
            found.append(n)
            if isinstance(n, Evaluate) and getattr(n.value, "op", None) == BARRIER
            else None
        ),
    )
    return len(found)


def kernels(func, target="cuda"):
    return list(lower(func, Target(target)).functions().values())


def tiled_gemm(M=37, N=45, K=29):
    func, reference = workloads.get("gemm", M=M, N=N, K=K)
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, 16])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(k, [None, 16])
    sch.reorder(io, jo, ii, ji, ko, ki)
    for loop, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"),
                      (ji, "threadIdx.x")):  # fmt: skip
        sch.bind(loop, tag)
    shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(shared, ko)
    _, ty, tx = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, 16, 16])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    return sch.func, reference


def test_thread_binding_gives_launch_sizes_and_thread_indices():
    func, _ = tiled_gemm()
    (kernel,) = kernels(func)
    launch = {tag: e.value for tag, e in kernel.attrs["gpu.launch"].items()}
    assert launch == {"blockIdx.x": 3, "blockIdx.y": 3, "threadIdx.x": 16, "threadIdx.y": 16}
    assert kernel.attrs["gpu.thread_loops"]["threadIdx.x"] == "j_1, ax0_ax1_fused_2"
    assert kernel.attrs["global_symbol"] == "gemm_kernel" and kernel.attrs["gpu.host"] == "gemm"
    text = kernel.script()
    assert 'j_1: T.int32 = T.call_intrin("int32", "thread_index", "threadIdx.x")' in text


def test_shared_tile_is_sized_for_one_block_and_one_k_step_and_synchronized():
    func, _ = tiled_gemm()
    (kernel,) = kernels(func)
    assert isinstance(kernel.body, Allocate) and kernel.body.buffer.scope == "shared"
    assert [e.value for e in kernel.body.buffer.shape] == [256]  # 16 x 16, not 16 x K
    # one barrier before the tile is overwritten (the last step's reads), one before reading it
    assert barriers(kernel) == 2


def test_reverse_through_shared_memory_needs_its_barrier():
    func = reverse()
    (kernel,) = kernels(func, "opencl")
    assert barriers(kernel) == 1
    A = np.arange(40, dtype="float32")
    expected = (A * 2)[::-1]
    for explicit in (False, True):  # an explicit barrier is a no-op in the interpreter
        out = np.zeros(40, "float32")
        schedlab.interpret(reverse(explicit), A, out)
        np.testing.assert_array_equal(out, expected)
    if opencl_ready():
        out = np.zeros(40, "float32")
        schedlab.build(func, "opencl")(A, out)
        np.testing.assert_array_equal(out, expected)


def test_stages_become_kernels_with_workspace_in_between():
    from schedlab.dlight import gpu
    from schedlab.dlight.base import schedule_func

    func, reference = workloads.get("softmax", M=7, N=37)
    sch, _ = schedule_func(func, (gpu.Fallback(),), Target("cuda"))
    found = kernels(sch.func)
    assert [k.attrs["gpu.order"] for k in found] == [0, 1, 2, 3]
    assert [k.attrs["global_symbol"] for k in found][0] == "softmax_kernel0"
    assert found[0].attrs["gpu.workspace"] == ("T_softmax_maxelem",)
    if opencl_ready():
        A = np.random.default_rng(1).standard_normal((7, 37)).astype("float32")
        out = np.zeros_like(A)
        schedlab.build(sch.func, "opencl")(A, out)
        np.testing.assert_allclose(out, reference(A), rtol=1e-5, atol=1e-6)


COUNT = """
@T.prim_func
def count(A: T.Buffer((40,), "float32"), B: T.Buffer((41,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(40, thread="threadIdx.x"):
            with T.block("copy"):
                v = T.axis.spatial(40, tx)
                B[v + 1] = A[v]
        with T.block("count"):
            B[0] = B[0] + T.float32(1)
"""


def test_a_store_outside_the_thread_loops_has_one_writer():
    func = from_source(COUNT)
    (kernel,) = kernels(func, "opencl")
    assert 'T.call_intrin("int32", "thread_index", "threadIdx.x") == 0' in kernel.script()
    A = np.arange(40, dtype="float32")
    expected = np.concatenate([[6.0], A]).astype("float32")
    out = np.full(41, 5.0, "float32")
    schedlab.interpret(func, A, out)
    np.testing.assert_array_equal(out, expected)
    if opencl_ready():  # 40 threads, one increment
        out = np.full(41, 5.0, "float32")
        schedlab.build(func, "opencl")(A, out)
        np.testing.assert_array_equal(out, expected)
    unbound, _ = workloads.get("reduce_sum", M=13, N=37)
    (kernel,) = kernels(unbound)  # no binding at all: one thread of one block
    assert kernel.attrs["gpu.launch"] == {}


def test_block_loop_inside_a_serial_loop_is_refused_by_name():
    func, _ = workloads.get("gemm", M=8, N=8, K=8)
    sch = Schedule(func)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(j, "blockIdx.x")
    with pytest.raises(LoweringError, match="loop j is bound to blockIdx.x inside loop i"):
        lower(sch.func, "cuda")


def test_symbolic_thread_count_is_refused():
    from schedlab import te

    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    sch = Schedule(te.create_prim_func([A, B]))
    (loop,) = sch.get_loops(sch.get_block("B"))
    sch.bind(loop, "threadIdx.x")
    with pytest.raises(LoweringError, match="bound to threadIdx.x with the symbolic extent"):
        lower(sch.func, "cuda")


def test_limits_are_checked_with_the_loop_and_the_limit_named():
    func, _ = workloads.get("transpose", M=64, N=33)
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("T_transpose"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    small = Target("opencl", max_threads_per_block=32)
    threads = r"loop j is bound to threadIdx.x with 64 threads; at most 32 .*max_threads_per_block"
    with pytest.raises(LoweringError, match=threads):
        lower(sch.func, small)
    tiled, _ = tiled_gemm()
    shared = r"1024 bytes of shared memory \(A_shared 1024 B\); at most 512 .*max_shared_memory"
    with pytest.raises(LoweringError, match=shared):
        lower(tiled, Target("cuda", max_shared_memory_per_block=512))
    with pytest.raises(LoweringError, match=r"registers per thread .*max_registers_per_thread"):
        lower(_big_local_tile(), Target("cuda", max_registers_per_thread=32))


def _big_local_tile():
    func, _ = workloads.get("gemm", M=64, N=64, K=8)
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, _ = sch.get_loops(block)
    io, ii = sch.split(i, [None, 16])
    sch.bind(io, "threadIdx.x")
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, io)
    return sch.func

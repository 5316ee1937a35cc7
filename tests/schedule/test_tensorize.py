"""Blockize and tensorize, with the tensor intrinsic registry and the built-in CPU intrinsics."""

from __future__ import annotations

import numpy as np
import pytest

from schedlab import workloads
from schedlab.schedule import NonAffineBindingError, NotSingleChildError, Schedule, TensorizeError
from schedlab.schedule.index_map import IndexMap
from schedlab.schedule.primitives.blockize_tensorize import BlockizeError
from schedlab.schedule.tensor_intrin import TensorIntrin, TensorIntrinError
from schedlab.script import from_source
from schedlab.script import tir as T

from .helpers import (
    assert_error_keeps_state,
    assert_same_numerics,
    assert_script_equal,
    assert_trace_roundtrip,
    random_args,
)
from .test_layout import relayout, runners

TWO_STAGE = """
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
      C: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
"""


def tiled(sch: Schedule, block_name: str, factors: dict[int, int]):
    """Split the block's loops by `factors` ({loop position: inner factor}) and order them
    outer tiles first; returns (outer loops, inner loops)."""
    loops = sch.get_loops(sch.get_block(block_name))
    outer, inner = [], []
    for k, loop in enumerate(loops):
        if k in factors:
            o, i = sch.split(loop, [None, factors[k]])
            outer.append(o)
            inner.append(i)
        else:
            outer.append(loop)
    sch.reorder(*outer, *inner)
    return outer, inner


# ---------------------------------------------------------------------------------------------
# blockize a loop
# ---------------------------------------------------------------------------------------------
def test_blockize_tiled_elementwise():
    func = workloads.get("transpose", M=8, N=8)[0]
    sch = Schedule(func)
    _, inner = tiled(sch, "T_transpose", {0: 4, 1: 4})
    outer = sch.blockize(inner[0])
    assert sch.get(outer).name_hint == "T_transpose_o"
    assert_script_equal(sch.func, """
@T.prim_func
def transpose(A: T.Buffer((8, 8), "float32"), T_transpose: T.Buffer((8, 8), "float32")):
    for i_0, j_0 in T.grid(2, 2):
        with T.block("T_transpose_o"):
            vi_o, vj_o = T.axis.remap("SS", [i_0, j_0])
            T.reads(A[vj_o * 4:vj_o * 4 + 4, vi_o * 4:vi_o * 4 + 4])
            T.writes(T_transpose[vi_o * 4:vi_o * 4 + 4, vj_o * 4:vj_o * 4 + 4])
            for i_1, j_1 in T.grid(4, 4):
                with T.block("T_transpose"):
                    vi_i, vj_i = T.axis.remap("SS", [i_1, j_1])
                    T.reads(A[vj_o * 4 + vj_i, vi_o * 4 + vi_i])
                    T.writes(T_transpose[vi_o * 4 + vi_i, vj_o * 4 + vj_i])
                    T_transpose[vi_o * 4 + vi_i, vj_o * 4 + vj_i] = A[vj_o * 4 + vj_i, vi_o * 4 + vi_i]
""")  # fmt: skip  # noqa: E501
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_blockize_moves_reduction_init_to_outer_block():
    func = workloads.get("reduce_sum", M=4, N=6)[0]
    sch = Schedule(func)
    i, k = sch.get_loops(sch.get_block("A_red"))
    sch.reorder(k, i)
    sch.blockize(k)
    assert_script_equal(sch.func, """
@T.prim_func
def reduce_sum(A: T.Buffer((4, 6), "float32"), A_red: T.Buffer((4,), "float32")):
    with T.block("A_red_o"):
        vi_o = T.axis.spatial(1, 0)
        vk_o = T.axis.reduce(1, 0)
        T.reads(A[0:4, 0:6])
        T.writes(A_red[0:4])
        with T.init():
            for i in range(4):
                with T.block("A_red_init"):
                    vi_init = T.axis.spatial(4, i)
                    T.reads()
                    T.writes(A_red[vi_init])
                    A_red[vi_init] = T.float32(0)
        for k, i in T.grid(6, 4):
            with T.block("A_red"):
                vi_i, vk_i = T.axis.remap("SR", [i, k])
                T.reads(A[vi_i, vk_i])
                T.writes(A_red[vi_i])
                A_red[vi_i] = A_red[vi_i] + A[vi_i, vk_i]
""")  # fmt: skip  # noqa: E501
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_blockize_without_unit_iters_keeps_inner_init():
    func = workloads.get("gemm", M=5, N=6, K=7)[0]
    sch = Schedule(func)
    _, _, k = sch.get_loops(sch.get_block("C"))
    sch.blockize(k, preserve_unit_iters=False)
    assert_script_equal(sch.func, """
@T.prim_func
def gemm(A: T.Buffer((5, 7), "float32"), B: T.Buffer((7, 6), "float32"), C: T.Buffer((5, 6), "float32")):
    for i, j in T.grid(5, 6):
        with T.block("C_o"):
            vi_o, vj_o = T.axis.remap("SS", [i, j])
            T.reads(A[vi_o, 0:7], B[0:7, vj_o])
            T.writes(C[vi_o, vj_o])
            for k in range(7):
                with T.block("C"):
                    vk_i = T.axis.reduce(7, k)
                    T.reads(A[vi_o, vk_i], B[vk_i, vj_o])
                    T.writes(C[vi_o, vj_o])
                    with T.init():
                        C[vi_o, vj_o] = T.float32(0)
                    C[vi_o, vj_o] = C[vi_o, vj_o] + A[vi_o, vk_i] * B[vk_i, vj_o]
""")  # fmt: skip  # noqa: E501
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


@pytest.mark.parametrize("preserve", [True, False])
def test_blockize_partial_tiles_keep_predicate(preserve):
    """Non-divisible tiles: the predicate stays on the inner block and guards the moved init."""
    func = workloads.get("gemm", M=13, N=11, K=9)[0]
    sch = Schedule(func)
    outer, inner = tiled(sch, "C", {0: 4, 1: 4})
    sch.reorder(outer[0], outer[1], outer[2], inner[0], inner[1])
    sch.blockize(inner[0], preserve_unit_iters=preserve)
    init = sch.get(sch.get_block("C_o")).init
    assert "13" in init.script() and "11" in init.script()
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_blockize_moves_outer_predicate_to_outer_block():
    """Regression: `split(b, [2, None, 1])` of an extent-1 loop, blockized at the middle loop,
    ran the outer block (and its init, zeroing the output) for the out-of-range tile b_0 = 1."""
    func = workloads.get("reduce_sum", M=1, N=3)[0]
    sch = Schedule(func, debug=True)
    i, _ = sch.get_loops(sch.get_block("A_red"))
    _, i1, _ = sch.split(i, [2, None, 1])
    sch.blockize(i1)
    assert_script_equal(sch.func, """
@T.prim_func
def reduce_sum(A: T.Buffer((1, 3), "float32"), A_red: T.Buffer((1,), "float32")):
    for i_0 in range(2):
        with T.block("A_red_o"):
            vi_o = T.axis.spatial(1, i_0)
            vk_o = T.axis.reduce(1, 0)
            T.where(i_0 < 1)
            T.reads(A[0, 0:3])
            T.writes(A_red[0])
            with T.init():
                A_red[0] = T.float32(0)
            for i_1, i_2, k in T.grid(1, 1, 3):
                with T.block("A_red"):
                    vk_i = T.axis.reduce(3, k)
                    T.reads(A[0, vk_i])
                    T.writes(A_red[0])
                    A_red[0] = A_red[0] + A[0, vk_i]
""")  # fmt: skip
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


@pytest.mark.parametrize("preserve", [True, False])
def test_blockize_out_of_range_tile_of_depthwise_conv(preserve):
    """The case found by test_property.py: the output was all zeros."""
    func = workloads.get("depthwise_conv2d_nchw", N=1, C=3, H=5, W=7, kernel=3)[0]
    sch = Schedule(func, debug=True)
    b = sch.get_loops(sch.get_block("depthwise_conv2d_nchw"))[0]
    _, b1, _ = sch.split(b, [2, None, 1])
    outer = sch.blockize(b1, preserve_unit_iters=preserve)
    assert (sch.get(outer).init is not None) == preserve  # the init moves with outer reductions
    assert str(sch.state.realize_of(sch.get(outer)).predicate) == "b_0 < 1"
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_blockize_guards_outer_iter_values_out_of_their_domain():
    """`split(i, [4, None, 1])` of 5 gives tiles of 2 for i_0 in [0, 4): vi_o = i_0 has the
    domain [0, 3), so the outer block gets `i_0 < 3`; the init keeps the partial-tile guard."""
    func = workloads.get("reduce_sum", M=5, N=3)[0]
    sch = Schedule(func, debug=True)
    i, _ = sch.get_loops(sch.get_block("A_red"))
    _, i1, _ = sch.split(i, [4, None, 1])
    sch.blockize(i1)
    assert_script_equal(sch.func, """
@T.prim_func
def reduce_sum(A: T.Buffer((5, 3), "float32"), A_red: T.Buffer((5,), "float32")):
    for i_0 in range(4):
        with T.block("A_red_o"):
            vi_o = T.axis.spatial(3, i_0)
            vk_o = T.axis.reduce(1, 0)
            T.where(i_0 < 3)
            T.reads(A[vi_o * 2:vi_o * 2 + 2, 0:3])
            T.writes(A_red[vi_o * 2:vi_o * 2 + 2])
            with T.init():
                for i_1, i_2 in T.grid(2, 1):
                    with T.block("A_red_init"):
                        vi_init = T.axis.spatial(2, i_1 + i_2)
                        T.where(vi_o * 2 + i_1 < 5)
                        T.reads()
                        T.writes(A_red[vi_o * 2 + vi_init])
                        A_red[vi_o * 2 + vi_init] = T.float32(0)
            for i_1, i_2, k in T.grid(2, 1, 3):
                with T.block("A_red"):
                    vi_i = T.axis.spatial(2, i_1 + i_2)
                    vk_i = T.axis.reduce(3, k)
                    T.where(vi_o * 2 + i_1 + i_2 < 5)
                    T.reads(A[vi_o * 2 + vi_i, vk_i])
                    T.writes(A_red[vi_o * 2 + vi_i])
                    A_red[vi_o * 2 + vi_i] = A_red[vi_o * 2 + vi_i] + A[vi_o * 2 + vi_i, vk_i]
""")  # fmt: skip  # noqa: E501
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_blockize_writes_mixed_predicates_through_outer_iter_values():
    """At i_2 of `split(i, [None, 2, 2])`, vi_o = i_0 * 2 + i_1: the inner predicate reads
    `vi_o * 2 + i_2 < 13`, and the outer block gets `i_0 * 2 + i_1 < 7` (vi_o's domain)."""
    func = workloads.get("gemm", M=13, N=3, K=3)[0]
    sch = Schedule(func, debug=True)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    *_, i2 = sch.split(i, [None, 2, 2])
    outer = sch.blockize(i2)
    assert str(sch.state.realize_of(sch.get(outer)).predicate) == "i_0 * 2 + i_1 < 7"
    inner = sch.get(sch.get_block("C"))
    assert "vi_o * 2 + i_2 < 13" in str(sch.state.realize_of(inner).predicate)
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_blockize_refuses_predicates_it_cannot_write_through_outer_iters():
    sch = Schedule(from_source("""
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i_0, i_1, i_2 in T.grid(2, 2, 4):
        with T.block("B"):
            vi = T.axis.spatial(16, i_0 * 8 + i_1 * 4 + i_2)
            T.where(i_0 * 8 + i_2 < 11)
            B[vi] = A[vi]
"""))  # fmt: skip
    *_, i2 = sch.get_loops(sch.get_block("B"))  # vi_o = i_0 * 2 + i_1: i_0 alone is not one
    assert_error_keeps_state(sch, lambda: sch.blockize(i2), BlockizeError, "uses loop i_0")


@pytest.mark.parametrize(
    "name, sizes, block, loop, factors, at",
    [("gemm", dict(M=7, N=9, K=5), "C", 2, [2, None, 1], 1),
     ("gemm", dict(M=7, N=9, K=5), "C", 0, [4, None, 1], 2),
     ("depthwise_conv2d_nchw", dict(N=1, C=3, H=5, W=7, kernel=3), "depthwise_conv2d_nchw",
      1, [2, None, 2], 2),
     ("depthwise_conv2d_nchw", dict(N=1, C=3, H=5, W=7, kernel=3), "depthwise_conv2d_nchw",
      4, [2, None, 1], 5),
     ("reduce_sum", dict(M=5, N=9), "A_red", 1, [3, None, 2], 2),
     ("softmax", dict(M=5, N=7), "T_softmax_expsum", 1, [None, 2, 2], 2),
     ("softmax", dict(M=5, N=7), "T_softmax_norm", 0, [4, None, 1], 1)],
)  # fmt: skip
def test_blockize_after_non_divisible_splits(name, sizes, block, loop, factors, at):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func, debug=True)
    sch.split(sch.get_loops(sch.get_block(block))[loop], factors)
    sch.blockize(sch.get_loops(sch.get_block(block))[at])
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


@pytest.mark.parametrize(
    "name, sizes, block, factors, at",
    [("conv2d_nchw", dict(N=1, CI=3, CO=4, H=7, W=5, kernel=3), "conv2d_nchw", {1: 2, 2: 3}, 0),
     ("softmax", dict(M=5, N=11), "T_softmax_exp", {1: 4}, 0),
     ("batch_matmul", dict(batch=3, M=5, N=6, K=7), "C", {2: 3, 3: 2}, 0)],
)  # fmt: skip
def test_blockize_numerics_on_workloads(name, sizes, block, factors, at):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func)
    _, inner = tiled(sch, block, factors)
    sch.blockize(inner[at])
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_blockize_errors_keep_state():
    sch = Schedule(from_source("""
@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i in range(4):
        for j in range(4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]
        for j in range(4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = B[vi, vj]
"""))  # fmt: skip
    (i,) = sch.get_loops(sch.get_block("B"))[:1]
    assert_error_keeps_state(sch, lambda: sch.blockize(i), NotSingleChildError, "exactly one")
    assert_error_keeps_state(sch, lambda: sch.blockize([]), BlockizeError, "loop or")


def test_blockize_refuses_bindings_it_cannot_divide():
    func = workloads.get("transpose", M=4, N=4)[0]
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("T_transpose"))
    fused = sch.fuse(i, j)
    _, f1 = sch.split(fused, [None, 3])
    assert_error_keeps_state(sch, lambda: sch.blockize(f1), BlockizeError, "cannot be divided")
    sch = Schedule(from_source("""
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi = T.axis.spatial(16, i * i + j)
            B[vi] = A[vi]
"""))  # fmt: skip
    _, j = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(sch, lambda: sch.blockize(j), NonAffineBindingError)


def test_blockize_refuses_inner_loops_that_are_not_dense():
    sch = Schedule(from_source("""
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi = T.axis.spatial(16, j * 4 + i)
            B[vi] = A[vi]
"""))  # fmt: skip
    _, j = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(sch, lambda: sch.blockize(j), BlockizeError, "dense range")


# ---------------------------------------------------------------------------------------------
# blockize a list of blocks
# ---------------------------------------------------------------------------------------------
def test_blockize_blocks():
    func = from_source(TWO_STAGE)
    sch = Schedule(func)
    outer = sch.blockize([sch.get_block("B"), sch.get_block("C")])
    assert sch.get(outer).name_hint == "outer_B_C_"
    assert_script_equal(sch.func, """
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    with T.block("outer_B_C_"):
        T.reads(A[0:8, 0:8], B[0:8, 0:8])
        T.writes(B[0:8, 0:8], C[0:8, 0:8])
        for i, j in T.grid(8, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for i, j in T.grid(8, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(B[vi, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = B[vi, vj] + T.float32(1)
""")  # fmt: skip  # noqa: E501
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_blockize_blocks_errors_keep_state():
    extra = """
    for i, j in T.grid(8, 8):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = C[vi, vj]
"""
    three = from_source(TWO_STAGE.rstrip() + extra)
    sch = Schedule(three)
    b, c, d = (sch.get_block(n) for n in "BCD")
    assert_error_keeps_state(sch, lambda: sch.blockize([b, d]), BlockizeError, "consecutive")
    assert_error_keeps_state(sch, lambda: sch.blockize([b, b]), BlockizeError, "twice")
    shared_loop = from_source("""
@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i in range(4):
        for j in range(4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]
        for j in range(4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = B[vi, vj] * T.float32(2)
""")  # fmt: skip  # noqa: E501
    sch = Schedule(shared_loop)
    b, c = sch.get_block("B"), sch.get_block("C")
    assert_error_keeps_state(sch, lambda: sch.blockize([b, c]), BlockizeError, "loop i")


# ---------------------------------------------------------------------------------------------
# tensorize with the built-in CPU intrinsics
# ---------------------------------------------------------------------------------------------
def test_tensorize_gemm_4x4x4_micro_kernel():
    func = workloads.get("gemm", M=12, N=20, K=8)[0]
    sch = Schedule(func)
    _, inner = tiled(sch, "C", {0: 4, 1: 4, 2: 4})
    sch.tensorize(inner[0], "cpu_f32_gemm_4x4x4")
    block = sch.get(sch.get_block("C_o"))
    assert [m.buffer.shape[0].value for m in block.match_buffers] == [4, 4, 4]
    assert "Ramp" in block.body.script()
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_tensorize_on_a_packed_layout():
    """TVM's recipe: pack A into 4x4 tiles with transform_layout after tensorizing; the
    intrinsic's view of A becomes one whole tile (leading unit dimensions)."""
    func, ref = workloads.get("gemm", M=12, N=20, K=8)
    sch = Schedule(func)
    _, inner = tiled(sch, "C", {0: 4, 1: 4, 2: 4})
    sch.tensorize(inner[0], "cpu_f32_gemm_4x4x4")
    pack = IndexMap.from_func(lambda i, k: (i // 4, k // 4, i % 4, k % 4))
    sch.transform_layout(sch.get_block("C_o"), ("read", 0), pack)
    view = sch.get(sch.get_block("C_o")).match_buffers[0]
    assert str(view.source.region[2].extent) == "4" and str(view.source.region[0].extent) == "1"
    assert_trace_roundtrip(sch, func)
    a, b, _ = random_args(func)
    for run in runners(sch.func):
        c = np.zeros((12, 20), "float32")
        run(relayout(a, pack), b, c)
        np.testing.assert_allclose(c, ref(a, b), rtol=1e-5, atol=1e-5)


def test_tensorize_fma_16_with_zero_16_init():
    """A whole vectorized gemm: decompose the reduction, tensorize the init with a vector
    store of zeros and the update with a broadcast multiply-accumulate."""
    func = workloads.get("gemm", M=5, N=48, K=7)[0]
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    init = sch.decompose_reduction(block, i)
    _, init_j = sch.get_loops(init)
    _, init_j1 = sch.split(init_j, [None, 16])
    sch.tensorize(init_j1, "cpu_f32_zero_16")
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i, k, j0, j1)
    sch.tensorize(j1, "cpu_f32_fma_16")
    assert_script_equal(sch.func, """
@T.prim_func
def gemm(A: T.Buffer((5, 7), "float32"), B: T.Buffer((7, 48), "float32"), C: T.Buffer((5, 48), "float32")):
    for i_init, j_init_0 in T.grid(5, 3):
        with T.block("C_init_o"):
            vi_init_o, vj_init_o = T.axis.remap("SS", [i_init, j_init_0])
            T.reads()
            T.writes(C[vi_init_o, vj_init_o * 16:vj_init_o * 16 + 16])
            C_1 = T.match_buffer(C[vi_init_o, vj_init_o * 16:vj_init_o * 16 + 16], (16,), "float32")
            C_1[T.Ramp(0, 1, 16)] = T.Broadcast(T.float32(0), 16)
    for i, k, j_0 in T.grid(5, 7, 3):
        with T.block("C_update_o"):
            vi_o, vj_o, vk_o = T.axis.remap("SSR", [i, j_0, k])
            T.reads(C[vi_o, vj_o * 16:vj_o * 16 + 16], A[vi_o, vk_o], B[vk_o, vj_o * 16:vj_o * 16 + 16])
            T.writes(C[vi_o, vj_o * 16:vj_o * 16 + 16])
            A_1 = T.match_buffer(A[vi_o, vk_o], (1,), "float32")
            B_1 = T.match_buffer(B[vk_o, vj_o * 16:vj_o * 16 + 16], (16,), "float32")
            C_2 = T.match_buffer(C[vi_o, vj_o * 16:vj_o * 16 + 16], (16,), "float32")
            C_2[T.Ramp(0, 1, 16)] = C_2[T.Ramp(0, 1, 16)] + T.Broadcast(A_1[0], 16) * B_1[T.Ramp(0, 1, 16)]
""")  # fmt: skip  # noqa: E501
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_tensorize_dot_4_on_gemv():
    func = workloads.get("gemv", M=5, K=12)[0]
    sch = Schedule(func)
    _, k = sch.get_loops(sch.get_block("y"))
    _, k1 = sch.split(k, [None, 4])
    sch.tensorize(k1, "cpu_f32_dot_4")
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_tensorize_a_blockized_block():
    func = workloads.get("gemm", M=8, N=4, K=12)[0]
    sch = Schedule(func)
    _, inner = tiled(sch, "C", {0: 4, 1: 4, 2: 4})
    outer = sch.blockize(inner[0])
    sch.tensorize(outer, "cpu_f32_gemm_4x4x4")
    assert sch.get(outer).match_buffers
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_tensorize_user_intrinsic():
    @T.prim_func
    def desc(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("update"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi] * T.float32(2)

    @T.prim_func
    def impl(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        B[T.Ramp(0, 1, 4)] = A[T.Ramp(0, 1, 4)] * T.Broadcast(T.float32(2), 4)

    TensorIntrin.register("test_scale2_4", desc, impl, override=True)
    func = from_source(TWO_STAGE)
    sch = Schedule(func)
    _, j = sch.get_loops(sch.get_block("B"))
    _, j1 = sch.split(j, [None, 4])
    sch.tensorize(j1, "test_scale2_4")
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_tensorize_errors_keep_state():
    func = workloads.get("gemm", M=8, N=8, K=16)[0]
    sch = Schedule(func)
    _, inner = tiled(sch, "C", {0: 4, 1: 4, 2: 8})
    i1 = inner[0]
    assert_error_keeps_state(sch, lambda: sch.tensorize(i1, "no_such_intrin"), TensorizeError,
                             "cpu_f32_gemm_4x4x4")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.tensorize(i1, "cpu_f32_gemm_4x4x4"),
                             TensorizeError, "loop extent is 8")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.tensorize(i1, "cpu_f32_fma_16"), TensorizeError,
                             "does not match")  # fmt: skip
    block = sch.get_block("C")
    assert_error_keeps_state(sch, lambda: sch.tensorize(block, "cpu_f32_gemm_4x4x4"),
                             TensorizeError, "store where the intrinsic has a loop")  # fmt: skip


def test_tensorize_refuses_partial_tiles_and_other_reductions():
    func = workloads.get("gemm", M=10, N=8, K=8)[0]
    sch = Schedule(func)
    _, inner = tiled(sch, "C", {0: 4, 1: 4, 2: 4})
    i1 = inner[0]
    assert_error_keeps_state(sch, lambda: sch.tensorize(i1, "cpu_f32_gemm_4x4x4"),
                             TensorizeError, "partial tile")  # fmt: skip
    func = workloads.get("reduce_max", M=3, N=8)[0]
    sch = Schedule(func)
    _, k = sch.get_loops(sch.get_block("A_red"))
    _, k1 = sch.split(k, [None, 4])
    assert_error_keeps_state(sch, lambda: sch.tensorize(k1, "cpu_f32_dot_4"), TensorizeError,
                             "intrinsic computes")  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------------------------
def test_registry_lists_and_guards_names():
    assert {"cpu_f32_fma_16", "cpu_f32_gemm_4x4x4", "cpu_f32_dot_4", "cpu_f32_zero_16"} <= set(
        TensorIntrin.names()
    )
    intrin = TensorIntrin.get("cpu_f32_dot_4")
    assert TensorIntrin.get("missing", allow_missing=True) is None
    with pytest.raises(TensorIntrinError, match="registered"):
        TensorIntrin.get("missing")
    with pytest.raises(TensorIntrinError, match="already registered"):
        TensorIntrin.register("cpu_f32_dot_4", intrin.desc, intrin.impl)
    other = TensorIntrin.get("cpu_f32_fma_16")
    with pytest.raises(TensorIntrinError, match="must agree"):
        TensorIntrin.register("test_bad_pair", intrin.desc, other.impl)
    with pytest.raises(TensorIntrinError, match="PrimFunc"):
        TensorIntrin.register("test_bad_type", "desc", intrin.impl)

"""Layout: IndexMap, transform_layout, transform_block_layout, pad_einsum."""

from __future__ import annotations

import json

import numpy as np
import pytest

import schedlab
from schedlab import workloads
from schedlab.arith import evaluate
from schedlab.ir import structural_equal
from schedlab.ir.expr import SizeVar
from schedlab.schedule import BufferIndexError, Schedule, TraceError
from schedlab.schedule.index_map import IndexMap, IndexMapError
from schedlab.schedule.primitives._einsum import NotEinsumError
from schedlab.schedule.primitives.layout import (
    LayoutError,
    NotTrivialBindingError,
    TransformationPaddingError,
)
from schedlab.schedule.values import decode_value, encode_value, python_value
from schedlab.script import from_source

from .helpers import (
    assert_error_keeps_state,
    assert_same_numerics,
    assert_script_equal,
    assert_trace_roundtrip,
    random_args,
)

TWO_STAGE = """
@T.prim_func
def two_stage(A: T.Buffer((10, 6), "float32"), C: T.Buffer((10, 6), "float32")):
    B = T.alloc_buffer((10, 6), "float32")
    for i, j in T.grid(10, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(10, 6):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
"""


def two_stage():
    return from_source(TWO_STAGE)


def relayout(array: np.ndarray, index_map: IndexMap, fill=0) -> np.ndarray:
    """`array` stored in the layout `index_map` (padding filled with `fill`)."""
    shape = [int(s) for s in index_map.map_shape(array.shape)]
    out = np.full(shape, fill, array.dtype)
    for index in np.ndindex(array.shape):
        new = tuple(int(evaluate(e)) for e in index_map.map_indices(index))
        out[new] = array[index]
    return out


def runners(func):
    """The interpreter and the compiled kernel of `func`, as callables on arrays."""
    return [lambda *args: schedlab.interpret(func, *args), schedlab.build(func, target="cpu")]


# ---------------------------------------------------------------------------------------------
# IndexMap
# ---------------------------------------------------------------------------------------------
def test_index_map_from_func_and_text_round_trip():
    m = IndexMap.from_func(lambda i, j: (i // 4, j, i % 4))
    assert m.to_text() == "lambda i, j: (i // 4, j, i % 4)"
    back = IndexMap.from_text(m.to_text())
    assert back.is_equivalent_to(m)
    assert [int(x) for x in m.map_indices([9, 2])] == [2, 2, 1]
    single = IndexMap.from_func(lambda i: i * 2)
    assert single.to_text() == "lambda i: (i * 2,)"
    assert IndexMap.from_text(single.to_text()).is_equivalent_to(single)


def test_index_map_text_keeps_dtype_and_constants():
    m = IndexMap.from_text("lambda i, j: (0, j, i % 4)", "int64")
    assert all(str(v.dtype) == "int64" for v in m.initial_indices)
    assert all(str(e.dtype) == "int64" for e in m.final_indices)
    assert m.with_index_dtype("int32").index_dtype == "int32"


@pytest.mark.parametrize(
    "text",
    ["__import__('os').system('true')", "lambda i: (os.system('x'),)", "lambda i=1: (i,)",
     "lambda *a: (a,)", "lambda i: (i.real,)", "lambda i: (undefined,)", "lambda i: [i for i in x]",
     "lambda i: (i,"],
)  # fmt: skip
def test_index_map_text_is_parsed_never_executed(text):
    with pytest.raises(IndexMapError):
        IndexMap.from_text(text)


def test_index_map_shapes_and_inverse():
    m = IndexMap.from_func(lambda i, j: (i // 4, j, i % 4))
    assert [int(s) for s in m.map_shape([16, 3])] == [4, 3, 4]
    assert [int(s) for s in m.map_shape([10, 3])] == [3, 3, 4]
    inv = m.inverse([16, 3])
    assert inv.to_text() == "lambda i0, i1, i2: (i0 * 4 + i2, i1)"
    for point in np.ndindex(16, 3):
        assert [int(x) for x in inv.map_indices(m.map_indices(point))] == list(point)
    inverse, padding = m.non_surjective_inverse([10, 3])
    assert str(padding) == "i0 * 4 + i2 >= 10"
    with pytest.raises(IndexMapError, match="padding"):
        m.inverse([10, 3])


def test_index_map_fused_and_symbolic_inverse():
    fused = IndexMap.from_func(lambda i, j: ((i * 5 + j) // 4, (i * 5 + j) % 4))
    inverse, padding = fused.non_surjective_inverse([3, 5])
    for p in np.ndindex(4, 4):
        original = [int(evaluate(e)) for e in inverse.map_indices(p)]
        is_pad = bool(evaluate(padding, dict(zip(inverse.initial_indices, p))))
        assert is_pad == (p[0] * 4 + p[1] >= 15)
        if not is_pad:
            assert [int(x) for x in fused.map_indices(original)] == list(p)
    n = SizeVar("n")
    m = IndexMap.from_func(lambda i: (i // 4, i % 4))
    _, padding = m.non_surjective_inverse([n])
    assert "n" in str(padding)


@pytest.mark.parametrize(
    "func, shape, match",
    [(lambda i, j: (i + j,), [3, 3], "overlap"), (lambda i: (i * i,), [4], "not affine"),
     (lambda i: (i + 1,), [4], "not at 0"), (lambda i: (i // 2,), [4], "not an injective")],
)  # fmt: skip
def test_index_map_rejects_non_injective_maps(func, shape, match):
    with pytest.raises(IndexMapError, match=match):
        IndexMap.from_func(func).inverse(shape)


def test_index_map_trace_codec():
    m = IndexMap.from_func(lambda i, j: (j, i))
    data = json.loads(json.dumps(encode_value(m)))
    assert data == {"__type__": "IndexMap",
                    "value": {"lambda": "lambda i, j: (j, i)", "index_dtype": "int32"}}  # fmt: skip
    assert decode_value(data).is_equivalent_to(m)
    # a Python lambda given to a primitive is recorded as the same data
    assert encode_value(lambda i, j: (j, i)) == data
    assert python_value(m) == "lambda i, j: (j, i)"
    bad = {"__type__": "IndexMap", "value": {"lambda": "__import__('os').getcwd()"}}
    with pytest.raises(TraceError, match="IndexMap"):
        decode_value(bad)


# ---------------------------------------------------------------------------------------------
# transform_layout
# ---------------------------------------------------------------------------------------------
def test_transform_layout_intermediate_bijective():
    func = two_stage()
    sch = Schedule(func)
    sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i, j: (j, i))
    assert_script_equal(sch.func, """
@T.prim_func
def main(A: T.Buffer((10, 6), "float32"), C: T.Buffer((10, 6), "float32")):
    B = T.alloc_buffer((6, 10), "float32")
    for i, j in T.grid(10, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj])
            T.writes(B[vj, vi])
            B[vj, vi] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(10, 6):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(B[vj, vi])
            T.writes(C[vi, vj])
            C[vi, vj] = B[vj, vi] + T.float32(1)
""")  # fmt: skip  # noqa: E501
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_transform_layout_padding_with_pad_value():
    func = two_stage()
    sch = Schedule(func)
    to_b = IndexMap.from_func(lambda i, j: (i // 4, j, i % 4))
    sch.transform_layout(sch.get_block("C"), "B", to_b, pad_value=0.0)
    assert_script_equal(sch.func, """
@T.prim_func
def main(A: T.Buffer((10, 6), "float32"), C: T.Buffer((10, 6), "float32")):
    B = T.alloc_buffer((3, 6, 4), "float32")
    for i, j in T.grid(10, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj])
            T.writes(B[vi // 4, vj, vi % 4])
            B[vi // 4, vj, vi % 4] = A[vi, vj] * T.float32(2)
    for ax0, ax1, ax2 in T.grid(3, 6, 4):
        with T.block("B_pad"):
            v0, v1, v2 = T.axis.remap("SSS", [ax0, ax1, ax2])
            T.reads()
            T.writes(B[v0, v1, v2])
            if v0 * 4 + v2 >= 10:
                B[v0, v1, v2] = T.float32(0)
    for i, j in T.grid(10, 6):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(B[vi // 4, vj, vi % 4])
            T.writes(C[vi, vj])
            C[vi, vj] = B[vi // 4, vj, vi % 4] + T.float32(1)
""")  # fmt: skip  # noqa: E501
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_transform_layout_parameter_changes_signature():
    """Re-laying out a parameter changes the function's signature (as in TVM): the caller
    passes the array in the new layout."""
    func, ref = workloads.get("gemm", M=13, N=9, K=7)
    sch = Schedule(func)
    block = sch.get_block("C")
    to_b = IndexMap.from_func(lambda k, j: (j // 4, k, j % 4))
    to_c = IndexMap.from_func(lambda i, j: (j, i))
    sch.transform_layout(block, ("read", 1), to_b)
    sch.transform_layout(block, ("write", 0), to_c)
    assert [int(s) for s in sch.func.buffers[1].shape] == [3, 7, 4]
    assert [int(s) for s in sch.func.buffers[2].shape] == [9, 13]
    assert_trace_roundtrip(sch, func)
    a, b, _ = random_args(func)
    expected = ref(a, b)
    for run in runners(sch.func):
        c = np.zeros((9, 13), "float32")
        run(a, relayout(b, to_b), c)
        np.testing.assert_allclose(c.T, expected, rtol=1e-5, atol=1e-5)


def test_transform_layout_output_padding_is_filled():
    func, ref = workloads.get("transpose", M=5, N=7)
    sch = Schedule(func)
    to_out = IndexMap.from_func(lambda i, j: (i // 2, j, i % 2))
    sch.transform_layout(sch.get_block("T_transpose"), ("write", 0), to_out, pad_value=-1.0)
    assert_trace_roundtrip(sch, func)
    a = random_args(func)[0]
    for run in runners(sch.func):
        out = np.zeros((4, 5, 2), "float32")
        run(a, out)
        np.testing.assert_allclose(out, relayout(ref(a), to_out, fill=-1.0), rtol=1e-6)


@pytest.mark.parametrize(
    "name, sizes, block, buffer, index_map, pad_value",
    [("matmul_bias_relu", dict(M=7, N=9, K=5), "T_relu", ("read", 0), lambda i, j: (j, i), None),
     ("softmax", dict(M=5, N=11), "T_softmax_exp", ("write", 0), lambda i, j: (j, i), None),
     ("softmax", dict(M=5, N=11), "T_softmax_norm", ("read", 1), lambda i: (i // 2, i % 2), 0.0),
     ("conv2d_nchw", dict(N=1, CI=3, CO=4, H=7, W=5, kernel=3), "pad_temp", ("write", 0),
      lambda n, c, h, w: (n, h, w // 4, c, w % 4), 0.0)],
)  # fmt: skip
def test_transform_layout_numerics_on_workloads(name, sizes, block, buffer, index_map, pad_value):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func)
    sch.transform_layout(sch.get_block(block), buffer, index_map, pad_value=pad_value)
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_transform_layout_errors_keep_state():
    func = two_stage()
    sch = Schedule(func)
    block = sch.get_block("B")
    assert_error_keeps_state(sch, lambda: sch.transform_layout(block, ("read", 3), lambda i, j:
                             (j, i)), BufferIndexError, "out of range")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.transform_layout(block, "X", lambda i, j: (j, i)),
                             BufferIndexError)  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.transform_layout(block, "B", lambda i: (i,)),
                             LayoutError, "takes 1 indices, expected 2")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.transform_layout(block, "B", lambda i, j: (i + j,)),
                             LayoutError, "not an injective affine map")  # fmt: skip
    err = assert_error_keeps_state(
        sch, lambda: sch.transform_layout(block, "B", lambda i, j: (i // 4, j, i % 4)),
        TransformationPaddingError, "pass pad_value",
    )  # fmt: skip
    assert "v0 * 4 + v2 >= 10" in str(err) or "i0 * 4 + i2 >= 10" in str(err)
    assert_error_keeps_state(sch, lambda: sch.transform_layout(block, "B", lambda i, j: (j, i),
                             pad_value=0.0), LayoutError, "no padding")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.transform_layout(block, "A", lambda i, j:
                             (i // 4, j, i % 4), pad_value=0.0), LayoutError, "caller")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.transform_layout(block, "B", lambda i, j: (i, j - 1)),
                             LayoutError, "not at 0")  # fmt: skip


def test_transform_layout_refuses_match_buffer_views():
    func = from_source("""
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i0 in range(2):
        with T.block("outer"):
            vi = T.axis.spatial(2, i0)
            A_1 = T.match_buffer(A[vi * 4:vi * 4 + 4], (4,), "float32")
            for i1 in range(4):
                with T.block("inner"):
                    vj = T.axis.spatial(4, i1)
                    B[vi * 4 + vj] = A_1[vj]
""")  # fmt: skip  # noqa: E501
    sch = Schedule(func)
    inner = sch.get_block("inner")
    assert_error_keeps_state(sch, lambda: sch.transform_layout(inner, "A_1", lambda i:
                             (i // 2, i % 2)), LayoutError, "match_buffer view of A")  # fmt: skip


# ---------------------------------------------------------------------------------------------
# transform_block_layout
# ---------------------------------------------------------------------------------------------
def test_transform_block_layout_fuses_iterations():
    func = workloads.get("transpose", M=5, N=7)[0]
    sch = Schedule(func)
    sch.transform_block_layout(sch.get_block("T_transpose"), lambda i, j: (i * 5 + j,))
    assert_script_equal(sch.func, """
@T.prim_func
def transpose(A: T.Buffer((5, 7), "float32"), T_transpose: T.Buffer((7, 5), "float32")):
    for ax0 in range(35):
        with T.block("T_transpose"):
            v0 = T.axis.spatial(35, ax0)
            T.reads(A[v0 % 5, v0 // 5])
            T.writes(T_transpose[v0 // 5, v0 % 5])
            T_transpose[v0 // 5, v0 % 5] = A[v0 % 5, v0 // 5]
""")  # fmt: skip  # noqa: E501
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_transform_block_layout_reduction_keeps_kinds():
    func = workloads.get("gemm", M=13, N=7, K=9)[0]
    sch = Schedule(func)
    block = sch.get_block("C")
    sch.transform_block_layout(block, lambda i, j, k: (k, j * 13 + i))
    new = sch.get(block)
    assert [str(iv.iter_type) for iv in new.iter_vars] == ["reduce", "spatial"]
    assert [int(iv.dom.extent) for iv in new.iter_vars] == [9, 91]
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


def test_transform_block_layout_errors_keep_state():
    func = workloads.get("gemm", M=12, N=8, K=6)[0]
    sch = Schedule(func)
    block = sch.get_block("C")
    assert_error_keeps_state(sch, lambda: sch.transform_block_layout(block, lambda i, j, k:
                             (j, i * 6 + k)), LayoutError, "mixes iter vars")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.transform_block_layout(block, lambda i, j, k:
                             (i // 5, j, k, i % 5)), LayoutError, "padding")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.transform_block_layout(block, lambda i, j:
                             (i, j)), LayoutError, "takes 2")  # fmt: skip
    i, _, _ = sch.get_loops(block)
    sch.split(i, [None, 4])
    assert_error_keeps_state(sch, lambda: sch.transform_block_layout(block, lambda i, j, k:
                             (j, i, k)), NotTrivialBindingError, "exactly the loops")  # fmt: skip


def test_transform_block_layout_needs_exclusive_loops():
    func = from_source("""
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
""")  # fmt: skip  # noqa: E501
    sch = Schedule(func)
    block = sch.get_block("B")
    assert_error_keeps_state(sch, lambda: sch.transform_block_layout(block, lambda i, j: (j, i)),
                             NotTrivialBindingError, "holds more")  # fmt: skip


# ---------------------------------------------------------------------------------------------
# pad_einsum
# ---------------------------------------------------------------------------------------------
def test_pad_einsum_gemm_all_axes():
    func = workloads.get("gemm", M=3, N=4, K=5)[0]
    sch = Schedule(func)
    sch.pad_einsum(sch.get_block("C"), [4, 4, 4])
    assert_script_equal(sch.func, """
@T.prim_func
def gemm(A: T.Buffer((3, 5), "float32"), B: T.Buffer((5, 4), "float32"), C: T.Buffer((3, 4), "float32")):
    A_pad = T.alloc_buffer((4, 8), "float32")
    B_pad = T.alloc_buffer((8, 4), "float32")
    C_pad = T.alloc_buffer((4, 4), "float32")
    for i0, i1 in T.grid(4, 8):
        with T.block("A_pad"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            T.reads(A[v0, v1])
            T.writes(A_pad[v0, v1])
            A_pad[v0, v1] = T.if_then_else(v0 < 3 and v1 < 5, A[v0, v1], T.float32(0))
    for i0, i1 in T.grid(8, 4):
        with T.block("B_pad"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            T.reads(B[v0, v1])
            T.writes(B_pad[v0, v1])
            B_pad[v0, v1] = T.if_then_else(v0 < 5, B[v0, v1], T.float32(0))
    for i, j, k in T.grid(4, 4, 8):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A_pad[vi, vk], B_pad[vk, vj])
            T.writes(C_pad[vi, vj])
            with T.init():
                C_pad[vi, vj] = T.float32(0)
            C_pad[vi, vj] = C_pad[vi, vj] + A_pad[vi, vk] * B_pad[vk, vj]
    for i0, i1 in T.grid(3, 4):
        with T.block("C_pad"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            T.reads(C_pad[v0, v1])
            T.writes(C[v0, v1])
            C[v0, v1] = C_pad[v0, v1]
""")  # fmt: skip  # noqa: E501
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


@pytest.mark.parametrize(
    "name, sizes, block, padding",
    [("gemm", dict(M=13, N=7, K=9), "C", [4, 4, 4]),
     ("reduce_sum", dict(M=5, N=9), "A_red", [4, 4]), ("gemv", dict(M=5, K=11), "y", [2, 8]),
     ("batch_matmul", dict(batch=3, M=5, N=6, K=7), "C", [1, 4, 4, 4]),
     ("reduce_max", dict(M=5, N=9), "A_red", [4, 1])],
)  # fmt: skip
def test_pad_einsum_numerics(name, sizes, block, padding):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func)
    sch.pad_einsum(sch.get_block(block), padding)
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_pad_einsum_already_aligned_changes_nothing():
    func = workloads.get("gemm", M=8, N=8, K=8)[0]
    sch = Schedule(func)
    sch.pad_einsum(sch.get_block("C"), [4, 4, 4])
    assert structural_equal(sch.func, func)


def test_pad_einsum_errors_keep_state():
    func = workloads.get("reduce_max", M=5, N=9)[0]
    sch = Schedule(func)
    block = sch.get_block("A_red")
    assert_error_keeps_state(sch, lambda: sch.pad_einsum(block, [1, 4]), NotEinsumError,
                             "out = out \\+ a \\* b")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.pad_einsum(block, [4]), NotEinsumError,
                             "list of 2 positive ints")  # fmt: skip
    assert_error_keeps_state(sch, lambda: sch.pad_einsum(block, [0, 1]), NotEinsumError,
                             "positive")  # fmt: skip
    conv = workloads.get("conv2d_nchw", N=1, CI=2, CO=3, H=5, W=5, kernel=3)[0]
    sch = Schedule(conv)
    conv_block = sch.get_block("conv2d_nchw")
    assert_error_keeps_state(sch, lambda: sch.pad_einsum(conv_block, [1, 4, 4, 4, 1, 1, 1]),
                             NotEinsumError, "index a dimension by itself")  # fmt: skip
    gemm = workloads.get("gemm", M=6, N=6, K=6)[0]
    sch = Schedule(gemm)
    block = sch.get_block("C")
    i, _, _ = sch.get_loops(block)
    sch.split(i, [2, 3])
    assert_error_keeps_state(sch, lambda: sch.pad_einsum(block, [4, 4, 4]),
                             NotTrivialBindingError)  # fmt: skip


def test_pad_einsum_pads_a_convolution_along_its_channels():
    """The output channels index only the weight and the output by themselves; the input's
    `h + ry` stays as it is (no copy of the input)."""
    conv, reference = workloads.get("conv2d_nchw", N=1, CI=3, CO=5, H=7, W=6, kernel=3)
    sch = Schedule(conv)
    sch.pad_einsum(sch.get_block("conv2d_nchw"), [1, 8, 1, 1, 1, 1, 1])
    names = {b.name for b in sch.func.body.block.alloc_buffers}
    assert {"weight_pad", "conv2d_nchw_pad"} <= names and "data_pad" not in names
    assert_same_numerics(conv, sch.func)


def test_pad_einsum_refuses_nonlinear_factor_of_padded_data():
    func = from_source("""
@T.prim_func
def f(A: T.Buffer((3, 5), "float32"), B: T.Buffer((5,), "float32"), C: T.Buffer((3,), "float32")):
    for i, k in T.grid(3, 5):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk] * (T.float32(1) / B[vk])
""")  # fmt: skip  # noqa: E501
    sch = Schedule(func)
    block = sch.get_block("C")
    assert_error_keeps_state(sch, lambda: sch.pad_einsum(block, [1, 4]), NotEinsumError,
                             "non-linear")  # fmt: skip
    sch.pad_einsum(block, [4, 1])  # spatial padding alone is fine
    assert_same_numerics(func, sch.func)

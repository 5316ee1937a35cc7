"""FlattenBuffer: every buffer becomes 1-D (one axis per physical dimension)."""

import pytest

from schedlab.errors import LoweringError
from schedlab.ir import (
    Allocate,
    BufferStore,
    Var,
    assert_structural_equal,
    const,
    decl_buffer,
    post_order_visit,
)  # fmt: skip
from schedlab.ir.dtype import int64
from schedlab.transform import (
    PARAM_SHAPES_ATTR,
    flatten_buffer,
    lower_init_block,
    lower_opaque_block,
)  # fmt: skip
from schedlab.transform.flatten_buffer import is_flat

from . import tir_samples as ts
from .tir_samples import plain_func as _func


def _stores(func):
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, BufferStore) else None)
    return found


def test_row_major_indices_and_flat_params():
    A = decl_buffer((3, 5), "float32", "A")
    i, j = Var("i"), Var("j")
    after = flatten_buffer(_func([A], BufferStore(A, const(1.0, "float32"), (i, j))))
    (flat,) = after.buffers
    assert tuple(s.value for s in flat.shape) == (15,) and flat.data is A.data
    assert after.attrs[PARAM_SHAPES_ATTR] == {"A": (3, 5)}
    expected = BufferStore(flat, const(1.0, "float32"), (i * 5 + j,))
    assert_structural_equal(after.body, expected, map_free_vars=True)


def test_strides_and_elem_offset_are_respected():
    A = decl_buffer((3, 4), "float32", "A", strides=(10, 2), elem_offset=7)
    i, j = Var("i"), Var("j")
    after = flatten_buffer(_func([A], BufferStore(A, const(1.0, "float32"), (i, j))))
    (flat,) = after.buffers
    assert is_flat(flat)
    assert flat.shape[0].value == 7 + 2 * 10 + 3 * 2 + 1  # the furthest element, plus one
    (store,) = _stores(after)
    assert str(store.indices[0]) == str(i * 10 + j * 2 + 7)


def test_axis_separators_keep_one_axis_per_group():
    A = decl_buffer((4, 6, 8), "float32", "A", axis_separators=(1,))
    i, j, k = Var("i"), Var("j"), Var("k")
    after = flatten_buffer(_func([A], BufferStore(A, const(1.0, "float32"), (i, j, k))))
    (flat,) = after.buffers
    assert tuple(s.value for s in flat.shape) == (4, 48) and flat.axis_separators == (1,)
    (store,) = _stores(after)
    assert str(store.indices[0]) == str(i) and str(store.indices[1]) == str(j * 8 + k)


def test_allocations_and_zero_dim_buffers():
    A = decl_buffer((2, 3), "float32", "A")
    T = decl_buffer((), "float32", "T")
    i, j = Var("i"), Var("j")
    body = Allocate(T, BufferStore(A, T[()], (i, j)))
    after = flatten_buffer(_func([A], body))
    assert tuple(s.value for s in after.body.buffer.shape) == (1,)
    (store,) = _stores(after)
    assert store.value.indices[0].value == 0


def test_huge_buffers_use_64_bit_offsets():
    A = decl_buffer((100000, 30000), "float32", "A")
    i, j = Var("i"), Var("j")
    after = flatten_buffer(_func([A], BufferStore(A, const(1.0, "float32"), (i, j))))
    (store,) = _stores(after)
    assert store.indices[0].dtype == int64


def test_flat_function_is_unchanged():
    A = decl_buffer((7,), "float32", "A")
    func = _func([A], BufferStore(A, const(1.0, "float32"), (Var("i"),)))
    assert flatten_buffer(func) is func


def test_blocks_are_an_error():
    with pytest.raises(LoweringError, match="LowerOpaqueBlock"):
        flatten_buffer(ts.two_stage()[0])


def test_numerics_before_and_after():
    for sample in (ts.gemm_split_rows, ts.row_sum_split):
        func, reference, in_shapes, out_shape = sample()
        after = flatten_buffer(lower_opaque_block(lower_init_block(func)))
        ts.check_numerics(after, reference, in_shapes, out_shape)

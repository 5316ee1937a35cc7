"""VectorizeLoop: straight-line affine vectorized loops become Ramp/Broadcast code; the rest
stays a VECTORIZED loop."""

import pytest

from schedlab.ir import (
    Broadcast,
    BufferStore,
    Cast,
    For,
    ForKind,
    IfThenElse,
    Ramp,
    SeqStmt,
    Var,
    assert_structural_equal,
    const,
    decl_buffer,
    op,
)  # fmt: skip
from schedlab.transform import (
    flatten_buffer,
    lower_init_block,
    lower_opaque_block,
    simplify,
    vectorize_loop,
)  # fmt: skip

from . import tir_samples as ts
from .tir_samples import plain_func as _func

F2 = const(2.0, "float32")


def _vloop(v, lanes, body):
    return For(v, 0, lanes, ForKind.VECTORIZED, body)


def test_affine_body_becomes_ramp_code():
    A, B, C = (decl_buffer((n,), "float32", x) for n, x in ((32, "A"), (8, "B"), (32, "C")))
    i, v = Var("i"), Var("v")
    store = BufferStore(C, A[i * 8 + v] * F2 + B[v], (i * 8 + v,))
    after = vectorize_loop(_func([A, B, C], For(i, 0, 4, "serial", _vloop(v, 8, store))))
    row = Ramp(i * 8, const(1), 8)
    expected = BufferStore(C, A[row] * Broadcast(F2, 8) + B[Ramp(const(0), const(1), 8)], (row,))
    assert_structural_equal(after.body.body, expected)


def test_loop_var_as_a_value_is_a_cast_ramp():
    C = decl_buffer((8,), "float32", "C")
    v = Var("v")
    after = vectorize_loop(_func([C], _vloop(v, 8, BufferStore(C, op.cast(v, "float32"), (v,)))))
    assert isinstance(after.body, BufferStore) and isinstance(after.body.value, Cast)
    assert after.body.value.dtype.lanes == 8


def test_extent_one_is_replaced_by_its_body():
    C = decl_buffer((4,), "float32", "C")
    v = Var("v")
    after = vectorize_loop(_func([C], _vloop(v, 1, BufferStore(C, F2, (v + 3,)))))
    assert isinstance(after.body, BufferStore) and after.body.indices[0].value == 3


def _kept(body, *buffers):
    func = _func(list(buffers), body)
    after = vectorize_loop(func)
    assert after is func
    return after


@pytest.mark.parametrize("lanes", [3, 6, 128])
def test_lanes_must_be_a_small_power_of_two(lanes):
    C = decl_buffer((128,), "float32", "C")
    v = Var("v")
    _kept(_vloop(v, lanes, BufferStore(C, F2, (v,))), C)


def test_loop_carried_dependence_keeps_the_loop():
    A = decl_buffer((9,), "float32", "A")
    v = Var("v")
    _kept(_vloop(v, 8, BufferStore(A, A[v] + F2, (v + 1,))), A)  # reads what lane v-1 wrote
    _kept(_vloop(v, 8, BufferStore(A, A[0] + F2, (v,))), A)  # lane 0 writes what all read


def test_store_to_one_place_keeps_the_loop():
    A, S = decl_buffer((8,), "float32", "A"), decl_buffer((1,), "float32", "S")
    v = Var("v")
    _kept(_vloop(v, 8, BufferStore(S, S[0] + A[v], (0,))), A, S)


def test_branches_and_unsupported_operators_keep_the_loop():
    A, C = decl_buffer((8,), "float32", "A"), decl_buffer((8,), "float32", "C")
    v = Var("v")
    guarded = IfThenElse(v < 5, BufferStore(C, A[v], (v,)))
    _kept(_vloop(v, 8, guarded), A, C)
    _kept(_vloop(v, 8, BufferStore(C, op.exp(A[v]), (v,))), A, C)  # a math call
    _kept(_vloop(v, 8, BufferStore(C, A[v // 2], (v,))), A, C)  # not affine


def test_scalar_parts_may_use_any_operator():
    A, C, X = (decl_buffer((8,), "float32", x) for x in "ACX")
    v = Var("v")
    store = BufferStore(C, A[v] * op.max(X[0], F2), (v,))
    after = vectorize_loop(_func([A, C, X], _vloop(v, 8, store)))
    assert isinstance(after.body, BufferStore) and after.body.value.dtype.lanes == 8


def test_half_precision_keeps_the_loop():
    A = decl_buffer((8,), "float16", "A")
    v = Var("v")
    _kept(_vloop(v, 8, BufferStore(A, A[v] + const(1.0, "float16"), (v,))), A)


def test_several_stores_in_a_line():
    A, B = decl_buffer((8,), "float32", "A"), decl_buffer((8,), "float32", "B")
    v = Var("v")
    line = SeqStmt((BufferStore(A, A[v] * F2, (v,)), BufferStore(B, A[v] + F2, (v,))))
    after = vectorize_loop(_func([A, B], _vloop(v, 8, line)))
    assert isinstance(after.body, SeqStmt)
    assert all(s.indices[0].dtype.lanes == 8 for s in after.body.seq)


@pytest.mark.parametrize("n", [24, 23])
def test_numerics_before_and_after(n):
    func, reference, in_shapes, out_shape = ts.scale_add(n=n)
    lowered = simplify(flatten_buffer(lower_opaque_block(lower_init_block(func))))
    after = vectorize_loop(lowered)
    assert (after is lowered) == (n == 23)  # the ragged one has a branch in the loop
    ts.check_numerics(after, reference, in_shapes, out_shape)


def test_loop_invariant_select_is_unswitched_and_each_side_vectorized():
    """A concat's `if_then_else(channel < 64, A[..], B[..])` inside a vector loop over columns:
    the test is made once, outside, and both copies become vector code."""
    A, B, C = (decl_buffer((16,), "float32", x) for x in "ABC")
    c, v = Var("c"), Var("v")
    value = op.if_then_else(c < 1, A[c * 8 + v], B[c * 8 + v - 8])
    body = For(c, 0, 2, "serial", _vloop(v, 8, BufferStore(C, value, (c * 8 + v,))))
    after = vectorize_loop(_func([A, B, C], body))
    branch = after.body.body
    assert isinstance(branch, IfThenElse)
    for side, source in ((branch.then_case, A), (branch.else_case, B)):
        assert isinstance(side, BufferStore) and side.value.buffer is source
        assert side.value.dtype.lanes == 8
    lane_dependent = op.if_then_else(v < 4, A[v], B[v])
    _kept(_vloop(v, 8, BufferStore(C, lane_dependent, (v,))), A, B, C)


def test_min_max_become_vector_operations():
    A, C = decl_buffer((8,), "float32", "A"), decl_buffer((8,), "float32", "C")
    v = Var("v")
    store = BufferStore(C, op.max(op.min(A[v], F2), const(0.0, "float32")), (v,))
    after = vectorize_loop(_func([A, C], _vloop(v, 8, store)))
    assert isinstance(after.body, BufferStore) and after.body.value.dtype.lanes == 8


def test_guarded_body_with_a_lane_invariant_test_is_unswitched():
    """`for v (vectorized): if i < 5: C[i*8 + v] = ...` (a predicated row of a register tile):
    the test is decided once, outside the loop, and the store becomes a vector store; a test
    on the lane itself keeps the loop."""
    A, C = (decl_buffer((64,), "float32", x) for x in "AC")
    i, v = Var("i"), Var("v")
    store = BufferStore(C, A[i * 8 + v] * F2, (i * 8 + v,))
    after = vectorize_loop(_func([A, C], _vloop(v, 8, IfThenElse(i < 5, store))))
    assert isinstance(after.body, IfThenElse) and after.body.else_case is None
    vector_store = after.body.then_case
    assert isinstance(vector_store, BufferStore) and vector_store.value.dtype.lanes == 8
    _kept(_vloop(v, 8, IfThenElse(v < 5, store)), A, C)

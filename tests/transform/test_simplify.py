"""Simplify: arith's statement simplifier over the function (index folding, dead branches)."""

from schedlab.ir import (
    BufferStore,
    For,
    IfThenElse,
    Var,
    assert_structural_equal,
    const,
    decl_buffer,
)  # fmt: skip
from schedlab.transform import simplify

from . import tir_samples as ts
from .tir_samples import plain_func as _func

ONE = const(1.0, "float32")


def test_index_arithmetic_folds_and_proven_branches_go():
    A = decl_buffer((13,), "float32", "A")
    i, j = Var("i"), Var("j")
    store = BufferStore(A, ONE, ((i - i) * 13 + j,))
    body = For(j, 0, 13, "serial", IfThenElse(j < 13, store))  # always true inside the loop
    after = simplify(_func([A], For(i, 0, 4, "serial", body)))
    expected = For(i, 0, 4, "serial", For(j, 0, 13, "serial", BufferStore(A, ONE, (j,))))
    assert_structural_equal(after.body, expected)


def test_numerics_before_and_after():
    from schedlab.transform import flatten_buffer, lower_init_block, lower_opaque_block

    func, reference, in_shapes, out_shape = ts.gemm_local_tile()
    lowered = flatten_buffer(lower_opaque_block(lower_init_block(func)))
    ts.check_numerics(simplify(lowered), reference, in_shapes, out_shape)

"""ConvertBlocksToOpaque and LowerOpaqueBlock: blocks to plain loops."""

import pytest

from schedlab.errors import LoweringError
from schedlab.ir import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    For,
    IfThenElse,
    MatchBufferRegion,
    SeqStmt,
    Var,
    assert_structural_equal,
    const,
    decl_buffer,
    post_order_visit,
)  # fmt: skip
from schedlab.transform import (
    convert_blocks_to_opaque,
    lower_init_block,
    lower_opaque_block,
    plan_and_update_buffer_allocation_location,
)  # fmt: skip

from . import tir_samples as ts
from .tir_samples import S, nest, prim_func, realize


def _count(node, types):
    found = []
    post_order_visit(node, lambda n: found.append(n) if isinstance(n, types) else None)
    return found


def test_convert_substitutes_iter_vars_by_bindings():
    func = lower_init_block(ts.gemm(5, 4, 3)[0])
    after = convert_blocks_to_opaque(func)
    for block in _count(after.body, Block):
        assert block.iter_vars == ()
    (update,) = [b for b in _count(after.body, Block) if b.name_hint == "C"]
    A, B, C = after.buffers
    loops = {f.loop_var.name: f.loop_var for f in _count(after.body, For)}
    i, j, k = loops["i"], loops["j"], loops["k"]
    expected = BufferStore(C, C[i, j] + A[i, k] * B[k, j], (i, j))
    assert_structural_equal(update.body, expected)


def test_lower_opaque_block_removes_blocks_and_keeps_predicates():
    func = lower_init_block(ts.gemm_split_rows()[0])
    after = lower_opaque_block(convert_blocks_to_opaque(func))
    assert not _count(after.body, (Block, BlockRealize))
    guards = _count(after.body, IfThenElse)
    assert len(guards) == 2  # the hoisted init and the update both keep the row predicate


def test_lower_opaque_block_alone_also_converts():
    func = lower_init_block(ts.gemm(5, 4, 3)[0])
    after = lower_opaque_block(func)
    expected = lower_opaque_block(convert_blocks_to_opaque(func))
    assert_structural_equal(after, expected)


def test_alloc_buffers_become_allocate():
    func = plan_and_update_buffer_allocation_location(ts.two_stage()[0])
    after = lower_opaque_block(func)
    assert isinstance(after.body, Allocate) and after.body.buffer.name == "B"
    assert isinstance(after.body.body, SeqStmt)


def test_remaining_init_is_an_error():
    with pytest.raises(LoweringError, match="LowerInitBlock"):
        convert_blocks_to_opaque(ts.gemm()[0])
    with pytest.raises(LoweringError, match="LowerInitBlock"):
        lower_opaque_block(ts.gemm()[0])


def _match_buffer_func(m=3, n=6, width=4, view_dims=1):
    """C[i, t] = A[i, 1 + t] * 2 for t < width, through a view of A's row region."""
    A, C = decl_buffer((m, n), "float32", "A"), decl_buffer((m, width), "float32", "C")
    view = decl_buffer((width,) if view_dims == 1 else (1, width), "float32", "Av")
    i, t, vi = Var("i"), Var("t"), Var("vi")
    index = (t,) if view_dims == 1 else (0, t)
    body = For(t, 0, width, "serial", BufferStore(C, view[index] * const(2.0, "float32"), (vi, t)))
    block = realize("copy", [(vi, m, S)], (i,), body)
    match = MatchBufferRegion(view, A.region((vi, 1), (1, width)))
    block = block.replace(block=block.block.replace(match_buffers=(match,)))
    return prim_func("f", [A, C], nest([(i, m)], block)), (m, n), (m, width)


@pytest.mark.parametrize("view_dims", [1, 2])
def test_match_buffer_accesses_go_to_the_source_region(view_dims):
    func, a_shape, c_shape = _match_buffer_func(view_dims=view_dims)
    after = lower_opaque_block(func)
    assert not _count(after.body, (Block, BlockRealize))
    ts.check_numerics(after, lambda a: a[:, 1:5] * 2, [a_shape], c_shape)


def test_match_buffer_with_too_many_dimensions_is_an_error():
    A, C = decl_buffer((4,), "float32", "A"), decl_buffer((4,), "float32", "C")
    view = decl_buffer((1, 4), "float32", "Av")
    block = realize("b", [], (), BufferStore(C, view[0, 0], (0,)))
    match = MatchBufferRegion(view, A.region((0, 4)))
    block = block.replace(block=block.block.replace(match_buffers=(match,)))
    with pytest.raises(LoweringError, match="match_buffer Av"):
        lower_opaque_block(prim_func("f", [A, C], block))


def test_numerics_before_and_after():
    for sample in (ts.gemm_split_rows, ts.row_sum_split, lambda: ts.two_stage(fused=True)):
        func, reference, in_shapes, out_shape = sample()
        func = plan_and_update_buffer_allocation_location(lower_init_block(func))
        opaque = convert_blocks_to_opaque(func)
        ts.check_numerics(lower_opaque_block(opaque), reference, in_shapes, out_shape)

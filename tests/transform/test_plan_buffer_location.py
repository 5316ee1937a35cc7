"""PlanAndUpdateBufferAllocationLocation: allocations move to the LCA of their uses."""

from schedlab.ir import (
    Allocate,
    Block,
    BufferStore,
    For,
    SeqStmt,
    Var,
    const,
    decl_buffer,
    post_order_visit,
)  # fmt: skip
from schedlab.transform import (
    lower,
    lower_init_block,
    plan_and_update_buffer_allocation_location,
)  # fmt: skip

from . import tir_samples as ts
from .tir_samples import R, S, nest, prim_func, realize

plan = plan_and_update_buffer_allocation_location


def _allocates(func):
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Allocate) else None)
    return found


def _root(func):
    return func.body.block


def test_buffer_used_by_two_top_level_nests_stays_in_the_root():
    func = ts.two_stage()[0]
    assert plan(func) is func


def test_buffer_used_under_one_loop_moves_into_it():
    func = ts.two_stage(fused=True)[0]
    after = plan(func)
    assert _root(after).alloc_buffers == ()
    loop = _root(after).body
    assert isinstance(loop, For) and loop.loop_var.name == "i"
    assert isinstance(loop.body, Allocate) and loop.body.buffer.name == "B"
    assert isinstance(loop.body.body, SeqStmt)


def test_local_tile_moves_under_the_tile_loops_not_inside_the_reduction():
    after = plan(lower_init_block(ts.gemm_local_tile()[0]))
    (alloc,) = _allocates(after)
    assert alloc.buffer.name == "C_local"
    outer = _root(after).body
    assert outer.loop_var.name == "io" and outer.body.loop_var.name == "jo"
    assert outer.body.body is alloc


def test_reduction_result_is_allocated_above_its_reduction_loop():
    # for i: { for k: T[vi] += A[vi, vk];  C[vi] = T[vi] * 2 }: T lives across the k loop
    m, k = 5, 7
    A, C = decl_buffer((m, k), "float32", "A"), decl_buffer((m,), "float32", "C")
    T = decl_buffer((m,), "float32", "T")
    i, kk, vi, vk, wi = (Var(x) for x in ("i", "k", "vi", "vk", "wi"))
    red = realize(
        "T",
        [(vi, m, S), (vk, k, R)],
        (i, kk),
        BufferStore(T, T[vi] + A[vi, vk], (vi,)),
        init=BufferStore(T, const(0.0, "float32"), (vi,)),
    )
    use = realize("C", [(wi, m, S)], (i,), BufferStore(C, T[wi] * const(2.0, "float32"), (wi,)))
    body = nest([(i, m)], SeqStmt((nest([(kk, k)], red), use)))
    func = prim_func("f", [A, C], body, allocs=(T,))
    after = plan(lower_init_block(func))
    loop = _root(after).body
    assert isinstance(loop.body, Allocate) and loop.body.buffer is T
    ts.check_numerics(after, lambda a: a.sum(axis=1) * 2, [(m, k)], (m,))


def test_numerics_before_and_after():
    for sample in (lambda: ts.two_stage(fused=True), ts.gemm_local_tile):
        func, reference, in_shapes, out_shape = sample()
        after = plan(lower_init_block(func))
        ts.check_numerics(after, reference, in_shapes, out_shape)


def test_buffer_used_inside_one_block_moves_to_its_alloc_buffers():
    # for i: block outer(vi = i) { block P: T[0] = A[vi] * 2;  block Q: C[vi] = T[0] + 1 }
    m = 5
    A, C, T = (decl_buffer(s, "float32", x) for s, x in (((m,), "A"), ((m,), "C"), ((1,), "T")))
    i, vi = Var("i"), Var("vi")
    produce = realize("P", [], (), BufferStore(T, A[vi] * const(2.0, "float32"), (0,)))
    consume = realize("Q", [], (), BufferStore(C, T[0] + const(1.0, "float32"), (vi,)))
    outer = realize("outer", [(vi, m, S)], (i,), SeqStmt((produce, consume)))
    func = prim_func("f", [A, C], nest([(i, m)], outer), allocs=(T,))
    after = plan(func)
    assert _root(after).alloc_buffers == ()
    (moved,) = [b for b in _blocks(after) if b.name_hint == "outer"]
    assert moved.alloc_buffers == (T,)
    ts.check_numerics(after, lambda a: a * 2 + 1, [(m,)], (m,))
    ts.check_numerics(lower(after)["f"], lambda a: a * 2 + 1, [(m,)], (m,))


def _blocks(func):
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return found

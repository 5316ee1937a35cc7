"""CompactBufferAllocation: allocations shrink to the region their scope touches."""

from schedlab.ir import (
    Allocate,
    BufferStore,
    For,
    PrimFunc,
    Ramp,
    SeqStmt,
    Var,
    const,
    decl_buffer,
    post_order_visit,
)  # fmt: skip
from schedlab.transform import (
    compact_buffer_allocation,
    lower_init_block,
    lower_opaque_block,
    plan_and_update_buffer_allocation_location,
)  # fmt: skip

from . import tir_samples as ts


def _prepare(func):
    return lower_opaque_block(plan_and_update_buffer_allocation_location(lower_init_block(func)))


def _allocates(func):
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Allocate) else None)
    return {a.buffer.name: a for a in found}


def _shape(alloc):
    return tuple(s.value for s in alloc.buffer.shape)


def test_row_intermediate_under_its_row_loop_becomes_one_row():
    after = compact_buffer_allocation(_prepare(ts.two_stage(fused=True)[0]))
    assert _shape(_allocates(after)["B"]) == (1, 13)


def test_local_accumulator_becomes_the_tile():
    after = compact_buffer_allocation(_prepare(ts.gemm_local_tile(tm=4, tn=8)[0]))
    alloc = _allocates(after)["C_local"]
    assert _shape(alloc) == (4, 8) and alloc.buffer.scope == "local"


def test_allocation_of_the_whole_function_keeps_its_shape():
    func = _prepare(ts.two_stage()[0])
    assert compact_buffer_allocation(func) is func


def _triangle(n=4, size=16):
    """for i: allocate T[size]; for j < i + 1: T[j] = A[i]; C[i] = T[i]  (lowered form)."""
    A, C = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "C")
    T = decl_buffer((size,), "float32", "T")
    i, j = Var("i"), Var("j")
    fill = For(j, 0, i + 1, "serial", BufferStore(T, A[i], (j,)))
    body = Allocate(T, SeqStmt((fill, BufferStore(C, T[i], (i,)))))
    params = [Var("A", "handle"), Var("C", "handle")]
    return PrimFunc(params, For(i, 0, n, "serial", body), dict(zip(params, [A, C])))


def test_symbolic_extent_is_bounded_by_the_outer_loop_range():
    after = compact_buffer_allocation(_triangle())
    assert _shape(_allocates(after)["T"]) == (4,)
    ts.check_numerics(after, lambda a: a, [(4,)], (4,))


def test_vector_accesses_are_left_alone():
    A = decl_buffer((8,), "float32", "A")
    T = decl_buffer((64,), "float32", "T")
    store = BufferStore(T, A[Ramp(const(0), const(1), 8)], (Ramp(const(0), const(1), 8),))
    param = Var("A", "handle")
    func = PrimFunc([param], Allocate(T, store), {param: A})
    assert compact_buffer_allocation(func) is func


def test_numerics_before_and_after():
    for sample in (lambda: ts.two_stage(fused=True), ts.gemm_local_tile):
        func, reference, in_shapes, out_shape = sample()
        after = compact_buffer_allocation(_prepare(func))
        ts.check_numerics(after, reference, in_shapes, out_shape)

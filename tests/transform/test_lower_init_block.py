"""LowerInitBlock: the init hoisted before the reduction loops where legal, else conditional."""

from schedlab.ir import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    IfThenElse,
    SeqStmt,
    Var,
    assert_structural_equal,
    const,
    decl_buffer,
    post_order_visit,
)  # fmt: skip
from schedlab.transform import lower_init_block

from . import tir_samples as ts
from .tir_samples import R, S, gemm, nest, prim_func, realize


def _blocks(func):
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return {b.name_hint: b for b in found}


def _gemm_parts(m, n, k):
    A, B, C = (
        decl_buffer(s, "float32", x) for s, x in (((m, k), "A"), ((k, n), "B"), ((m, n), "C"))
    )
    i, j, kk, vi, vj, vk, wi, wj = (Var(x) for x in ("i", "j", "k", "vi", "vj", "vk", "wi", "wj"))
    return A, B, C, i, j, kk, vi, vj, vk, wi, wj


def test_gemm_init_hoisted_before_the_reduction_loop():
    m, n, k = 5, 4, 3
    after = lower_init_block(gemm(m, n, k)[0])
    A, B, C, i, j, kk, vi, vj, vk, wi, wj = _gemm_parts(m, n, k)
    init = realize(
        "C_init", [(wi, m, S), (wj, n, S)], (i, j), BufferStore(C, const(0.0, "float32"), (wi, wj))
    )
    update = realize(
        "C",
        [(vi, m, S), (vj, n, S), (vk, k, R)],
        (i, j, kk),
        BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
    )
    body = nest([(i, m), (j, n)], SeqStmt((init, For(kk, 0, k, "serial", update))))
    assert_structural_equal(after, prim_func("gemm", [A, B, C], body))


def test_spatial_predicate_goes_with_the_hoisted_init():
    after = lower_init_block(ts.gemm_split_rows()[0])
    blocks = _blocks(after)
    assert blocks["C"].init is None
    init_realize = []
    post_order_visit(
        after.body,
        lambda n: (
            init_realize.append(n)
            if isinstance(n, BlockRealize) and n.block.name_hint == "C_init"
            else None
        ),
    )
    (init,) = init_realize
    assert not (hasattr(init.predicate, "value") and init.predicate.value)  # the row guard


def test_predicate_on_the_reduction_loops_keeps_the_init_conditional():
    after = lower_init_block(ts.row_sum_split()[0])
    blocks = _blocks(after)
    assert set(blocks) == {"root", "S"}
    body = blocks["S"].body
    assert isinstance(body, SeqStmt) and isinstance(body.seq[0], IfThenElse)
    assert blocks["S"].init is None


def test_reduction_loop_outside_spatial_loops_gets_an_init_nest_before_it():
    # for k: for ii: for ji: C_local[...] += ...  ->  for ii': for ji': init; for k: ...
    after = lower_init_block(ts.gemm_local_tile(tm=4, tn=8)[0])
    blocks = _blocks(after)
    assert blocks["C_local"].init is None
    assert not isinstance(blocks["C_local"].body, SeqStmt)  # no `if k == 0` left
    nests = []
    post_order_visit(after.body, lambda n: nests.append(n) if isinstance(n, SeqStmt) else None)
    init_nest = next(s.seq[0] for s in nests if isinstance(s.seq[0], For)
                     and "C_local_init" in str(s.seq[0]))  # fmt: skip
    assert [int(init_nest.extent.value), int(init_nest.body.extent.value)] == [4, 8]
    update_nest = next(s.seq[1] for s in nests if s.seq[0] is init_nest)
    assert update_nest.loop_var.name == "k"
    rows = update_nest.body  # the ii loop the init nest copies: fresh variable, fresh loop
    assert init_nest.loop_var is not rows.loop_var and init_nest.uid != rows.uid


def _row_sum_with_extra_loop(extent: int, predicate=None):
    """for i: for k: for r in range(extent): S[vi] += A[vi, vk] -- r binds no iter var, and
    `predicate(r)` (if given) guards the block."""
    m, k = 3, 4
    A, Sb = decl_buffer((m, k), "float32", "A"), decl_buffer((m,), "float32", "S")
    i, kk, r, vi, vk = (Var(x) for x in ("i", "k", "r", "vi", "vk"))
    block = realize(
        "S",
        [(vi, m, S), (vk, k, R)],
        (i, kk),
        BufferStore(Sb, Sb[vi] + A[vi, vk], (vi,)),
        init=BufferStore(Sb, const(0.0, "float32"), (vi,)),
        predicate=True if predicate is None else predicate(r),
    )
    return prim_func("f", [A, Sb], nest([(i, m), (kk, k), (r, extent)], block))


def test_a_loop_only_in_the_predicate_prevents_hoisting():
    # for k: for r: if r < 2: S[vi] += ...  -- r binds nothing: the conditional init resets S
    func = _row_sum_with_extra_loop(3, predicate=lambda r: r < 2)
    assert "S_init" not in _blocks(lower_init_block(func))


def test_a_loop_binding_nothing_between_reduction_loops_prevents_hoisting():
    # for k: for r: S[vi] += A[vi, vk]  -- r repeats the reduction; hoisting would sum twice
    assert "S_init" not in _blocks(lower_init_block(_row_sum_with_extra_loop(2)))


def test_split_reduction_is_hoisted_in_either_loop_order():
    # vk = ko * 4 + ki over (ko, ki) or (ki, ko): a bijection starting at 0 on the first iteration
    m, k = 3, 12
    for swapped in (False, True):
        A, Sb = decl_buffer((m, k), "float32", "A"), decl_buffer((m,), "float32", "S")
        i, ko, ki, vi, vk = (Var(x) for x in ("i", "ko", "ki", "vi", "vk"))
        block = realize(
            "S",
            [(vi, m, S), (vk, k, R)],
            (i, ko * 4 + ki),
            BufferStore(Sb, Sb[vi] + A[vi, vk], (vi,)),
            init=BufferStore(Sb, const(0.0, "float32"), (vi,)),
        )
        loops = [(i, m), (ki, 4), (ko, 3)] if swapped else [(i, m), (ko, 3), (ki, 4)]
        after = lower_init_block(prim_func("f", [A, Sb], nest(loops, block)))
        assert "S_init" in _blocks(after)


def test_reversed_reduction_is_not_hoisted():
    # vk = 3 - k reaches the domain minimum on the last iteration, not the first
    m, k = 3, 4
    A, Sb = decl_buffer((m, k), "float32", "A"), decl_buffer((m,), "float32", "S")
    i, kk, vi, vk = (Var(x) for x in ("i", "k", "vi", "vk"))
    block = realize(
        "S",
        [(vi, m, S), (vk, k, R)],
        (i, 3 - kk),
        BufferStore(Sb, Sb[vi] + A[vi, vk], (vi,)),
        init=BufferStore(Sb, const(0.0, "float32"), (vi,)),
    )
    after = lower_init_block(prim_func("f", [A, Sb], nest([(i, m), (kk, k)], block)))
    assert "S_init" not in _blocks(after)


def test_numerics_before_and_after():
    for sample in (ts.gemm, ts.gemm_split_rows, ts.row_sum_split, ts.gemm_local_tile):
        func, reference, in_shapes, out_shape = sample()
        ts.check_numerics(func, reference, in_shapes, out_shape)
        ts.check_numerics(lower_init_block(func), reference, in_shapes, out_shape)

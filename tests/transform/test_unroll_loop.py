"""UnrollLoop: unrolled loops expanded (fresh variables per copy); auto-unroll honoured."""

from schedlab.ir import (
    BufferStore,
    For,
    ForKind,
    SeqStmt,
    Var,
    const,
    decl_buffer,
    post_order_visit,
    verify,
)  # fmt: skip
from schedlab.ir.transform import PassContext
from schedlab.transform import (
    UnrollLoop,
    flatten_buffer,
    lower_init_block,
    lower_opaque_block,
    simplify,
    unroll_loop,
)  # fmt: skip

from . import tir_samples as ts
from .tir_samples import plain_func as _func

ONE = const(1.0, "float32")


def _loops(func):
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, For) else None)
    return found


def _stores(func):
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, BufferStore) else None)
    return found


def test_unrolled_loop_becomes_copies_with_constants():
    A = decl_buffer((16,), "float32", "A")
    i, u = Var("i"), Var("u")
    body = For(i, 0, 4, "serial", For(u, 0, 4, ForKind.UNROLLED, BufferStore(A, ONE, (i * 4 + u,))))
    after = unroll_loop(_func([A], body))
    inner = after.body.body
    assert isinstance(inner, SeqStmt) and len(inner.seq) == 4
    assert [str(s.indices[0]) for s in inner.seq] == [str(i * 4 + c) for c in range(4)]


def test_too_long_unrolled_loop_stays_a_loop():
    A = decl_buffer((16,), "float32", "A")
    u = Var("u")
    func = _func([A], For(u, 0, 16, ForKind.UNROLLED, BufferStore(A, ONE, (u,))))
    assert unroll_loop(func, max_statements=8) is func
    with PassContext(config={"tir.UnrollLoop": {"max_statements": 8}}):
        assert UnrollLoop()(func) is func
    assert isinstance(unroll_loop(func).body, SeqStmt)


def test_copies_get_fresh_inner_loop_variables():
    A = decl_buffer((3, 5), "float32", "A")
    u, j = Var("u"), Var("j")
    inner = For(j, 0, 5, "serial", BufferStore(A, ONE, (u, j)))
    after = unroll_loop(_func([A], For(u, 0, 3, ForKind.UNROLLED, inner)))
    loops = _loops(after)
    assert len(loops) == 3 and len({id(loop.loop_var) for loop in loops}) == 3
    verify(after)


def _auto(explicit=None):
    A = decl_buffer((8, 4), "float32", "A")
    i, j, k = Var("i"), Var("j"), Var("k")
    annotations = {"pragma_auto_unroll_max_step": 16}
    if explicit is not None:
        annotations["pragma_unroll_explicit"] = explicit
    body = For(j, 0, 8, "serial", For(k, 0, 4, "serial", BufferStore(A, ONE, (j, k))))
    return _func([A], For(i, 0, 2, "serial", body, annotations=annotations))


def test_auto_unroll_expands_inner_loops_up_to_the_step_limit():
    after = unroll_loop(_auto())
    loops = _loops(after)
    # k (4 steps) is unrolled; j would be 32 steps > 16 and stays; i carries the pragma
    assert sorted(loop.loop_var.name for loop in loops) == ["i", "j"]
    assert len(_stores(after)) == 4


def test_auto_unroll_without_explicit_marks_loops_unrolled():
    after = unroll_loop(_auto(explicit=0))
    kinds = {loop.loop_var.name: loop.kind for loop in _loops(after)}
    assert kinds == {"i": ForKind.SERIAL, "j": ForKind.SERIAL, "k": ForKind.UNROLLED}


def test_numerics_before_and_after():
    for n in (24, 23):
        func, reference, in_shapes, out_shape = ts.scale_add(n=n, lanes=4, kind="unrolled")
        lowered = simplify(flatten_buffer(lower_opaque_block(lower_init_block(func))))
        after = unroll_loop(lowered)
        assert not any(loop.kind == ForKind.UNROLLED for loop in _loops(after))
        ts.check_numerics(after, reference, in_shapes, out_shape)
    annotated = {"pragma_auto_unroll_max_step": 64}
    func, reference, in_shapes, out_shape = ts.scale_add(n=23, lanes=4, annotations=annotated)
    after = unroll_loop(flatten_buffer(lower_opaque_block(lower_init_block(func))))
    ts.check_numerics(after, reference, in_shapes, out_shape)

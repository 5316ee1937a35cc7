"""Statements, blocks, buffers and layouts through the interpreter (vectorized and scalar)."""

from __future__ import annotations

import numpy as np
import pytest

import schedlab
from schedlab.interpreter import interpret, scalar_mode, source
from schedlab.ir import (
    Allocate,
    Broadcast,
    Buffer,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IRModule,
    LetStmt,
    MatchBufferRegion,
    Ramp,
    Range,
    SizeVar,
    Var,
    const,
    decl_buffer,
    op,
)

from .interp_builders import block, func, loops, matmul, root, run_both, seq


# -- blocks ----------------------------------------------------------------------------------
def test_block_predicate_from_a_non_divisible_split():
    """for io, ii: vi = io * 4 + ii, predicate vi < 13: the tail lanes do nothing."""
    n = 13
    a, b = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    body = loops(
        [4, 4],
        lambda io, ii: block(
            "B",
            [io * 4 + ii],
            [n],
            "S",
            lambda vi: BufferStore(b, a[vi] * 2.0, (vi,)),
            predicate=io * 4 + ii < n,
        ),
    )
    x = np.arange(n, dtype="float32")
    out = run_both(func([a, b], root(body)), x, np.zeros(n, "float32"))[1]
    np.testing.assert_array_equal(out, x * 2)


@pytest.mark.parametrize("order", ["ijk", "kij", "ikj", "jki"])
def test_init_runs_at_the_first_reduction_point_in_any_loop_order(order):
    f = matmul(7, 5, 9, order=order)
    rng = np.random.default_rng(0)
    a, b = (
        rng.standard_normal((7, 9)).astype("float32"),
        rng.standard_normal((9, 5)).astype("float32"),
    )
    c = np.full((7, 5), 99.0, "float32")  # init must overwrite this
    out = run_both(f, a, b, c)[2]
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_init_with_a_split_reduction_axis_and_nonzero_domain_start():
    """vk = ko * 3 + ki + 2 over dom [2, 14): init when vk == 2 (the domain min)."""
    m, k = 5, 12
    a, c = decl_buffer((m, k + 2), "int32", "A"), decl_buffer((m,), "int32", "C")

    def make_block(i, ko, ki):
        realize = block(
            "C",
            [i, ko * 3 + ki + 2],
            [m, k],
            "SR",
            lambda vi, vk: BufferStore(c, c[vi] + a[vi, vk], (vi,)),
            init=lambda vi, vk: BufferStore(c, const(1, "int32"), (vi,)),
        )
        iv = realize.block.iter_vars
        fixed = iv[1].replace(dom=Range(2, k))
        return realize.replace(block=realize.block.replace(iter_vars=(iv[0], fixed)))

    f = func([a, c], root(loops([m, 4, 3], make_block, names=["i", "ko", "ki"])))
    x = np.arange(m * (k + 2), dtype="int32").reshape(m, k + 2)
    out = run_both(f, x, np.full(m, -50, "int32"))[1]
    np.testing.assert_array_equal(out, 1 + x[:, 2:].sum(axis=1))


def test_block_alloc_buffers_and_root_intermediates():
    """B = A + 1 into an intermediate; per-row scratch allocated inside a block."""
    n, m = 6, 5
    a, out = decl_buffer((n, m), "float32", "A"), decl_buffer((n, m), "float32", "Out")
    tmp = decl_buffer((n, m), "float32", "T")
    scratch = decl_buffer((m,), "float32", "S")

    def row(i):
        fill = loops([m], lambda j: BufferStore(scratch, a[i, j] * 3.0, (j,)), names=["j"])
        use = loops(
            [m], lambda j: BufferStore(out, tmp[i, j] + scratch[m - 1 - j], (i, j)), names=["j2"]
        )
        return block("row", [i], [n], "S", lambda vi: seq(fill, use), alloc=[scratch])

    stage1 = loops([n, m], lambda i, j: BufferStore(tmp, a[i, j] + 1.0, (i, j)))
    f = func([a, out], root(seq(stage1, loops([n], row, names=["r"])), alloc=[tmp]))
    x = np.arange(n * m, dtype="float32").reshape(n, m)
    got = run_both(f, x, np.zeros((n, m), "float32"))[1]
    np.testing.assert_array_equal(got, x + 1 + (x * 3)[:, ::-1])


def test_match_buffer_views_a_region():
    """A block matching A[i, 2:5] as a 1-D buffer writes through the view."""
    n = 4
    a = decl_buffer((n, 6), "int32", "A")
    sub = decl_buffer((3,), "int32", "Sub")

    def body(i):
        match = MatchBufferRegion(sub, BufferRegion(a, (Range(i, 1), Range(2, 3))))
        inner = loops([3], lambda j: BufferStore(sub, sub[j] * 10 + j, (j,)), names=["j"])
        realize = block("m", [i], [n], "S", lambda vi: inner)
        # the region uses the loop var through the block binding
        vi = realize.block.iter_vars[0].var
        match = MatchBufferRegion(sub, BufferRegion(a, (Range(vi, 1), Range(2, 3))))
        return realize.replace(block=realize.block.replace(match_buffers=(match,)))

    f = func([a], root(loops([n], body)))
    x = np.arange(n * 6, dtype="int32").reshape(n, 6)
    got = run_both(f, x)[0]
    expected = x.copy()
    expected[:, 2:5] = x[:, 2:5] * 10 + np.arange(3)
    np.testing.assert_array_equal(got, expected)


# -- control flow ----------------------------------------------------------------------------
def test_if_then_else_let_and_evaluate():
    n = 11
    a, b = decl_buffer((n,), "int32", "A"), decl_buffer((n,), "int32", "B")

    def body(i):
        t = Var("t")
        branch = IfThenElse(a[i] % 2 == 0, BufferStore(b, t * 2, (i,)), BufferStore(b, -t, (i,)))
        return seq(Evaluate(const(0)), Evaluate(a[i] + 1), LetStmt(t, a[i] + 3, branch))

    x = np.arange(n, dtype="int32") - 5
    got = run_both(func([a, b], root(loops([n], body))), x, np.zeros(n, "int32"))[1]
    np.testing.assert_array_equal(got, np.where(x % 2 == 0, (x + 3) * 2, -(x + 3)))


@pytest.mark.parametrize("kind", ["serial", "parallel", "vectorized", "unrolled"])
def test_loop_kinds_all_run_serially(kind):
    a, b = decl_buffer((5, 7), "float32", "A"), decl_buffer((5, 7), "float32", "B")
    body = loops([5, 7], lambda i, j: BufferStore(b, a[i, j] * a[i, j], (i, j)), kind=kind)
    x = np.arange(35, dtype="float32").reshape(5, 7)
    np.testing.assert_array_equal(run_both(func([a, b], root(body)), x, 0 * x)[1], x * x)


def test_thread_binding_loops_run_serially():
    a, b = decl_buffer((6, 32), "float32", "A"), decl_buffer((6, 32), "float32", "B")
    bx, tx = Var("bx"), Var("tx")
    store = BufferStore(b, a[bx, tx] + 1.0, (bx, tx))
    body = For(
        bx,
        0,
        6,
        "thread_binding",
        For(tx, 0, 32, "thread_binding", store, thread_tag="threadIdx.x"),
        thread_tag="blockIdx.x",
    )
    x = np.arange(6 * 32, dtype="float32").reshape(6, 32)
    np.testing.assert_array_equal(run_both(func([a, b], root(body)), x, 0 * x)[1], x + 1)


def test_deep_loop_nests_are_outlined():
    """More nested Python loops than CPython allows in one function (20)."""
    depth = 24
    a = decl_buffer((1,), "int64", "A")
    names = [f"l{d}" for d in range(depth)]
    extents = [1, 2, 1, 1] * (depth // 4)
    body = loops(extents, lambda *vs: BufferStore(a, a[0] + 1, (0,)), names=names)
    f = func([a], root(body))
    with scalar_mode():
        assert "_part" in source(f, vectorize=False)
        out = np.zeros(1, "int64")
        interpret(f, out)
    assert out[0] == 2 ** (depth // 4)


# -- the lowered form --------------------------------------------------------------------------
def test_lowered_flat_ir_with_allocate_and_ramps():
    """Flat buffers, an Allocate'd temporary and 4-lane Ramp/Broadcast vector code."""
    n = 24
    a, b = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    tmp = decl_buffer((4,), "float32", "tmp", scope="local")

    def body(i):
        lanes = Ramp(i * 4, const(1), 4)
        load = tmp[Ramp(const(0), const(1), 4)]
        return Allocate(
            tmp,
            seq(
                BufferStore(
                    tmp, a[lanes] * Broadcast(const(2.0), 4), (Ramp(const(0), const(1), 4),)
                ),
                BufferStore(b, load + Broadcast(a[i * 4], 4), (lanes,)),
            ),
        )

    f = func([a, b], loops([n // 4], body))
    x = np.arange(n, dtype="float32")
    got = run_both(f, x, np.zeros(n, "float32"))[1]
    np.testing.assert_array_equal(got, x * 2 + np.repeat(x[::4], 4))


def test_lowered_te_gemm_takes_the_original_arrays():
    pytest.importorskip("schedlab.transform")
    from schedlab import te

    m, n, k = 9, 11, 13
    A, B = te.placeholder((m, k), "float32", "A"), te.placeholder((k, n), "float32", "B")
    r = te.reduce_axis((0, k), "r")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    lowered = schedlab.transform.lower(te.create_prim_func([A, B, C]))
    rng = np.random.default_rng(3)
    a, b = (
        rng.standard_normal((m, k)).astype("float32"),
        rng.standard_normal((k, n)).astype("float32"),
    )
    c = run_both(lowered, a, b, np.zeros((m, n), "float32"))[2]
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


# -- layouts and shapes ------------------------------------------------------------------------
def test_parameter_with_symbolic_strides_takes_a_strided_view():
    n, m = SizeVar("n"), SizeVar("m")
    s0, s1 = Var("s0"), Var("s1")
    a = Buffer(Var("A", "handle"), "float32", (n, m), "A", strides=(s0, s1))
    b = decl_buffer((n, m), "float32", "B")
    body = loops([n, m], lambda i, j: BufferStore(b, a[i, j] + 1.0, (i, j)))
    f = func([a, b], root(body))
    base = np.arange(80, dtype="float32").reshape(8, 10)
    view = base[1::2, ::3]  # non-contiguous: strides (20, 3) elements
    out = run_both(f, view, np.zeros(view.shape, "float32"))[1]
    np.testing.assert_array_equal(out, view + 1)


def test_intermediate_with_strides_and_elem_offset():
    n = 5
    a, b = decl_buffer((n, 3), "int32", "A"), decl_buffer((n, 3), "int32", "B")
    # column-major scratch inside a padded allocation starting at element 7
    tmp = Buffer(Var("T", "handle"), "int32", (n, 3), "T", strides=(1, n + 2), elem_offset=7)
    stage1 = loops([n, 3], lambda i, j: BufferStore(tmp, a[i, j] * 2, (i, j)))
    stage2 = loops(
        [n, 3], lambda i, j: BufferStore(b, tmp[i, j] + tmp[n - 1 - i, j], (i, j)), names=["x", "y"]
    )
    f = func([a, b], root(seq(stage1, stage2), alloc=[tmp]))
    x = np.arange(n * 3, dtype="int32").reshape(n, 3)
    out = run_both(f, x, np.zeros((n, 3), "int32"))[1]
    np.testing.assert_array_equal(out, x * 2 + x[::-1] * 2)


def test_symbolic_shapes_bind_per_call():
    n = SizeVar("n")
    a, b = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    body = loops([n], lambda i: BufferStore(b, a[i] * op.cast(n, "float32"), (i,)))
    f = func([a, b], root(body))
    for size in (1, 7, 300):
        x = np.arange(size, dtype="float32")
        out = run_both(f, x, np.zeros(size, "float32"))[1]
        np.testing.assert_array_equal(out, x * size)
    empty = np.zeros(0, "float32")
    interpret(f, empty, empty.copy())


def test_symbolic_matmul_from_te():
    from schedlab import te

    m, n, k = te.size_var("m"), te.size_var("n"), te.size_var("k")
    A, B = te.placeholder((m, k), "float32", "A"), te.placeholder((k, n), "float32", "B")
    r = te.reduce_axis((0, k), "r")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    f = te.create_prim_func([A, B, C])
    rng = np.random.default_rng(4)
    for shape in ((3, 5, 7), (17, 1, 4)):
        a = rng.standard_normal(shape[:2]).astype("float32")
        b = rng.standard_normal(shape[1:]).astype("float32")
        c = run_both(f, a, b, np.zeros((shape[0], shape[2]), "float32"))[2]
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


# -- calling conventions -----------------------------------------------------------------------
def test_irmodule_and_func_name():
    f = matmul(3, 4, 5)
    mod = IRModule({"mm": f, "other": matmul(2, 2, 2)})
    a, b = np.ones((3, 5), "float32"), np.ones((5, 4), "float32")
    c = np.zeros((3, 4), "float32")
    interpret(mod, a, b, c, func_name="mm")
    np.testing.assert_array_equal(c, np.full((3, 4), 5.0))
    with pytest.raises(ValueError, match="func_name"):
        interpret(mod, a, b, c)
    with pytest.raises(ValueError, match="'nope'"):
        interpret(mod, a, b, c, func_name="nope")
    interpret(IRModule({"only": f}), a, b, c)


def test_aliased_arguments_run_in_order():
    """The same array as input and output (overlapping, not allowed by noalias but handled):
    B[i] = A[i - 1] + 1 over the same memory is a running sum, as a loop computes it."""
    n = 9
    a, b = decl_buffer((n,), "int32", "A"), decl_buffer((n,), "int32", "B")
    body = loops([n - 1], lambda i: BufferStore(b, a[i] + 1, (i + 1,)))
    x = np.zeros(n, "int32")
    interpret(func([a, b], root(body)), x, x)
    np.testing.assert_array_equal(x, np.arange(n))


def test_read_only_output_is_rejected():
    f = matmul(2, 2, 2)
    c = np.zeros((2, 2), "float32")
    c.flags.writeable = False
    with pytest.raises(ValueError, match="argument C: expected a writeable array"):
        interpret(f, np.ones((2, 2), "float32"), np.ones((2, 2), "float32"), c)


@pytest.mark.parametrize("vector", [True, False])
def test_out_of_bounds_access_raises(vector):
    a, b = decl_buffer((5,), "float32", "A"), decl_buffer((5,), "float32", "B")
    body = loops([5], lambda i: BufferStore(b, a[i + 1], (i,)))
    f = func([a, b], root(body))
    x = np.zeros(5, "float32")
    if vector:
        with pytest.raises(IndexError, match="buffer A"):
            interpret(f, x, x.copy())
    else:
        with scalar_mode(), pytest.raises(IndexError, match="buffer A"):
            interpret(f, x, x.copy())


def test_negative_index_is_out_of_bounds_not_wrapped():
    a, b = decl_buffer((5,), "float32", "A"), decl_buffer((5,), "float32", "B")
    body = loops([5], lambda i: BufferStore(b, a[i - 1], (i,)))
    with pytest.raises(IndexError, match="index -1"):
        interpret(func([a, b], root(body)), np.zeros(5, "float32"), np.zeros(5, "float32"))


def test_uninitialized_float_intermediates_read_as_nan():
    a = decl_buffer((3,), "float32", "A")
    tmp = decl_buffer((3,), "float32", "T")
    f = func([a], root(loops([3], lambda i: BufferStore(a, tmp[i], (i,))), alloc=[tmp]))
    out = np.zeros(3, "float32")
    interpret(f, out)
    assert np.isnan(out).all()


def test_translation_is_cached_per_function():
    from schedlab.interpreter import get_translation

    f = matmul(2, 3, 4)
    assert get_translation(f) is get_translation(f)
    assert get_translation(f, vectorize=False) is not get_translation(f)


def test_translations_do_not_keep_functions_alive():
    import gc
    import weakref

    from schedlab.interpreter import get_translation

    f = matmul(2, 3, 4)
    get_translation(f)
    alive = weakref.ref(f)
    del f
    gc.collect()
    assert alive() is None


def test_deeply_nested_conditions_are_outlined():
    a = decl_buffer((1,), "int32", "A")
    stmt = BufferStore(a, a[0] + 1, (0,))
    for level in range(120):  # Python allows 100 levels of indentation
        stmt = IfThenElse(a[0] >= -level, stmt)
    out = run_both(func([a], root(stmt)), np.zeros(1, "int32"))[0]
    assert out[0] == 1


def test_buffers_sharing_storage_see_each_others_writes():
    """A flat 1-D buffer over the same data as a 2-D parameter (what flattening produces)."""
    a, b = decl_buffer((3, 4), "float32", "A"), decl_buffer((3, 4), "float32", "B")
    flat = Buffer(a.data, "float32", (12,), "A_flat")
    double = loops([12], lambda i: BufferStore(flat, flat[i] * 2.0, (i,)))
    mixed = loops([3, 4], lambda i, j: BufferStore(b, a[i, j] + flat[i * 4 + j], (i, j)))
    shift = loops([11], lambda i: BufferStore(flat, a[(i + 1) // 4, (i + 1) % 4], (i,)))
    f = func([a, b], root(seq(double, mixed, shift)))
    x = np.arange(12, dtype="float32").reshape(3, 4)
    got_a, got_b = run_both(f, x, np.zeros((3, 4), "float32"))
    np.testing.assert_array_equal(got_b, x * 4)
    expected = (x * 2).reshape(-1)
    expected[:11] = expected[1:]
    np.testing.assert_array_equal(got_a.reshape(-1), expected)

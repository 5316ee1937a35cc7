"""The vectorizer: what it turns into array code, and proof that it changes no result.

Random programs run three ways: vectorized, in scalar mode (every loop a Python loop) and by a
naive tree-walking evaluator written independently in the test suite. Integer programs must agree
exactly; float programs within a tolerance (vectorized reductions re-associate sums).
"""

from __future__ import annotations

import numpy as np
import pytest

from schedlab.interpreter import interpret, scalar_mode, source
from schedlab.ir import BufferStore, IfThenElse, const, decl_buffer, op

from .interp_builders import block, func, loops, matmul, root, run_both, seq
from .naive_eval import Naive
from .random_programs import ProgramGen


def _loops_in(text: str) -> int:
    return sum(line.lstrip().startswith("for ") for line in text.splitlines())


# -- what gets vectorized ----------------------------------------------------------------------
def test_matmul_runs_without_python_loops():
    f = matmul(64, 64, 64)
    assert _loops_in(source(f)) == 0
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype("float32")
    b = rng.standard_normal((64, 64)).astype("float32")
    c = np.zeros((64, 64), "float32")
    interpret(f, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_te_matmul_64_matches_numpy():
    from schedlab import te

    A, B = te.placeholder((64, 64), "float32", "A"), te.placeholder((64, 64), "float32", "B")
    k = te.reduce_axis((0, 64), "k")
    C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    f = te.create_prim_func([A, B, C])
    rng = np.random.default_rng(1)
    a, b = (
        rng.standard_normal((64, 64)).astype("float32"),
        rng.standard_normal((64, 64)).astype("float32"),
    )
    c = np.zeros((64, 64), "float32")
    interpret(f, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert _loops_in(source(f)) == 0


def test_integer_matmul_is_exact_with_wraparound():
    f = matmul(9, 10, 11, dtype="int8")
    rng = np.random.default_rng(2)
    a = rng.integers(-128, 128, (9, 11)).astype("int8")
    b = rng.integers(-128, 128, (11, 10)).astype("int8")
    c = run_both(f, a, b, np.zeros((9, 10), "int8"))[2]
    expected = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int8)  # wraps mod 256
    np.testing.assert_array_equal(c, expected)


@pytest.mark.parametrize(
    "combine,reference,dtype",
    [
        (op.add, np.sum, "float32"),
        (op.max, np.max, "float32"),
        (op.min, np.min, "int32"),
        (op.mul, np.prod, "int32"),
        (op.logical_and, np.all, "bool"),
        (op.logical_or, np.any, "bool"),
    ],
)
def test_reductions_vectorize(combine, reference, dtype):
    m, n = 6, 9
    a, c = decl_buffer((m, n), dtype, "A"), decl_buffer((m,), dtype, "C")
    start = {"add": 0, "max": -1e30, "min": 2**30, "mul": 1, "and": True, "or": False}
    kind = combine.__name__.replace("logical_", "")
    body = loops(
        [m, n],
        lambda i, k: block(
            "C",
            [i, k],
            [m, n],
            "SR",
            lambda vi, vk: BufferStore(c, combine(c[vi], a[vi, vk]), (vi,)),
            init=lambda vi, vk: BufferStore(c, const(start[kind], dtype), (vi,)),
        ),
    )
    f = func([a, c], root(body))
    assert _loops_in(source(f)) == 0
    rng = np.random.default_rng(3)
    x = (
        rng.integers(0, 2, (m, n)).astype(dtype)
        if dtype == "bool"
        else rng.integers(1, 4, (m, n)).astype(dtype)
    )
    out = run_both(f, x, np.zeros(m, dtype))[1]
    np.testing.assert_allclose(out, reference(x, axis=1).astype(dtype), rtol=1e-6)


def test_loop_carried_dependence_stays_sequential():
    """A[i] = A[i - 1] + A[i]: a prefix sum; vectorizing it would be wrong."""
    n = 17
    a = decl_buffer((n,), "int32", "A")
    f = func([a], root(loops([n - 1], lambda i: BufferStore(a, a[i] + a[i + 1], (i + 1,)))))
    assert _loops_in(source(f)) == 1
    x = np.arange(n, dtype="int32")
    np.testing.assert_array_equal(run_both(f, x)[0], np.cumsum(x))


def test_outer_dependence_inner_parallel():
    """Rows depend on the previous row; each row is computed at once."""
    m, n = 6, 8
    a = decl_buffer((m, n), "int32", "A")
    body = loops([m - 1, n], lambda i, j: BufferStore(a, a[i, j] * 2 + j, (i + 1, j)))
    f = func([a], root(body))
    assert _loops_in(source(f)) == 1
    x = np.ones((m, n), "int32")
    expected = x.copy()
    for i in range(m - 1):
        expected[i + 1] = expected[i] * 2 + np.arange(n)
    np.testing.assert_array_equal(run_both(f, x)[0], expected)


def test_every_point_writing_one_element_keeps_the_last_write():
    n = 7
    a, s = decl_buffer((n,), "int32", "A"), decl_buffer((1,), "int32", "S")
    f = func([a, s], root(loops([n], lambda i: BufferStore(s, a[i], (0,)))))
    assert _loops_in(source(f)) == 1
    out = run_both(f, np.arange(n, dtype="int32") * 3, np.zeros(1, "int32"))[1]
    assert out[0] == (n - 1) * 3


def test_guarded_stores_vectorize_with_masks():
    n = 21
    a, b = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    body = loops(
        [n],
        lambda i: IfThenElse(
            a[i] > 0.0, BufferStore(b, a[i], (i,)), BufferStore(b, -a[i] * 2.0, (i,))
        ),
    )
    f = func([a, b], root(body))
    assert _loops_in(source(f)) == 0
    x = np.linspace(-3, 3, n).astype("float32")
    out = run_both(f, x, np.zeros(n, "float32"))[1]
    np.testing.assert_array_equal(out, np.where(x > 0, x, -x * 2))


def test_symbolic_flat_index_is_checked_at_run_time():
    """B[i * n + j] with symbolic n and m: injective only when n >= m, checked when run."""
    from schedlab.ir import SizeVar, Var

    size, n, m = SizeVar("L"), Var("n"), Var("m")
    a, b = decl_buffer((size,), "int32", "A"), decl_buffer((size,), "int32", "B")
    body = loops([3, m], lambda i, j: BufferStore(b, a[i * n + j] + i * 100, (i * n + j,)))
    f = func([a, b], root(body), scalars=[n, m])
    assert "radix_ok" in source(f)
    for length, rows, width in ((12, 4, 4), (9, 2, 3)):  # the second has overlapping rows
        x = np.arange(length, dtype="int32")
        expected = np.zeros(length, "int32")
        for i in range(3):
            for j in range(width):
                expected[i * rows + j] = x[i * rows + j] + i * 100
        out = run_both(f, x, np.zeros(length, "int32"), rows, width)[1]
        np.testing.assert_array_equal(out, expected)


# -- random programs ---------------------------------------------------------------------------
def _run_three_ways(f, arrays):
    naive = [a.copy() for a in arrays]
    try:
        Naive({}).run(f, *naive)
    except IndexError:
        naive = None
    results = []
    for vectorize in (True, False):
        copies = [a.copy() for a in arrays]
        if vectorize:
            interpret(f, *copies)
        else:
            with scalar_mode():
                interpret(f, *copies)
        results.append(copies)
    return naive, results


@pytest.mark.parametrize("seed", range(200))
def test_random_integer_programs_agree_exactly(seed):
    gen = ProgramGen(seed, "int32")
    f = gen.program()
    arrays = gen.arrays()
    with np.errstate(all="ignore"):
        naive, (vector, scalar) = _run_three_ways(f, arrays)
    assert naive is not None, "the generator made an out-of-bounds program"
    for got_v, got_s, want in zip(vector, scalar, naive):
        np.testing.assert_array_equal(got_s, want, err_msg=f"scalar mode\n{f.script()}")
        np.testing.assert_array_equal(got_v, want, err_msg=f"vectorized\n{source(f)}\n{f.script()}")


@pytest.mark.parametrize("seed", range(40))
def test_random_float_programs_agree(seed):
    gen = ProgramGen(1000 + seed, "float32")
    f = gen.program()
    arrays = gen.arrays()
    with np.errstate(all="ignore"):
        naive, (vector, scalar) = _run_three_ways(f, arrays)
    for got_v, got_s, want in zip(vector, scalar, naive):
        np.testing.assert_array_equal(got_s, want, err_msg=f"scalar mode\n{f.script()}")
        np.testing.assert_allclose(
            got_v, want, rtol=1e-4, atol=1e-4, equal_nan=True, err_msg=f"vectorized\n{source(f)}"
        )


def test_ramp_vector_code_inside_a_vectorized_loop():
    """Lowered 4-lane code (Ramp/Broadcast) in a loop that itself runs as arrays: the lanes get
    their own leading axis."""
    from schedlab.ir import Broadcast, Ramp

    n = 28
    a, b = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")

    def body(i):
        lanes = Ramp(i * 4, const(1), 4)
        value = a[lanes] * Broadcast(const(2.0), 4) + Broadcast(a[i * 4 + 3], 4)
        return BufferStore(b, value, (lanes,))

    f = func([a, b], loops([n // 4], body))
    assert _loops_in(source(f)) == 0
    x = np.arange(n, dtype="float32")
    out = run_both(f, x, np.zeros(n, "float32"))[1]
    np.testing.assert_array_equal(out, x * 2 + np.repeat(x[3::4], 4))


def test_unguarded_store_before_an_update_runs_every_iteration():
    """`S = v(k); S = max(S, f(k))` in one loop: only the last iteration's pair counts (not a
    reduction with an init at the start)."""
    n = 9
    a, s = decl_buffer((n,), "int32", "A"), decl_buffer((1,), "int32", "S")
    body = loops(
        [n],
        lambda k: seq(
            BufferStore(s, a[k] * 2, (0,)), BufferStore(s, op.max(s[0], a[(k + 3) % n]), (0,))
        ),
    )
    x = np.array([5, -1, 7, 0, 3, 9, -4, 2, 1], "int32")
    out = run_both(func([a, s], root(body)), x, np.zeros(1, "int32"))[1]
    assert out[0] == max(x[-1] * 2, x[(n - 1 + 3) % n])


def test_inner_loop_bound_read_from_a_written_buffer():
    """for i: (for k in range(B[0]): C[i] += 1); B[i] = i + 3 — the first point writes B[0]
    after using it, every later point sees the new value: the i loop must stay in order."""
    n = 6
    b, c = decl_buffer((n,), "int32", "B"), decl_buffer((n,), "int32", "C")
    from schedlab.ir import For, Var

    def body(i):
        k = Var("k")
        count = For(k, const(0), b[0], "serial", BufferStore(c, c[i] + 1, (i,)))
        return seq(count, BufferStore(b, i + 3, (i,)))

    out = run_both(func([b, c], root(loops([n], body))), np.zeros(n, "int32"), np.zeros(n, "int32"))
    np.testing.assert_array_equal(out[1], [0] + [3] * (n - 1))


def test_symbolic_sizes_over_the_array_cap_fall_back_to_an_outer_loop():
    from schedlab.interpreter.loops import LIMIT
    from schedlab.ir import SizeVar

    n, m = SizeVar("n"), SizeVar("m")
    a, b = decl_buffer((n, m), "float32", "A"), decl_buffer((n, m), "float32", "B")
    f = func([a, b], root(loops([n, m], lambda i, j: BufferStore(b, a[i, j] + 1.0, (i, j)))))
    assert f"<= {LIMIT}" in source(f)
    rows = LIMIT // 1024 + 1  # rows * 1024 > LIMIT: one row at a time
    x = np.ones((rows, 1024), "float32")
    out = np.zeros_like(x)
    interpret(f, x, out)
    assert (out == 2).all()


def test_tiled_matmul_with_tail_predicates():
    """The loop nest a schedule makes (split i, j, k by 8, reorder io jo ko ii ji ki, predicate
    for the tails): tiles `io * 8 + ii` still prove independent."""
    m, n, k, t = 30, 21, 19, 8
    A, B = decl_buffer((m, k), "float32", "A"), decl_buffer((k, n), "float32", "B")
    C = decl_buffer((m, n), "float32", "C")
    tiles = [-(-m // t), -(-n // t), -(-k // t), t, t, t]

    def body(io, jo, ko, ii, ji, ki):
        i, j, r = io * t + ii, jo * t + ji, ko * t + ki
        return block(
            "C",
            [i, j, r],
            [m, n, k],
            "SSR",
            lambda vi, vj, vk: BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
            init=lambda vi, vj, vk: BufferStore(C, const(0.0), (vi, vj)),
            predicate=op.all(i < m, j < n, r < k),
        )

    names = ["io", "jo", "ko", "ii", "ji", "ki"]
    f = func([A, B, C], root(loops(tiles, body, names=names)))
    assert _loops_in(source(f)) <= 1
    rng = np.random.default_rng(5)
    a, b = (
        rng.standard_normal((m, k)).astype("float32"),
        rng.standard_normal((k, n)).astype("float32"),
    )
    c = run_both(f, a, b, np.full((m, n), 7.0, "float32"))[2]
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)

"""Compiled kernels vs numpy: loop kinds, OpenMP, vector (Ramp/Broadcast) code, allocations,
symbolic shapes and scalar parameters, at odd sizes."""

import numpy as np
import pytest

from schedlab.ir import (
    Allocate,
    Broadcast,
    BufferStore,
    IfThenElse,
    LetStmt,
    Ramp,
    SizeVar,
    Var,
    op,
)
from schedlab.ir.buffer import decl_buffer
from schedlab.target import Target

from ._lowered import Params, build, f32, i32, loop, rand, seq


def _elementwise(outer: str, inner: str, m=7, n=13):
    p = Params()
    A, C = p.buf("A", (m, n)), p.buf("C", (m, n))
    i, j = Var("i"), Var("j")
    store = BufferStore(C, A[i * n + j] * f32(2.0) + op.cast(j, "float32"), (i * n + j,))
    return p.func(loop(i, m, loop(j, n, store, inner), outer), f"ew_{outer}_{inner}")


@pytest.mark.parametrize(
    "outer,inner",
    [("serial", "serial"), ("parallel", "serial"), ("serial", "vectorized"),
     ("parallel", "unrolled"), ("parallel", "parallel"), ("vectorized", "parallel")],
)  # fmt: skip
def test_loop_kinds(outer, inner):
    kernel = build(_elementwise(outer, inner))
    a, c = rand((7, 13)), np.zeros((7, 13), "float32")
    kernel(a, c)
    np.testing.assert_allclose(c, a * 2 + np.arange(13, dtype="float32"), rtol=1e-6)


def _gemm(m, n, k, outer="parallel"):
    p = Params()
    A, B, C = p.buf("A", (m, k)), p.buf("B", (k, n)), p.buf("C", (m, n))
    i, j, r = Var("i"), Var("j"), Var("k")
    init = BufferStore(C, f32(0.0), (i * n + j,))
    update = BufferStore(C, C[i * n + j] + A[i * k + r] * B[r * n + j], (i * n + j,))
    body = loop(i, m, loop(j, n, seq(init, loop(r, k, update))), outer)
    return p.func(body, "gemm")


def test_parallel_gemm_odd_sizes():
    kernel = build(_gemm(17, 23, 29))
    a, b, c = rand((17, 29)), rand((29, 23), seed=1), np.full((17, 23), np.nan, "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_vectorized_loop_with_carried_dependence_stays_correct():
    p = Params()
    A, B = p.buf("A", 37), p.buf("B", 37)
    i = Var("i")
    body = seq(
        BufferStore(A, B[i32(0)], (i32(0),)),
        loop(i, 36, BufferStore(A, A[i - 1] + B[i], (i,)), "vectorized", start=1),
    )
    kernel = build(p.func(body, "prefix_sum"))
    assert "omp simd" not in kernel.source
    a, b = np.zeros(37, "float32"), rand(37)
    kernel(a, b)
    np.testing.assert_allclose(a, np.cumsum(b), rtol=1e-5)


def test_vector_ramp_code():
    """Contiguous, strided and gathered loads; contiguous and scattered stores; int vector
    division; vector casts; lanes that are not a power of two."""
    p = Params()
    A, Ix, C, D, E, G = (p.buf("A", 40), p.buf("I", 40, "int32"), p.buf("C", 40),
                        p.buf("D", 40), p.buf("E", 15), p.buf("G", 40, "int32"))  # fmt: skip
    i = Var("i")
    ramp8, ramp4s2 = Ramp(i * 8, i32(1), 8), Ramp(i * 8, i32(2), 4)
    body = seq(
        BufferStore(C, A[ramp8] * Broadcast(f32(3.0), 8) + op.cast(Ix[ramp8], "float32"), (ramp8,)),
        BufferStore(D, A[ramp4s2] - Broadcast(f32(1.0), 4), (Ramp(i * 8 + 1, i32(2), 4),)),
        BufferStore(D, A[Ix[ramp4s2]], (ramp4s2,)),  # gather through an index buffer
        BufferStore(
            E, A[Ramp(i * 3, i32(1), 3)] * A[Ramp(i * 3, i32(1), 3)], (Ramp(i * 3, i32(1), 3),)
        ),  # fmt: skip
        BufferStore(
            G, Ix[ramp8] / Broadcast(i32(3), 8) + Ix[ramp8] % Broadcast(i32(5), 8), (ramp8,)
        ),  # fmt: skip
    )
    kernel = build(p.func(loop(i, 5, body), "vectors"))
    assert "sl_load_float32x8" in kernel.source and "sl_store_float32x8" in kernel.source
    a = rand(40)
    idx = np.random.default_rng(3).permutation(40).astype("int32")
    c, d, e, g = (np.zeros(40, "float32"), np.zeros(40, "float32"), np.zeros(15, "float32"),
                  np.zeros(40, "int32"))  # fmt: skip
    kernel(a, idx, c, d, e, g)
    np.testing.assert_allclose(c, a * 3 + idx, rtol=1e-6)
    np.testing.assert_allclose(d[1::2], a[::2] - 1, rtol=1e-6)
    np.testing.assert_array_equal(d[::2], a[idx[::2]])
    np.testing.assert_allclose(e, a[:15] ** 2, rtol=1e-6)
    np.testing.assert_array_equal(g, np.fix(idx / 3).astype("int32") + idx % 5)


def test_vector_select_compare_and_lazy_if_then_else():
    p = Params()
    A, C, D = p.buf("A", 16), p.buf("C", 16), p.buf("D", 16)
    i = Var("i")
    ramp = Ramp(i * 8, i32(1), 8)
    far = Ramp(i * 8 - (1 << 28), i32(1), 8)  # 1 GiB before A: only safe if never loaded
    body = seq(
        BufferStore(
            C, op.select(A[ramp] > Broadcast(f32(0.0), 8), A[ramp], Broadcast(f32(0.0), 8)), (ramp,)
        ),  # fmt: skip
        BufferStore(
            D, op.if_then_else(ramp < Broadcast(i32(-1), 8), A[far], A[ramp] + A[ramp]), (ramp,)
        ),  # fmt: skip
    )
    kernel = build(p.func(loop(i, 2, body), "vector_select"))
    a, c, d = rand(16), np.zeros(16, "float32"), np.zeros(16, "float32")
    kernel(a, c, d)
    np.testing.assert_array_equal(c, np.maximum(a, 0))
    np.testing.assert_allclose(d, 2 * a, rtol=1e-6)


def test_if_then_else_at_borders_pads():
    n = 11
    p = Params()
    A, C = p.buf("A", n), p.buf("C", n + 4)
    i = Var("i")
    guarded = op.if_then_else(op.logical_and(i >= 2, i < n + 2), A[i - 2], f32(-1.0))
    kernel = build(p.func(loop(i, n + 4, BufferStore(C, guarded, (i,))), "pad"))
    a, c = rand(n), np.zeros(n + 4, "float32")
    kernel(a, c)
    np.testing.assert_array_equal(c, np.pad(a, (2, 2), constant_values=-1.0))


def _two_stage(rows: int, cols: int, kind: str):
    """tmp = A row * 2 (a scratch Allocate inside the row loop), C = reversed tmp + 1."""
    p = Params()
    A, C = p.buf("A", (rows, cols)), p.buf("C", (rows, cols))
    tmp = decl_buffer((cols,), "float32", "tmp", scope="local")
    i, j = Var("i"), Var("j")
    body = Allocate(tmp, seq(
        loop(j, cols, BufferStore(tmp, A[i * cols + j] * f32(2.0), (j,))),
        loop(j, cols, BufferStore(C, tmp[cols - 1 - j] + f32(1.0), (i * cols + j,))),
    ))  # fmt: skip
    return p.func(loop(i, rows, body, kind), f"two_stage_{cols}")


@pytest.mark.parametrize("cols,where", [(19, "stack"), (4099, "heap")])
@pytest.mark.parametrize("kind", ["serial", "parallel"])
def test_allocate_stack_and_heap(cols, where, kind):
    kernel = build(_two_stage(3, cols, kind))
    assert ("sl_alloc(" in kernel.source) == (where == "heap")
    a, c = rand((3, cols)), np.zeros((3, cols), "float32")
    kernel(a, c)
    np.testing.assert_allclose(c, a[:, ::-1] * 2 + 1, rtol=1e-6)


def test_symbolic_shapes_and_scalar_params():
    p = Params()
    n, m = SizeVar("n"), SizeVar("m")
    A = decl_buffer((n,), "float32", "A")
    B = decl_buffer((m,), "float32", "B")
    C = decl_buffer((n * m,), "float32", "C")
    for buffer in (A, B, C):
        param = Var(buffer.name, "handle")
        p.params.append(param)
        p.buffer_map[param] = buffer
    alpha, shift = p.scalar("alpha", "float32"), p.scalar("shift", "int32")
    i, j = Var("i"), Var("j")
    value = A[i] * B[j] * alpha + op.cast(shift, "float32")
    body = loop(i, n, loop(j, m, BufferStore(C, value, (i * m + j,))), "parallel")
    kernel = build(p.func(body, "outer"))
    for rows, cols in ((7, 13), (3, 1), (0, 5)):
        a, b = rand(rows), rand(cols, seed=2)
        c = np.zeros(rows * cols, "float32")
        kernel(a, b, c, 1.5, -3)
        np.testing.assert_allclose(c, (np.outer(a, b) * 1.5 - 3).ravel(), rtol=1e-6)


def test_let_stmt_if_else_and_unrolled_lets():
    p = Params()
    A, C = p.buf("A", 9), p.buf("C", 9)
    i, x = Var("i"), Var("x", "float32")
    body = LetStmt(x, A[i] * f32(3.0), IfThenElse(
        x > f32(0.0), BufferStore(C, x, (i,)), BufferStore(C, op.neg(x), (i,))
    ))  # fmt: skip
    kernel = build(p.func(seq(loop(i, 4, body), loop(i, 5, body, "unrolled", start=4)), "lets"))
    a, c = rand(9), np.zeros(9, "float32")
    kernel(a, c)
    np.testing.assert_allclose(c, np.abs(a * 3), rtol=1e-6)


def test_bool_buffers_and_logic():
    p = Params()
    A, M, C = p.buf("A", 21), p.buf("M", 21, "bool"), p.buf("C", 21, "bool")
    i = Var("i")
    value = op.logical_or(op.logical_and(A[i] > f32(0.0), M[i]), op.logical_not(A[i] > f32(-1.0)))
    kernel = build(p.func(loop(i, 21, BufferStore(C, value, (i,))), "logic"))
    a, m = rand(21), np.random.default_rng(4).random(21) > 0.5
    c = np.zeros(21, bool)
    kernel(a, m, c)
    np.testing.assert_array_equal(c, ((a > 0) & m) | ~(a > -1))


def test_vector_stores_wider_than_the_machine_are_split():
    """A 64-lane store becomes native-width chunks (gcc spills over-wide vectors); a store that
    reads lanes another chunk writes stays whole, and both keep vector semantics."""
    width = Target("cpu").simd_width // 32
    p = Params()
    A, C = p.buf("A", 65), p.buf("C", 64)
    wide = Ramp(i32(0), i32(1), 64)
    body = seq(
        BufferStore(C, A[wide] * Broadcast(f32(2.0), 64) + C[wide], (wide,)),
        BufferStore(A, A[wide], (Ramp(i32(1), i32(1), 64),)),  # shift right by one
    )
    kernel = build(p.func(body, "wide_stores"))
    assert f"sl_store_float32x{width}(C + " in kernel.source
    assert "sl_store_float32x64(A + 1, sl_load_float32x64(A + 0));" in kernel.source
    a, c = rand(65), rand(64, seed=1)
    expected_c = a[:64] * 2 + c
    expected_a = np.concatenate([a[:1], a[:64]])
    kernel(a, c)
    np.testing.assert_allclose(c, expected_c, rtol=1e-6)
    np.testing.assert_array_equal(a, expected_a)


def test_repeated_lets_and_allocations_of_one_variable():
    """An unrolled body repeats its LetStmt and Allocate with the same variable and buffer in
    one sequence; each repetition gets its own C block."""
    p = Params()
    A, C = p.buf("A", 2), p.buf("C", 2)
    x = Var("x", "float32")
    tmp = decl_buffer((1,), "float32", "tmp", scope="local")

    def body(k):
        inner = seq(BufferStore(tmp, x, (i32(0),)), BufferStore(C, tmp[i32(0)] + x, (i32(k),)))
        return LetStmt(x, A[i32(k)] * f32(2.0), Allocate(tmp, inner))

    kernel = build(p.func(seq(body(0), body(1)), "repeated"))
    a, c = rand(2), np.zeros(2, "float32")
    kernel(a, c)
    np.testing.assert_allclose(c, a * 4, rtol=1e-6)

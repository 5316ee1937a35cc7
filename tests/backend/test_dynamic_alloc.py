"""Allocations whose size is known only at run time (a symbolic dim of the arguments): the C
backend puts them on the heap (sl_alloc, freed at the end of their scope); constant small ones
stay on the stack. Every kernel is compared with the interpreter at two sizes."""

import numpy as np
import pytest

import schedlab
from schedlab import te
from schedlab.errors import LoweringError
from schedlab.interpreter import interpret
from schedlab.ir import Allocate, BufferStore, SizeVar, Var
from schedlab.ir.buffer import decl_buffer
from schedlab.transform import verify_lowered

from ._lowered import Params, build, f32, loop, rand, seq


def _symbolic_scratch(rows: str = "serial"):
    """tmp[n * m] = A * 2 (a symbolic-size scratch buffer), then C = reversed tmp + 1, plus a
    per-row scratch of `m` floats allocated inside the row loop (of kind `rows`)."""
    p = Params()
    n, m = SizeVar("n"), SizeVar("m")
    for name in ("A", "C"):
        param = Var(name, "handle")
        p.params.append(param)
        p.buffer_map[param] = decl_buffer((n * m,), "float32", name)
        p.shapes[name] = (n, m)  # the logical shape binds n and m from the arguments
    A, C = p.buffer_map[p.params[0]], p.buffer_map[p.params[1]]
    tmp = decl_buffer((n * m,), "float32", "tmp")
    row = decl_buffer((m,), "float32", "row")
    i, j, k = Var("i"), Var("j"), Var("k")
    fill = loop(k, n * m, BufferStore(tmp, A[k] * f32(2.0), (k,)))
    per_row = Allocate(row, seq(
        loop(j, m, BufferStore(row, tmp[n * m - 1 - (i * m + j)], (j,))),
        loop(j, m, BufferStore(C, row[m - 1 - j] + f32(1.0), (i * m + j,))),
    ))  # fmt: skip
    return p.func(Allocate(tmp, seq(fill, loop(i, n, per_row, rows))), "symbolic_scratch")


def test_hand_built_symbolic_scratch_matches_interpreter():
    func = _symbolic_scratch()
    verify_lowered(func)
    kernel = build(func)
    assert kernel.source.count("sl_alloc((size_t)") == 2 and kernel.source.count("free(") == 2
    assert "sl_status = -1;" in kernel.source
    for rows, cols in ((3, 5), (17, 33)):
        a = rand((rows, cols), seed=rows)
        got, want = np.zeros_like(a), np.zeros_like(a)
        kernel(a, got)
        interpret(func, a, want)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        expected = a[::-1] * 2 + 1
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_parallel_rows_with_heap_scratch_match_interpreter():
    """The parallel row loop's body is outlined: it takes the outer scratch pointer and the
    symbolic sizes, allocates its own row on the heap and reports a failed allocation."""
    func = _symbolic_scratch(rows="parallel")
    kernel = build(func)
    assert "static inline int32_t symbolic_scratch__i_body(int32_t i," in kernel.source
    assert "#pragma omp atomic write" in kernel.source
    for rows, cols in ((3, 5), (17, 33)):
        a = rand((rows, cols), seed=rows)
        got = np.zeros_like(a)
        kernel(a, got)
        np.testing.assert_allclose(got, a[::-1] * 2 + 1, rtol=1e-6)


def test_constant_scratch_stays_on_the_stack():
    p = Params()
    A, C = p.buf("A", 7), p.buf("C", 7)
    tmp = decl_buffer((7,), "float32", "tmp")
    i = Var("i")
    body = Allocate(tmp, seq(
        loop(i, 7, BufferStore(tmp, A[i] + f32(1.0), (i,))),
        loop(i, 7, BufferStore(C, tmp[6 - i], (i,))),
    ))  # fmt: skip
    kernel = build(p.func(body, "on_stack"))
    assert "sl_alloc(" not in kernel.source
    a, c = rand(7), np.zeros(7, "float32")
    kernel(a, c)
    np.testing.assert_allclose(c, a[::-1] + 1, rtol=1e-6)


def test_size_of_no_argument_is_still_rejected():
    p = Params()
    A = p.buf("A", 4)
    free = SizeVar("k")
    tmp = decl_buffer((free,), "float32", "tmp")
    i = Var("i")
    body = Allocate(tmp, loop(i, 4, BufferStore(A, f32(0.0), (i,))))
    with pytest.raises(LoweringError, match=r"Allocate of .*tmp.* non-constant size .* uses k"):
        verify_lowered(p.func(body, "unbound"))


def _te_two_stage():
    n = te.size_var("n")
    A = te.placeholder((n, 6), "float32", "A")
    B = te.compute((n, 6), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    C = te.compute((n, 6), lambda i, j: B[i, 5 - j] * B[i, j], name="C")
    return te.create_prim_func([A, C], "two_stage")


def test_te_two_stage_with_symbolic_dim():
    func = _te_two_stage()
    kernel = schedlab.build(func, "cpu")
    assert "sl_alloc(" in kernel.source
    for rows in (3, 11):
        a = rand((rows, 6), seed=rows)
        got, want = np.zeros_like(a), np.zeros_like(a)
        kernel(a, got)
        interpret(func, a, want)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        b = a * 2 + 1
        np.testing.assert_allclose(got, b[:, ::-1] * b, rtol=1e-6)


def test_scratch_sized_by_a_scalar_and_its_failure_path():
    """A size from a scalar parameter; an impossible size makes the kernel return -1, which
    the runtime reports as MemoryError (nothing is written, nothing leaks)."""
    p = Params()
    A, C = p.buf("A", 9), p.buf("C", 9)
    count = p.scalar("count", "int64")
    tmp = decl_buffer((count,), "float32", "tmp")
    i = Var("i")
    body = Allocate(tmp, seq(
        loop(i, 9, BufferStore(tmp, A[i] * f32(3.0), (i,))),
        loop(i, 9, BufferStore(C, tmp[8 - i], (i,))),
    ))  # fmt: skip
    func = p.func(body, "scalar_sized")
    kernel = build(func)
    a = rand(9)
    for size in (9, 40):
        got, want = np.zeros(9, "float32"), np.zeros(9, "float32")
        kernel(a, got, size)
        interpret(func, a, want, size)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(MemoryError, match="scalar_sized: the kernel could not allocate"):
        kernel(a, np.zeros(9, "float32"), 2**60)  # 4 EiB

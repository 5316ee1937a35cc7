"""Distinct objects with the same name print with distinct names; odd names become identifiers."""

from schedlab.ir import Add, BufferStore, For, SeqStmt, Var, decl_buffer
from schedlab.script import expr_text, from_source

from .script_helpers import make_func, roundtrip


def test_two_vars_named_i_print_as_i_and_i_1():
    A = decl_buffer((4, 4), "float32", "A")
    outer, inner = Var("i"), Var("i")
    store = BufferStore(A, A[outer, inner], (inner, outer))
    nest = For(outer, 0, 4, "serial", For(inner, 0, 4, "parallel", store))
    text = roundtrip(make_func(nest, (A,)))
    assert "for i in range(4):" in text and "for i_1 in T.parallel(4):" in text
    assert "A[i_1, i] = A[i, i_1]" in text
    assert expr_text(Add(Var("i"), Var("i"))) == "i + i_1"
    same = Var("i")
    assert expr_text(Add(same, same)) == "i + i"


def test_sibling_loops_with_distinct_vars_of_one_name():
    A = decl_buffer((4,), "float32", "A")
    first, second = Var("i"), Var("i")
    body = SeqStmt(
        (
            For(first, 0, 4, "serial", BufferStore(A, A[first], (first,))),
            For(second, 0, 4, "serial", BufferStore(A, A[second], (second,))),
        )
    )
    text = roundtrip(make_func(body, (A,)))
    assert "for i in range(4):" in text and "for i_1 in range(4):" in text


def test_buffers_and_vars_share_one_namespace():
    A1, A2 = decl_buffer((4,), "float32", "A"), decl_buffer((4,), "float32", "A")
    local = decl_buffer((4,), "float32", "C.local")
    i = Var("A")
    body = For(i, 0, 4, "serial", BufferStore(A2, A1[i] + local[i], (i,)))
    text = roundtrip(make_func(body, (A1, A2, local)))
    assert "def main(A: T.Buffer" in text and "A_1: T.Buffer" in text
    assert "C_local: T.Buffer" in text and "for A_2 in range(4):" in text


def test_reserved_and_invalid_names_are_sanitized():
    A = decl_buffer((4,), "float32", "T")
    names = ["T", "range", "lambda", "1x", "", "I", "True", "a b"]
    loops = [Var(n) for n in names]
    body = BufferStore(A, A[loops[0]], (loops[-1],))
    for var in reversed(loops):
        body = For(var, 0, 1, "serial", body)
    text = roundtrip(make_func(body, (A,)))
    assert "for T_2, range_1, lambda_1, v_1x, v, I_1, True_1, a_b in T.grid(" in text
    assert "def main(T_1: T.Buffer((4,)" in text
    parsed = from_source(text)
    assert parsed.buffers[0].name == "T_1"  # the printed (sanitized) name

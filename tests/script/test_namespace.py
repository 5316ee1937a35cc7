"""The T/I namespaces as Python objects, printer options, HTML for notebooks, and repr."""

import sys

import pytest

from schedlab.errors import ScriptError
from schedlab.ir import (
    Add,
    Buffer,
    BufferStore,
    FloatImm,
    For,
    IntImm,
    PrimExpr,
    SizeVar,
    Var,
    const,
    decl_buffer,
)  # fmt: skip
from schedlab.ir.node import ir_node
from schedlab.script import expr_text, script, to_html
from schedlab.script import tir as T

from .script_helpers import gemm


def test_dtype_objects_and_buffer_are_callable_for_annotations():
    assert isinstance(T.Buffer((4, 4), "float16"), Buffer)
    assert T.Buffer((4,), "float16").dtype == "float16"
    assert type(T.int32()) is Var and isinstance(T.int64(is_size_var=True), SizeVar)
    assert isinstance(T.float32(1.5), FloatImm) and T.float32(1.5).value == 1.5
    assert isinstance(T.int8(-3), IntImm) and T.int8(-3).dtype == "int8"
    assert T.float32x4.dtype == "float32x4" and repr(T.bfloat16) == "T.bfloat16"
    assert T.float32("inf").value == float("inf")


def test_statement_constructs_are_markers():
    for marker in (T.grid, T.block, T.reads, T.axis.remap, T.exp, T.Select, T.floordiv):
        with pytest.raises(RuntimeError, match="only has meaning inside a @T.prim_func"):
            marker(1)
    assert {"grid", "exp", "serial", "thread_binding", "Cast"} <= set(dir(T))
    with pytest.raises(AttributeError):
        _ = T.not_a_thing


def test_prim_func_call_form_and_missing_source():
    @T.prim_func(private=True)
    def copy(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = A[i]

    assert [b.name for b in copy.buffers] == ["A", "B"] and copy.attrs == {}
    namespace = {"T": T}
    with pytest.raises(ScriptError, match="cannot read the source"):
        exec("@T.prim_func\ndef f(A: T.Buffer((4,), 'float32')):\n    A[0] = A[1]\n", namespace)


def test_printer_options():
    text = script(gemm(), show_header=False, indent_spaces=2, print_line_numbers=True)
    lines = text.splitlines()
    assert lines[0] == " 1 @T.prim_func" and lines[3].startswith(" 4   for i, j, k in T.grid")
    func = gemm()
    loop = func.body.block.body
    marked = script(func, underline=[loop.body]).splitlines()  # the j loop, folded in the grid
    row = next(k for k, line in enumerate(marked) if "T.grid" in line)
    assert set(marked[row + 1].strip()) == {"^"}
    assert len(marked[row + 1]) == len(marked[row])


def test_statements_expressions_and_other_nodes_print():
    A = decl_buffer((8,), "float32", "A")
    n, i = Var("n"), Var("i")
    stmt = For(i, 0, n, "serial", BufferStore(A, A[i] + 1.0, (i,)))
    text = script(stmt)
    assert text.splitlines()[1:] == [
        "n = T.int32()",
        'A = T.Buffer((8,), "float32")',
        "for i in range(n):",
        "    A[i] = A[i] + T.float32(1)",
    ]
    assert str(stmt) == text and repr(stmt) == text
    assert script(Add(i, const(1))) == "i + 1" and repr(i + 1) == "i + 1"
    assert script(A) == 'A = T.Buffer((8,), "float32")'
    assert script(A.region((i, 4))) == "A[i:i + 4]"
    block = gemm().body.block.body.body.body.body.block
    assert 'with T.block("C"):' in script(block)  # a block without its realize


def test_expr_text_never_raises():
    @ir_node
    class Weird(PrimExpr):
        payload: int

        @property
        def dtype(self):
            return const(0).dtype

    text = expr_text(Weird(3))
    assert "Weird" in text and "3" in text
    assert repr(Add(Var("x"), Weird(3))) == "Add(a=x, b=Weird(payload=3))"


def test_html_with_and_without_pygments(monkeypatch):
    func = gemm()
    highlighted = to_html(func)
    assert "<span" in highlighted and "style=" in highlighted and "T" in highlighted
    assert func._repr_html_() == highlighted
    monkeypatch.setitem(sys.modules, "pygments", None)
    plain = to_html(func)
    assert plain.startswith('<pre class="schedlab-script">')
    assert "&quot;float32&quot;" in plain and "<span" not in plain

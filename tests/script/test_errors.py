"""Malformed text raises ScriptError with the 1-based line and column and a plain message; the
parser never executes the text."""

import inspect
import textwrap

import pytest

from schedlab.errors import ScriptError
from schedlab.script import from_source
from schedlab.script import tir as T

HEADER = """\
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8, 8), "float32")):
"""


def _error(body: str) -> ScriptError:
    """Parse a function whose body is `body` (written at 4 spaces) and return the error."""
    with pytest.raises(ScriptError) as info:
        from_source(HEADER + textwrap.indent(textwrap.dedent(body), "    "))
    return info.value


def _at(err: ScriptError, line: int, column: int, *words: str) -> None:
    assert (err.line, err.column) == (line, column), str(err)
    for word in words:
        assert word in str(err), str(err)


def test_unknown_name():
    err = _error("for i in range(8):\n    A[i] = A[j]\n")
    _at(err, 4, 18, "unknown name 'j'")


def test_wrong_number_of_axis_values():
    body = """\
    for i, j in T.grid(8, 8):
        with T.block("b"):
            vi, vj = T.axis.remap("SSR", [i, j])
            B[vi, vj] = T.float32(0)
    """
    _at(_error(body), 5, 22, "3 kind(s) 'SSR' for 2 value(s)")
    body = body.replace('"SSR", [i, j]', '"SS", [i, j, i]')
    _at(_error(body), 5, 22, "2 kind(s) 'SS' for 3 value(s)")


def test_dtype_typo():
    err = _error('X = T.alloc_buffer((4,), "flaot32")\nfor i in range(4):\n    X[i] = A[i]\n')
    _at(err, 3, 30, "unknown dtype 'flaot32'", "did you mean 'float32'")
    _at(_error("A[0] = T.flaot32(1)\n"), 3, 12, "unknown function T.flaot32")


def test_mismatched_buffer_rank():
    _at(_error("for i in range(8):\n    A[i] = A[i, i]\n"), 4, 16, "A has 1 dimension(s), got 2")
    _at(_error("for i in range(8):\n    B[i] = A[i]\n"), 4, 9, "B has 2 dimension(s), got 1 index")


def test_unsupported_statements():
    _at(_error("while True:\n    A[0] = A[1]\n"), 3, 5, "unsupported statement: a while loop")
    _at(_error("return 0\n"), 3, 5, "unsupported statement: return")
    _at(_error("A[0] = A[1] ** 2\n"), 3, 12, "operator ** is not supported")
    _at(_error("A[0] = A[1] if True else A[2]\n"), 3, 12, "T.Select")


def test_syntax_errors_become_script_errors():
    with pytest.raises(ScriptError) as info:
        from_source(HEADER + "    for i in range(8)\n        A[i] = 0\n")
    assert info.value.line == 3 and "invalid syntax" in str(info.value)
    assert isinstance(info.value, SyntaxError)


def test_parser_never_executes_code(tmp_path):
    marker = tmp_path / "executed"
    payload = f"__import__('os').system('touch {marker}')"
    for text in (
        f"{HEADER}    T.evaluate({payload})\n",
        f"{HEADER}    A[0] = {payload}\n",
        f"{HEADER}    T.func_attr({{'x': {payload}}})\n",
        f"{HEADER}    for i in range({payload}):\n        A[i] = A[i]\n",
        f"import os\n{HEADER}    A[0] = A[0]\n",
        f"{payload}\n{HEADER}    A[0] = A[0]\n",
        f"@T.prim_func\ndef f(A: T.Buffer((8,), 'float32') = {payload}):\n    A[0] = A[0]\n",
    ):
        with pytest.raises(ScriptError):
            from_source(text)
    assert not marker.exists()
    err = _error(f"A[0] = {payload}\n")
    _at(err, 3, 12, "unknown function \"__import__('os').system\"", "never executed")


def test_frame_statements_out_of_place():
    _at(_error("T.reads(A[0])\n"), 3, 5, "directly inside a `with T.block(...):`")
    body = 'for i in range(8):\n    T.func_attr({"a": 1})\n'
    _at(_error(body), 4, 9, "T.func_attr(...) must be at the top")
    body = 'for i in range(8):\n    X = T.alloc_buffer((4,), "float32")\n'
    _at(_error(body), 4, 9, "directly inside a block or the function body")


def test_other_plain_messages():
    _at(_error("A[0] = T.int8(300)\n"), 3, 12, "value 300 does not fit in int8")
    _at(_error("A[0] = T.expp(A[1])\n"), 3, 12, "did you mean 'exp'")
    _at(_error("A[0] = T.exp(A[1], A[2])\n"), 3, 12, "T.exp takes 1 argument(s), got 2")
    _at(_error("A[0] = A\n"), 3, 12, "buffer A is not a value")
    _at(_error("A[0] = T.int64(1) + 2 * T.int32(3)\n"), 3, 12, "same dtype")
    body = """\
    n = T.int32()
    with T.block("b"):
        v = T.axis.remap("S", [n])
        A[v] = A[v]
    """
    _at(_error(body), 5, 32, "n is not a loop var")
    with pytest.raises(ScriptError, match="parameter a needs a type"):
        from_source("@T.prim_func\ndef f(a):\n    T.evaluate(0)\n")
    with pytest.raises(ScriptError, match="expected one function"):
        from_source(HEADER + "    T.evaluate(0)\n" + HEADER + "    T.evaluate(0)\n")
    with pytest.raises(ScriptError, match="no @T.prim_func"):
        from_source("# nothing here\n")


def test_decorator_errors_point_into_the_file():
    with pytest.raises(ScriptError) as info:

        @T.prim_func
        def broken(A: T.Buffer((4,), "float32")):
            A[0] = undefined_name  # noqa: F821 - the error under test

    lines, start = inspect.getsourcelines(test_decorator_errors_point_into_the_file)
    offset = next(k for k, line in enumerate(lines) if "undefined_name  #" in line)
    assert info.value.line == start + offset
    assert info.value.column == lines[offset].index("undefined_name") + 1
    assert "unknown name 'undefined_name'" in str(info.value)
    assert info.value.filename == __file__


@pytest.mark.parametrize("terms", [900, 200_000])
def test_an_expression_too_long_to_read_is_a_script_error_with_its_position(terms):
    # 900 terms pass Python's parser but not the recursive readers here; 200,000 fail in `ast`
    shape = " + ".join(["n"] * terms)
    text = (
        "@T.prim_func\n"
        f'def f(n: T.int32, A: T.Buffer(({shape},), "float32")):\n'
        "    A[0] = T.float32(1)\n"
    )
    err = pytest.raises(ScriptError, from_source, text).value
    _at(err, 2, 32, "nested too deeply (or chains too many operators)")
    shown = str(err).splitlines()
    assert len(str(err)) < 400  # the 1.2 MB line is shown as a window around the column
    assert shown[1].startswith("    def f(n: T.int32, A: T.Buffer((n + n + ")
    assert shown[1].endswith("n + n...") and len(shown[1]) < 120
    assert shown[2].index("^") == shown[1].index("((n") + 2  # the caret under the first n


def test_a_long_source_line_is_shown_around_the_column():
    err = ScriptError("unexpected BAD", 1, 5001, "x" * 5000 + "BAD" + "y" * 5000)
    _, shown, caret = str(err).splitlines()
    assert shown.startswith("    ...xxx") and shown.endswith("yyy...") and len(shown) < 120
    assert shown[caret.index("^") :].startswith("BAD")

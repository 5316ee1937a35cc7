import pytest

from schedlab import tir
from schedlab.ir import (
    EQ,
    Add,
    Call,
    Cast,
    FloatImm,
    FloorDiv,
    IntImm,
    Mul,
    Select,
    Var,
    const,
    decl_buffer,
)  # fmt: skip


def test_operator_overloading_builds_nodes():
    i, j = Var("i"), Var("j")
    expr = i * 4 + j
    assert isinstance(expr, Add) and isinstance(expr.a, Mul)
    assert isinstance(i // 2, FloorDiv)
    assert expr.dtype == "int32"
    assert (i < j).dtype == "bool"


def test_constant_folding_and_identities():
    i = Var("i")
    assert i + 0 is i and 0 + i is i and i * 1 is i
    assert isinstance(i * 0, IntImm) and (i * 0).value == 0
    folded = const(6) // const(4)
    assert isinstance(folded, IntImm) and folded.value == 1
    assert tir.floordiv(-7, 2).value == -4 and tir.floormod(-7, 2).value == 1
    assert tir.truncdiv(-7, 2).value == -3 and tir.truncmod(-7, 2).value == -1


def test_promotion():
    i = Var("i", "int32")
    x = Var("x", "float32")
    mixed = i + x
    assert mixed.dtype == "float32" and isinstance(mixed.a, Cast)
    wide = i + Var("n", "int64")
    assert wide.dtype == "int64"
    assert (x + 1).b.dtype == "float32"
    assert isinstance((x * 2.5).b, FloatImm)


def test_eq_is_a_node_with_identity_truth():
    i, j = Var("i"), Var("j")
    assert isinstance(i == j, EQ)
    assert not (i == j) and (i == i)
    assert {i: 1}[i] == 1
    assert i != None  # noqa: E711 - comparing with None must not build a node


def test_symbolic_bool_is_an_error():
    i = Var("i")
    with pytest.raises(TypeError, match="Python bool"):
        bool(i < 3)


def test_type_errors_name_the_problem():
    with pytest.raises(TypeError, match="same dtype"):
        Add(Var("i"), Var("x", "float32"))
    with pytest.raises(TypeError, match="PrimExpr"):
        Add(Var("i"), 3)
    with pytest.raises(ValueError, match="does not fit"):
        IntImm("int8", 300)
    with pytest.raises(ZeroDivisionError):
        Var("i") // 0


def test_intrinsics_and_select():
    x = Var("x", "float32")
    e = tir.exp(x)
    assert isinstance(e, Call) and e.op == "exp" and e.dtype == "float32"
    assert tir.sqrt(Var("n")).args[0].dtype == "float32"
    assert tir.isnan(x).dtype == "bool"
    assert isinstance(tir.select(x > 0, x, 0.0), Select)
    lazy = tir.if_then_else(x > 0, x, 0.0)
    assert isinstance(lazy, Call) and lazy.op == "if_then_else"
    with pytest.raises(ValueError, match="unknown intrinsic"):
        tir.call_intrin("no_such_fn", x)


def test_buffer_load_dtype_and_rank_check():
    A = decl_buffer((4, 8), "float16", "A")
    i = Var("i")
    assert A[i, 0].dtype == "float16"
    vec = A[i, tir.Ramp(const(0), const(1), 8)]
    assert vec.dtype == "float16x8"
    with pytest.raises(ValueError, match="2 dimensions"):
        A[i]

"""Random expression trees print with minimal parentheses and parse back to the same tree."""

from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BufferStore,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    Select,
    SeqStmt,
    Sub,
    Var,
    const,
    decl_buffer,
)  # fmt: skip

from .script_helpers import make_func, roundtrip

VI, VJ = Var("i"), Var("j")
X = Var("x", "float32")
INT_OPS = (Add, Sub, Mul, FloorDiv, FloorMod, Div, Mod, Min, Max)
CMP_OPS = (EQ, NE, LT, LE, GT, GE)


@st.composite
def int_exprs(draw, depth=3):
    """An int32 expression tree of at most `depth` levels over i, j and constants."""
    choice = draw(st.integers(0, 9 if depth > 0 else 1))
    if choice == 0:
        return draw(st.sampled_from([VI, VJ]))
    if choice == 1:
        return IntImm("int32", draw(st.integers(-(2**31), 2**31 - 1)))
    if choice == 2:
        cond = draw(bool_exprs(depth - 1))
        return Select(cond, draw(int_exprs(depth - 1)), draw(int_exprs(depth - 1)))
    op = draw(st.sampled_from(INT_OPS))
    return op(draw(int_exprs(depth - 1)), draw(int_exprs(depth - 1)))


@st.composite
def bool_exprs(draw, depth=3):
    choice = draw(st.integers(0, 4 if depth > 0 else 1))
    if choice == 0:
        return const(draw(st.booleans()))
    if choice == 1:
        op = draw(st.sampled_from(CMP_OPS))
        return op(draw(int_exprs(min(depth, 1))), draw(int_exprs(min(depth, 1))))
    if choice == 2:
        return Not(draw(bool_exprs(depth - 1)))
    op = draw(st.sampled_from((And, Or)))
    return op(draw(bool_exprs(depth - 1)), draw(bool_exprs(depth - 1)))


@st.composite
def float_exprs(draw, depth=3):
    choice = draw(st.integers(0, 5 if depth > 0 else 2))
    if choice == 0:
        return X
    if choice == 1:
        return FloatImm("float32", draw(st.floats(allow_nan=False, width=32)))
    if choice == 2:
        return Cast("float32", draw(int_exprs(1)))
    op = draw(st.sampled_from((Add, Sub, Mul, Div, Min, Max, FloorDiv)))
    return op(draw(float_exprs(depth - 1)), draw(float_exprs(depth - 1)))


@settings(max_examples=150, deadline=None)
@given(value=int_exprs(), flag=bool_exprs(), real=float_exprs())
def test_random_expressions_roundtrip(value, flag, real):
    A = decl_buffer((1,), "int32", "A")
    B = decl_buffer((1,), "bool", "B")
    C = decl_buffer((1,), "float32", "C")
    zero = (const(0),)
    body = [BufferStore(A, value, zero), BufferStore(B, flag, zero), BufferStore(C, real, zero)]
    roundtrip(make_func(SeqStmt(tuple(body)), (A, B, C), scalars=(VI, VJ, X)))

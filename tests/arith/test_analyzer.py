"""Analyzer facts: bind, update, scopes, lets, bounds."""

import pytest

from schedlab.arith import Analyzer, ConstIntBound
from schedlab.ir import Range, SizeVar, Var, const, op
from schedlab.ir import expr as E

from .arith_text import text

x, y, t = Var("x"), Var("y"), Var("t")


def test_update_intersects_unless_overriding():
    a = Analyzer()
    a.update(x, ConstIntBound(0, 10))
    a.update(x, ConstIntBound(5, 20))
    assert a.const_int_bound(x) == ConstIntBound(5, 10)
    a.update(x, ConstIntBound(-3, 3), allow_override=True)
    assert a.const_int_bound(x) == ConstIntBound(-3, 3)


def test_bind_range_and_extent_one():
    a = Analyzer()
    a.bind(x, Range(2, 5))
    assert a.const_int_bound(x * 2) == ConstIntBound(4, 12)
    assert text(a.var_range(x).extent) == "5"
    a.bind(y, Range(7, 1))  # a single value: simplification substitutes it
    assert text(a.simplify(x + y)) == "x + 7"


def test_bind_symbolic_range_gives_relations():
    n = SizeVar("n")
    a = Analyzer()
    a.bind(x, Range(0, n))
    assert a.can_prove(x < n)
    assert a.can_prove(n - x >= 1)
    assert text(a.simplify(op.min(x, n))) == "x"


def test_scopes_restore_everything():
    a = Analyzer()
    with a.scope():
        a.bind(x, Range(0, 4))
        a.bind(y, x + 1)
        assert a.can_prove(y < 5)
    assert not a.can_prove(x < 4)
    assert text(a.simplify(y)) == "y"
    with a.let_scope(t, x % 4):
        assert a.can_prove(t < 4)
    assert not a.can_prove(t < 4)


def test_assumed_facts_for_non_integer_conditions():
    a = Analyzer()
    flag = Var("flag", "bool")
    f = Var("f", "float32")
    with a.constraint_scope(E.And(flag, f < 1.0)):
        assert a.can_prove(flag)
        assert a.can_prove(f < 1.0)
    with a.constraint_scope(E.Not(flag)):
        assert text(a.simplify(flag)) == "False"


def test_equalities_and_gcd_constraints():
    a = Analyzer()
    with a.constraint_scope(E.EQ(x, const(3))):
        assert text(a.simplify(x * 2 + 1)) == "7"
    with a.constraint_scope(x * 4 < 10):
        assert a.can_prove(x <= 2)
    a.bind(y, Range(0, 100))
    assert a.const_int_bound(y - y // 4 * 4) == ConstIntBound(0, 3)


def test_argument_errors_name_the_argument():
    a = Analyzer()
    with pytest.raises(TypeError, match="var must be a Var"):
        a.bind(3, Range(0, 4))
    with pytest.raises(TypeError, match="Range or PrimExpr"):
        a.bind(x, "wide")

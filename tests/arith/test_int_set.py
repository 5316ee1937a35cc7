"""IntervalSet and eval_set: images of expressions over variable domains."""

import pytest

from schedlab.arith import Analyzer, IntervalSet, eval_set
from schedlab.ir import Range, SizeVar, Var, const, op
from schedlab.ir import expr as E

from .arith_text import text

i, j, k, f = (Var(n) for n in ("i", "j", "k", "f"))
n = SizeVar("n")


def ends(interval):
    low = "-inf" if interval.min is None else text(interval.min)
    high = "+inf" if interval.max is None else text(interval.max)
    return low, high


@pytest.mark.parametrize(
    "make, dom, expected",
    [
        (lambda: i * 4 + j, {j: Range(0, 4)}, ("i*4", "i*4 + 3")),
        (lambda: i * 4 + j, {i: Range(0, 8), j: Range(0, 4)}, ("0", "31")),
        (lambda: i * 16 + j, {i: Range(0, 4), j: Range(0, 16)}, ("0", "63")),
        (lambda: f // 48, {f: Range(0, 96)}, ("0", "1")),
        (lambda: f % 48, {f: Range(0, 96)}, ("0", "47")),
        (lambda: f % 48, {f: Range(50, 10)}, ("2", "11")),
        (lambda: 10 - i, {i: Range(0, 4)}, ("7", "10")),
        (lambda: i - i, {i: Range(0, 4)}, ("0", "0")),
        (lambda: i * k, {i: Range(0, 4)}, ("-inf", "+inf")),
        (lambda: op.min(i, 2), {i: Range(0, 4)}, ("0", "2")),
        (lambda: op.max(i, k), {i: Range(0, 4)}, ("max(k, 0)", "max(k, 3)")),
        (lambda: E.Select(k < 0, i, i + 4), {i: Range(0, 4)}, ("0", "7")),
        (lambda: i + j, {i: Range(0, n)}, ("j", "n + j - 1")),
        (lambda: (i * 4 + j) // 4, {j: Range(0, 4)}, ("i", "i")),
        (lambda: i * n, {i: Range(0, 4)}, ("0", "n*3")),
    ],
)
def test_eval_set(make, dom, expected):
    assert ends(eval_set(make(), dom)) == expected


def test_ramp_covers_its_lanes():
    assert ends(eval_set(E.Ramp(i * 8, const(1), 8), {})) == ("i*8", "i*8 + 7")
    assert ends(eval_set(E.Ramp(i, const(-2), 4), {})) == ("i - 6", "i")


def test_union_intersect_to_range():
    ana = Analyzer()
    a = IntervalSet(i, i + 3)
    b = IntervalSet(i + 2, i + 8)
    assert ends(a.union(b, ana)) == ("i", "i + 8")
    assert ends(a.intersect(b, ana)) == ("i + 2", "i + 3")
    rng = a.to_range(ana)
    assert text(rng.min) == "i" and text(rng.extent) == "4"
    assert IntervalSet.everything().is_everything
    assert IntervalSet.point(i).is_single_point()
    assert ends(a.union(IntervalSet(None, i), ana)) == ("-inf", "i + 3")
    with pytest.raises(ValueError, match="unbounded"):
        IntervalSet(None, i).to_range()
    covered = IntervalSet(None, i).cover_range(Range(0, 16), ana)
    assert text(covered.min) == "0" and text(covered.extent) == "i + 1"


def test_analyzer_int_set_uses_known_facts():
    ana = Analyzer()
    ana.bind(k, Range(0, 4))
    interval = ana.int_set(k * 8 + i, {i: Range(0, 8)})
    assert ends(interval) == ("k*8", "k*8 + 7")
    assert ends(ana.int_set(op.min(k, 10), {})) == ("k", "k")


def test_bad_domains():
    with pytest.raises(TypeError, match="Range or IntervalSet"):
        eval_set(i, {i: 4})
    with pytest.raises(TypeError, match="integer expression"):
        eval_set(Var("x", "float32"), {})

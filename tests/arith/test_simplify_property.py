"""Property test: simplification preserves the value of random integer expressions."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.arith import Analyzer, evaluate
from schedlab.ir import Range, Var, const, op
from schedlab.ir import expr as E


class _Gen:
    """Random expressions over a few variables with small ranges (cheap to generate)."""

    def __init__(self, rng: random.Random, dtype: str):
        self.rng = rng
        self.dtype = dtype
        self.vars = []
        for name in "xyz":
            low = rng.randint(-8, 8)
            extent = rng.randint(1, 8)
            self.vars.append((Var(name, dtype), low, extent))

    def const(self, allow_zero=True):
        value = self.rng.randint(-10, 10)
        if not allow_zero and value == 0:
            value = self.rng.choice((-3, 2, 4, 16))
        return const(value, self.dtype)

    def leaf(self):
        if self.rng.random() < 0.65:
            return self.rng.choice(self.vars)[0]
        return self.const()

    def divisor(self):
        positive = [v for v, low, _ in self.vars if low > 0]
        if positive and self.rng.random() < 0.25:
            return self.rng.choice(positive)
        return self.const(allow_zero=False)

    def int_expr(self, depth: int):
        if depth == 0 or self.rng.random() < 0.2:
            return self.leaf()
        kind = self.rng.randrange(11)
        a = self.int_expr(depth - 1)
        if kind in (0, 1):
            return E.Add(a, self.int_expr(depth - 1))
        if kind == 2:
            return E.Sub(a, self.int_expr(depth - 1))
        if kind == 3:
            return E.Mul(a, self.int_expr(depth - 1))
        if kind == 4:
            return E.Mul(a, self.const())
        if kind in (5, 6):
            cls = E.FloorDiv if kind == 5 else E.FloorMod
            return cls(a, self.divisor())
        if kind == 7:
            cls = self.rng.choice((E.Div, E.Mod))
            return cls(a, self.const(allow_zero=False))
        if kind == 8:
            cls = self.rng.choice((E.Min, E.Max))
            return cls(a, self.int_expr(depth - 1))
        if kind == 9:
            return E.Select(self.bool_expr(depth - 1), a, self.int_expr(depth - 1))
        # a typical index: var * const + var
        x, y = self.rng.choice(self.vars)[0], self.rng.choice(self.vars)[0]
        return E.Add(E.Mul(x, self.const()), y)

    def bool_expr(self, depth: int):
        kind = self.rng.randrange(8)
        if depth > 0 and kind == 0:
            return E.And(self.bool_expr(depth - 1), self.bool_expr(depth - 1))
        if depth > 0 and kind == 1:
            return E.Or(self.bool_expr(depth - 1), self.bool_expr(depth - 1))
        if depth > 0 and kind == 2:
            return E.Not(self.bool_expr(depth - 1))
        cls = self.rng.choice((E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE))
        return cls(self.int_expr(max(depth - 1, 0)), self.int_expr(max(depth - 1, 0)))

    def envs(self, count: int):
        for _ in range(count):
            yield {v: self.rng.randint(low, low + extent - 1) for v, low, extent in self.vars}


def _check(seed: int, dtype: str, depth: int):
    rng = random.Random(seed)
    gen = _Gen(rng, dtype)
    expr = gen.bool_expr(depth) if rng.random() < 0.25 else gen.int_expr(depth)
    analyzer = Analyzer()
    for var, low, extent in gen.vars:
        analyzer.bind(var, Range(const(low, dtype), const(extent, dtype)))
    simplified = analyzer.simplify(expr)
    for env in gen.envs(6):
        expected = evaluate(expr, env)
        actual = evaluate(simplified, env)
        assert expected == actual, (
            f"seed={seed}: {expr!r} simplified to {simplified!r}; at {env} {expected} != {actual}"
        )


@settings(max_examples=2000, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_simplify_preserves_value_int64(seed):
    _check(seed, "int64", depth=4)


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_simplify_preserves_value_int32(seed):
    _check(seed, "int32", depth=3)


def test_generator_is_cheap_and_varied():
    kinds = set()
    for seed in range(200):
        gen = _Gen(random.Random(seed), "int32")
        kinds.add(type(gen.int_expr(3)).__name__)
    assert {"Add", "FloorDiv", "FloorMod", "Select"} <= kinds
    assert op is not None

"""Property tests: eval_set is sound, bijective iter maps really are one-to-one."""

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.arith import Analyzer, detect_iter_map, eval_set, evaluate
from schedlab.ir import Range, Var, const
from schedlab.ir import expr as E

from .test_simplify_property import _Gen


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_eval_set_contains_every_value(seed):
    rng = random.Random(seed)
    gen = _Gen(rng, "int64")
    expr = gen.int_expr(3)
    relaxed = [(v, lo, ext) for v, lo, ext in gen.vars if rng.random() < 0.6]
    fixed = [(v, lo, ext) for v, lo, ext in gen.vars if all(v is not r[0] for r in relaxed)]
    analyzer = Analyzer()
    for v, lo, ext in fixed:
        analyzer.bind(v, Range(const(lo, "int64"), const(ext, "int64")))
    dom = {v: Range(const(lo, "int64"), const(ext, "int64")) for v, lo, ext in relaxed}
    interval = eval_set(expr, dom, analyzer)
    for env in gen.envs(8):
        value = evaluate(expr, env)
        if interval.min is not None:
            assert evaluate(interval.min, env) <= value, (seed, expr, interval)
        if interval.max is not None:
            assert value <= evaluate(interval.max, env), (seed, expr, interval)


def _random_indices(rng: random.Random):
    """Index lists built like schedules build bindings: splits, fusions, offsets, and
    sometimes a non-affine or overlapping mistake."""
    extents = [rng.choice((2, 3, 4, 6)) for _ in range(rng.randint(1, 3))]
    loops = [Var(f"l{n}") for n in range(len(extents))]
    indices = list(loops)
    for _ in range(rng.randint(0, 3)):
        kind = rng.randrange(5)
        if kind == 0 and len(indices) >= 2:  # fuse two neighbours
            a, b = indices.pop(0), indices.pop(0)
            width = rng.choice((2, 3, 4, 6))
            indices.insert(0, a * width + b)
        elif kind == 1:  # split one index
            pos = rng.randrange(len(indices))
            factor = rng.choice((2, 3, 4))
            x = indices.pop(pos)
            indices[pos:pos] = [E.FloorDiv(x, const(factor)), E.FloorMod(x, const(factor))]
        elif kind == 2:
            pos = rng.randrange(len(indices))
            indices[pos] = indices[pos] + rng.randint(-3, 3)
        elif kind == 3 and len(indices) >= 2:  # a mistake: overlap
            indices[0] = indices[0] + indices[-1]
        elif kind == 4:
            pos = rng.randrange(len(indices))
            indices[pos] = indices[pos] * rng.choice((1, 2, -1))
    return dict(zip(loops, (Range(0, e) for e in extents))), indices


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_bijective_detection_is_sound(seed):
    rng = random.Random(seed)
    iters, indices = _random_indices(rng)
    result = detect_iter_map(indices, iters, check_level="bijective")
    if not result:
        return
    loops = list(iters)
    seen = set()
    for point in itertools.product(*(range(int(r.extent)) for r in iters.values())):
        env = dict(zip(loops, point))
        image = tuple(evaluate(i, env) for i in indices)
        assert image not in seen, (seed, indices, "claimed bijective but not one-to-one")
        seen.add(image)
        normalized = tuple(evaluate(s.to_expr(), env) for s in result.indices)
        assert normalized == image, (seed, indices)


def test_division_of_a_negatively_scaled_iterator_is_not_a_split():
    """(l0 % 2 * -1) // 2 was rewritten as l0 // -2 % -1 (wrong for l0 = 1: -1 vs 0); a
    negative scale under a division is now not affine (found by the property test above)."""
    l0 = Var("l0")
    flipped = E.FloorMod(l0, const(2)) * -1
    indices = [
        E.FloorDiv(l0, const(2)),
        E.FloorDiv(flipped, const(2)),
        E.FloorMod(flipped, const(2)),
    ]
    assert not detect_iter_map(indices, {l0: Range(0, 6)}, check_level="bijective")

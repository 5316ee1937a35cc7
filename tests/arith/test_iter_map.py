"""Affine iter-map detection: splits, fusions, predicates, overlaps, bijectivity."""

import pytest

from schedlab.arith import (
    detect_iter_map,
    is_affine_binding,
    iter_map_simplify,
)
from schedlab.ir import (
    Block,
    BlockRealize,
    BufferStore,
    IterVar,
    Range,
    SizeVar,
    Var,
    const,
    decl_buffer,
)

from .arith_text import text

i, j, k, f, i0, i1 = (Var(n) for n in ("i", "j", "k", "f", "i0", "i1"))


def split_parts(result, index):
    """(source text, lower, extent, scale, base) of a detected single-split index."""
    value = result.indices[index]
    (split,) = value.args
    return (
        text(split.source.source_expr()),
        text(split.lower_factor),
        text(split.extent),
        text(split.scale),
        text(value.base),
    )


def test_plain_vars_are_bijective():
    result = detect_iter_map([i, j], {i: Range(0, 4), j: Range(0, 6)}, check_level="bijective")
    assert result and not result.errors
    assert split_parts(result, 0) == ("i", "1", "4", "1", "0")
    assert split_parts(result, 1) == ("j", "1", "6", "1", "0")


def test_split_loops_fuse_into_one_iterator():
    result = detect_iter_map(
        [i0 * 16 + i1], {i0: Range(0, 4), i1: Range(0, 16)}, check_level="bijective"
    )
    assert result
    assert split_parts(result, 0) == ("i0*16 + i1", "1", "64", "1", "0")


def test_fused_iterator_split_again():
    result = detect_iter_map([f // 48, f % 48], {f: Range(0, 96)}, check_level="bijective")
    assert split_parts(result, 0) == ("f", "48", "2", "1", "0")
    assert split_parts(result, 1) == ("f", "1", "48", "1", "0")


def test_nested_splits_of_a_fused_iterator():
    fused = i0 * 16 + i1
    iters = {i0: Range(0, 6), i1: Range(0, 16)}
    result = detect_iter_map(
        [fused // 48, fused % 48 // 16, fused % 16], iters, check_level="bijective"
    )
    assert result, result.errors
    assert split_parts(result, 0) == ("i0*16 + i1", "48", "2", "1", "0")
    assert split_parts(result, 1) == ("i0*16 + i1", "16", "3", "1", "0")
    simplified = [text(e) for e in iter_map_simplify([fused // 16, fused % 16], iters)]
    assert simplified == ["i0", "i1"]


def test_constant_offsets_and_scales():
    result = detect_iter_map([i + 3, j * 2 + 1], {i: Range(0, 4), j: Range(0, 4)})
    assert split_parts(result, 0) == ("i", "1", "4", "1", "3")
    assert split_parts(result, 1) == ("j", "1", "4", "2", "1")


def test_nonzero_loop_minimum():
    result = detect_iter_map([i], {i: Range(2, 6)}, check_level="bijective")
    assert split_parts(result, 0) == ("i - 2", "1", "6", "1", "2")


def test_predicate_for_non_divisible_split():
    iters = {i0: Range(0, 7), i1: Range(0, 16)}
    result = detect_iter_map(
        [i0 * 16 + i1], iters, predicate=i0 * 16 + i1 < 100, check_level="bijective"
    )
    assert result, result.errors
    assert split_parts(result, 0) == ("i0*16 + i1", "1", "100", "1", "0")
    without = detect_iter_map([i0 * 16 + i1], iters, check_level="bijective")
    assert split_parts(without, 0)[2] == "112"


def test_predicate_on_a_single_loop():
    result = detect_iter_map([i], {i: Range(0, 16)}, predicate=i < 10, check_level="bijective")
    assert split_parts(result, 0) == ("i", "1", "10", "1", "0")


def test_predicate_that_is_not_a_bound_is_an_error():
    result = detect_iter_map([i], {i: Range(0, 16)}, predicate=i * i < 10)
    assert not result and "not affine" in result.errors[0]


def test_overlapping_iterators_are_rejected():
    result = detect_iter_map([i + j], {i: Range(0, 4), j: Range(0, 4)})
    assert result.indices is None
    assert "overlap" in result.errors[0]
    assert not detect_iter_map([i, i], {i: Range(0, 8)})
    assert not detect_iter_map([i, i + 1], {i: Range(0, 8)})


def test_non_affine_bindings_are_rejected():
    result = detect_iter_map([i * i], {i: Range(0, 4)})
    assert not result and "not affine" in result.errors[0]
    result = detect_iter_map([i * j], {i: Range(0, 4), j: Range(0, 4)})
    assert not result
    result = detect_iter_map([f // 3], {f: Range(0, 8)})
    assert not result and "not divisible" in result.errors[0]


def test_bijective_needs_full_cover_and_every_iterator():
    assert detect_iter_map([f // 4], {f: Range(0, 8)})  # surjective: fine
    result = detect_iter_map([f // 4], {f: Range(0, 8)}, check_level="bijective")
    assert not result and "bijective" in result.errors[0]
    result = detect_iter_map([i], {i: Range(0, 4), j: Range(0, 4)}, check_level="bijective")
    assert not result and "j is not used" in result.errors[0]
    # an extent-1 loop is a constant and need not be used
    assert detect_iter_map([i], {i: Range(0, 4), j: Range(0, 1)}, check_level="bijective")


def test_surjective_may_skip_inner_parts_only_when_divisible():
    iters = {f: Range(0, 24)}
    assert detect_iter_map([f // 6, f % 2], iters)
    assert not detect_iter_map([f // 6, f % 2], iters, check_level="bijective")


def test_symbolic_extent():
    n = SizeVar("n")
    result = detect_iter_map([i * n + j], {i: Range(0, 4), j: Range(0, n)}, check_level="bijective")
    assert result, result.errors
    assert split_parts(result, 0)[0] == "i*n + j"


def test_loop_independent_index_is_a_constant():
    result = detect_iter_map([k * 2, i], {i: Range(0, 4)})
    assert result.indices[0].args == () and text(result.indices[0].base) == "k*2"


def test_bad_check_level():
    with pytest.raises(ValueError, match="check_level"):
        detect_iter_map([i], {i: Range(0, 4)}, check_level="maybe")


def _realize(values, predicate=True):
    A = decl_buffer((64,), "float32", "A")
    v = Var("v")
    block = Block((IterVar(v, Range(0, 64)),), (), (), "b", BufferStore(A, const(0.0), (v,)))
    return BlockRealize(
        tuple(values), const(predicate) if isinstance(predicate, bool) else predicate, block
    )


def test_is_affine_binding():
    loops = {i0: Range(0, 4), i1: Range(0, 16)}
    assert is_affine_binding(_realize([i0 * 16 + i1]), loops)
    assert not is_affine_binding(_realize([i0 * i1]), loops)
    loops = {i0: Range(0, 7), i1: Range(0, 16)}
    assert is_affine_binding(_realize([i0 * 16 + i1], i0 * 16 + i1 < 100), loops)


def test_predicate_on_part_of_a_fused_iterator_does_not_bound_it():
    """Regression: `f % 6 < 5` bounds the inner part of a fused f, not f itself."""
    from schedlab.arith import iter_map_simplify
    from schedlab.ir import Range, Var

    f = Var("f")
    out = iter_map_simplify([f // 6, f % 6], {f: Range(0, 18)}, predicate=f % 6 < 5)
    assert [str(e) for e in out] == ["f // 6", "f % 6"]


def test_predicate_with_a_lower_bound():
    """Regression: a lower bound in the predicate (`x >= 2`) used to crash building max(x, 0)."""
    from schedlab.arith import detect_iter_map
    from schedlab.ir import Range, Var

    i, j = Var("i"), Var("j")
    fused = i * 4 + j
    result = detect_iter_map([fused], {i: Range(0, 4), j: Range(0, 4)},
                             predicate=(fused >= 2) & (fused < 13))  # fmt: skip
    assert result.indices is not None and not result.errors


def test_plain_loop_with_a_symbolic_extent_is_surjective():
    """Regression: `i in range(m)` with m a plain (possibly zero) Var was refused."""
    from schedlab.arith import detect_iter_map
    from schedlab.ir import Range, Var

    i, m = Var("i"), Var("m")
    result = detect_iter_map([i], {i: Range(0, m)}, check_level="surjective")
    assert result.indices is not None and not result.errors

"""Per-store features: shape, determinism, finite values, and that a feature follows the schedule
property it names (vector lanes, parallel extent, unrolling, pragmas, caches, arithmetic)."""

import math

import numpy as np
import pytest

from schedlab import workloads
from schedlab.schedule import Schedule
from schedlab.target import Target
from schedlab.tune.features import FEATURE_NAMES, N_FEATURES, extract_features

TARGET = Target("cpu", num_cores=4, simd_width=256, l1d_bytes=32768, l2_bytes=1 << 20,
                l3_bytes=8 << 20)  # fmt: skip


def _gemm(n=64):
    return workloads.spec("gemm").make(M=n, N=n, K=n)


def _tiled(n=64, vectorize=False, parallel=False, unroll=False, pragma=0):
    """gemm tiled i0 j0 k i1 j1 with the requested annotations."""
    sch = Schedule(_gemm(n), debug=False)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, k, i1, j1)
    if vectorize:
        sch.vectorize(j1)
    if parallel:
        sch.parallel(i0)
    if unroll:
        sch.unroll(i1)
    if pragma:
        sch.annotate(i0, "pragma_auto_unroll_max_step", pragma)
    return sch


def _value(sch_or_func, name: str, row: int = -1) -> float:
    return float(extract_features(sch_or_func, TARGET)[row, FEATURE_NAMES.index(name)])


def test_names_match_the_columns():
    assert len(FEATURE_NAMES) == N_FEATURES == len(set(FEATURE_NAMES))


@pytest.mark.parametrize("name", ["gemm", "conv2d_nchw"])
def test_shape_finite_and_deterministic(name):
    sizes = {"gemm": {"M": 32, "N": 48, "K": 16},
             "conv2d_nchw": {"N": 1, "CI": 4, "H": 10, "W": 10, "CO": 8, "kernel": 3}}  # fmt: skip
    func = workloads.spec(name).make(**sizes[name])
    feats = extract_features(func, TARGET)
    stores = 1 if name == "gemm" else 2  # conv2d: the padding block and the convolution
    assert feats.shape == (stores, N_FEATURES) and feats.dtype == np.float32
    assert np.isfinite(feats).all()
    again = extract_features(workloads.spec(name).make(**sizes[name]), TARGET)
    np.testing.assert_array_equal(feats, again)


def test_accepts_schedule_module_and_function():
    sch = _tiled()
    by_func = extract_features(sch.func, TARGET)
    np.testing.assert_array_equal(by_func, extract_features(sch, TARGET))
    np.testing.assert_array_equal(by_func, extract_features(sch.mod, TARGET))


def test_vectorize_sets_the_vector_lanes():
    assert _value(_tiled(), "vector_lanes") == 0.0
    assert _value(_tiled(vectorize=True), "vector_lanes") == pytest.approx(math.log2(17))
    assert _value(_tiled(vectorize=True), "vector_per_simd") == pytest.approx(16 / 8)
    assert _value(_tiled(vectorize=True), "inner0_vectorized") == 1.0


def test_parallel_sets_the_parallel_extent():
    assert _value(_tiled(), "parallel_extent") == 0.0
    assert _value(_tiled(parallel=True), "parallel_extent") == pytest.approx(math.log2(17))
    assert _value(_tiled(parallel=True), "parallel_num") == 1.0


def test_unroll_and_auto_unroll_pragma():
    assert _value(_tiled(unroll=True), "unroll_num") == 1.0
    assert _value(_tiled(unroll=True), "unroll_extent") == pytest.approx(math.log2(5))
    assert _value(_tiled(), "auto_unroll_max_step") == 0.0
    assert _value(_tiled(pragma=64), "auto_unroll_max_step") == pytest.approx(math.log2(65))


def test_arithmetic_counts_fmas_over_all_iterations():
    assert _value(_gemm(64), "float_mad") == pytest.approx(math.log2(1 + 64**3))
    assert _value(_gemm(64), "float_mul") == 0.0


def test_conv_padding_counts_its_select():
    func = workloads.spec("conv2d_nchw").make(N=1, CI=4, H=10, W=10, CO=8, kernel=3)
    assert _value(func, "select_op", row=0) > 0.0  # the padding block's if_then_else
    assert _value(func, "select_op", row=1) == 0.0


def test_cache_write_adds_a_store_and_its_compacted_allocation():
    sch = _tiled()
    block = sch.get_block("C")
    cache = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(cache, sch.get_loops(block)[1])  # under j0: a 4x16 tile
    feats = extract_features(sch, TARGET)
    assert feats.shape[0] == 2
    col = FEATURE_NAMES.index
    assert feats[0, col("alloc_write_local")] == 1.0
    assert feats[0, col("alloc_write_bytes")] == pytest.approx(math.log2(1 + 4 * 16 * 4))
    assert feats[1, col("alloc_read_bytes")] == pytest.approx(math.log2(1 + 4 * 16 * 4))


def test_stride_of_the_innermost_loop_per_buffer():
    # tiled gemm, innermost j1: C and B move by one element, A not at all
    feats = extract_features(_tiled(), TARGET)[0]
    slots = {b: feats[FEATURE_NAMES.index(f"buf{b}_stride_0")] for b in range(3)}
    assert feats[FEATURE_NAMES.index("buf0_write")] == 1.0  # the stored buffer comes first
    assert slots[0] == pytest.approx(1.0)
    assert sorted([slots[1], slots[2]]) == pytest.approx([0.0, 1.0])


def test_prior_is_the_analytical_prediction():
    from schedlab.cost import predict

    sch = _tiled(vectorize=True)
    seconds = predict(sch, TARGET).seconds
    assert _value(sch, "prior_func_ns") == pytest.approx(math.log2(1 + seconds * 1e9), rel=1e-6)


def test_design_space_unroll_annotation_on_the_root_block():
    sch = Schedule(_gemm(16), debug=False)
    sch.annotate(sch.get_block("root"), "meta_schedule.unroll_implicit", 16)
    assert _value(sch, "auto_unroll_max_step") == pytest.approx(math.log2(17))
    assert _value(sch, "unroll_explicit") == 0.0
    assert _value(_tiled(pragma=16), "unroll_explicit") == 1.0

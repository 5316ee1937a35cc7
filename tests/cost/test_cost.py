"""Sanity properties of the analytical latency model (no timing assertions)."""

import random

import numpy as np
import pytest

from schedlab import workloads
from schedlab.cost import Prediction, predict, spearman
from schedlab.cost.benchmark import random_schedule
from schedlab.schedule import Schedule
from schedlab.target import Target

TARGET = Target("cpu", num_cores=8, simd_width=256)


def gemm(n=1024, m=None, k=None):
    return workloads.spec("gemm").make(M=n, N=m or n, K=k or n)


def tuned_gemm(n=1024):
    """Tiled, parallel outer tile, vectorized innermost spatial loop, unrolled register tile."""
    sch = Schedule(gemm(n))
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 64])
    sch.reorder(i0, j0, k0, k1, i1, j1)
    sch.parallel(i0)
    sch.unroll(i1)
    sch.vectorize(j1)
    return sch.func


def test_fields_present():
    p = predict(gemm(64), TARGET)
    assert isinstance(p, Prediction)
    assert p.seconds > 0 and p.flops == 2 * 64**3
    assert p.bound in ("compute", "memory")
    assert set(p.bytes_moved) == {"L2->L1", "L3->L2", "DRAM->L3"}
    assert p.peaks["flops"] == TARGET.peak_flops("float32")
    assert p.roofline_seconds > 0 and p.roofline_seconds <= p.seconds
    (nest,) = p.nests
    assert nest.block == "C" and nest.iterations == 64**3
    assert [name for name, _ in nest.footprint_per_loop] == ["i", "j", "k", "(one iteration)"]
    sizes = [b for _, b in nest.footprint_per_loop]
    assert sizes == sorted(sizes, reverse=True)  # footprints shrink going inward
    assert set(nest.terms) >= {"compute", "load_store", "L2->L1", "DRAM->L3"}
    assert "predicted" in p.summary()
    assert p.as_dict()["flops"] == p.flops


def test_more_flops_more_time():
    times = [predict(gemm(n, 96, 80), TARGET).seconds for n in (33, 65, 129, 257)]
    assert times == sorted(times) and len(set(times)) == 4


def test_scheduled_gemm_faster_and_compute_bound():
    naive, tuned = predict(gemm(), TARGET), predict(tuned_gemm(), TARGET)
    assert tuned.seconds < naive.seconds / 4
    assert tuned.bound == "compute"
    (nest,) = tuned.nests
    assert nest.cores_used == 8 and nest.vector_lanes == 8 and nest.vectorization == "explicit"


def test_parallel_and_vectorize_each_help():
    sch = Schedule(gemm(256))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(i, k, j)
    base = predict(sch.func, TARGET).seconds
    par = sch.copy()
    par.parallel(par.get_loops(par.get_block("C"))[0])
    assert predict(par.func, TARGET).seconds < base
    vec = sch.copy()
    j0, j1 = vec.split(vec.get_loops(vec.get_block("C"))[2], [None, 8])
    vec.vectorize(j1)
    assert predict(vec.func, TARGET).nests[0].vectorization == "explicit"
    assert predict(vec.func, TARGET).seconds <= base


def test_transpose_is_memory_bound():
    func = workloads.spec("transpose").make(**{k: 2048 for k in _dims("transpose")})
    p = predict(func, TARGET)
    assert p.bound == "memory"
    assert p.bytes_moved["DRAM->L3"] >= 2 * 2048 * 2048 * 4


def _dims(name):
    return [k for k, v in workloads.spec(name).defaults.items() if isinstance(v, int) and v > 1]


def test_conv2d_and_module_and_schedule_inputs():
    func = workloads.spec("conv2d_nchw").make()
    p = predict(func)
    assert [n.block for n in p.nests] == ["pad_temp", "conv2d_nchw"]
    assert p.flops == workloads.spec("conv2d_nchw").flops() or p.flops > 0
    sch = Schedule(func)
    assert predict(sch).seconds == p.seconds
    assert predict(sch.mod).seconds == p.seconds


def test_random_schedules_are_predicted():
    func = workloads.spec("gemm").make(M=48, N=40, K=24)
    rng = random.Random(3)
    for _ in range(10):
        sch, _text = random_schedule(func, "C", rng)
        assert predict(sch.func).seconds > 0


def test_spearman_matches_definition():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    x, y = [1, 2, 2, 3, 5], [2, 1, 4, 4, 3]
    rx, ry = np.array([1, 2.5, 2.5, 4, 5]), np.array([2, 1, 4.5, 4.5, 3])
    assert spearman(x, y) == pytest.approx(np.corrcoef(rx, ry)[0, 1])
    with pytest.raises(ValueError, match="equal lengths"):
        spearman([1, 2], [1])


def test_bench_cost_runs_small(monkeypatch):
    from schedlab.cost import benchmark

    monkeypatch.setitem(benchmark.SIZES, "gemm", {"M": 24, "N": 20, "K": 12})
    lines = []
    result = benchmark.run_cost_bench(count=3, seeds=(7, 1), workload_names=["gemm"],
                                      log=lines.append, target="zen3")  # fmt: skip
    assert set(result["seeds"]) == {7, 1}
    assert all(set(rhos) == {"gemm", "overall"} for rhos in result["seeds"].values())
    assert all(-1.0 <= rho <= 1.0 for rhos in result["seeds"].values() for rho in rhos.values())
    assert set(result["pooled"]) == {"gemm", "overall"}
    # the target is printed, and every seed's correlation with whether it is held out
    assert lines[0].startswith("target: cpu: AMD Zen 3 (preset)") and "256-bit" in lines[0]
    assert any("seed   7 (held out" in line for line in lines)
    assert any("seed   1 (tuning" in line for line in lines)
    assert 1 <= benchmark.available_cores()


def test_bench_cost_command_line(monkeypatch):
    from schedlab import cli
    from schedlab.cost import benchmark

    calls = []
    monkeypatch.setattr(benchmark, "run_cost_bench", lambda **kw: calls.append(kw))
    assert cli.main(["bench-cost", "--target", "zen3", "--seed", "0,7-8", "--count", "5"]) == 0
    assert calls[-1]["target"] == "zen3" and calls[-1]["seeds"] == (0, 7, 8)
    assert cli.main(["bench-cost"]) == 0
    assert calls[-1]["target"] == "cpu" and tuple(calls[-1]["seeds"]) == benchmark.HELD_OUT_SEEDS
    with pytest.raises(ValueError, match="--seed"):
        benchmark.parse_seeds("0,x")


def test_measurements_share_arguments():
    from schedlab.cost.benchmark import _shared_args

    a, b, c = gemm(8), gemm(8), gemm(16)
    args = _shared_args([a, b, c])
    assert args[0] is args[1] and args[2] is not args[0]


def _gemm_order(n, order, split_k=None):
    """gemm n^3 with its loops reordered ("ijk", "ikj", ...), k optionally split."""
    sch = Schedule(gemm(n))
    loops = dict(zip("ijk", sch.get_loops(sch.get_block("C")), strict=True))
    if split_k:
        k0, k1 = sch.split(loops["k"], [None, split_k])
        loops["k"], loops["K"] = k0, k1
    sch.reorder(*[loops[c] for c in order])
    return sch


def test_contiguous_vector_loop_beats_strided_one():
    def vectorized(axis):
        sch = Schedule(gemm(256))
        i, j, k = sch.get_loops(sch.get_block("C"))
        outer, inner = (j, i) if axis == "i" else (i, j)
        o0, o1 = sch.split(inner, [None, 16])
        sch.reorder(outer, k, o0, o1)
        sch.vectorize(o1)
        return predict(sch.func, TARGET)

    contiguous, strided = vectorized("j"), vectorized("i")
    assert contiguous.nests[0].vectorization == "explicit"
    # `omp simd` over a column of C: the arithmetic runs in vectors, but gcc moves each element
    # of C and A in and out of them by itself
    assert strided.nests[0].vectorization == "strided" and strided.nests[0].vector_lanes == 8
    assert strided.nests[0].load_store_ops > contiguous.nests[0].load_store_ops
    assert contiguous.seconds < strided.seconds


def test_long_reduction_chain_is_latency_bound():
    # k innermost: every step waits on the previous one of the same C element
    ijk = predict(_gemm_order(256, "ijk").func, TARGET)
    ikj = predict(_gemm_order(256, "ikj").func, TARGET)
    assert ikj.seconds < ijk.seconds
    (nest,) = ijk.nests
    assert nest.ilp == 1 and nest.bound == "compute"
    # short inner reductions with spatial loops around them overlap more chains
    long_chain = predict(_gemm_order(256, "ijkK", split_k=32).func, TARGET).nests[0]
    short_chain = predict(_gemm_order(256, "kijK", split_k=2).func, TARGET).nests[0]
    assert short_chain.ilp > long_chain.ilp
    assert short_chain.seconds < long_chain.seconds


def test_auto_vectorization_follows_gcc():
    # a short reduction innermost is unrolled by gcc, which then vectorizes the j loop around it
    sch = _gemm_order(256, "ikjK", split_k=4)
    i, k0, j, k1 = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, [None, 16])
    nest = predict(sch.func, TARGET).nests[0]
    assert (nest.vectorization, nest.vector_lanes) == ("auto", 8)  # 256-bit target: 8 floats
    # an innermost loop the schedule unrolls is not vectorized as a loop: with a reduction
    # around it nothing is; with j_0 around it, gcc packs the 4 stores and vectorizes j_0
    for order, expected in (("ijkJ", "none"), ("ikjJ", "auto")):
        sch = Schedule(gemm(256))
        i, j, k = sch.get_loops(sch.get_block("C"))
        j0, j1 = sch.split(j, [None, 4])
        loops = {"i": i, "j": j0, "k": k, "J": j1}
        sch.reorder(*[loops[c] for c in order])
        sch.unroll(j1)
        assert predict(sch.func, TARGET).nests[0].vectorization == expected
    # a strided store (C's column) is not vectorized either
    assert predict(_gemm_order(256, "jki").func, TARGET).nests[0].vectorization == "none"
    # the unscheduled i-j-k gemm: gcc vectorizes j around the whole k loop (outer-loop
    # vectorization; -fopt-info-vec: "loop vectorized" at the j loop), sums in registers
    plain = predict(gemm(256), TARGET).nests[0]
    assert (plain.vectorization, plain.vector_lanes) == ("auto", 8)


def test_vector_fill_counts_remainders():
    from schedlab.cost.predict import _vector_fill

    assert _vector_fill(16, 8) == 8
    assert _vector_fill(14, 8) == pytest.approx(14 / 3)  # 8 + 4 + 2
    assert _vector_fill(3, 16) == pytest.approx(1.5)  # 2 + 1


def test_available_cores_respects_omp_num_threads(monkeypatch):
    from schedlab.cost import benchmark

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert benchmark.available_cores() == 1


def test_measure_interleaved_times_every_kernel():
    from schedlab.cost.benchmark import measure_interleaved

    funcs = [gemm(8), gemm(16)]
    times = measure_interleaved(funcs, rounds=2, min_repeat_ms=0.2)
    assert len(times) == 2 and all(0 < t < 1 for t in times)


def test_own_load_is_a_share_of_one_core():
    from schedlab.cost.benchmark import _own_load

    assert 0.0 <= _own_load() <= 1.0

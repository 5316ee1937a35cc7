"""Retrieval and sampling primitives: results, errors that leave the schedule as it was, and
traces that replay the same decisions."""

import pytest

from schedlab import workloads
from schedlab.schedule import BlockNotFoundError, Schedule, ScheduleError

from .helpers import assert_error_keeps_state, assert_trace_roundtrip


def _schedule(name="matmul_bias_relu", **sizes):
    func = workloads.get(name, **(sizes or {"M": 6, "N": 10, "K": 12}))[0]
    return Schedule(func, seed=7), func


def test_retrieval_results():
    sch, _ = _schedule()
    matmul, relu = sch.get_block("matmul"), sch.get_block("T_relu")
    assert [sch.get(loop).loop_var.name for loop in sch.get_loops(matmul)] == ["i", "j", "k"]
    assert [sch.get(b).name_hint for b in sch.get_producers(relu)] == ["matmul"]
    assert [sch.get(b).name_hint for b in sch.get_consumers(matmul)] == ["T_relu"]
    assert sch.get_producers(matmul) == []
    outer = sch.get_loops(relu)[0]
    assert [sch.get(b).name_hint for b in sch.get_child_blocks(outer)] == ["T_relu"]


def test_retrieval_errors_keep_state():
    sch, _ = _schedule()
    error = assert_error_keeps_state(sch, lambda: sch.get_block("nope"), BlockNotFoundError)
    assert "matmul" in str(error) and "T_relu" in str(error)
    loop = sch.get_loops(sch.get_block("matmul"))[0]
    assert_error_keeps_state(sch, lambda: sch.get_loops(loop), ScheduleError, "block")
    assert_error_keeps_state(sch, lambda: sch.get_producers(loop), ScheduleError, "block")


def test_sample_perfect_tile_is_seeded_and_replays():
    first, func = _schedule("gemm", M=48, N=8, K=8)
    second, _ = _schedule("gemm", M=48, N=8, K=8)
    picks = []
    for sch in (first, second):
        i = sch.get_loops(sch.get_block("C"))[0]
        factors = sch.sample_perfect_tile(i, n=3, max_innermost_factor=4)
        picks.append([sch.get(f) for f in factors])
        sch.split(i, factors)
    assert picks[0] == picks[1]
    a, b, c = picks[0]
    assert a * b * c == 48 and c <= 4
    assert_trace_roundtrip(first, func)


def test_sample_perfect_tile_errors_keep_state():
    sch, _ = _schedule("gemm", M=12, N=8, K=8)
    i = sch.get_loops(sch.get_block("C"))[0]
    for kwargs, match in (
        (dict(n=0), "positive"),
        (dict(n=2, max_innermost_factor=0), "max_innermost_factor"),
        (dict(n=2, decision=[5, 3]), "product 12"),
        (dict(n=3, decision=[12, 1]), "3 factors"),
    ):
        assert_error_keeps_state(
            sch, lambda kw=kwargs: sch.sample_perfect_tile(i, **kw), ScheduleError, match
        )


def test_sample_categorical_decisions_and_errors():
    sch, func = _schedule()
    value = sch.sample_categorical([1, 2, 3], [0.0, 0.0, 1.0])
    assert sch.get(value) == 3
    assert sch.trace.get_decision(sch.trace.insts[-1]) == 2
    fixed = sch.sample_categorical([4, 8], [0.5, 0.5], decision=0)
    assert sch.get(fixed) == 4
    assert_trace_roundtrip(sch, func)
    for args, match in (
        (([1, 2], [1.0]), "as many probabilities"),
        (([1, 2], [0.0, 0.0]), "not all zero"),
    ):
        assert_error_keeps_state(
            sch, lambda a=args: sch.sample_categorical(*a), ScheduleError, match
        )
    with pytest.raises(ScheduleError, match="candidate index"):
        sch.sample_categorical([1, 2], [0.5, 0.5], decision=5)

"""Trace.as_python(named=True): variables named after the loops and blocks (as the printed IR
and the explorer's tree show them), defaults left out, and still a script that replays."""

from __future__ import annotations

import pytest

from schedlab import workloads
from schedlab.ir.structural import structural_equal
from schedlab.schedule import Schedule
from schedlab.schedule.trace import Trace
from schedlab.script import tir as T


def _gemm():
    return workloads.get("gemm", M=64, N=48, K=32)[0]


def _replay(source: str):
    namespace = {"T": T}
    exec(source, namespace)  # our own generated text
    sch = Schedule(_gemm())
    namespace["apply_trace"](sch)
    return sch


def test_variables_are_the_loop_and_block_names():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 16])
    sch.reorder(i0, j, k, i1)
    fused = sch.fuse(i0, j)
    sch.parallel(fused)
    assert sch.trace.as_python_lines(named=True) == [
        "C = sch.get_block(name='C')",
        "i, j, k = sch.get_loops(block=C)",
        "i_0, i_1 = sch.split(loop=i, factors=[None, 16])",
        "sch.reorder(i_0, j, k, i_1)",
        "i_0_j_fused = sch.fuse(i_0, j)",
        "sch.parallel(loop=i_0_j_fused)",
    ]
    replayed = _replay(sch.trace.as_python(named=True))
    assert structural_equal(replayed.mod, sch.mod)
    # the default stays TVM's form
    assert sch.trace.as_python_lines()[1] == "l1, l2, l3 = sch.get_loops(block=b0)"


def test_a_name_is_taken_again_only_once_its_handle_is_read_no_more():
    sch = Schedule(_gemm())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, [None, 8])
    # a second look-up while the first `C` and `k` are dead: the names are simply rebound
    loops = sch.get_loops(sch.get_block("C"))
    sch.vectorize(loops[2])
    again = sch.get_loops(sch.get_block("C"))  # `i` (from the first look-up) is still used
    sch.unroll(i)
    sch.parallel(again[0])
    lines = sch.trace.as_python_lines(named=True)
    # `i` is read at the end: the new handles of loop i are i__2 (the second look-up's is
    # read by nothing, so the third one's takes its name again)
    lookup = ["C = sch.get_block(name='C')", "i__2, j_0, j_1, k = sch.get_loops(block=C)"]
    assert lines[3:5] == lookup and lines[6:8] == lookup
    assert lines[8:] == ["sch.unroll(loop=i)", "sch.parallel(loop=i__2)"]
    replayed = _replay(sch.trace.as_python(named=True))
    assert structural_equal(replayed.mod, sch.mod)


def test_handles_without_a_name_and_odd_names():
    sch = Schedule(_gemm())
    i, j, _k = sch.get_loops(sch.get_block("C"))
    factors = sch.sample_perfect_tile(j, n=2)
    sch.split(j, factors)
    lines = sch.trace.as_python_lines(named=True)
    assert lines[2].startswith("v4, v5 = sch.sample_perfect_tile(loop=j, n=2, decision=")
    assert lines[3] == "j_0, j_1 = sch.split(loop=j, factors=[v4, v5])"
    # a trace read from JSON has no names: TVM's variables, still runnable
    read = Trace.from_json(sch.trace.as_json())
    assert read.as_python_lines(named=True)[1] == "l1, l2, l3 = sch.get_loops(block=b0)"
    assert structural_equal(_replay(read.as_python(named=True)).mod, sch.mod)


@pytest.mark.parametrize(
    "hint, name", [("i_0", "i_0"), ("A.shared", "A_shared"), ("0x", "_0x"), ("for", "for_")]
)
def test_names_are_python_identifiers(hint, name):
    from schedlab.schedule.trace import _identifier

    assert _identifier(hint) == name

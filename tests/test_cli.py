"""The command line as people use it: version, demo, bench, and bad input."""

import subprocess
import sys

import pytest

import schedlab
from schedlab import workloads
from schedlab.bench import parse_sizes, run_bench
from schedlab.cli import main
from schedlab.demo import run_demo


def test_version_from_a_fresh_process():
    out = subprocess.run(
        [sys.executable, "-m", "schedlab.cli", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0
    assert out.stdout.strip() == f"schedlab {schedlab.__version__}"


def test_demo_walks_every_stage():
    lines = []
    figures = run_demo(size=33, printer=lines.append, repeat=1)
    text = "\n".join(lines)
    for marker in ("T.prim_func", "LowerInitBlock", "FlattenBuffer", "int32_t gemm(", "GFLOP/s"):
        assert marker in text
    assert figures["error"] < 1e-3 and figures["schedlab"] > 0 and figures["numpy"] > 0


def test_bench_gemm_prints_all_candidates(capsys):
    assert main(["bench", "gemm", "--size", "31", "--repeat", "1", "--min-repeat-ms", "1"]) == 0
    out = capsys.readouterr().out
    for label in ("schedlab (no schedule)", "naive C i-j-k", "naive C i-k-j + OpenMP", "numpy"):
        assert label in out
    assert "M=31, N=31, K=31" in out


@pytest.mark.parametrize("name", ["softmax", "conv2d_nchw", "transpose"])
def test_bench_other_workloads(name):
    rows = run_bench(name, "9", repeat=1, min_repeat_ms=1, printer=lambda *_: None)
    assert {row.name for row in rows} >= {"schedlab (no schedule)"}
    assert all(row.timings.min > 0 for row in rows)


def test_size_parsing():
    gemm = workloads.spec("gemm")
    assert parse_sizes(gemm, "64") == {"M": 64, "N": 64, "K": 64}
    assert parse_sizes(gemm, "M=8,K=4") == {"M": 8, "K": 4}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_sizes(gemm, "M:8")


def test_bad_input_is_one_line_and_exit_2(capsys):
    assert main(["bench", "no_such_workload"]) == 2
    err = capsys.readouterr().err
    assert "unknown workload 'no_such_workload'" in err and "gemm" in err
    assert main(["bench", "gemm", "--size", "Q=3"]) == 2
    assert "unknown size 'Q'" in capsys.readouterr().err

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
    assert "target: cpu: " in out and "-bit SIMD" in out  # the machine it measured


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


# -- bench --trace -------------------------------------------------------------------------------
def _gemm_trace_file(tmp_path, size: int) -> str:
    from schedlab.examples import record_gemm_cpu, trace_text

    path = tmp_path / f"gemm_{size}.json"
    path.write_text(trace_text(record_gemm_cpu(size)))
    return str(path)


def test_bench_with_a_trace_prints_the_scheduled_kernel_and_numpy(tmp_path, capsys):
    trace = _gemm_trace_file(tmp_path, 64)
    argv = ["bench", "gemm", "--size", "64", "--trace", trace, "--repeat", "1",
            "--min-repeat-ms", "1", "--no-naive"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "schedlab (trace)" in out and "numpy" in out
    assert "schedlab (no schedule)" not in out and "naive C" not in out


def test_shipped_gemm_trace_is_found_by_name_and_up_to_date():
    from schedlab.bench import find_trace, load_trace
    from schedlab.examples import record_gemm_cpu, trace_text

    path = find_trace("gemm_1024_cpu")
    assert path == find_trace("gemm_1024_cpu.json") == find_trace(str(path))
    assert path.read_text() == trace_text(record_gemm_cpu(1024)), (
        "schedlab/examples/gemm_1024_cpu.json is stale: run `python -m schedlab.examples`"
    )
    trace = load_trace("gemm_1024_cpu")
    assert trace.target == "cpu" and len(trace) > 10


def test_shipped_gemm_trace_has_an_avx2_variant_picked_by_target():
    from schedlab.bench import find_trace
    from schedlab.examples import record_gemm_cpu, trace_text
    from schedlab.examples.__main__ import SHIPPED

    variant = find_trace("gemm_1024_cpu", target="zen3")
    assert variant.name == "gemm_1024_cpu_avx2.json"
    assert variant.read_text() == trace_text(record_gemm_cpu(1024, **SHIPPED[variant.name]))
    assert find_trace("gemm_1024_cpu", target="zen5").name == "gemm_1024_cpu.json"
    assert find_trace("gemm_1024_cpu.json", target="zen3") == variant


def test_bench_trace_errors_are_one_line(tmp_path, capsys):
    assert main(["bench", "gemm", "--size", "32", "--trace", "gemm_1024_cpu"]) == 2
    assert "recorded on a different workload" in capsys.readouterr().err
    assert main(["bench", "gemm", "--trace", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "no file" in err and "gemm_1024_cpu.json" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "schedlab.trace", "version": 1, "insts": [["Exec", [], [], []]]}')
    assert main(["bench", "gemm", "--trace", str(bad)]) == 2
    assert "unknown kind 'Exec'" in capsys.readouterr().err


def test_bench_schedule_prints_every_figure(capsys):
    assert main(["bench-schedule", "--size", "16", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "M=16, N=16, K=16" in out
    for label in ("primitive: split", "primitive: cache_write", "replay 30 insts",
                  "replay 30 insts from JSON"):  # fmt: skip
        assert label in out


@pytest.mark.parametrize("size", [37, 64])
def test_gemm_example_schedule_is_correct_at_odd_sizes(size):
    from schedlab.examples import schedule_gemm_cpu
    from schedlab.schedule import Schedule
    from tests.schedule.helpers import assert_same_numerics

    func, _ = workloads.get("gemm", M=size, N=size + 2, K=size - 4)
    sch = Schedule(func)
    schedule_gemm_cpu(sch)
    assert_same_numerics(func, sch.func, rtol=1e-4, atol=1e-4)
    source = schedlab.build(sch.func, target="cpu").source
    assert "#pragma omp parallel for" in source and "float C_local[256]" in source

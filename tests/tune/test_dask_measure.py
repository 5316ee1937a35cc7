"""DaskMeasurer on a local dask cluster: the same results as the local measurer, failures kept
inside the task, and a clear message when dask is missing."""

import sys

import pytest

from schedlab import workloads
from schedlab.schedule.schedule import Schedule
from schedlab.script import from_source
from schedlab.target import Target
from schedlab.tune.measure import LocalBuilder, LocalRunner, MeasureInput, Measurer

distributed = pytest.importorskip("distributed")

from schedlab.tune.dask_measure import DaskMeasurer  # noqa: E402

from .conftest import SEGV  # noqa: E402

GEMM = workloads.get("gemm", M=64, N=64, K=64)[0]
TARGET = Target("cpu")


@pytest.fixture(scope="module")
def cluster():
    # the private kernel cache (conftest) is set before the dask workers start: they inherit it
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:  # fmt: skip
        yield cluster


def _gemm(factor: int) -> MeasureInput:
    sch = Schedule(GEMM, target=TARGET)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, factor])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, k, i1, j1)
    sch.vectorize(j1)
    return MeasureInput.from_schedule(sch)


def test_same_results_as_the_local_measurer(cluster):
    inputs = [_gemm(4), _gemm(8)]
    with Measurer(LocalBuilder(max_workers=1), LocalRunner()) as local:
        expected = local.measure(inputs)
    seen = []
    with distributed.Client(cluster) as client:
        results = DaskMeasurer(client).measure(inputs, on_result=lambda i, r: seen.append(i))
    assert seen == [0, 1]
    for mine, theirs in zip(results, expected):
        assert type(mine) is type(theirs) and mine.ok and theirs.ok
        assert len(mine.run_secs) == len(theirs.run_secs) == 3
        assert mine.build_secs > 0 and mine.run_wall_secs > 0
        assert 1 / 3 < mine.median_secs / theirs.median_secs < 3


def test_failures_stay_inside_the_task(cluster):
    broken = MeasureInput(GEMM, Target("cpu", cflags=["-fno-such-flag"]))
    with DaskMeasurer(cluster.scheduler_address, timeout_s=5.0) as measurer:
        segv = MeasureInput(from_source(SEGV), TARGET)
        results = measurer.measure([segv, broken, _gemm(4)])
        assert results[0].error == "run: worker crashed (signal 11)"
        assert results[1].error.startswith("build: CompileError: gcc failed")
        assert results[2].ok
        again = measurer.remeasure_in_fresh_process(_gemm(4), repeat=2)
        assert again.ok and len(again.run_secs) == 2


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"pip install 'schedlab\[tune\]'"):
        DaskMeasurer("tcp://127.0.0.1:1")


def test_bad_argument():
    with pytest.raises(TypeError, match="DaskMeasurer: expected a scheduler address or a"):
        DaskMeasurer(3)

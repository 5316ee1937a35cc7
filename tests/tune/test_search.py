"""Search strategies: seeded and reproducible, unmeasured and unique candidates, what was
measured (now or in the database) is never proposed again, bad options are named."""

import pytest

from schedlab import workloads
from schedlab.tune import TuneTask
from schedlab.tune.cost_model import AnalyticalModel
from schedlab.tune.database import Database
from schedlab.tune.measure import MeasureResult
from schedlab.tune.search import EvolutionarySearch, ReplayTrace, make_strategy
from schedlab.tune.space import PostOrderApply

TASK = TuneTask("gemm", workloads.get("gemm", M=64, N=48, K=40)[0], "cpu")
SMALL = {"population_size": 8, "init_min_unmeasured": 4, "genetic_num_iters": 1}


def _started(strategy, database=None):
    strategy.start(TASK, PostOrderApply(), database, AnalyticalModel())
    return strategy


@pytest.mark.parametrize("make", [lambda: EvolutionarySearch(seed=5, **SMALL),
                                  lambda: ReplayTrace(seed=5)])  # fmt: skip
def test_same_seed_same_candidates(make):
    first = [c.key for c in _started(make()).generate(4)]
    second = [c.key for c in _started(make()).generate(4)]
    assert len(first) == 4 and first == second
    assert len(set(first)) == 4


def test_measured_candidates_are_not_proposed_again(tmp_path):
    search = _started(EvolutionarySearch(seed=1, **SMALL))
    batch = search.generate(4)
    search.notify(batch, [MeasureResult((1e-3,))] * len(batch))
    again = search.generate(4)
    assert not {c.key for c in batch} & {c.key for c in again}
    # a new search on a database holding the batch knows it was measured
    db = Database(tmp_path)
    db.commit_workload(TASK.func, TASK.name)
    for candidate in batch:
        db.commit_record(MeasureResult((1e-3,)).to_record(TASK, candidate.trace))
    resumed = _started(EvolutionarySearch(seed=1, **SMALL), db)
    assert {c.key for c in batch} <= resumed.measured
    assert not {c.key for c in batch} & {c.key for c in resumed.generate(4)}


def test_the_best_measured_records_seed_the_population(tmp_path):
    db = Database(tmp_path)
    db.commit_workload(TASK.func, TASK.name)
    search = _started(EvolutionarySearch(seed=2, **SMALL))
    batch = search.generate(3)
    for rank, candidate in enumerate(batch):
        db.commit_record(MeasureResult(((rank + 1) * 1e-3,)).to_record(TASK, candidate.trace))
    seeded = _started(EvolutionarySearch(seed=2, **SMALL), db)
    population = seeded._best_measured(2)
    assert [c.key for c in population] == [batch[0].key, batch[1].key]


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="population_size"):
        EvolutionarySearch(population_size=1)
    with pytest.raises(ValueError, match="eps_greedy"):
        EvolutionarySearch(eps_greedy=1.5)
    with pytest.raises(ValueError, match="strategy must be one of"):
        make_strategy("annealing")

"""Candidates made on worker processes are the ones made here: the same jobs give the same
modules whatever the number of workers, a search gives the same batch, node ids made in a
worker never collide with ours, a space that does not pickle stays in this process, and a
worker's failure is named."""

import multiprocessing
import pickle

import pytest

from schedlab import workloads
from schedlab.ir.node import fresh_uid
from schedlab.ir.structural import structural_equal
from schedlab.tune import TuneTask
from schedlab.tune.candidates import (
    InProcess,
    SearchContext,
    WorkerPool,
    make_candidate_maker,
)  # fmt: skip
from schedlab.tune.cost_model import AnalyticalModel
from schedlab.tune.search import EvolutionarySearch
from schedlab.tune.space import PostOrderApply

TASK = TuneTask("gemm", workloads.get("gemm", M=64, N=48, K=40)[0], "cpu")
SMALL = {"population_size": 8, "init_min_unmeasured": 4, "genetic_num_iters": 2}


@pytest.fixture(scope="module")
def pool():
    maker = WorkerPool(2)
    yield maker
    maker.close()


def _jobs(context):
    designs = PostOrderApply().generate_design_space(TASK.func, TASK.target)
    samples = [("sample", designs[i % len(designs)].trace, 11 + i) for i in range(6)]
    made = InProcess().map(context, samples)
    parents = [c.trace for c in made if c is not None]
    return samples + [("mutate", t, seed, 10) for t in parents for seed in (1, 2)] + [
        ("replay", t) for t in parents
    ]  # fmt: skip


def test_workers_make_the_candidates_this_process_makes(pool):
    context = SearchContext.of(TASK, PostOrderApply())
    jobs = _jobs(context)
    here, there = InProcess().map(context, jobs), pool.map(context, jobs)
    assert len(here) == len(there) == len(jobs)
    assert any(c is not None for c in there)
    for a, b in zip(here, there):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.key == b.key and a.trace.as_json() == b.trace.as_json()
            assert structural_equal(a.func, b.func)


def test_a_search_proposes_the_same_batch_on_workers(pool):
    def batch(maker):
        search = EvolutionarySearch(seed=4, **SMALL)
        search.start(TASK, PostOrderApply(), None, AnalyticalModel(), maker)
        return [c.key for c in search.generate(6)]

    assert batch(InProcess()) == batch(pool)


def test_node_ids_made_in_another_process_are_not_ours():
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as other:
        theirs = other.apply(fresh_uid)
    ours = fresh_uid()
    assert theirs != ours and abs(theirs - ours) >= 1 << 29
    assert max(theirs, ours) < 2**53  # exact in the explorer's JavaScript


class _LambdaSpace(PostOrderApply):
    def __init__(self):
        super().__init__()
        self.hook = lambda: None  # does not pickle


def test_a_space_that_does_not_pickle_stays_in_this_process(pool):
    context = SearchContext.of(TASK, _LambdaSpace())
    assert not context.travels
    with pytest.raises(AttributeError, match="pickle"):
        pickle.dumps(context)
    jobs = _jobs(SearchContext.of(TASK, PostOrderApply()))[:3]
    assert [c.key for c in pool.map(context, jobs) if c] == [
        c.key for c in InProcess().map(context, jobs) if c
    ]  # fmt: skip


def test_a_failing_job_is_named(pool):
    context = SearchContext.of(TASK, PostOrderApply())
    with pytest.raises(RuntimeError, match="search worker: KeyError: 'anneal'"):
        pool.map(context, [("anneal", None)])


def test_bad_worker_counts_are_named():
    with pytest.raises(ValueError, match="search workers must be a positive int, got 0"):
        make_candidate_maker(0)
    assert isinstance(make_candidate_maker(1), InProcess)

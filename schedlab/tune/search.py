"""Search strategies: which candidates of a task to measure next (TVM's SearchStrategy).

    search = EvolutionarySearch(population_size=64, seed=0)
    search.start(task, space, database, cost_model)
    batch = search.generate(16)          # Candidates: never measured before, best predicted first
    search.notify(batch, results)        # what was measured (so it is not proposed again)

`EvolutionarySearch` follows MetaSchedule's: the population starts from the best measured
records of the task (replayed from the database) and fresh random samples of the design
spaces; for a few generations the cost model scores it, unseen schedules go to a top-k pool,
and parents drawn in proportion to their score are mutated (tile sizes, unroll, parallel,
compute location: every mutation edits a sampling decision of the trace, never code). The
batch is the best of the pool, with an eps-greedy share of random samples so a wrong cost
model cannot lock the search in. `ReplayTrace` measures fresh random samples only.

Both are seeded: the same seed, task and database give the same candidates. The replays a
batch needs (fresh samples, mutations, stored records) go to the caller's candidate maker as
one list of jobs at a time (`candidates.py`): in this process or on worker processes, with the
same candidates either way.
"""

from __future__ import annotations

import heapq
import random

import numpy as np

from schedlab.schedule import Trace

from .candidates import Candidate, InProcess, SearchContext
from .task import TuneTask

__all__ = ["Candidate", "SearchStrategy", "ReplayTrace", "EvolutionarySearch", "make_strategy"]


class SearchStrategy:
    """Base: `start` binds a task, `generate(n)` proposes up to n unmeasured candidates
    (fewer, or none, when the space is exhausted), `notify` records what was measured.
    Candidates are made by `maker` (candidates.InProcess or WorkerPool; default: this
    process), which the caller owns."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.rng = random.Random(seed)
        self.task: TuneTask | None = None
        self.measured: set[str] = set()
        self.design_spaces: list[Trace] = []

    def start(self, task: TuneTask, space, database=None, cost_model=None,
              maker=None) -> None:  # fmt: skip
        self.task, self.space, self.database, self.cost_model = task, space, database, cost_model
        self.context = SearchContext.of(task, space)
        self.maker = maker if maker is not None else InProcess()
        self.design_spaces = [s.trace for s in space.generate_design_space(task.func, task.target)]
        if not self.design_spaces:
            raise ValueError(f"search: the design space of task {task.name!r} is empty")
        stored = self._replay_all([Trace.from_json(r.trace) for r in self._stored_records()])
        self.measured = {c.key for c in stored if c is not None}

    def generate(self, count: int) -> list[Candidate]:
        raise NotImplementedError

    def notify(self, candidates: list[Candidate], results) -> None:
        for candidate in candidates:
            self.measured.add(candidate.key)

    # -- shared helpers ---------------------------------------------------------------------
    def _stored_records(self) -> list:
        if self.database is None:
            return []
        return self.database.records(workload=self.task.workload, target=str(self.task.target))

    def _replay_all(self, traces: list[Trace]) -> list[Candidate | None]:
        """The candidate each trace makes (None where it no longer applies)."""
        return self.maker.map(self.context, [("replay", trace) for trace in traces])

    def _random_unmeasured(self, count: int, exclude: set[str], max_fails: int) -> list:
        """Up to `count` fresh samples of random design spaces, new and unmeasured, drawn in
        waves of what is still missing until `max_fails` samples were refused or repeats."""
        picked: list[Candidate] = []
        fails = 0
        while len(picked) < count and fails < max_fails:
            jobs = [("sample", self.design_spaces[self.rng.randrange(len(self.design_spaces))],
                     self.rng.randrange(1, 2**31 - 1))
                    for _ in range(count - len(picked))]  # fmt: skip
            for candidate in self.maker.map(self.context, jobs):
                if candidate is None or candidate.key in exclude or candidate.key in self.measured:
                    fails += 1
                    continue
                exclude.add(candidate.key)
                picked.append(candidate)
        return picked


class ReplayTrace(SearchStrategy):
    """Each trial a fresh random sample of a random design space (TVM's ReplayTrace)."""

    def __init__(self, max_fail_count: int = 100, seed: int = 0):
        super().__init__(seed)
        self.max_fail_count = max_fail_count

    def generate(self, count: int) -> list[Candidate]:
        return self._random_unmeasured(count, set(), self.max_fail_count)


class EvolutionarySearch(SearchStrategy):
    """MetaSchedule's evolutionary search, sized for a Python tuner (TVM's population is 512
    with 4 generations; each candidate here is a trace replay of 30-150 ms, so the defaults
    are smaller and the time goes to measuring)."""

    def __init__(self, population_size: int = 64, init_measured_ratio: float = 0.2,
                 init_min_unmeasured: int = 16, max_fail_count: int = 40,
                 genetic_num_iters: int = 3, genetic_mutate_prob: float = 0.85,
                 genetic_max_fail_count: int = 10, eps_greedy: float = 0.05,
                 seed: int = 0):  # fmt: skip
        super().__init__(seed)
        if population_size < 2:
            raise ValueError(f"EvolutionarySearch: population_size must be >= 2, got "
                             f"{population_size}")  # fmt: skip
        if not 0.0 <= eps_greedy <= 1.0:
            raise ValueError(f"EvolutionarySearch: eps_greedy must be in [0, 1], got {eps_greedy}")
        self.population_size = population_size
        self.init_measured_ratio = init_measured_ratio
        self.init_min_unmeasured = init_min_unmeasured
        self.max_fail_count = max_fail_count
        self.genetic_num_iters = genetic_num_iters
        self.genetic_mutate_prob = genetic_mutate_prob
        self.genetic_max_fail_count = genetic_max_fail_count
        self.eps_greedy = eps_greedy

    def generate(self, count: int) -> list[Candidate]:
        population = self._initial_population()
        if not population:
            return []
        pool = self._evolve(population, count)
        n_random = int(round(count * self.eps_greedy))
        best = [c for _, _, c in heapq.nlargest(count - n_random, pool)]
        taken = {c.key for c in best}
        randoms = self._random_unmeasured(count - len(best), taken, self.max_fail_count)
        return best + randoms

    # -- population -------------------------------------------------------------------------
    def _initial_population(self) -> list[Candidate]:
        population = self._best_measured(int(self.population_size * self.init_measured_ratio))
        seen = {c.key for c in population}
        wanted = max(self.population_size - len(population), self.init_min_unmeasured)
        population += self._random_unmeasured(wanted, seen, self.max_fail_count + wanted)
        return population

    def _best_measured(self, count: int) -> list[Candidate]:
        if count <= 0 or self.database is None:
            return []
        records = self.database.get_top_k(self.task.workload, str(self.task.target), count)
        replayed = self._replay_all([Trace.from_json(record.trace) for record in records])
        return [candidate for candidate in replayed if candidate is not None]

    def _evolve(self, population: list[Candidate], count: int) -> list:
        """Genetic iterations; returns a heap of (score, tie, candidate) of unmeasured
        candidates, at most `count` * 2 kept (the best by predicted score)."""
        pool: list = []
        in_pool: set[str] = set()
        for generation in range(self.genetic_num_iters + 1):
            scores = self._scores(population)
            for candidate, score in zip(population, scores):
                if candidate.key in self.measured or candidate.key in in_pool:
                    continue
                in_pool.add(candidate.key)
                item = (float(score), self.rng.random(), candidate)
                if len(pool) < 2 * count:
                    heapq.heappush(pool, item)
                else:
                    heapq.heappushpop(pool, item)
            if generation < self.genetic_num_iters:
                population = self._next_generation(population, scores)
        return pool

    def _scores(self, population: list[Candidate]) -> np.ndarray:
        if self.cost_model is None:
            return np.array([self.rng.random() for _ in population])
        scores = np.asarray(self.cost_model.predict(self.task, [c.mod for c in population]))
        return np.nan_to_num(np.maximum(scores, 0.0), nan=0.0, posinf=0.0)

    def _next_generation(self, population: list[Candidate], scores: np.ndarray) -> list:
        """Parents drawn in proportion to their score, each mutated with probability
        `genetic_mutate_prob` (a parent none of whose mutations replays stays as it is)."""
        weights = scores + 1e-9 if scores.sum() > 0 else np.ones(len(scores))
        children: list[Candidate] = []
        jobs, slots = [], []
        for _ in range(self.population_size):
            parent = population[self._draw(weights)]
            if self.rng.random() < self.genetic_mutate_prob:
                seed = self.rng.randrange(1, 2**31 - 1)
                jobs.append(("mutate", parent.trace, seed, self.genetic_max_fail_count))
                slots.append(len(children))
            children.append(parent)
        for slot, child in zip(slots, self.maker.map(self.context, jobs)):
            if child is not None:
                children[slot] = child
        return children

    def _draw(self, weights: np.ndarray) -> int:
        return self.rng.choices(range(len(weights)), weights=list(weights))[0]


def make_strategy(name_or_strategy, seed: int = 0, **options) -> SearchStrategy:
    """A strategy from its name ("evolutionary", "replay-trace") or the object itself."""
    if isinstance(name_or_strategy, SearchStrategy):
        return name_or_strategy
    kinds = {"evolutionary": EvolutionarySearch, "replay-trace": ReplayTrace}
    if name_or_strategy not in kinds:
        raise ValueError(
            f"strategy must be one of {', '.join(kinds)} or a SearchStrategy, got "
            f"{name_or_strategy!r}"
        )
    return kinds[name_or_strategy](seed=seed, **options)

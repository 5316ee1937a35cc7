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

Both are seeded: the same seed, task and database give the same candidates.
"""

from __future__ import annotations

import heapq
import random
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from schedlab.schedule import Schedule, Trace
from schedlab.schedule.errors import ScheduleError, TraceError

from .task import TuneTask

REPLAY_CACHE_SIZE = 1024  # replayed schedules kept per task (each holds its version history)


@dataclass(frozen=True, eq=False)
class Candidate:
    """A schedule to measure. `key` is the scheduled module's structural fingerprint: two
    traces that make the same loop nest are one candidate."""

    sch: Schedule
    key: str

    @property
    def trace(self) -> Trace:
        return self.sch.trace

    @property
    def mod(self):
        return self.sch.mod

    @staticmethod
    def of(sch: Schedule) -> Candidate:
        from schedlab.ir.structural import structural_fingerprint

        return Candidate(sch, structural_fingerprint(sch.mod))


class SearchStrategy:
    """Base: `start` binds a task, `generate(n)` proposes up to n unmeasured candidates
    (fewer, or none, when the space is exhausted), `notify` records what was measured."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.rng = random.Random(seed)
        self.task: TuneTask | None = None
        self.measured: set[str] = set()
        self.design_spaces: list[Trace] = []
        self._replayed: OrderedDict[str, Schedule | None] = OrderedDict()

    def start(self, task: TuneTask, space, database=None, cost_model=None) -> None:
        self.task, self.space, self.database, self.cost_model = task, space, database, cost_model
        self.design_spaces = [s.trace for s in space.generate_design_space(task.func, task.target)]
        if not self.design_spaces:
            raise ValueError(f"search: the design space of task {task.name!r} is empty")
        self.measured = set()
        for record in self._stored_records():
            sch = self._replay(Trace.from_json(record.trace))
            if sch is not None:
                self.measured.add(Candidate.of(sch).key)

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

    def _replay(self, trace: Trace) -> Schedule | None:
        """The schedule `trace` makes (None when it no longer applies). Mutations often land
        on a trace seen before, and a replay costs tens of milliseconds: replays are cached
        by the trace's decisions."""
        from .database import candidate_key

        key = candidate_key(trace)
        if key in self._replayed:
            self._replayed.move_to_end(key)
            return self._replayed[key]
        sch = self.space.apply_trace(self.task.func, self.task.target, trace)
        self._replayed[key] = sch
        if len(self._replayed) > REPLAY_CACHE_SIZE:
            self._replayed.popitem(last=False)
        return sch

    def _random_sample(self) -> Candidate | None:
        """One fresh sample of a random design space (None when a sampled decision is
        illegal: the space's postprocessors refuse it)."""
        trace = self.design_spaces[self.rng.randrange(len(self.design_spaces))]
        seed = self.rng.randrange(1, 2**31 - 1)
        sch = self.space.sample_candidate(self.task.func, self.task.target, trace, seed)
        return None if sch is None else Candidate.of(sch)

    def _random_unmeasured(self, count: int, exclude: set[str], max_fails: int) -> list:
        picked: list[Candidate] = []
        fails = 0
        while len(picked) < count and fails < max_fails:
            candidate = self._random_sample()
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
    with 4 generations; each candidate here is a trace replay of ~10 ms, so the defaults are
    smaller and the time goes to measuring)."""

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

    def start(self, task, space, database=None, cost_model=None) -> None:
        super().start(task, space, database, cost_model)
        mutators = space.mutators(task.target)
        self.mutators = list(mutators)
        self.mutator_probs = [float(p) for p in mutators.values()]

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
        population = []
        for record in records:
            sch = self._replay(Trace.from_json(record.trace))
            if sch is not None:
                population.append(Candidate.of(sch))
        return population

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
        weights = scores + 1e-9 if scores.sum() > 0 else np.ones(len(scores))
        children: list[Candidate] = []
        for _ in range(self.population_size):
            parent = population[self._draw(weights)]
            children.append(self._child(parent) if self.rng.random() < self.genetic_mutate_prob
                            else parent)  # fmt: skip
        return children

    def _child(self, parent: Candidate) -> Candidate:
        """A mutation of `parent` that replays (the parent itself after too many tries)."""
        for _ in range(self.genetic_max_fail_count):
            mutator = self.mutators[self.rng.choices(range(len(self.mutators)),
                                                     self.mutator_probs)[0]]  # fmt: skip
            try:
                trace = mutator.apply(parent.trace, self.rng)
            except (ScheduleError, TraceError):
                trace = None
            if trace is None:
                continue
            sch = self._replay(trace)
            if sch is not None:
                return Candidate.of(sch)
        return parent

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

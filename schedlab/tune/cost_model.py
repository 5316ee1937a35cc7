"""Cost models: scores that rank a task's candidate schedules before they are measured.

    model = XGBModel()                          # or AnalyticalModel(), make_cost_model("xgb")
    scores = model.predict(task, mods)          # higher = faster; comparable within a task
    model.update(task, mods, run_secs)          # None or inf: the measurement failed

A score is a normalized throughput: about 1 for the fastest schedule the model knows of the task,
0.5 for one twice as slow. Scores of different tasks are not comparable.

- `AnalyticalModel`: 1 / `schedlab.cost.predict` seconds (no training; well under 1 ms each).
- `XGBModel`: gradient-boosted trees (xgboost) over the per-store features of `features.py`,
  retrained on every update, on top of the analytical model as a prior (see its docstring).
- `RandomModel`: random scores (the ablation baseline TVM keeps too).
"""

from __future__ import annotations

import json
import math
import random
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from schedlab.cost import predict as analytical_predict
from schedlab.cost.spearman import spearman

from .features import FEATURE_NAMES, N_FEATURES, extract_features
from .task import TuneTask

_PRIOR_COLUMN = FEATURE_NAMES.index("prior_func_ns")
_FEATURE_CACHE = 4096  # candidates whose features are kept (the search rescores its parents)
BLEND_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)  # of the trees over the prior margin, per task
CV_FOLDS = 4  # cross-validation folds that choose the blend
# beyond this many measured candidates (all tasks together) the trees are taken whole: with
# 100 per task the blend ranked as the trees alone, and its trainings grow with the data
CV_MAX_SAMPLES = 1024


class CostModel:
    """Scores a task's candidates (IRModules or PrimFuncs in scheduled TensorIR form) and
    learns from their measurements. Subclasses override `predict`; the rest is optional."""

    def predict(self, task: TuneTask, mods: list) -> np.ndarray:
        """One score per candidate, higher = faster (normalized throughput, within a task)."""
        raise NotImplementedError

    def update(self, task: TuneTask, mods: list, run_secs: list[float | None]) -> None:
        """Learn from measured candidates: `run_secs[i]` seconds for `mods[i]`, None or inf when
        its build or run failed."""

    def save(self, path: str) -> None:
        """Write the model to `path` (a file)."""
        with open(path, "w") as f:
            json.dump({"kind": type(self).__name__}, f)

    def load(self, path: str) -> CostModel:
        """Read what `save` wrote; returns self."""
        with open(path) as f:
            kind = json.load(f).get("kind")
        if kind != type(self).__name__:
            raise ValueError(f"{path}: holds a {kind} cost model, not a {type(self).__name__}")
        return self


class AnalyticalModel(CostModel):
    """Scores from the analytical latency model: the predicted seconds of the task's function
    as given (unscheduled) over each candidate's predicted seconds."""

    def __init__(self) -> None:
        self._reference: dict[str, float] = {}

    def predict(self, task: TuneTask, mods: list) -> np.ndarray:
        secs = [analytical_predict(mod, task.target).seconds for mod in mods]
        return _prior_scores(np.asarray(secs, dtype=float), self.reference_seconds(task))

    def reference_seconds(self, task: TuneTask) -> float:
        """Predicted seconds of the task's function as given (cached per task)."""
        key = _task_key(task)
        if key not in self._reference:
            self._reference[key] = analytical_predict(task.func, task.target).seconds
        return self._reference[key]


class RandomModel(CostModel):
    """Uniform random scores (a baseline: what the search does without a model)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def predict(self, task: TuneTask, mods: list) -> np.ndarray:
        return np.array([self.rng.random() for _ in mods])


def _prior_scores(secs: np.ndarray, reference: float) -> np.ndarray:
    with np.errstate(divide="ignore"):
        scores = np.where(secs > 0, reference / np.maximum(secs, 1e-30), 0.0)
    return np.nan_to_num(scores, nan=0.0, posinf=0.0)


def _task_key(task: TuneTask) -> str:
    return f"{task.workload}@{task.target}"


@dataclass
class _TaskData:
    """The measured candidates of one task: per-store features, prior seconds, seconds."""

    features: list[np.ndarray] = field(default_factory=list)
    prior: list[float] = field(default_factory=list)
    secs: list[float] = field(default_factory=list)

    @property
    def ok(self) -> int:
        return sum(math.isfinite(s) for s in self.secs)

    def targets(self) -> np.ndarray:
        """log2(best / secs): 0 for the fastest, -1 for twice as slow; failures one below the
        slowest (they rank last)."""
        secs = np.asarray(self.secs, dtype=float)
        finite = np.isfinite(secs) & (secs > 0)
        if not finite.any():
            return np.full(len(secs), -1.0)
        t = np.full(len(secs), 0.0)
        t[finite] = np.log2(secs[finite].min() / secs[finite])
        t[~finite] = t[finite].min() - 1.0
        return t


def _import_xgboost():
    try:
        import xgboost
    except ImportError as err:
        raise ImportError(
            "XGBModel needs xgboost: pip install schedlab[tune] (or pip install xgboost-cpu)"
        ) from err
    return xgboost


def _prior_secs(features: np.ndarray) -> float:
    """The analytical model's seconds for the whole function, read back from the features."""
    if not len(features):
        return 0.0
    return float(np.exp2(np.float64(features[0, _PRIOR_COLUMN])) - 1.0) * 1e-9


class XGBModel(CostModel):
    """Gradient-boosted trees over per-store features, trained online, on top of the analytical
    model.

    Each candidate's score is 2 ** (prior margin + the sum of its stores' tree outputs), in
    units of normalized throughput: the prior margin is log2(1 / analytical seconds),
    calibrated per task on its measured samples (a least-squares line, slope clipped to
    [0, 1]), and the trees learn the correction. The label of a measured candidate is
    log2(best seconds of its task / its seconds); failures sit one below the slowest success.
    Per-store outputs are summed per candidate as TVM's XGBModel does (the gradient of the
    candidate's loss reaches each of its stores' rows).

    `objective="reg"` (the default) is squared error on the labels; `"rank"` is a pairwise
    logistic loss (RankNet, TVM's "rank") over the pairs of candidates of a task. Measured on
    held-out random gemm 256 and conv2d schedules and on the design space's candidates of both,
    the two rank alike (within 0.02 Spearman, either way) and "reg" is cheaper. The prior
    margin adds 0.01-0.07 over trees alone with 40 samples per task; trees trained jointly on
    all tasks rank within 0.02 of one model per task.

    How much of the trees a task's scores take is chosen per task by cross-validation
    (`BLEND_WEIGHTS`, `CV_FOLDS`, while at most `CV_MAX_SAMPLES` candidates are measured): the
    weight whose out-of-fold scores rank the task's candidates best. Before a task has
    `num_warmup_samples` successful measurements its scores are the analytical model's.
    Measured (mean held-out Spearman over 8 random splits, gemm / conv2d, analytical in
    brackets): on random schedules, trees alone ranked worse than the prior with 10-20
    samples per task (0.79 / 0.66 with 10 [0.80 / 0.75]) and the blend matched the prior
    (0.80 / 0.74), with 100 both beat it (0.83 / 0.75 [0.81 / 0.74]); on the design space's
    candidates, where the analytical model ranks poorly, the blend beat the prior from 20 on
    (0.57 / 0.42 [0.50 / 0.38]; with 100: 0.61 / 0.61 [0.49 / 0.37]).

    Retrained from scratch on every update (about 0.3 s at 400 samples, cross-validation
    included); xgboost runs on `nthread` threads (1: the measurements keep the others).
    """

    def __init__(self, num_warmup_samples: int = 16, seed: int = 0, objective: str = "reg",
                 num_boost_round: int = 100, max_depth: int = 3, eta: float = 0.05,
                 nthread: int = 1) -> None:  # fmt: skip
        if objective not in ("rank", "reg"):
            raise ValueError(f"XGBModel: objective must be 'rank' or 'reg', got {objective!r}")
        self.num_warmup_samples, self.seed, self.objective = num_warmup_samples, seed, objective
        # small data: shallow trees, a small step, row and column subsampling (bagging)
        self.params = {"max_depth": max_depth, "eta": eta, "nthread": nthread, "seed": seed,
                       "min_child_weight": 0.05, "subsample": 0.7, "colsample_bytree": 0.5,
                       "lambda": 1.0, "base_score": 0.0, "tree_method": "hist"}  # fmt: skip
        self.num_boost_round = num_boost_round
        self._data: dict[str, _TaskData] = {}
        self._calibration: dict[str, tuple[float, float]] = {}
        self._booster = None
        self._blend: dict[str, float] = {}
        self._analytical = AnalyticalModel()
        self._cache: OrderedDict = OrderedDict()

    # -- public API ------------------------------------------------------------------------------
    def predict(self, task: TuneTask, mods: list) -> np.ndarray:
        feats = [self._featurize(mod, task) for mod in mods]
        prior = np.array([_prior_secs(f) for f in feats])
        key = _task_key(task)
        if not self._learned(key):
            scores = _prior_scores(prior, self._analytical.reference_seconds(task))
        else:
            margins = self._margins(feats, self._prior_margin(prior, key), key)
            scores = np.exp2(np.clip(margins, -60.0, 60.0))
        return self._known_failures_last(key, feats, scores)

    def _known_failures_last(self, key: str, feats, scores: np.ndarray) -> np.ndarray:
        """A candidate whose features are those of one that failed to build or run scores
        below every other: out of fold the trees cannot learn failures that no feature
        explains (the blend then keeps them out), but the same candidate fails again."""
        data = self._data.get(key)
        if data is None or data.ok == len(data.secs):
            return scores
        failed = {f.tobytes() for f, s in zip(data.features, data.secs) if not math.isfinite(s)}
        floor = float(np.min(scores)) / 2 if len(scores) else 0.0
        return np.array([floor if f.tobytes() in failed else v for f, v in zip(feats, scores)])

    def update(self, task: TuneTask, mods: list, run_secs: list[float | None]) -> None:
        if len(mods) != len(run_secs):
            raise ValueError(f"update: {len(mods)} candidates but {len(run_secs)} run times")
        data = self._data.setdefault(_task_key(task), _TaskData())
        for mod, secs in zip(mods, run_secs, strict=True):
            feats = self._featurize(mod, task)
            data.features.append(feats)
            data.prior.append(_prior_secs(feats))
            ok = secs is not None and math.isfinite(secs) and secs > 0
            data.secs.append(float(secs) if ok else math.inf)
        self._train()

    def save(self, path: str) -> None:
        """Write the training data, the calibrations and the trees to one .npz file."""
        keys = list(self._data)
        config = {"kind": "XGBModel", "keys": keys, "feature_names": list(FEATURE_NAMES),
                  "blend": self._blend}  # fmt: skip
        arrays = {"config": np.array(json.dumps(config))}
        for i, key in enumerate(keys):
            data = self._data[key]
            arrays[f"features_{i}"] = _stack(data.features)
            arrays[f"rows_{i}"] = np.array([len(f) for f in data.features], dtype=np.int64)
            arrays[f"prior_{i}"] = np.asarray(data.prior, dtype=float)
            arrays[f"secs_{i}"] = np.asarray(data.secs, dtype=float)
        if self._booster is not None:
            arrays["booster"] = np.frombuffer(bytes(self._booster.save_raw("json")), np.uint8)
        with open(path, "wb") as f:
            np.savez(f, **arrays)

    def load(self, path: str) -> XGBModel:
        """Read what `save` wrote (replacing this model's data and trees); returns self."""
        with _open_npz(path) as arrays:
            config = json.loads(str(arrays["config"]))
            if config.get("kind") != "XGBModel":
                raise ValueError(f"{path}: not an XGBModel file")
            if config["feature_names"] != list(FEATURE_NAMES):
                raise ValueError(f"{path}: saved with other features; retrain on the database")
            self._data = {key: _load_task(arrays, i) for i, key in enumerate(config["keys"])}
            raw = bytearray(arrays["booster"].tobytes()) if "booster" in arrays else None
        self._calibration = {key: _calibrate(d) for key, d in self._data.items() if d.ok >= 2}
        self._blend = {key: float(w) for key, w in config.get("blend", {}).items()}
        self._booster = None
        if raw is not None:
            self._booster = _import_xgboost().Booster(params={"nthread": self.params["nthread"]})
            self._booster.load_model(raw)
        return self

    # -- internals -------------------------------------------------------------------------------
    def _featurize(self, mod, task: TuneTask) -> np.ndarray:
        key = (id(mod), str(task.target))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is mod:
            self._cache.move_to_end(key)
            return hit[1]
        feats = extract_features(mod, task.target)
        self._cache[key] = (mod, feats)  # holding `mod` keeps its id from being reused
        if len(self._cache) > _FEATURE_CACHE:
            self._cache.popitem(last=False)
        return feats

    def _learned(self, key: str) -> bool:
        data = self._data.get(key)
        return (self._booster is not None and data is not None and key in self._calibration
                and data.ok >= max(2, self.num_warmup_samples))  # fmt: skip

    def _prior_margin(self, prior: np.ndarray, key: str) -> np.ndarray:
        slope, offset = self._calibration.get(key, (1.0, 0.0))
        return slope * _log_throughput(prior) + offset

    def _margins(self, feats: list[np.ndarray], base: np.ndarray, key: str) -> np.ndarray:
        batch = _Batch.of(feats, base, np.zeros(len(feats)), [(0, len(feats))])
        return self._blend.get(key, 1.0) * _tree_sums(self._booster, batch) + base

    def _train(self) -> None:
        """Fit the trees on every task with two successes or more (from scratch), then choose
        how much of them each task's scores take (`_choose_blend`)."""
        keys = [key for key, data in self._data.items() if data.ok >= 2]
        self._booster, self._blend = None, {}
        if not keys:
            return
        feats, base, labels, spans = [], [], [], []
        for key in keys:
            data = self._data[key]
            self._calibration[key] = _calibrate(data)
            spans.append((len(feats), len(feats) + len(data.features)))
            feats += data.features
            base.append(self._prior_margin(np.asarray(data.prior), key))
            labels.append(data.targets())
        batch = _Batch.of(feats, np.concatenate(base), np.concatenate(labels), spans)
        self._booster = self._fit(batch)
        if len(feats) <= CV_MAX_SAMPLES:
            self._blend = dict(zip(keys, self._choose_blend(batch), strict=True))

    def _fit(self, batch: _Batch):
        xgb = _import_xgboost()
        dtrain = xgb.DMatrix(batch.x, base_margin=_first_rows(batch.rows, batch.base))
        loss = _PackSum(batch.rows, batch.labels, batch.spans, self.objective, self.seed)
        return xgb.train(self.params, dtrain, self.num_boost_round, obj=loss)

    def _choose_blend(self, batch: _Batch) -> list[float]:
        """Per task, the weight in BLEND_WEIGHTS of the trees over the prior margin that ranks
        its candidates best out of fold (CV_FOLDS trainings on the other folds): with a few
        samples the trees can rank worse than the prior alone, and this keeps them out then."""
        n = len(batch.rows)
        fold = np.random.default_rng(self.seed).integers(0, CV_FOLDS, n)
        out_of_fold = np.zeros(n)
        for k in range(CV_FOLDS):
            held = np.nonzero(fold == k)[0]
            if len(held) and len(held) < n:
                booster = self._fit(batch.subset(np.nonzero(fold != k)[0]))
                out_of_fold[held] = _tree_sums(booster, batch.subset(held))
        weights = []
        for start, stop in batch.spans:
            base, labels = batch.base[start:stop], batch.labels[start:stop]
            fits = [spearman(base + w * out_of_fold[start:stop], labels) for w in BLEND_WEIGHTS]
            weights.append(BLEND_WEIGHTS[int(np.argmax(fits))])
        return weights


@dataclass
class _Batch:
    """Training candidates of several tasks: stacked per-store rows, rows per candidate, prior
    margins, labels, and each task's [start, stop) candidate range."""

    x: np.ndarray
    rows: list[int]
    base: np.ndarray
    labels: np.ndarray
    spans: list[tuple[int, int]]

    @staticmethod
    def of(feats: list[np.ndarray], base, labels, spans) -> _Batch:
        return _Batch(_stack(feats), [len(f) for f in feats], np.asarray(base, dtype=float),
                      np.asarray(labels, dtype=float), list(spans))  # fmt: skip

    def subset(self, keep: np.ndarray) -> _Batch:
        """The candidates `keep` (sorted indices), task ranges renumbered."""
        owner = np.repeat(np.arange(len(self.rows)), self.rows)  # each row's candidate
        x = self.x[np.isin(owner, keep)]
        spans = []
        for start, stop in self.spans:
            first = int(np.searchsorted(keep, start))
            spans.append((first, int(np.searchsorted(keep, stop))))
        rows = [self.rows[c] for c in keep]
        return _Batch(x, rows, self.base[keep], self.labels[keep], spans)


def _tree_sums(booster, batch: _Batch) -> np.ndarray:
    """The trees' output per candidate: the sum over its stores' rows."""
    xgb = _import_xgboost()
    out = booster.predict(xgb.DMatrix(batch.x), output_margin=True)
    groups = np.repeat(np.arange(len(batch.rows)), batch.rows)
    return np.bincount(groups, weights=out, minlength=len(batch.rows))


def _first_rows(rows: list[int], values: np.ndarray) -> np.ndarray:
    """Per row: a candidate's value on its first row, 0 on the others (sums give it back)."""
    out = np.zeros(sum(rows))
    counts = np.asarray(rows)
    starts = np.cumsum(counts) - counts
    out[starts[counts > 0]] = values[counts > 0]
    return out


def _stack(feats: list[np.ndarray]) -> np.ndarray:
    return np.vstack(feats) if feats else np.zeros((0, N_FEATURES), np.float32)


def _log_throughput(secs: np.ndarray) -> np.ndarray:
    return -np.log2(np.maximum(np.asarray(secs, dtype=float), 1e-12))


def _calibrate(data: _TaskData) -> tuple[float, float]:
    """(slope, offset) of the line from log2(1 / predicted seconds) to the task's labels over
    its successes: how far the analytical model's ranking holds on this machine and task."""
    ok = np.isfinite(np.asarray(data.secs))
    x, y = _log_throughput(np.asarray(data.prior)[ok]), data.targets()[ok]
    if len(x) < 2 or float(np.var(x)) == 0.0:
        return 1.0, float(np.mean(y - x)) if len(x) else 0.0
    slope = float(np.clip(np.cov(x, y, bias=True)[0, 1] / np.var(x), 0.0, 1.0))
    return slope, float(np.mean(y) - slope * np.mean(x))


def _open_npz(path: str):
    try:
        arrays = np.load(path, allow_pickle=False)
    except (ValueError, EOFError) as err:  # not an .npz: a JSON model, a pickle, text
        raise ValueError(f"{path}: not an XGBModel file ({err})") from err
    if not isinstance(arrays, np.lib.npyio.NpzFile) or "config" not in arrays:
        raise ValueError(f"{path}: not an XGBModel file")
    return arrays


def _load_task(arrays, i: int) -> _TaskData:
    rows = arrays[f"rows_{i}"]
    feats = np.split(arrays[f"features_{i}"], np.cumsum(rows)[:-1]) if len(rows) else []
    return _TaskData(list(feats), arrays[f"prior_{i}"].tolist(), arrays[f"secs_{i}"].tolist())


class _PackSum:
    """xgboost objective on per-candidate sums of per-store outputs (TVM's pack-sum): the
    gradient of a candidate's loss reaches each of its rows unchanged."""

    MAX_PAIRS = 200_000  # pairs sampled per training beyond this (keeps an update well < 1 s)

    def __init__(self, rows: list[int], labels: np.ndarray, spans, objective: str, seed: int):
        self.groups = np.repeat(np.arange(len(rows)), rows)
        self.labels, self.objective, self.n = labels, objective, len(rows)
        if objective == "rank":
            self.first, self.second = _pairs(labels, spans, self.MAX_PAIRS, seed)

    def __call__(self, preds: np.ndarray, dtrain) -> tuple[np.ndarray, np.ndarray]:
        sums = np.bincount(self.groups, weights=preds, minlength=self.n)
        if self.objective == "reg":
            grad, hess = sums - self.labels, np.ones(self.n)
        else:
            grad, hess = self._pairwise(sums)
        return grad[self.groups], hess[self.groups]

    def _pairwise(self, sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """RankNet: loss log(1 + exp(-(s_i - s_j))) for every pair where i is faster than j."""
        diff = sums[self.first] - sums[self.second]
        p = 1.0 / (1.0 + np.exp(np.clip(diff, -50.0, 50.0)))  # chance the pair is misordered
        grad = np.bincount(self.second, p, self.n) - np.bincount(self.first, p, self.n)
        h = np.maximum(p * (1.0 - p), 1e-6)
        hess = np.bincount(self.first, h, self.n) + np.bincount(self.second, h, self.n)
        return grad, np.maximum(hess, 1e-6)


def _pairs(labels: np.ndarray, spans, limit: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(faster, slower) candidate indices of every ordered pair within a task, or `limit` of
    them sampled when there are more."""
    first, second = [], []
    for start, stop in spans:
        t = labels[start:stop]
        i, j = np.nonzero(t[:, None] > t[None, :])
        first.append(i + start)
        second.append(j + start)
    a, b = np.concatenate(first), np.concatenate(second)
    if len(a) > limit:
        pick = np.random.default_rng(seed).choice(len(a), limit, replace=False)
        a, b = a[pick], b[pick]
    return a, b


def make_cost_model(kind: str | CostModel = "xgb", seed: int = 0, **options) -> CostModel:
    """A cost model from its name ("xgb", "analytical", "random") or the model itself."""
    if isinstance(kind, CostModel):
        return kind
    if kind == "xgb":
        return XGBModel(seed=seed, **options)
    if kind == "analytical":
        return AnalyticalModel(**options)
    if kind == "random":
        return RandomModel(seed=seed, **options)
    raise ValueError(f"cost_model must be xgb, analytical, random or a CostModel, got {kind!r}")

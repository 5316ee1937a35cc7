"""Spearman rank correlation (scipy is not a dependency)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks from 1, ties sharing the average of their ranks (as scipy.stats.rankdata)."""
    data = np.asarray(values, dtype=float)
    order = np.argsort(data, kind="mergesort")
    ranks = np.empty(len(data))
    sorted_vals = data[order]
    i = 0
    while i < len(data):
        j = i
        while j + 1 < len(data) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho of two equal-length sequences: the Pearson correlation of their ranks."""
    if len(x) != len(y):
        raise ValueError(f"spearman: x and y must have equal lengths, got {len(x)} and {len(y)}")
    if len(x) < 2:
        raise ValueError(f"spearman: need at least 2 points, got {len(x)}")
    rx, ry = _ranks(x), _ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / denom) if denom else 0.0

"""The percentile bootstrap over the items of a file (a sentence, a document, a pair), for the intervals of
a model card (`seqlab.cards.intervals`): each item's summable statistics (`Items`, filled by the family's
`cards` part), resampled with replacement, and a figure recomputed from the sums of each resample.

A corpus figure is f(sum over items of s_i). The percentile bootstrap (Efron & Tibshirani 1993, ch. 13;
Koehn 2004 for BLEU) draws the n items with replacement B times, b = 1..B:

    i_b1 .. i_bn ~ Uniform{1..n} (i.i.d.),   theta*_b = f(sum_k s_{i_bk})

and the interval at confidence c (0.95) is the (1 - c) / 2 and (1 + c) / 2 percentiles of theta*_1 ..
theta*_B (numpy's linear interpolation). The draws come from `numpy.random.default_rng(seed)`, so a seed
gives the same interval.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def resample_sums(stats: np.ndarray, resamples: int, seed: int | np.random.Generator,
                  block: int = 4_000_000) -> np.ndarray:
    """(B, k): for each of B resamples of the n rows of `stats` (n, k), drawn with replacement, the
    column sums of the rows drawn. The draws are `default_rng(seed).integers(0, n, size=(B, n))`,
    made a block of resamples at a time (the same numbers: the generator's stream does not depend on
    the blocks), so that memory stays near `block` numbers whatever n and B. Equal rows are counted
    together (a classifier's n documents are at most K^2 distinct rows of the confusion matrix):
    sum of the rows drawn = sum over distinct rows r of (times r was drawn) * r."""
    stats = np.asarray(stats, dtype=np.float64)
    n = len(stats)
    first: dict[bytes, int] = {}                                                 # a row -> its first index
    which = np.fromiter((first.setdefault(row.tobytes(), i) for i, row in enumerate(stats)), dtype=np.int64,
                        count=n)
    distinct = np.array(sorted(first.values()), dtype=np.int64)
    which = np.searchsorted(distinct, which)                                     # (n,): distinct row ids
    distinct, u = stats[distinct], len(distinct)                                 # (u, k)
    rng = np.random.default_rng(seed)
    sums = np.empty((resamples, stats.shape[1]))
    rows = max(1, block // max(n, 1))
    for start in range(0, resamples, rows):
        b = min(rows, resamples - start)
        drawn = which[rng.integers(0, n, size=(b, n))]                          # (b, n): distinct row ids
        counts = np.bincount((drawn + u * np.arange(b)[:, None]).ravel(), minlength=b * u).reshape(b, u)
        sums[start:start + b] = counts @ distinct                                 # (b, k)
    return sums


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile bootstrap interval: the (1 - c)/2 and (1 + c)/2 percentiles of the replicates."""
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(replicates, [tail, 100.0 - tail])
    return float(low), float(high)


class Items:
    """Per-item summable statistics (n, k) with the named columns, and the figures as functions of
    their column sums: each `figures[name]` maps sums (B, k) to values (B,). `collect(gold, predicted)`
    (set per task) turns a chunk of an evaluation's predictions into rows."""

    def __init__(self, unit: str, columns: list[str]):
        self.unit, self.columns = unit, list(columns)
        self.index = {name: i for i, name in enumerate(self.columns)}
        self.rows: list[np.ndarray] = []
        self.figures: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
        self.collect: Callable[..., None] = self.add       # add(rows), or a task's (gold, predicted)

    def add(self, rows: Any) -> None:
        rows = np.asarray(rows, dtype=np.float64).reshape(-1, len(self.columns))
        if len(rows):
            self.rows.append(rows)

    @property
    def stats(self) -> np.ndarray:
        return np.concatenate(self.rows) if self.rows else np.zeros((0, len(self.columns)))

    def column(self, sums: np.ndarray, name: str) -> np.ndarray:
        return sums[:, self.index[name]]

    def full(self) -> dict[str, float]:
        """Each figure on the whole file (every item once)."""
        sums = self.stats.sum(axis=0, keepdims=True)
        return {name: float(f(sums)[0]) for name, f in self.figures.items()}

    def intervals(self, values: dict[str, float], resamples: int, seed: int, confidence: float) -> dict[str, Any]:
        """{figure: value, low, high, ...}: `values` are the pipeline's own figures."""
        stats = self.stats
        if not len(stats):
            return {}
        sums = resample_sums(stats, resamples, seed)
        result = {}
        for name, f in self.figures.items():
            low, high = percentile_interval(f(sums), confidence)
            result[name] = {"value": values[name], "low": low, "high": high, "unit": self.unit,
                            "items": len(stats), "resamples": resamples, "confidence": confidence}
        return result


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """100 a / b, and 0 where b is 0 (as `seqlab.metrics.PRF` reads an empty denominator)."""
    shares: np.ndarray = np.divide(100.0 * numerator, denominator, out=np.zeros_like(numerator, dtype=np.float64),
                                   where=denominator != 0)
    return shares


def f1(precision: np.ndarray, recall: np.ndarray) -> np.ndarray:
    """F1 = 2PR / (P + R), 0 where P + R is 0 (`seqlab.metrics.PRF.f1`)."""
    total = precision + recall
    scores: np.ndarray = np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total != 0)
    return scores








# ---------------------------------------------------------------------------- the API

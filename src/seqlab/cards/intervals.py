"""Bootstrap confidence intervals for the figures of `seqlab evaluate`, as a model card reports them
(issue 17: "every metric on every split the run scored, with a bootstrap 95% interval").

One prediction pass over the file, through the task's own evaluation (`Pipeline.evaluate`, with its
`on_predictions` hook), gives the figures the pipeline reports and, for every item of the file (a
sentence, a document or a pair), the summable statistics the corpus-level figure is a function of:

    tagger      per sentence: tokens right, tokens; with entity tags, spans found correctly /
                predicted / in gold, overall and per type        -> accuracy; micro P, R, F1
    classifier  per document: its cell (gold i, predicted j) of the confusion matrix
                                                                 -> accuracy, macro-F1, per-class F1
    seq2seq     per pair: sacrebleu's BLEU statistics (hypothesis and reference lengths, n-gram
                matches and totals for n = 1..4) and chrF statistics; ROUGE-1/2/L F1
                                                                 -> BLEU, chrF, ROUGE-1/2/L

A corpus figure is f(sum over items of s_i). The percentile bootstrap (Efron & Tibshirani 1993, ch. 13;
Koehn 2004, "Statistical significance tests for machine translation evaluation", for BLEU) draws the
n items with replacement B times, b = 1..B:

    i_b1 .. i_bn ~ Uniform{1..n} (i.i.d.),   theta*_b = f(sum_k s_{i_bk})

and the interval at confidence c (0.95) is the (1 - c) / 2 and (1 + c) / 2 percentiles of theta*_1 ..
theta*_B (numpy's linear interpolation). The draws come from `numpy.random.default_rng(seed)`, so a
seed gives the same interval. The decoding is done once; only the sums are recomputed. A file with no
items gives no intervals.

Language models get no intervals (an empty dict): `TrainedLM.evaluate_file` scores the file as one
stream of tokens (an RNN's state carried along each row of a batch across line ends; the transformer's
overlapping windows that cross them), so a token's loss depends on the lines before it and the
perplexity is not a sum of per-line terms that could be resampled.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from seqlab.errors import SeqlabError
from seqlab.families.contract import Family

CHECK = 1e-6            # how close f(all items) must come to the pipeline's own figure (float rounding)


# ---------------------------------------------------------------------------- the bootstrap

def resample_sums(stats: np.ndarray, resamples: int, seed: int, block: int = 4_000_000) -> np.ndarray:
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
        self.collect: Callable[[list, list], None] = self.add

    def add(self, rows) -> None:
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

    def intervals(self, values: dict[str, float], resamples: int, seed: int, confidence: float) -> dict:
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
    return np.divide(100.0 * numerator, denominator, out=np.zeros_like(numerator, dtype=np.float64),
                     where=denominator != 0)


def f1(precision: np.ndarray, recall: np.ndarray) -> np.ndarray:
    """F1 = 2PR / (P + R), 0 where P + R is 0 (`seqlab.metrics.PRF.f1`)."""
    total = precision + recall
    return np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total != 0)








# ---------------------------------------------------------------------------- the API

def evaluation_intervals(trained, path: str | Path, resamples: int = 1000, seed: int = 0,
                         confidence: float = 0.95, progress: bool | None = None, **read_options) -> dict:
    """{figure: {"value", "low", "high", "unit", "items", "resamples", "confidence"}} for the file at
    `path` scored by `trained` (what `seqlab.load(run)` returns), with the options of its pipeline's
    evaluate (`read_options`: fmt, chunk_size, max_input_length, ...; for seq2seq also target, options
    (decoding: beam 5 unless given, as `seqlab evaluate`), bleu_tokenize, ...).

    "value" is the pipeline's own figure for the file; low / high the percentile-bootstrap interval
    over the file's items (module docstring). A language model gives {} (its evaluation is not a sum
    over lines). `progress`: a bar while the file is scored (None: when stderr is a terminal)."""
    if resamples < 1:
        raise SeqlabError(f"resamples {resamples}: at least 1")
    if not 0 < confidence < 1:
        raise SeqlabError(f"confidence {confidence}: between 0 and 1 (0.95 for a 95% interval)")
    family = getattr(trained, "family", None)
    if not isinstance(family, Family):
        raise SeqlabError(f"evaluation_intervals: {type(trained).__name__} is not a model seqlab.load returns")
    found = family.part("cards").interval_items(trained, path, progress, read_options)
    if found is None:
        return {}
    items, values = found
    check(items, values, str(path))
    return items.intervals(values, resamples, seed, confidence)


def check(items: Items, values: dict[str, float], path: str) -> None:
    """The figures recomputed from the items' summed statistics are the pipeline's (to float rounding):
    the bootstrap resamples the statistic the evaluation reports."""
    if not len(items.stats):
        return
    for name, value in items.full().items():
        if abs(value - values[name]) > CHECK * max(1.0, abs(value)):
            raise SeqlabError(f"{path}: {name} from the per-item statistics is {value!r} but the evaluation "
                              f"reports {values[name]!r}; the intervals would not be of the reported figure")






def split_intervals(trained, resamples: int = 1000, seed: int = 0, confidence: float = 0.95,
                    progress: bool | None = None) -> dict:
    """{split: evaluation_intervals} for the evaluation files of the run's config, by the names of its
    metrics.jsonl: "valid" (--dev) and "test" (--test). Each is read as training read it (the run's
    --format; seq2seq: a file of pairs or --dev-src / --dev-tgt; decoding as `seqlab evaluate`, beam 5).
    A split with no file (not given, held out with --dev-fraction, or no longer where the run read
    it) is left out; a language model gives {} (`evaluation_intervals`)."""
    data, result, reading = trained.config.data, {}, trained.family.part("cards")
    for option, split in trained.family.splits:
        found = reading.evaluation_file(data, option) if split != "train" else None
        if found is None:
            continue
        path, options, files = found
        if not all(Path(f).is_file() for f in files):
            continue
        intervals = evaluation_intervals(trained, path, resamples, seed, confidence, progress, **options)
        if intervals:
            result[split] = intervals
    return result

"""Bootstrap confidence intervals for the figures of `seqlab evaluate`, as a model card reports them
(issue 17: "every metric on every split the run scored, with a bootstrap 95% interval").

One prediction pass over the file, through the family's own evaluation (its `cards` part's
`interval_items`, with the evaluation's `on_predictions` hook), gives the figures the pipeline reports and,
for every item of the file (a sentence, a document or a pair), the summable statistics the corpus-level
figure is a function of:

    tagger      per sentence: tokens right, tokens; with entity tags, spans found correctly /
                predicted / in gold, overall and per type        -> accuracy; micro P, R, F1
    classifier  per document: its cell (gold i, predicted j) of the confusion matrix
                                                                 -> accuracy, macro-F1, per-class F1
    seq2seq     per pair: sacrebleu's BLEU statistics (hypothesis and reference lengths, n-gram
                matches and totals for n = 1..4) and chrF statistics; ROUGE-1/2/L F1
                                                                 -> BLEU, chrF, ROUGE-1/2/L

A corpus figure is f(sum over items of s_i); `seqlab.cards.bootstrap` resamples the items (the percentile
bootstrap, Efron & Tibshirani 1993, ch. 13; Koehn 2004 for BLEU). The decoding is done once; only the sums
are recomputed. A file with no items gives no intervals.

Language models get no intervals (an empty dict): `TrainedLM.evaluate_file` scores the file as one
stream of tokens (an RNN's state carried along each row of a batch across line ends; the transformer's
overlapping windows that cross them), so a token's loss depends on the lines before it and the
perplexity is not a sum of per-line terms that could be resampled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqlab.cards.bootstrap import Items
from seqlab.contract import Family
from seqlab.errors import SeqlabError

CHECK = 1e-6            # how close f(all items) must come to the pipeline's own figure (float rounding)


def evaluation_intervals(trained: Any, path: str | Path, resamples: int = 1000, seed: int = 0,
                         confidence: float = 0.95, progress: bool | None = None, **read_options: Any) -> dict[str, Any]:
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






def split_intervals(trained: Any, resamples: int = 1000, seed: int = 0, confidence: float = 0.95,
                    progress: bool | None = None) -> dict[str, Any]:
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

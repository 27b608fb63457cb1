"""The figures seqlab reports, each declared once with its direction (`Metric`, `METRICS`: what picks the best
weights, a comparison's winner and a study's best trial), and the scores of predictions against gold labels:
token accuracy, and entity precision / recall / F1 (conlleval's definition: an entity counts as found only with
its exact type, start and end).

    P = found correctly / predicted,  R = found correctly / in gold,  F1 = 2PR / (P + R)   (percent)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from seqlab.data.tags import spans


@dataclass(frozen=True)
class Metric:
    """A figure of an evaluation (a key of metrics.jsonl's records) and the direction that ranks it."""

    name: str                   # the key in metrics.jsonl, compare.json and `seqlab tune --objective`
    lower_is_better: bool       # what ranks it: the best weights, a comparison's winner, a study's best trial
    title: str                  # how reports name it
    unit: str = ""              # what it is measured in ("" where it is a ratio)


METRICS: dict[str, Metric] = {}       # every declared figure by name: one declaration each (`declare`)


def declare(*metrics: Metric) -> tuple[Metric, ...]:
    """Add figures to `METRICS` (a family defined outside seqlab declares its own the same way); a name already
    declared otherwise is refused."""
    for metric in metrics:
        if METRICS.setdefault(metric.name, metric) != metric:
            raise ValueError(f"the figure {metric.name!r} is declared twice, differently: {METRICS[metric.name]} "
                             f"and {metric}")
    return metrics


LOSS, PERPLEXITY, BITS_PER_TOKEN, BITS_PER_CHAR = declare(
    Metric("loss", True, "loss", "nats per token (per document for a classifier)"),
    Metric("perplexity", True, "perplexity"),
    Metric("bits_per_token", True, "bits per token", "bits"),
    Metric("bits_per_char", True, "bits per character", "bits"))
ACCURACY, PRECISION, RECALL, F1, MACRO_F1 = declare(
    Metric("accuracy", False, "accuracy", "percent"),
    Metric("precision", False, "precision", "percent"),
    Metric("recall", False, "recall", "percent"),
    Metric("f1", False, "F1", "percent"),
    Metric("macro_f1", False, "macro-F1", "percent"))
BLEU, CHRF, ROUGE1, ROUGE2, ROUGEL = declare(          # of a file's outputs (`seqlab evaluate`)
    Metric("bleu", False, "BLEU", "percent"),
    Metric("chrf", False, "chrF", "percent"),
    Metric("rouge1", False, "ROUGE-1", "percent"),
    Metric("rouge2", False, "ROUGE-2", "percent"),
    Metric("rougeL", False, "ROUGE-L", "percent"))
GREEDY_BLEU, GREEDY_CHRF, GREEDY_ROUGE1, GREEDY_ROUGE2, GREEDY_ROUGEL = declare(   # at each evaluation (--eval-decode)
    Metric("greedy_bleu", False, "BLEU of greedy outputs", "percent"),
    Metric("greedy_chrf", False, "chrF of greedy outputs", "percent"),
    Metric("greedy_rouge1", False, "ROUGE-1 of greedy outputs", "percent"),
    Metric("greedy_rouge2", False, "ROUGE-2 of greedy outputs", "percent"),
    Metric("greedy_rougeL", False, "ROUGE-L of greedy outputs", "percent"))


def lower_is_better(name: str) -> bool:
    """Whether a lower value of the figure `name` is better; a figure nobody declared ranks as a score (higher
    is better), as a compare.json or --objective naming one always has."""
    metric = METRICS.get(name)
    return metric.lower_is_better if metric is not None else False


@dataclass
class PRF:
    """Precision, recall and F1 in percent, with the counts they come from."""

    correct: int = 0
    predicted: int = 0
    gold: int = 0

    @property
    def precision(self) -> float:
        return 100.0 * self.correct / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return 100.0 * self.correct / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                "correct": self.correct, "predicted": self.predicted, "gold": self.gold}


@dataclass
class SpanScores:
    """Entity-level scores, overall and per entity type."""

    overall: PRF = field(default_factory=PRF)
    by_type: dict[str, PRF] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {**self.overall.as_dict(), "by_type": {k: v.as_dict() for k, v in sorted(self.by_type.items())}}


def span_scores(gold: list[list[str]], predicted: list[list[str]]) -> SpanScores:
    """conlleval-compatible entity P/R/F1 over sentences of tags (any of IOB1, IOB2, BIOES)."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    scores = SpanScores()
    for number, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted, strict=True)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"sentence {number}: {len(gold_tags)} gold tags but {len(predicted_tags)} predicted")
        gold_spans, predicted_spans = set(spans(gold_tags)), set(spans(predicted_tags))
        for kind, *_ in gold_spans | predicted_spans:
            scores.by_type.setdefault(kind, PRF())
        for span in gold_spans:
            scores.by_type[span[0]].gold += 1
        for span in predicted_spans:
            scores.by_type[span[0]].predicted += 1
            if span in gold_spans:
                scores.by_type[span[0]].correct += 1
    for part in scores.by_type.values():
        scores.overall.correct += part.correct
        scores.overall.predicted += part.predicted
        scores.overall.gold += part.gold
    return scores


def confusions(gold: list[list[str]], predicted: list[list[str]], top: int = 10) -> list[tuple[str, str, int]]:
    """The most frequent (gold, predicted, count) mistakes."""
    return most_confused(mistakes(gold, predicted), top)


def mistakes(gold: list[list[str]], predicted: list[list[str]]) -> Counter:
    """How often each (gold, predicted) pair of different tags occurs: summable over parts of a file."""
    return Counter((g, p) for gs, ps in zip(gold, predicted, strict=True)
                   for g, p in zip(gs, ps, strict=True) if g != p)


def most_confused(counts: Counter, top: int = 10) -> list[tuple[str, str, int]]:
    """The `top` most frequent mistakes, ties by tag name (so the list does not depend on the order the
    sentences were scored in)."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [(g, p, n) for (g, p), n in ranked[:top]]


def classification_scores(confusion: list[list[int]], labels: list[str]) -> dict:
    """Accuracy, per-class precision / recall / F1 and their unweighted mean (macro-F1), in percent,
    from a confusion matrix whose row i, column j counts documents of gold class i predicted as j."""
    K = len(labels)
    total = sum(map(sum, confusion))
    right = sum(confusion[i][i] for i in range(K))
    per_class = {}
    for i, label in enumerate(labels):
        scores = PRF(confusion[i][i], sum(confusion[k][i] for k in range(K)), sum(confusion[i]))
        per_class[label] = {"precision": scores.precision, "recall": scores.recall, "f1": scores.f1,
                            "support": scores.gold}
    return {"accuracy": 100.0 * right / total if total else 0.0,
            "macro_f1": sum(c["f1"] for c in per_class.values()) / max(K, 1),
            "per_class": per_class, "confusion": confusion, "labels": list(labels)}


def bleu(hypotheses: list[str], references: list[str], tokenize: str = "13a", lowercase: bool = False) -> float:
    """Corpus BLEU (percent) with sacrebleu: on detokenised text with its standard `13a` tokenizer, or
    with `tokenize="none"` on text already tokenised (multi-bleu.perl's figure, as papers on the
    lower-cased tokenised Multi30k report)."""
    import sacrebleu

    _same_length(hypotheses, references)
    # force: with tokenize="none" the text is tokenised on purpose; sacrebleu would warn that it looks so
    return sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenize, lowercase=lowercase,
                                 force=tokenize == "none").score


def chrf(hypotheses: list[str], references: list[str]) -> float:
    """Corpus chrF (percent, sacrebleu's defaults: character 6-grams, beta 2)."""
    import sacrebleu

    _same_length(hypotheses, references)
    return sacrebleu.corpus_chrf(hypotheses, [references]).score


def rouge(hypotheses: list[str], references: list[str], stemmer: bool = True) -> dict[str, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F1 (percent), each the mean over documents, with Google's
    `rouge-score` package (Porter stemming as in the original ROUGE's -m)."""
    from rouge_score import rouge_scorer

    _same_length(hypotheses, references)
    kinds = ("rouge1", "rouge2", "rougeL")
    scorer = rouge_scorer.RougeScorer(list(kinds), use_stemmer=stemmer)
    totals = dict.fromkeys(kinds, 0.0)
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        scores = scorer.score(reference, hypothesis)
        for kind in kinds:
            totals[kind] += scores[kind].fmeasure
    return {kind: 100.0 * total / max(len(hypotheses), 1) for kind, total in totals.items()}


def _same_length(hypotheses: list[str], references: list[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")


class CorpusScores:
    """BLEU, chrF and ROUGE-1/2/L of a corpus scored a part at a time, keeping no text.

    Corpus BLEU and chrF are functions of sums over sentences (BLEU: n-gram matches and totals for
    n = 1-4 and the hypothesis and reference lengths; chrF: character n-gram matches and totals), and
    sacrebleu's corpus_score computes them exactly so: `add` sums sacrebleu's own per-sentence
    statistics, `scores` turns the sums into the figures of `bleu` and `chrf` on the whole corpus.
    ROUGE is a mean over documents: the sum of their F1 and their count. (This uses sacrebleu's
    `_extract_corpus_statistics` and `_compute_score_from_stats`, the two halves of its corpus_score.)"""

    KINDS = ("rouge1", "rouge2", "rougeL")

    def __init__(self, bleu_tokenize: str = "13a", lowercase: bool = False, stemmer: bool = True):
        from rouge_score import rouge_scorer
        from sacrebleu.metrics import BLEU, CHRF

        # force: no "forgot to detokenize" check per part; it is made once over the corpus below
        self.bleu_metric = BLEU(tokenize=bleu_tokenize, lowercase=lowercase, force=True)
        self.chrf_metric = CHRF()
        self.scorer = rouge_scorer.RougeScorer(list(self.KINDS), use_stemmer=stemmer)
        self.check_detokenized = bleu_tokenize != "none"
        self.bleu_stats: list[int] | None = None
        self.chrf_stats: list[int] | None = None
        self.rouge_sums = dict.fromkeys(self.KINDS, 0.0)
        self.documents = self.tokenized_periods = 0

    def add(self, hypotheses: list[str], references: list[str]) -> None:
        _same_length(hypotheses, references)
        if not hypotheses:
            return
        self.bleu_stats = _add_stats(self.bleu_stats, self.bleu_metric._extract_corpus_statistics(
            hypotheses, [references]))
        self.chrf_stats = _add_stats(self.chrf_stats, self.chrf_metric._extract_corpus_statistics(
            hypotheses, [references]))
        for hypothesis, reference in zip(hypotheses, references, strict=True):
            scores = self.scorer.score(reference, hypothesis)
            for kind in self.KINDS:
                self.rouge_sums[kind] += scores[kind].fmeasure
        self.documents += len(hypotheses)
        self.tokenized_periods += sum(h.endswith(" .") for h in hypotheses)

    def scores(self) -> dict[str, float]:
        """bleu, chrf, rouge1, rouge2, rougeL (percent) of everything added."""
        if self.check_detokenized and self.tokenized_periods >= 100:
            import logging
            logging.getLogger("sacrebleu").warning(
                "That's 100 lines that end in a tokenized period ('.'); it looks like you forgot to detokenize "
                "your test data, which may hurt your score")
        if self.bleu_stats is None:
            return {"bleu": 0.0, "chrf": 0.0, **dict.fromkeys(self.KINDS, 0.0)}
        return {"bleu": self.bleu_metric._compute_score_from_stats(self.bleu_stats).score,
                "chrf": self.chrf_metric._compute_score_from_stats(self.chrf_stats).score,
                **{kind: 100.0 * total / max(self.documents, 1) for kind, total in self.rouge_sums.items()}}


def _add_stats(total: list | None, segments: list[list]) -> list:
    for segment in segments:
        total = list(segment) if total is None else [a + b for a, b in zip(total, segment, strict=True)]
    return total

"""Scores of predictions against gold labels: token accuracy, and entity precision / recall / F1
(conlleval's definition: an entity counts as found only with its exact type, start and end).

    P = found correctly / predicted,  R = found correctly / in gold,  F1 = 2PR / (P + R)   (percent)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from seqlab.data.tags import spans


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


def accuracy(gold: list[list[str]], predicted: list[list[str]]) -> float:
    """Token accuracy in percent."""
    right = total = 0
    for gold_tags, predicted_tags in zip(gold, predicted, strict=True):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"{len(gold_tags)} gold tags but {len(predicted_tags)} predicted in one sentence")
        right += sum(g == p for g, p in zip(gold_tags, predicted_tags, strict=True))
        total += len(gold_tags)
    return 100.0 * right / total if total else 0.0


def confusions(gold: list[list[str]], predicted: list[list[str]], top: int = 10) -> list[tuple[str, str, int]]:
    """The most frequent (gold, predicted, count) mistakes."""
    counts = Counter((g, p) for gs, ps in zip(gold, predicted, strict=True)
                     for g, p in zip(gs, ps, strict=True) if g != p)
    return [(g, p, n) for (g, p), n in counts.most_common(top)]


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

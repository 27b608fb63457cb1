"""The task's own figures at every evaluation of training (--eval-decode N): the greedy outputs of a split's first
N pairs scored against their references as `seqlab evaluate` scores outputs (`seqlab.metrics.CorpusScores`):
BLEU and chrF with sacrebleu (its 13a tokenization, on detokenised text), ROUGE-1/2/L F1 with rouge-score.

The trainer adds every process's evaluation statistics before it summarizes them (`seqlab.training.task`), so
what a process returns are sums, and the figures are computed once from the sums of all:

    BLEU    the hypothesis and reference lengths c and r, and for n = 1..4 the clipped n-gram matches and the
            hypothesis n-grams (Papineni et al. 2002): BP = min(1, exp(1 - r / c)) times the geometric mean of
            the four precisions; sacrebleu's corpus BLEU is this function of the sums
    chrF    character n-gram matches and totals of hypotheses and references (Popovic 2015, beta 2)
    ROUGE   each pair's F1 summed, and the pairs counted: the corpus figure is their mean

so however the pairs are shared between processes, the figures are those of the whole sample. They are recorded
as greedy_bleu, greedy_chrf, greedy_rouge1, greedy_rouge2, greedy_rougeL over greedy_pairs pairs: named apart
from `seqlab evaluate`'s bleu (beam 5, the whole file), which the model card's intervals use.
"""

from __future__ import annotations

from seqlab.metrics import CorpusScores

PREFIX = "greedy_"
FIGURES = ("bleu", "chrf", *CorpusScores.KINDS)       # CorpusScores.scores(): bleu, chrf, rouge1, rouge2, rougeL


def statistics(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    """The summable statistics of outputs and their references: greedy_bleu/i (the 10 sums of BLEU),
    greedy_chrf/i (chrF's), greedy_rouge1 ... (summed F1) and greedy_pairs. No pair gives zeros, the same keys."""
    scores = CorpusScores()
    scores.add(hypotheses, references)
    bleu_stats = scores.bleu_stats or [0] * (2 + 2 * scores.bleu_metric.max_ngram_order)
    chrf_metric = scores.chrf_metric
    chrf_stats = scores.chrf_stats or [0] * (3 * (chrf_metric.char_order + chrf_metric.word_order))
    return {**{f"{PREFIX}bleu/{i}": float(x) for i, x in enumerate(bleu_stats)},
            **{f"{PREFIX}chrf/{i}": float(x) for i, x in enumerate(chrf_stats)},
            **{f"{PREFIX}{kind}": total for kind, total in scores.rouge_sums.items()},
            f"{PREFIX}pairs": float(scores.documents)}


def figures(stats: dict[str, float]) -> dict:
    """greedy_bleu, greedy_chrf, greedy_rouge1/2/L (percent) and greedy_pairs from summed `statistics`; {} when
    nothing was decoded (--eval-decode 0)."""
    pairs = int(stats.get(f"{PREFIX}pairs", 0))
    if not pairs:
        return {}
    scores = CorpusScores()
    scores.bleu_stats = _summed(stats, "bleu")
    scores.chrf_stats = _summed(stats, "chrf")
    scores.rouge_sums = {kind: stats[f"{PREFIX}{kind}"] for kind in CorpusScores.KINDS}
    scores.documents = pairs
    return {**{f"{PREFIX}{name}": value for name, value in scores.scores().items()}, f"{PREFIX}pairs": pairs}


def _summed(stats: dict[str, float], metric: str) -> list[int]:
    """One metric's summed statistics in order, as the integers sacrebleu counts in (sums of integers)."""
    keys = sorted((key for key in stats if key.startswith(f"{PREFIX}{metric}/")), key=lambda k: int(k.split("/")[1]))
    return [round(stats[key]) for key in keys]


def describe(record: dict) -> str:
    """The figures as the evaluation's line shows them ('' when there are none)."""
    if f"{PREFIX}bleu" not in record:
        return ""
    return (f"; greedy on {record[f'{PREFIX}pairs']:,} pairs: BLEU {record[f'{PREFIX}bleu']:.2f}, "
            f"chrF {record[f'{PREFIX}chrf']:.2f}, ROUGE-L {record[f'{PREFIX}rougeL']:.2f}")

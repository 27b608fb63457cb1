"""Entity P/R/F1 equal to seqeval's (conlleval's definition) on real and random sequences; accuracy."""

import random
from pathlib import Path

import pytest
from seqeval.metrics import f1_score, precision_score, recall_score

from seqlab.data.conll import read_conll
from seqlab.metrics import confusions, span_scores

FIXTURES = Path(__file__).parent / "fixtures"
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "E-PER", "S-LOC"]


def random_tags(rng, length):
    return [rng.choice(TAGS) if rng.random() < 0.6 else "O" for _ in range(length)]


def check_against_seqeval(gold, predicted):
    ours = span_scores(gold, predicted).overall
    assert ours.f1 == pytest.approx(100 * f1_score(gold, predicted), abs=1e-9)
    assert ours.precision == pytest.approx(100 * precision_score(gold, predicted), abs=1e-9)
    assert ours.recall == pytest.approx(100 * recall_score(gold, predicted), abs=1e-9)


def test_metrics_span_f1_equals_seqeval_on_random_sequences():
    rng = random.Random(1)
    for _ in range(50):
        lengths = [rng.randint(1, 15) for _ in range(rng.randint(1, 8))]
        gold = [random_tags(rng, n) for n in lengths]
        predicted = [random_tags(rng, n) for n in lengths]
        check_against_seqeval(gold, predicted)


def test_metrics_span_f1_equals_seqeval_on_real_tags():
    gold = [s.labels for s in read_conll(FIXTURES / "ner.conll")]
    rng = random.Random(2)
    predicted = [[t if rng.random() < 0.8 else rng.choice(TAGS[:7]) for t in tags] for tags in gold]
    check_against_seqeval(gold, predicted)
    perfect = span_scores(gold, gold)
    assert perfect.overall.f1 == 100.0 and perfect.overall.gold == 7
    assert perfect.by_type["PER"].gold == 2


CONLL2003 = Path(__file__).parents[2] / "shared" / "data" / "conll2003" / "valid.txt"


@pytest.mark.skipif(not CONLL2003.exists(), reason="needs ../shared/data/conll2003")
def test_metrics_span_f1_equals_seqeval_on_conll2003_with_corrupted_predictions():
    gold = [s.labels for s in read_conll(CONLL2003)]
    rng = random.Random(3)
    predicted = [[t if rng.random() < 0.9 else rng.choice(TAGS) for t in tags] for tags in gold]
    check_against_seqeval(gold, predicted)


def test_metrics_span_counts_by_type():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG"]]
    scores = span_scores(gold, predicted)
    assert (scores.overall.correct, scores.overall.predicted, scores.overall.gold) == (1, 2, 2)
    assert scores.by_type["LOC"].recall == 0.0 and scores.by_type["ORG"].precision == 0.0
    assert scores.by_type["PER"].f1 == 100.0
    assert scores.overall.f1 == pytest.approx(50.0)


def test_metrics_confusions():
    gold = [["DET", "NOUN", "VERB"], ["NOUN"]]
    predicted = [["DET", "VERB", "VERB"], ["VERB"]]
    assert confusions(gold, predicted) == [("NOUN", "VERB", 2)]

"""Entity P/R/F1 equal to seqeval's (conlleval's definition) on real and random sequences; accuracy."""

import random
from pathlib import Path

import pytest
from seqeval.metrics import f1_score, precision_score, recall_score

from seqlab.families.tagger.conll import read_conll
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


# ------------------------------------------------------------------------ one declaration of each figure, one direction

COUNTS = {"tokens", "documents", "pairs", "characters", "correct", "predicted", "gold", "greedy_pairs"}


def reported_figures(name: str) -> set[str]:
    """The figures an evaluation record of the family holds (its task's `summarize` of made-up statistics), counts
    and nested tables (per class, per type, the confusion matrix) left out."""
    from types import SimpleNamespace

    if name == "lm":
        from seqlab.families.lm.task import summarize
        record = summarize(12.0, 10, 40)
    elif name == "tagger":
        from seqlab.families.tagger.task import TaggingTask
        stats = {"tokens": 10, "loss_sum": 3.0, "correct": 7, **{f"spans_{w}{s}": 2 for w in ("correct", "predicted",
                                                                                         "gold") for s in ("", "/PER")}}
        record = TaggingTask.summarize(SimpleNamespace(entity_tags=True, types=["PER"]), stats)
    elif name == "classifier":
        from seqlab.families.classifier.task import ClassificationTask
        stats = {"documents": 4, "loss_sum": 2.0, **{f"confusion/{i}/{j}": 1 for i in range(2) for j in range(2)}}
        record = ClassificationTask.summarize(SimpleNamespace(vocabulary=SimpleNamespace(labels=["neg", "pos"])), stats)
    else:
        from seqlab.families.seq2seq import task_metric
        from seqlab.families.seq2seq.task import Seq2SeqTask
        stats = {"tokens": 10, "loss_sum": 9.0, "pairs": 2, **task_metric.statistics(["a cat sat"], ["a cat sat ."])}
        record = Seq2SeqTask.summarize(None, stats)
        record.update(dict.fromkeys(("bleu", "chrf", "rouge1", "rouge2", "rougeL"), 0.0))   # `seqlab evaluate`'s
    return {key for key, value in record.items() if isinstance(value, float | int) and key not in COUNTS}


@pytest.mark.parametrize("name", ["lm", "tagger", "classifier", "seq2seq"])
def test_metrics_every_figure_a_family_reports_has_exactly_one_declaration(name):
    from seqlab.metrics import METRICS
    from seqlab.registry import family

    found = family(name)
    names = [m.name for m in found.metrics]
    assert len(names) == len(set(names)) and found.metric in names
    assert all(METRICS[m.name] is m for m in found.metrics)             # the table's own object, not a copy
    assert reported_figures(name) == set(names)


def test_metrics_a_second_declaration_that_disagrees_is_refused():
    from seqlab.metrics import METRICS, Metric, declare

    assert declare(Metric("loss", True, "loss", "nats per token (per document for a classifier)")) == (METRICS["loss"],)
    with pytest.raises(ValueError, match="declared twice"):
        declare(Metric("loss", False, "loss"))


def test_metrics_the_places_that_rank_agree(tmp_path):
    """The Family, a comparison's report (compare.json without "lower_is_better"), a study (`lower_is_better`,
    what tuning/study.py calls) and the trainer's choice of the best weights read one declaration."""
    import json

    from seqlab.compare.report import read_spec
    from seqlab.metrics import METRICS, lower_is_better
    from seqlab.registry import FAMILIES

    for found in FAMILIES.values():
        assert found.lower_is_better == METRICS[found.metric].lower_is_better
        for metric in found.metrics:
            (tmp_path / "compare.json").write_text(json.dumps({"task": found.name, "archs": ["a"],
                                                               "metric": metric.name}))
            assert read_spec(tmp_path)["lower_is_better"] == metric.lower_is_better == lower_is_better(metric.name)


def test_metrics_no_other_list_of_directions_remains():
    """`lower_is_better` is read from the table everywhere: no list of lower-is-better names, no task or family
    declaring its own direction."""
    import re

    source = Path(__file__).parents[1] / "src" / "seqlab"
    offenders = [f"{path.relative_to(source)}:{n}" for path in source.rglob("*.py") if path.name != "metrics.py"
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if re.search(r"LOWER_IS_BETTER|lower_is_better\s*=|lower_is_better\s*:\s*bool\s*$", line)]
    assert offenders == []

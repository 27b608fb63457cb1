"""Bootstrap intervals of the evaluation figures (seqlab.cards.intervals): the value is the pipeline's own
figure for every task, the interval holds it and is ordered, a seed gives the same interval, the
resampling is the textbook one (checked against a direct numpy version and an exact enumeration), and
BLEU from summed per-sentence statistics is sacrebleu's corpus BLEU."""

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

import seqlab
from seqlab.cards.bootstrap import percentile_interval, resample_sums
from seqlab.cards.intervals import evaluation_intervals, split_intervals
from seqlab.cli.main import main
from seqlab.errors import SeqlabError
from seqlab.families.classifier.cards import classifier_items
from seqlab.families.seq2seq.cards import seq2seq_items

FIXTURES = Path(__file__).parent / "fixtures"
FAST = ["--dropout", "0", "--schedule", "constant", "--no-progress", "--eval-every", "1000", "--threads", "1"]


def train(tmp_path, name: str, task: str, *options) -> Path:
    run = tmp_path / name
    assert main(["train", task, "--output", str(run), *FAST, *options]) == 0
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Tiny runs, trained a few steps (so that they make mistakes and the intervals have a width)."""
    folder = tmp_path_factory.mktemp("interval-runs")
    ner, pos = str(FIXTURES / "ner.conll"), str(FIXTURES / "tagging.conllu")
    tsv = str(FIXTURES / "classify" / "sentiment.tsv")
    s2s = FIXTURES / "seq2seq"
    small = ["--embedding-size", "8", "--hidden-size", "8", "--batch-size", "4", "--lr", "0.02"]
    return {
        "ner": train(folder, "ner", "tagger", "--train", ner, "--dev", ner, "--format", "conll", "--encoder",
                     "lstm", "--char-features", "none", "--max-steps", "15", *small),
        "pos": train(folder, "pos", "tagger", "--train", pos, "--dev", pos, "--char-features", "none",
                     "--max-steps", "6", *small),
        "classifier": train(folder, "classifier", "classifier", "--train", tsv, "--dev", tsv, "--test", tsv,
                            "--format", "tsv",
                            "--arch", "pooled", "--max-steps", "4", *small),
        "seq2seq": train(folder, "seq2seq", "seq2seq", "--train-src", str(s2s / "train.src"), "--train-tgt",
                         str(s2s / "train.tgt"), "--dev-src", str(s2s / "dev.src"), "--dev-tgt",
                         str(s2s / "dev.tgt"), "--arch", "gru", "--max-steps", "40", "--embedding-size", "16",
                         "--hidden-size", "16", "--batch-size", "16", "--lr", "0.01"),
    }


def check_intervals(intervals: dict, figures: dict, unit: str, items: int, resamples: int = 200):
    for name, interval in intervals.items():
        assert interval["value"] == figures[name], name
        assert interval["low"] <= interval["value"] <= interval["high"], (name, interval)
        assert interval["unit"] == unit and interval["items"] == items
        assert interval["resamples"] == resamples and interval["confidence"] == 0.95


def test_tagger_intervals_are_of_the_evaluation_figures(runs):
    for name, path, fmt in (("ner", FIXTURES / "ner.conll", "conll"), ("pos", FIXTURES / "tagging.conllu", None)):
        tagger = seqlab.load(runs[name])
        figures = tagger.evaluate_file(path, fmt)
        intervals = evaluation_intervals(tagger, path, resamples=200, fmt=fmt)
        flat = {**figures, **{f"{f}/{kind}": scores[f] for kind, scores in figures.get("by_type", {}).items()
                              for f in ("precision", "recall", "f1")}}
        sentences = 4 if name == "ner" else 5
        check_intervals(intervals, flat, "sentences", sentences)
        if name == "ner":
            assert {"accuracy", "precision", "recall", "f1", "f1/PER", "f1/LOC"} <= set(intervals)
            assert 0 < figures["f1"] < 100 and intervals["f1"]["low"] < intervals["f1"]["high"]
        else:
            assert set(intervals) == {"accuracy"}
        assert evaluation_intervals(tagger, path, resamples=200, fmt=fmt) == intervals     # seed 0 both times


def test_classifier_intervals_are_of_the_evaluation_figures(runs):
    classifier = seqlab.load(runs["classifier"])
    path = FIXTURES / "classify" / "sentiment.tsv"
    figures = classifier.evaluate_file(path)
    intervals = evaluation_intervals(classifier, path, resamples=200, progress=False)
    flat = {**figures, **{f"f1/{label}": scores["f1"] for label, scores in figures["per_class"].items()}}
    assert set(intervals) == {"accuracy", "macro_f1", "f1/neg", "f1/pos"}
    check_intervals(intervals, flat, "documents", figures["documents"])
    assert intervals == evaluation_intervals(classifier, path, resamples=200, progress=False)
    # the figures recomputed from the per-document statistics of the evaluation's own pass are its figures
    items = classifier_items(classifier.labels)
    again = classifier.evaluate_file(path, on_predictions=items.collect)
    assert items.full() == {name: flat[name] for name in items.figures} and again["accuracy"] == figures["accuracy"]


def test_seq2seq_intervals_are_of_the_evaluation_figures(runs):
    model = seqlab.load(runs["seq2seq"])
    source, target = FIXTURES / "seq2seq" / "dev.src", FIXTURES / "seq2seq" / "dev.tgt"
    from seqlab.decoding.search import SearchOptions

    greedy = SearchOptions(beam=1)
    figures = model.evaluate_files(source, target, options=greedy)
    intervals = evaluation_intervals(model, source, resamples=200, target=target, options=greedy, progress=False)
    assert set(intervals) == {"bleu", "chrf", "rouge1", "rouge2", "rougeL"}
    check_intervals(intervals, figures, "pairs", 40)
    assert intervals["chrf"]["low"] < intervals["chrf"]["high"]
    items = seq2seq_items()
    model.evaluate_files(source, target, options=greedy, on_predictions=items.collect)
    for name, value in items.full().items():
        assert value == pytest.approx(figures[name], abs=1e-9), name
    # with the run's default decoding (beam 5, as `seqlab evaluate`) and BLEU on its tokenised text
    beam = evaluation_intervals(model, source, resamples=200, target=target, bleu_tokenize="none", progress=False)
    check_intervals(beam, model.evaluate_files(source, target, bleu_tokenize="none"), "pairs", 40)


def test_split_intervals_are_of_the_figures_the_run_recorded_for_its_splits(runs):
    for name, splits in (("classifier", {"valid", "test"}), ("ner", {"valid"})):
        recorded = {r["split"]: r for r in map(json.loads, (runs[name] / "metrics.jsonl").read_text().splitlines())
                    if r.get("final")}
        intervals = split_intervals(seqlab.load(runs[name]), resamples=50, progress=False)
        assert set(intervals) == splits
        for split, figures in intervals.items():
            assert figures["accuracy"]["value"] == pytest.approx(recorded[split]["accuracy"], abs=1e-9)
            assert figures["accuracy"]["resamples"] == 50
    # seq2seq records no BLEU while training: its splits are decoded as `seqlab evaluate` decodes (beam 5)
    intervals = split_intervals(seqlab.load(runs["seq2seq"]), resamples=50, progress=False)
    assert set(intervals) == {"valid"} and set(intervals["valid"]) == {"bleu", "chrf", "rouge1", "rouge2", "rougeL"}


def test_a_language_model_gets_no_intervals_and_bad_arguments_are_refused(tmp_path, runs):
    text = str(FIXTURES / "shakespeare_train.txt")
    run = train(tmp_path, "lm", "lm", "--train", text, "--valid", text, "--tokenizer", "char", "--arch", "lstm",
                "--embedding-size", "8", "--hidden-size", "8", "--seq-len", "16", "--max-steps", "1")
    assert evaluation_intervals(seqlab.load(run), FIXTURES / "shakespeare_valid.txt") == {}
    tagger = seqlab.load(runs["pos"])
    with pytest.raises(SeqlabError, match="resamples 0"):
        evaluation_intervals(tagger, FIXTURES / "tagging.conllu", resamples=0)
    with pytest.raises(SeqlabError, match="confidence 95"):
        evaluation_intervals(tagger, FIXTURES / "tagging.conllu", confidence=95)
    with pytest.raises(SeqlabError, match="not a model seqlab.load returns"):
        evaluation_intervals(object(), FIXTURES / "tagging.conllu")


def test_resampling_is_the_direct_bootstrap_and_matches_an_exact_enumeration():
    # three documents, two classified right: accuracy 66.7%
    items = classifier_items(["neg", "pos"])
    items.collect([0, 1, 1], [0, 1, 0])
    assert items.full()["accuracy"] == pytest.approx(200 / 3)
    B, seed = 20_000, 7
    sums = resample_sums(items.stats, B, seed, block=10)             # in many blocks: the same draws
    # the same as drawing the indices all at once and averaging, the textbook way
    draws = np.random.default_rng(seed).integers(0, 3, size=(B, 3))
    direct = 100.0 * np.array([1.0, 1.0, 0.0])[draws].mean(axis=1)
    replicates = items.figures["accuracy"](sums)
    np.testing.assert_allclose(replicates, direct)
    assert not np.array_equal(resample_sums(items.stats, B, seed + 1), sums)     # another seed, other draws
    # equal rows counted together give the sums of the rows drawn, one by one
    stats = np.random.default_rng(0).integers(0, 3, size=(40, 4)).astype(float)      # many repeated rows
    draws = np.random.default_rng(5).integers(0, 40, size=(30, 40))
    np.testing.assert_array_equal(resample_sums(stats, 30, 5, block=100), stats[draws].sum(axis=1))
    # and the bootstrap distribution is the exact one: each of the 27 equally likely draws
    exact = {}
    for draw in itertools.product(range(3), repeat=3):
        value = 100.0 * sum((1, 1, 0)[i] for i in draw) / 3
        exact[value] = exact.get(value, 0) + 1 / 27
    for value, probability in exact.items():
        assert np.mean(np.isclose(replicates, value)) == pytest.approx(probability, abs=0.01)
    assert percentile_interval(replicates, 0.95) == (0.0, 100.0)      # P(0 right) = 1/27 > 2.5%
    # macro-F1 from each resample's confusion matrix is classification_scores' figure of that matrix
    from seqlab.metrics import classification_scores

    K = 2
    for row in sums[:50]:
        matrix = row.reshape(K, K).astype(int).tolist()
        assert items.figures["macro_f1"](row[None])[0] == pytest.approx(
            classification_scores(matrix, ["neg", "pos"])["macro_f1"])


def test_bleu_from_summed_sentence_statistics_is_sacrebleu_corpus_bleu():
    import sacrebleu

    references = ["the cat sat on the mat .", "a dog barks loudly at night", "the small car has the cat .",
                  "it rains", "nothing matches here at all"]
    hypotheses = ["the cat sat on a mat .", "a dog barks at night", "the small car has a cat .", "it rains",
                  "completely different words"]
    items = seq2seq_items()
    items.collect(references[:2], hypotheses[:2])                    # in two chunks, as an evaluation gives them
    items.collect(references[2:], hypotheses[2:])
    full = items.full()
    assert full["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score, abs=1e-9)
    assert full["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score, abs=1e-9)
    from seqlab.metrics import rouge

    for kind, value in rouge(hypotheses, references).items():
        assert full[kind] == pytest.approx(value, abs=1e-9)
    # a resample's BLEU is corpus BLEU of the sentences drawn
    draws = np.random.default_rng(3).integers(0, 5, size=(4, 5))
    counts = np.stack([np.bincount(d, minlength=5) for d in draws])
    for draw, value in zip(draws, items.figures["bleu"](counts @ items.stats), strict=True):
        expected = sacrebleu.corpus_bleu([hypotheses[i] for i in draw], [[references[i] for i in draw]]).score
        assert math.isclose(value, expected, abs_tol=1e-9)

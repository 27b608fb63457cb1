"""The classifier from the command line and the Python API, end to end on the fixtures: every reader,
train -> evaluate -> classify, save/load, resume, and the bad inputs of the issue."""

import io
import json
from pathlib import Path

import pytest
import torch

import seqlab
from seqlab.cli.main import main

FIXTURES = Path(__file__).parent / "fixtures" / "classify"
SMALL = ["--embedding-size", "16", "--hidden-size", "16", "--dropout", "0", "--batch-size", "4",
         "--eval-batch-size", "5", "--lr", "0.02", "--schedule", "constant", "--no-progress", "--epochs", "30",
         "--eval-every", "1000"]
READERS = [
    ("tsv", "sentiment.tsv", []),
    ("csv", "sentiment.csv", []),
    ("jsonl", "sentiment.jsonl", ["--text-column", "review", "--label-column", "sentiment"]),
    ("labeled-lines", "sentiment.txt", []),
]


def train(tmp_path, name, fmt, file, *options) -> Path:
    run = tmp_path / name
    path = str(FIXTURES / file)
    small = SMALL[2:] if "features" in options else SMALL         # the features network has no embeddings
    assert main(["train", "classifier", "--train", path, "--dev", path, "--test", path, "--format", fmt,
                 "--output", str(run), *small, *options]) == 0
    return run


@pytest.mark.parametrize("fmt, file, options", READERS)
def test_classifier_cli_every_reader_trains_evaluates_and_classifies(tmp_path, capsys, fmt, file, options):
    run = train(tmp_path, fmt, fmt, file, "--arch", "lstm", "--bidirectional", *options)
    assert main(["evaluate", str(run), str(FIXTURES / file), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["accuracy"] == 100.0 and figures["documents"] == 24
    assert figures["confusion"] == [[12, 0], [0, 12]] and figures["labels"] == ["neg", "pos"]
    assert Path(figures["confusion_png"]).stat().st_size > 1000
    for name in ("confusion_valid.png", "confusion_test.png", "curves.png", "vocab.json", "labels.json"):
        assert (run / name).exists(), name
    text = tmp_path / "in.txt"
    text.write_text("a fine film , warm and funny\nboring , dull and far too long\n")
    assert main(["classify", str(run), str(text)]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[-3:]]
    assert rows[0] == ["label", "p(neg)", "p(pos)"]
    assert [row[0] for row in rows[1:]] == ["pos", "neg"]
    assert all(abs(float(row[1]) + float(row[2]) - 1) < 1e-3 for row in rows[1:])


def test_classifier_cli_a_headerless_tsv_is_refused_naming_the_options_that_then_train(tmp_path, capsys):
    """A text<TAB>label file without a header (the documented order) is told the options that read it, not
    --format labeled-lines; those options train, and the run reads its files so from then on."""
    rows = [line.split("\t") for line in (FIXTURES / "sentiment.tsv").read_text().splitlines()[1:]]
    plain = tmp_path / "plain.tsv"
    plain.write_text("".join(f"{text}\t{label}\n" for _, text, label, _ in rows))
    argv = ["train", "classifier", "--train", str(plain), "--dev", str(plain), *SMALL, "--max-steps", "30"]
    assert main([*argv, "--output", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err.strip()
    assert "labeled-lines" not in err and "Traceback" not in err
    assert err.splitlines()[-1].endswith("so the file has no header row: pass --header no --text-column 0 "
                                         "--label-column 1")
    options = err.split("pass ")[-1].split()
    run = tmp_path / "plain"
    assert main([*argv, *options, "--output", str(run)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(run), str(plain), "--json", "--confusion-png", "none"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 24          # the run's columns, from config.json
    flipped = tmp_path / "flipped.tsv"                                      # label<TAB>text: the columns given
    flipped.write_text("".join(f"{label}\t{text}\n" for _, text, label, _ in rows))
    assert main(["evaluate", str(run), str(flipped), "--json", "--confusion-png", "none", "--text-column", "1",
                 "--label-column", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 24


def test_classifier_cli_classify_reads_a_table_by_its_extension_with_the_runs_columns(tmp_path, capsys):
    """`seqlab classify RUN reviews.csv`: a CSV (TSV, JSON lines) is read as one, with the run's columns, so its
    header line and labels are never classified; --input-format text reads every line; --text-column and
    --header read a table with other columns."""
    run = train(tmp_path, "csv", "csv", "sentiment.csv", "--max-steps", "30")
    capsys.readouterr()
    assert main(["classify", str(run), str(FIXTURES / "sentiment.csv")]) == 0
    auto = capsys.readouterr().out.splitlines()
    assert len(auto) == 1 + 24                                              # the TSV header, then one per review
    assert main(["classify", str(run), str(FIXTURES / "sentiment.csv"), "--input-format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == auto
    assert main(["classify", str(run), str(FIXTURES / "sentiment.csv"), "--input-format", "text"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 25              # asked for: the header line too
    texts = tmp_path / "reviews.tsv"                                        # other columns: named
    texts.write_text("review\n" + "".join(f"{line.split(chr(9))[1]}\n" for line in
                                           (FIXTURES / "sentiment.tsv").read_text().splitlines()[1:]))
    assert main(["classify", str(run), str(texts)]) == 2
    assert "no column named 'text'; the header has 'review'" in capsys.readouterr().err
    assert main(["classify", str(run), str(texts), "--text-column", "review"]) == 0
    assert capsys.readouterr().out.splitlines() == auto
    assert main(["classify", str(run), str(texts), "--input-format", "text", "--text-column", "review"]) == 2
    assert "--text-column names a column of tsv, csv or jsonl input" in capsys.readouterr().err


@pytest.mark.slow
def test_classifier_cli_sst_trees_evaluate_text_report_and_json_classify_from_stdin(tmp_path, capsys, monkeypatch):
    sst = FIXTURES / "sst.txt"
    run = train(tmp_path, "sst", "sst-tree", "sst.txt", "--arch", "gru", "--pooling", "max", "--epochs", "60")
    assert main(["evaluate", str(run), str(sst)]) == 0
    out = capsys.readouterr().out
    assert "accuracy:   100.00%" in out and "macro-F1:   100.00" in out
    assert "confusion matrix (rows: gold, columns: predicted)" in out
    assert (run / "confusion_sst.txt.png").exists()
    binary = train(tmp_path, "sst2", "sst-tree", "sst.txt", "--sst-classes", "2", "--phrases", "--arch", "pooled",
                   "--output-layer", "sigmoid", "--epochs", "60")
    assert json.loads((binary / "labels.json").read_text())["labels"] == ["0", "1"]
    capsys.readouterr()
    assert main(["evaluate", str(binary), str(sst), "--json", "--confusion-png", "none"]) == 0
    figures = json.loads(capsys.readouterr().out)           # one sigmoid unit: class 1 where p > 0.5
    assert figures["accuracy"] == 100.0 and figures["confusion"] == [[4, 0], [0, 4]]
    monkeypatch.setattr("sys.stdin", io.StringIO("i loved every minute\ni hated every minute\n"))
    assert main(["classify", str(binary), "-", "--output-format", "json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["label"] for r in records] == ["1", "0"]
    assert set(records[0]["probabilities"]) == {"0", "1"}


def test_classifier_api_resume_continues_and_loaded_predictions_agree_alone_and_batched(tmp_path):
    """(Save -> load against the model in memory: tests/test_roundtrips.py.)"""
    run = train(tmp_path, "api", "tsv", "sentiment.tsv", "--arch", "transformer", "--pooling", "cls", "--heads", "2",
                "--max-steps", "20", "--eval-every", "10")
    config = seqlab.resolve_classifier_config(overrides={"output": str(run), "max_steps": 40, "progress": False},
                                              resume=True)
    seqlab.train_classifier(config, resume=True)
    log = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if not r.get("final")] == [10, 20, 30, 40]
    clf = seqlab.load(run)
    assert isinstance(clf, seqlab.TrainedClassifier)
    first = clf.classify(["a fine film", "a dull , lifeless mess"])
    single = clf.classify("a fine film")                       # alone: no padding, the same figures
    assert single.label == first[0].label and single.probability == pytest.approx(first[0].probability, abs=1e-6)
    assert first[0].probability == max(first[0].probabilities.values())
    texts = ["the acting is wonderful and the music is great fun", "dull", "a fine film", "not good"]
    batched = clf.classify(texts, batch_size=3)                 # sorted by length inside, returned in order
    for text, prediction in zip(texts, batched, strict=True):
        assert clf.classify(text).probabilities == pytest.approx(prediction.probabilities, abs=1e-6)


@pytest.mark.slow
def test_classifier_features_arch_builtin_lexicon_and_numeric_columns(tmp_path, capsys):
    run = train(tmp_path, "features", "tsv", "sentiment.tsv", "--arch", "features", "--lexicon-size", "20",
                "--lexicon-min-count", "2", "--epochs", "60")
    features = json.loads((run / "features.json").read_text())
    assert features["names"][-4:] == ["negation", "pronouns", "exclamation", "log_length"]
    assert features["lexicon"]["funny"] == "pos" and features["lexicon"]["dull"] == "neg"
    assert main(["evaluate", str(run), str(FIXTURES / "sentiment.tsv"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["accuracy"] >= 90.0
    # a numeric column that gives the label away: "exclaims" is 3 or more for every positive review
    columns = train(tmp_path, "columns", "tsv", "sentiment.tsv", "--arch", "features", "--features", "columns",
                    "--feature-columns", "exclaims", "--epochs", "60")
    assert main(["evaluate", str(columns), str(FIXTURES / "sentiment.tsv"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["accuracy"] == 100.0
    capsys.readouterr()
    assert main(["classify", str(columns), str(FIXTURES / "sentiment.tsv"), "--input-format", "tsv"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split("\t")[0] == "pos"
    text = tmp_path / "in.txt"
    text.write_text("a fine film\n")
    assert main(["classify", str(columns), str(text)]) == 2
    assert "reads 1 feature columns" in capsys.readouterr().err


def test_classifier_pooled_bigrams_class_weights_and_truncation_are_reported(tmp_path, capsys):
    run = train(tmp_path, "bigrams", "labeled-lines", "sentiment.txt", "--arch", "pooled", "--ngrams", "2",
                "--class-weights", "balanced", "--max-length", "4", "--dev-fraction", "0")
    err = capsys.readouterr().err
    assert "are longer than --max-length 4 tokens" in err and "truncated to their first 4" in err
    vocab = json.loads((run / "vocab.json").read_text())["tokens"]
    assert "fine film" in vocab
    text = tmp_path / "long.txt"
    text.write_text("a fine film , warm and funny\n")
    with pytest.warns(UserWarning, match="1 of 1 documents"):
        seqlab.load(run).classify_documents(seqlab.data.documents.read_texts(text))


def test_classifier_dev_fraction_holds_out_part_of_the_training_file(tmp_path, capsys):
    run = tmp_path / "held"
    path = str(FIXTURES / "sentiment.txt")
    assert main(["train", "classifier", "--train", path, "--dev-fraction", "0.25", "--format", "labeled-lines",
                 "--output", str(run), *SMALL, "--max-steps", "2"]) == 0
    assert "holding out 6 of the 24 training documents" in capsys.readouterr().err
    final = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()][-1]
    assert final["documents"] == 6


def test_classifier_bad_inputs(tmp_path, capsys):
    tsv = FIXTURES / "sentiment.tsv"
    run = train(tmp_path, "ok", "tsv", "sentiment.tsv", "--max-steps", "2")
    # a label never seen in training, at evaluation time
    unseen = tmp_path / "unseen.tsv"
    unseen.write_text("text\tlabel\ngood film\tpos\nso-so film\tneutral\n")
    assert main(["evaluate", str(run), str(unseen)]) == 2
    err = capsys.readouterr().err
    assert "unseen.tsv:3: label 'neutral' never occurs in the training data" in err and "'neg', 'pos'" in err
    # a class with no training examples: in the dev file, or declared with --labels
    assert main(["train", "classifier", "--train", str(tsv), "--dev", str(unseen), "--output", str(tmp_path / "a"),
                 *SMALL]) == 2
    assert "unseen.tsv:3: label 'neutral' never occurs in the training data" in capsys.readouterr().err
    assert main(["train", "classifier", "--train", str(tsv), "--dev", str(tsv), "--labels", "neg,neutral,pos",
                 "--output", str(tmp_path / "b"), *SMALL]) == 2
    assert "class 'neutral' has no training examples" in capsys.readouterr().err
    # a row with a missing label, an empty text, mixed delimiters
    for content, message in (("text\tlabel\ngood\tpos\nbad\t\n", "bad.tsv:3: the label ('label') is missing"),
                             ("text\tlabel\ngood\tpos\n\tneg\n", "bad.tsv:3: the text ('text') is missing or empty"),
                             ("text\tlabel\ngood\tpos\nbad,neg\n", "mixed delimiters")):
        bad = tmp_path / "bad.tsv"
        bad.write_text(content)
        assert main(["train", "classifier", "--train", str(bad), "--dev", str(tsv), "--output",
                     str(tmp_path / "c"), *SMALL]) == 2
        assert message in capsys.readouterr().err
    one_class = tmp_path / "one.tsv"
    one_class.write_text("text\tlabel\ngood\tpos\nfine\tpos\n")
    assert main(["train", "classifier", "--train", str(one_class), "--dev", str(one_class), "--output",
                 str(tmp_path / "d"), *SMALL]) == 2
    assert "needs at least two classes" in capsys.readouterr().err
    # an empty line to classify; an unknown option; a corrupted checkpoint
    text = tmp_path / "in.txt"
    text.write_text("good\n\nbad\n")
    assert main(["classify", str(run), str(text)]) == 2
    assert "in.txt:2: empty line" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "classifier", "--train", str(tsv), "--no-such-option", "1"])
    assert main(["train", "classifier", "--train", str(tsv), "--dev", str(tsv), "--arch", "lstm", "--ngrams", "2",
                 "--output", str(tmp_path / "e"), *SMALL]) == 2
    assert "--ngrams is for --arch pooled" in capsys.readouterr().err
    (run / "model.safetensors").write_bytes(b"not a safetensors file")
    assert main(["classify", str(run), str(tsv)]) == 2
    assert "model.safetensors" in capsys.readouterr().err
    assert torch.get_num_threads() >= 1


def test_classifier_pretrained_vectors_initialise_and_stay_frozen(tmp_path):
    from seqlab.data.vectors import write_vectors

    vectors = tmp_path / "vectors.txt"
    words = ["fine", "film", "dull", "unseenword"]
    table = torch.arange(len(words) * 6, dtype=torch.float32).reshape(len(words), 6) / 10
    write_vectors(vectors, words, table)
    run = train(tmp_path, "vectors", "labeled-lines", "sentiment.txt", "--arch", "pooled", "--vectors", str(vectors),
                "--freeze-embeddings", "--max-steps", "5")
    clf = seqlab.load(run)
    assert clf.model.config.embedding_size == 6
    index = clf.vocabulary.words.index
    assert "unseenword" in index                                  # the file's words join the vocabulary
    embedding = clf.model.embedding.weight
    for word, row in zip(words, table, strict=True):
        torch.testing.assert_close(embedding[index[word]], row)   # frozen: still the file's vectors

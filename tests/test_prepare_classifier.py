"""A classifier's prepared data (`seqlab prepare classifier`, `seqlab.families.classifier.prepare`): the items,
vocabulary and features are those of the in-memory path, whatever the workers and formats (Parquet too); the
batches equal the in-memory encode + collate, and each DDP rank reads only its rows; training from a folder equals
training from the files; the cache; every damaged input or disagreeing option is one line, exit 2."""

from __future__ import annotations

import dataclasses
import errno
import json
import shutil
import sys

import numpy as np
import pytest
import torch

from conftest import FIXTURES, one_line_error
from conftest import run_seqlab as run
from seqlab.cli.main import main
from seqlab.data import prepare_text
from seqlab.data.prepared_items import Items
from seqlab.data.words import tokenize
from seqlab.families.classifier.config import ClassifierDataConfig, ClassifierTrainConfig, read_split
from seqlab.families.classifier.model import ClassifierConfig
from seqlab.families.classifier.pipeline import build_vocabulary
from seqlab.families.classifier.prepare import (
    HOLDOUT_SEED,
    open_prepared,
    prepare,
    prepared_vocabulary,
    write_prepared,
)
from seqlab.families.classifier.task import ClassificationTask, PreparedDocuments
from seqlab.training.config import TrainConfig

CLASSIFY = FIXTURES / "classify"
TSV, JSONL, SST = str(CLASSIFY / "sentiment.tsv"), str(CLASSIFY / "sentiment.jsonl"), str(CLASSIFY / "sst.txt")
SMALL = ["--embedding-size", "8", "--hidden-size", "8", "--batch-size", "4", "--max-steps", "4", "--eval-every", "2",
         "--log-every", "1", "--no-progress", "--threads", "1"]
VOLATILE = ("elapsed_s", "tokens_per_s", "mfu", "gflop_per_s", "time")



def records(run_dir, name):
    return [{k: v for k, v in json.loads(line).items() if k not in VOLATILE}
            for line in (run_dir / name).read_text().splitlines()]


def in_memory(data: ClassifierDataConfig, arch: str, seed: int = HOLDOUT_SEED):
    """What the old in-memory path gave: the splits read whole, the vocabulary built, every document encoded."""
    import random

    config = ClassifierTrainConfig(data=data, model=ClassifierConfig(arch=arch), train=TrainConfig(seed=seed))
    train = read_split(data.train, data, "training file", training=True)
    if data.dev:
        dev = read_split(data.dev, data, "development file")
    else:
        order = list(range(len(train)))
        random.Random(seed).shuffle(order)
        held = set(order[:max(1, round(data.dev_fraction * len(train)))])
        dev = [d for i, d in enumerate(train) if i in held]
        train = [d for i, d in enumerate(train) if i not in held]
    tokens = [tokenize(d.text, data.tokenizer, data.lowercase) for d in train]
    vocabulary = build_vocabulary(train, tokens, config)
    vocabulary.keep_tokens = True
    return vocabulary, {"train": vocabulary.encode_all(train, token_lists=tokens), "dev": vocabulary.encode_all(dev)}


CASES = {
    "words": dict(train=TSV, dev=TSV, max_length=4, truncate="tail", min_freq=2),
    "ngrams": dict(train=JSONL, format="jsonl", text_column="review", label_column="sentiment", dev_fraction=0.25,
                   ngrams=3),
    "features": dict(train=TSV, dev=TSV, features="both", feature_columns="exclaims", lexicon_min_count=1,
                     lexicon_size=4),
    "phrases": dict(train=SST, format="sst-tree", phrases=True, dev_fraction=0.2, sst_classes=2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_prepared_items_are_the_in_memory_encoding(tmp_path, case):
    data = ClassifierDataConfig(**CASES[case], lm_features=[])
    arch = "features" if case == "features" else "pooled"
    folder = prepare(data, tmp_path / "d", progress=False)
    prepared = open_prepared(folder)
    vocabulary, encoded = in_memory(data, arch)
    got = prepared_vocabulary(prepared, data, arch)
    assert got.labels == vocabulary.labels
    if arch == "features":
        assert got.features.to_dict() == vocabulary.features.to_dict()
    else:
        assert got.words.tokens == vocabulary.words.tokens
    for name, items in encoded.items():
        documents = PreparedDocuments(Items(prepared.split(name)), arch != "features", arch == "features")
        assert len(documents) == len(items)
        for item, read in zip(items, documents.read(range(len(items))), strict=True):
            assert read.label == item.label
            if arch == "features":
                assert read.features == [float(np.float32(x)) for x in item.features]
            else:
                assert torch.equal(read.words, item.words)
    assert prepared.split("train").record["labels"] == {
        label: sum(1 for item in encoded["train"] if item.label == k) for k, label in enumerate(vocabulary.labels)}


def test_workers_gzip_and_parquet_give_the_same_items(tmp_path, monkeypatch):
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setattr(prepare_text, "SMALL", 0)                       # two worker processes, even for a fixture
    base = dict(dev=TSV, feature_columns="exclaims", features="both")
    one = prepare(ClassifierDataConfig(train=TSV, **base), tmp_path / "one", workers=1, progress=False)
    two = prepare(ClassifierDataConfig(train=TSV, **base), tmp_path / "two", workers=2, progress=False)
    zipped = tmp_path / "train.tsv.gz"
    zipped.write_bytes(gzip.compress(open(TSV, "rb").read()))
    gz = prepare(ClassifierDataConfig(train=str(zipped), **base), tmp_path / "gz", workers=1, progress=False)
    rows = [line.split("\t") for line in open(TSV, encoding="utf-8").read().splitlines()[1:]]
    table = pa.table({"text": [r[1] for r in rows], "label": [r[2] for r in rows],
                      "exclaims": [int(r[3]) for r in rows]})
    pq.write_table(table, tmp_path / "train.parquet")
    parquet = prepare(ClassifierDataConfig(train=str(tmp_path / "train.parquet"), **base), tmp_path / "pq",
                      workers=1, progress=False)
    reference = open_prepared(one)
    for folder in (two, gz, parquet):
        prepared = open_prepared(folder)
        for name in ("vocab.json", "labels.json", "features.json"):
            assert prepared.read_json(name) == reference.read_json(name), (folder, name)
        for split in ("train", "dev"):
            a, b = Items(reference.split(split)), Items(prepared.split(split))
            assert len(a) == len(b)
            for i in range(len(a)):
                assert np.array_equal(a.column("words", i), b.column("words", i))
                assert np.array_equal(a.column("label", i), b.column("label", i))
            assert np.array_equal(reference.split(split).stream("features").read(0, 10 ** 6),
                                  prepared.split(split).stream("features").read(0, 10 ** 6))


class Recorder:
    """Items that remember which documents were read."""

    def __init__(self, items):
        self.items, self.seen = items, []
        self.split, self.streams = items.split, items.streams

    def __len__(self):
        return len(self.items)

    def lengths(self, name):
        return self.items.lengths(name)

    def column(self, name, i):
        if name == "label":
            self.seen.append(i)
        return self.items.column(name, i)

    def texts(self, name, i):
        return self.items.texts(name, i)


def test_batches_equal_the_in_memory_collate_and_each_rank_reads_its_rows(tmp_path):
    """The epoch's batches (grouping by length, seeded by the epoch) collate the very tensors of the in-memory
    path; two ranks taking rows 0-1 and 2-3 of every batch read only those documents, and together the epoch once."""
    data = ClassifierDataConfig(train=TSV, dev=TSV)
    prepared = open_prepared(prepare(data, tmp_path / "d", progress=False))
    vocabulary, encoded = in_memory(data, "lstm")
    vocabulary.keep_tokens = False
    words = prepared_vocabulary(prepared, data, "lstm")
    reference = ClassificationTask(vocabulary, encoded["train"], encoded["dev"], None, 4, 8, seed=3)
    for epoch in (1, 2):
        seen = []
        for rank in (0, 1):
            recorder = Recorder(Items(prepared.split("train")))
            task = ClassificationTask(words, PreparedDocuments(recorder, True, False), encoded["dev"], None, 4, 8,
                                      seed=3)
            batches, expected = task.train_batches(epoch), reference.train_batches(epoch)
            assert len(batches) == len(expected)
            for batch, gold in zip(batches, expected, strict=True):
                if rank == 0:
                    whole, gold_whole = batch.rows(0, 4), gold.rows(0, 4)
                    assert torch.equal(whole.words, gold_whole.words)
                    assert torch.equal(whole.lengths, gold_whole.lengths)
                    assert torch.equal(whole.labels, gold_whole.labels)
                recorder.seen.clear()
                part, gold_part = batch.rows(2 * rank, 2 * rank + 2), gold.rows(2 * rank, 2 * rank + 2)
                width = int(part.lengths.max())
                assert torch.equal(part.words, gold_part.words[:, :width])
                assert torch.equal(part.labels, gold_part.labels)
                assert len(recorder.seen) == 2                                    # its two documents, no others
                seen += recorder.seen
        assert len(seen) == len(set(seen)) == 24 - 24 % 4


@pytest.mark.slow
def test_training_from_a_prepared_folder_equals_training_from_the_files(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    options = ["--arch", "lstm", "--class-weights", "balanced", "--max-length", "5", *SMALL, "--max-steps", "2",
               "--eval-every", "1"]
    assert main(["prepare", "classifier", "--train", TSV, "--dev", TSV, "--test", TSV, "--max-length", "5",
                 "--output", str(tmp_path / "d"), "--no-progress"]) == 0
    assert main(["train", "classifier", "--data", str(tmp_path / "d"), "--output", str(tmp_path / "a"),
                 *options]) == 0
    assert main(["train", "classifier", "--train", TSV, "--dev", TSV, "--test", TSV, "--output",
                 str(tmp_path / "b"), *options]) == 0
    err = capsys.readouterr().err
    assert err.count("preparing the data once") == 1 and "were truncated to their first 5" in err
    for name in ("train_log.jsonl", "metrics.jsonl"):
        assert records(tmp_path / "a", name) == records(tmp_path / "b", name)
    for name in ("vocab.json", "labels.json"):
        assert json.loads((tmp_path / "a" / name).read_text()) == json.loads((tmp_path / "b" / name).read_text())
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["data"]["prepared"] == str(tmp_path / "d") and config["data"]["max_length"] == 5
    # a second run of the same files, and a --resume, read the shared cache without reading the files again
    assert main(["train", "classifier", "--output", str(tmp_path / "b"), "--resume", "--max-steps", "3",
                 "--no-progress"]) == 0
    assert "from the cache" in capsys.readouterr().err
    assert len(list((tmp_path / "cache").glob("classifier-*"))) == 1
    assert __import__("seqlab").load(tmp_path / "a").classify(["a fine film"])[0].label in ("pos", "neg")


@pytest.mark.slow
def test_features_vectors_and_a_held_out_dev_train_from_the_folder(tmp_path, capsys, monkeypatch):
    """The features classifier, --vectors and --dev-fraction through a prepared folder give the file's run."""
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("fine 0.1 0.2 0.3\nfilm 0.3 0.1 0.0\nzebra 1 1 1\n")
    data = ["--train", TSV, "--dev-fraction", "0.25", "--vectors", vectors, "--features", "both",
            "--feature-columns", "exclaims"]
    assert main(["prepare", "classifier", *map(str, data), "--output", str(tmp_path / "d"), "--no-progress"]) == 0
    for arch, extra in (("features", ["--features", "both", "--feature-columns", "exclaims"]),
                        ("lstm", ["--vectors", str(vectors)])):
        small = [*SMALL[2 * (arch == "features"):], "--seed", str(HOLDOUT_SEED), "--arch", arch]
        assert main(["train", "classifier", "--data", str(tmp_path / "d"), "--output", str(tmp_path / f"a{arch}"),
                     *small]) == 0
        assert main(["train", "classifier", "--train", TSV, "--dev-fraction", "0.25", *extra, "--output",
                     str(tmp_path / f"b{arch}"), *small]) == 0
        for name in ("train_log.jsonl", "metrics.jsonl"):
            assert records(tmp_path / f"a{arch}", name) == records(tmp_path / f"b{arch}", name), (arch, name)
    assert (tmp_path / "afeatures" / "features.json").exists() and not (tmp_path / "afeatures" / "vocab.json").exists()
    err = capsys.readouterr().err
    assert "holding out 6 of the 24 training documents" in err


# ---------------------------------------------------------------------------------------------- bad input


def test_damaged_items_are_refused(tmp_path, capsys):
    folder = prepare(ClassifierDataConfig(train=TSV, dev=TSV), tmp_path / "d", progress=False)
    other = prepare(ClassifierDataConfig(train=TSV, dev=TSV), tmp_path / "other", progress=False)
    base = ["train", "classifier", "--data", folder, "--arch", "features", "--output", tmp_path / "run",
            "--max-steps", "1", "--no-progress"]
    for name in ("train.words.000.bin", "dev.features.000.bin", "train.label.000.bin"):
        shard = folder / name
        data = shard.read_bytes()
        shard.write_bytes(data[:-3])
        one_line_error(*run(base, capsys), "is truncated")
        shutil.copy(other / name, shard)
        one_line_error(*run(base, capsys), "belongs to another prepared dataset")
        shard.write_bytes(data)
    index = folder / "train.label.idx"
    data = index.read_bytes()
    index.write_bytes(data[:-8])
    one_line_error(*run(base, capsys), "train.label.idx does not hold the contents")
    index.write_bytes(data)
    one_line_error(*run(["train", "lm", "--data", folder, "--output", tmp_path / "r"], capsys),
                   "was prepared for classifier, not lm")


def test_options_that_disagree_with_the_prepared_ones_are_refused(tmp_path, capsys):
    folder = prepare(ClassifierDataConfig(train=TSV, dev=TSV), tmp_path / "d", progress=False)
    code, err = run(["train", "classifier", "--data", folder, "--tokenizer", "whitespace", "--output",
                     tmp_path / "r"], capsys)
    one_line_error(code, err, "--tokenizer whitespace: ")
    assert "prepared with --tokenizer words" in err
    one_line_error(*run(["train", "classifier", "--data", folder, "--train", JSONL, "--output", tmp_path / "r"],
                        capsys), "is not the file")
    one_line_error(*run(["train", "classifier", "--data", folder, "--arch", "transformer", "--output",
                         tmp_path / "r"], capsys), "prepare it with --max-length")
    one_line_error(*run(["train", "classifier", "--data", folder, "--no-lowercase", "--output", tmp_path / "r"],
                        capsys), "--no-lowercase: ")
    lonely = write_prepared(ClassifierDataConfig(train=TSV, dev=TSV), tmp_path / "words", ("words",), 1, progress=False)
    one_line_error(*run(["train", "classifier", "--data", lonely, "--arch", "features", "--output", tmp_path / "r"],
                        capsys), "holds no feature vectors (--arch features)")
    one_line_error(*run(["prepare", "classifier", "--train", TSV, "--dev", TSV, "--output", folder], capsys),
                   "--overwrite replaces it")


def test_bad_documents_are_named_by_file_and_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(prepare_text, "SMALL", 0)
    bad = tmp_path / "bad.tsv"
    bad.write_text("text\tlabel\na fine film\tpos\na dull one\tneg\nno label here\n", encoding="utf-8")
    one_line_error(*run(["prepare", "classifier", "--train", bad, "--dev", TSV, "--output", tmp_path / "d",
                         "--workers", "2", "--no-progress"], capsys), f"{bad}:4: expected 2 tab-separated fields")
    dev = tmp_path / "dev.tsv"
    dev.write_text("text\tlabel\na fine film\tpos\nan odd one\tmeh\n", encoding="utf-8")
    one_line_error(*run(["prepare", "classifier", "--train", TSV, "--dev", dev, "--output", tmp_path / "d",
                         "--workers", "2", "--no-progress"], capsys), f"development file {dev}:3: label 'meh'")
    one_line_error(*run(["train", "classifier", "--train", bad, "--dev", TSV, "--output", tmp_path / "r"], capsys),
                   f"{bad}:4")
    assert not (tmp_path / "d").exists()
    with pytest.raises(Exception, match="does not take --metric"):
        __import__("seqlab").prepare("classifier", tmp_path / "d", train=TSV, dev=TSV, metric="macro_f1")


def test_parquet_without_pyarrow_and_a_full_disk_are_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "train.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    one_line_error(*run(["prepare", "classifier", "--train", tmp_path / "train.parquet", "--dev", TSV, "--output",
                         tmp_path / "d"], capsys), "reading Parquet needs pyarrow: pip install 'seqlab[parquet]'")
    monkeypatch.undo()

    def full(self, ids):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr("seqlab.data.prepared.ShardWriter.write", full)
    one_line_error(*run(["prepare", "classifier", "--train", TSV, "--dev", TSV, "--output", tmp_path / "d",
                         "--no-progress"], capsys), "the disk is full")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.parquet"]


def test_the_holdout_seed_is_the_trainers_default():
    assert HOLDOUT_SEED == TrainConfig().seed
    assert dataclasses.fields(ClassifierDataConfig)[0].name == "prepared"

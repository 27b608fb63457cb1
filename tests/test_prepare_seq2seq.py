"""Prepared pairs (`seqlab prepare seq2seq`): the vocabularies and ids are those of the in-memory path whatever
the workers and input formats (aligned files, TSV, JSON lines, gzip, Parquet); the training batches equal those
the in-memory encode + collate gives (length limits, copy attention, the lm's joint sequences); training from a
folder equals training from the files; the cache; each DDP rank reads its own rows, the ranks together the epoch
once; every bad input is one line and exit 2."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import seqlab
from conftest import one_line_error
from conftest import run_seqlab as run
from seqlab.cli.main import main
from seqlab.data import prepare_text
from seqlab.data.prepared import Prepared
from seqlab.data.prepared_items import Items
from seqlab.decoding.search import SearchOptions
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq.cards import training_data
from seqlab.families.seq2seq.config import (
    Seq2SeqDataConfig,
    Seq2SeqTrainConfig,
    read_pairs,
    read_run_config,
    resolve_seq2seq_config,
)
from seqlab.families.seq2seq.model import Seq2SeqConfig
from seqlab.families.seq2seq.pipeline import build_vocabulary, train_seq2seq
from seqlab.families.seq2seq.prepare import vocabulary_of
from seqlab.families.seq2seq.prepared_pairs import PreparedPairs, read_pair
from seqlab.families.seq2seq.prepared_pairs import read_pairs as read_prepared_pairs
from seqlab.families.seq2seq.task import LengthReport, pair_batches

FIXTURES = Path(__file__).parent / "fixtures" / "seq2seq"
ALIGNED = {f"{split}_{side}": str(FIXTURES / f"{split}.{side}") for split in ("train", "dev", "test")
           for side in ("src", "tgt")}
JSONL = {**{split: str(FIXTURES / f"{split}.jsonl") for split in ("train", "dev", "test")}, "format": "jsonl",
         "source_field": "email", "target_field": "subject"}
TSV = {"train": str(FIXTURES / "train.tsv"), "dev": str(FIXTURES / "dev.tsv"), "format": "tsv"}



def flags(options: dict) -> list[str]:
    return [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]


def in_memory(data: Seq2SeqDataConfig, model: Seq2SeqConfig | None = None):
    """What the old in-memory path gave: each split's pairs read whole, the vocabularies built from them."""
    config = Seq2SeqTrainConfig(data=data, model=model or Seq2SeqConfig())
    pairs = {split: read_pairs(data, split)[0] for split in ("train", "dev", "test")}
    return build_vocabulary(pairs["train"], config), pairs


def parquet_copy(tmp_path: Path, split: str) -> str:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    rows = [json.loads(line) for line in (FIXTURES / f"{split}.jsonl").read_text().splitlines()]
    path = tmp_path / f"{split}.parquet"
    pq.write_table(pa.table({"email": [r["email"] for r in rows], "subject": [r["subject"] for r in rows]}), path)
    return str(path)


@pytest.mark.parametrize("options", [
    {**ALIGNED, "max_vocab": 20},
    {**TSV, "tokenizer": "bpe", "bpe_vocab_size": 300},
    {**JSONL, "tokenizer": "char", "shared_vocab": True},
    {**ALIGNED, "shared_vocab": True, "tokenizer": "bpe", "bpe_vocab_size": 300},
    {**ALIGNED, "source_tokenizer": "char", "min_freq": 3},
    {**ALIGNED, "tokenizer": "moses", "target_lang": "de", "min_freq": 2},
], ids=["word", "bpe", "char-shared", "bpe-shared", "char-word", "moses"])
def test_prepared_pairs_are_the_in_memory_pairs(tmp_path, options):
    folder = seqlab.prepare("seq2seq", tmp_path / "d", progress=False, **options)
    data = Seq2SeqDataConfig(**options)
    expected_vocabulary, pairs = in_memory(data)
    prepared = Prepared(folder, "seq2seq")
    vocabulary = vocabulary_of(prepared, False, 0, 0)
    assert vocabulary.source_vocab.tokens == expected_vocabulary.source_vocab.tokens
    assert vocabulary.target_vocab.tokens == expected_vocabulary.target_vocab.tokens
    assert (vocabulary.source_vocab is vocabulary.target_vocab) == bool(options.get("shared_vocab"))
    for copy in (False, True):
        vocabulary.copy = expected_vocabulary.copy = copy
        for split in ("train", "dev", "test"):
            if pairs[split] is None:
                assert prepared.split(split) is None
                continue
            expected = expected_vocabulary.encode(pairs[split])
            got = read_prepared_pairs(prepared.split(split), vocabulary, LengthReport())
            assert [(p.source, p.target, p.source_copy, p.target_copy, p.oovs) for p in got] == \
                [(p.source, p.target, p.source_copy, p.target_copy, p.oovs) for p in expected], (split, copy)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["family"] == "seq2seq" and manifest["options"]["tokenizer"] == data.tokenizer
    assert len(manifest["sources"]["train"]) == (2 if "train_src" in options else 1)


def test_workers_and_formats_give_the_same_items(tmp_path, monkeypatch):
    """Two worker processes over small chunks, and the pairs gzipped and as Parquet: the same items as one
    process reading the JSON lines."""
    reference = seqlab.prepare("seq2seq", tmp_path / "one", progress=False, **JSONL)
    monkeypatch.setattr(prepare_text, "SMALL", 0)
    monkeypatch.setattr("seqlab.families.seq2seq.prepare.CHUNK", 7)
    gz = tmp_path / "train.jsonl.gz"
    gz.write_bytes(gzip.compress((FIXTURES / "train.jsonl").read_bytes()))
    found = {"workers": seqlab.prepare("seq2seq", tmp_path / "two", workers=2, progress=False, **JSONL),
             "gzip": seqlab.prepare("seq2seq", tmp_path / "gz", progress=False, workers=1,
                                    **{**JSONL, "train": str(gz)}),
             "parquet": seqlab.prepare("seq2seq", tmp_path / "pq", progress=False, workers=1,
                                       **{**JSONL, **{s: parquet_copy(tmp_path, s) for s in ("train", "dev", "test")}})}
    expected = Items(Prepared(reference, "seq2seq").split("train"))
    for name, folder in found.items():
        assert (folder / "vocab.json").read_text() == (reference / "vocab.json").read_text(), name
        items = Items(Prepared(folder, "seq2seq").split("train"))
        assert len(items) == len(expected) == 300
        for column in ("source", "target", "source_unk", "target_unk"):
            assert np.array_equal(items.lengths(column), expected.lengths(column)), (name, column)
        for i in (0, 6, 7, 299):
            assert np.array_equal(items.column("source", i), expected.column("source", i)), name
            assert np.array_equal(items.column("target", i), expected.column("target", i)), name


def assert_same_batch(got, expected) -> None:
    for name in ("source", "source_lengths", "target_in", "target_out", "source_out", "source_copy",
                 "target_copy_out"):
        a, b = getattr(got, name), getattr(expected, name)
        assert (a is None) == (b is None), name
        assert a is None or torch.equal(a, b), name
    assert got.oovs == expected.oovs


@pytest.mark.parametrize("setting", ["skip-copy", "truncate", "lm"])
def test_the_batches_are_those_of_the_in_memory_encode_and_collate(tmp_path, setting):
    """Every batch of two epochs, and any rows of it, equal the in-memory path's (`pair_batches` of
    `PairVocabulary.encode`), with the length limits skipping or cutting pairs, copy attention's extended ids and
    the lm's source <sep> target."""
    options = {**ALIGNED, "max_vocab": 20} if setting != "lm" else {**JSONL, "tokenizer": "char", "shared_vocab": True}
    folder = seqlab.prepare("seq2seq", tmp_path / "d", progress=False, **options)
    data = Seq2SeqDataConfig(**options)
    vocabulary, pairs = in_memory(data)
    joint = setting == "lm"
    limits = {"skip-copy": (7, 0), "truncate": (7, 6), "lm": (17, 6)}[setting]
    long = "skip" if setting == "skip-copy" else "truncate"
    vocabulary.joint, (vocabulary.max_source, vocabulary.max_target) = joint, limits
    vocabulary.copy = setting == "skip-copy"
    expected_report = LengthReport()
    expected = vocabulary.encode(pairs["train"], "", "training file", long, expected_report)
    read = vocabulary_of(Prepared(folder, "seq2seq"), joint, *limits)
    read.copy = vocabulary.copy
    report = LengthReport()
    train = PreparedPairs(Prepared(folder, "seq2seq").split("train"), read, long, report)
    assert report == expected_report and (report.skipped or report.truncated_targets)
    assert len(train) == len(expected)
    assert train.mean_positions() == sum(len(p.target) + 1 + joint * len(p.source) for p in expected) / len(expected)
    for epoch in (0, 1):
        seed = 5 * 1_000_003 + epoch
        reference = pair_batches(expected, vocabulary, 8, seed)
        batches = train.batches(8, seed)
        assert len(batches) == len(reference)
        for k in range(len(reference)):
            assert_same_batch(batches[k].whole(), reference[k])
            assert_same_batch(batches[k].rows(2, 6), reference[k].rows(2, 6))


def test_each_rank_reads_its_rows_and_the_ranks_read_the_epoch_once(tmp_path, monkeypatch):
    folder = seqlab.prepare("seq2seq", tmp_path / "d", progress=False, **ALIGNED)
    prepared = Prepared(folder, "seq2seq")
    vocabulary = vocabulary_of(prepared, False, 0, 0)
    seen = {0: [], 1: []}
    rank = [0]
    original = Items.column

    def column(self, name, i):
        if name == "source":
            seen[rank[0]].append(i)
        return original(self, name, i)
    monkeypatch.setattr(Items, "column", column)
    train = PreparedPairs(prepared.split("train"), vocabulary, "skip", LengthReport())
    batches = train.batches(4, 11)
    for r in (0, 1):
        rank[0] = r
        for batch in batches:
            part = batch.rows(2 * r, 2 * r + 2)
            assert len(part.source) == 2
    groups = [[int(train.kept[i]) for i in group] for group in batches.groups]
    for r in (0, 1):
        assert seen[r] == [i for group in groups for i in group[2 * r:2 * r + 2]]
    assert sorted(seen[0] + seen[1]) == list(range(300))              # 300 pairs, 75 batches of 4: each once


def train(**options) -> dict:
    """A run through the family's pipeline (the command line's, without the model card: fast)."""
    resume = options.pop("resume", False)
    overrides = {"embedding_size": 16, "dropout": 0.0, "batch_size": 8, "eval_batch_size": 16, "max_steps": 6,
                 "eval_every": 3, "log_every": 1, "progress": False, "threads": 1, **options}
    if resume:
        overrides = {k: options[k] for k in ("output", "max_steps")}
    return train_seq2seq(resolve_seq2seq_config(overrides=overrides, resume=resume), resume=resume)


@pytest.mark.slow
def test_training_from_a_prepared_folder_equals_training_from_the_files(tmp_path, capsys):
    assert main(["prepare", "seq2seq", *flags(ALIGNED), "--max-vocab", "20", "--output", str(tmp_path / "d"),
                 "--no-progress"]) == 0
    copy = {"arch": "gru", "hidden_size": 16, "attention": "dot", "copy": True, "coverage": True,
            "max_source_length": 7, "max_steps": 4, "eval_every": 2}
    train(prepared=str(tmp_path / "d"), output=str(tmp_path / "a"), **copy)
    train(**ALIGNED, max_vocab=20, output=str(tmp_path / "b"), **copy)
    err = capsys.readouterr().err
    assert "preparing the data once" in err and err.count("skipped 79 of 300 pairs") == 2

    def records(run, name):
        return [{k: v for k, v in json.loads(line).items() if k not in ("elapsed_s", "tokens_per_s", "mfu",
                                                                          "gflop_per_s", "time")}
                for line in (run / name).read_text().splitlines()]
    for name in ("train_log.jsonl", "metrics.jsonl"):
        assert records(tmp_path / "a", name) == records(tmp_path / "b", name)
    for name in ("vocab.json", "tokenizer.json"):
        assert json.loads((tmp_path / "a" / name).read_text()) == json.loads((tmp_path / "b" / name).read_text())
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["data"]["prepared"] == str(tmp_path / "d") and config["data"]["max_vocab"] == 20
    sheet = training_data(read_run_config(tmp_path / "a"))         # the model card's data: the manifest's
    assert sheet["splits"]["train"]["units"] == 300 and "train (target)" in sheet["sources"]
    train(output=str(tmp_path / "b"), max_steps=5, resume=True)          # --resume reads RUN/prepared again
    assert "from the cache" in capsys.readouterr().err
    assert len(records(tmp_path / "b", "train_log.jsonl")) == 5


@pytest.mark.slow
def test_the_shared_cache_serves_a_second_run_and_init_from_gets_its_own(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    base = {**TSV, "arch": "gru", "hidden_size": 16, "attention": "dot", "max_steps": 1}
    for name in ("one", "two"):
        train(**base, output=str(tmp_path / name))
    err = capsys.readouterr().err
    assert err.count("preparing the data once") == 1 and err.count("from the cache") == 1
    assert len(list((tmp_path / "cache").glob("seq2seq-*"))) == 1
    assert not (tmp_path / "two" / "prepared").exists()
    # --init-from: the pairs as ids of that run's vocabulary (here the same), under a key of its own
    train(**base, init_from=str(tmp_path / "one"), coverage=True, output=str(tmp_path / "three"))
    assert len(list((tmp_path / "cache").glob("seq2seq-*"))) == 2
    # a Parquet file of pairs is evaluated as its TSV is (the model card evaluates the dev file as training read it)
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa
    rows = [line.split("\t") for line in (FIXTURES / "dev.tsv").read_text().splitlines()[1:]]
    pq.write_table(pa.table({"source": [r[0] for r in rows], "target": [r[1] for r in rows]}), tmp_path / "dev.parquet")
    model = seqlab.load(tmp_path / "one")
    figures = [model.evaluate_files(path, options=SearchOptions(beam=1), keep_hypotheses=False)
               for path in (TSV["dev"], tmp_path / "dev.parquet")]
    assert figures[0] == figures[1] and figures[0]["pairs"] == 40


# ---------------------------------------------------------------------------------------------- bad input


def test_damaged_items_are_refused(tmp_path, capsys):
    folder = seqlab.prepare("seq2seq", tmp_path / "d", progress=False, **ALIGNED)
    other = seqlab.prepare("seq2seq", tmp_path / "other", progress=False, **ALIGNED)
    base = ["train", "seq2seq", "--data", folder, "--output", tmp_path / "run", "--max-steps", "1"]
    shard = folder / "train.target.000.bin"
    data = shard.read_bytes()
    shard.write_bytes(data[:-10])
    one_line_error(*run(base, capsys), "is truncated")
    shutil.copy(other / "train.target.000.bin", shard)
    one_line_error(*run(base, capsys), "belongs to another prepared dataset")
    shard.write_bytes(data)
    index = folder / "train.source_unk.idx"
    index.write_bytes(index.read_bytes()[:-8])
    one_line_error(*run(base, capsys), "train.source_unk.idx does not hold the contents")
    (folder / "manifest.json").write_text("{not json")
    one_line_error(*run(base, capsys), "manifest.json is damaged")
    lm = tmp_path / "lm"
    assert main(["prepare", "lm", "--train", str(FIXTURES / "train.src"), "--valid", str(FIXTURES / "dev.src"),
                 "--output", str(lm), "--no-progress"]) == 0
    one_line_error(*run(["train", "seq2seq", "--data", lm, "--output", tmp_path / "run"], capsys),
                   "was prepared for lm, not seq2seq")


def test_an_option_that_disagrees_with_the_prepared_one_is_refused(tmp_path, capsys):
    folder = seqlab.prepare("seq2seq", tmp_path / "d", progress=False, **ALIGNED)
    base = ["train", "seq2seq", "--data", folder, "--output", tmp_path / "r"]
    code, err = run([*base, "--tokenizer", "char"], capsys)
    one_line_error(code, err, "--tokenizer char: ")
    assert "prepared with --tokenizer word" in err
    one_line_error(*run([*base, "--shared-vocab"], capsys), "prepared with --no-shared-vocab")
    one_line_error(*run([*base, "--train-src", FIXTURES / "dev.src", "--train-tgt", FIXTURES / "train.tgt"], capsys),
                   "--train-src")
    one_line_error(*run(["prepare", "seq2seq", *flags(ALIGNED), "--output", folder], capsys), "--overwrite replaces it")
    with pytest.raises(SeqlabError, match="does not take --long-pairs"):
        seqlab.prepare("seq2seq", tmp_path / "x", long_pairs="truncate", **ALIGNED)
    one_line_error(*run(["prepare", "seq2seq", *flags(ALIGNED), "--tokenizer", "bpe", "--max-vocab", "9", "--output",
                         tmp_path / "y"], capsys), "--max-vocab 9: a BPE vocabulary")
    # --init-from a run of another vocabulary than the folder's
    train(**ALIGNED, tokenizer="char", arch="gru", hidden_size=8, max_steps=1, output=str(tmp_path / "chars"))
    one_line_error(*run([*base, "--arch", "gru", "--hidden-size", "8", "--init-from", tmp_path / "chars"], capsys),
                   "has another vocabulary than the prepared data")


def test_bad_pairs_are_named_by_file_and_line(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "a b", "target": "c"}\n{"source": "a b"}\n')
    one_line_error(*run(["prepare", "seq2seq", "--train", bad, "--dev", FIXTURES / "dev.jsonl", "--source-field",
                         "email", "--target-field", "subject", "--output", tmp_path / "d"], capsys), "bad.jsonl:1")
    one_line_error(*run(["prepare", "seq2seq", "--train", bad, "--dev", bad, "--output", tmp_path / "d"], capsys),
                   f"{bad}:2: no field 'target'")
    short = tmp_path / "short.tgt"
    short.write_text("the dog .\n")
    code, err = run(["train", "seq2seq", *flags({**ALIGNED, "train_tgt": str(short)}), "--output", tmp_path / "r"],
                    capsys)
    one_line_error(code, err, "has 300 lines but")
    assert not (tmp_path / "r" / "prepared").exists()             # no half-written cache left behind
    one_line_error(*run(["prepare", "seq2seq", "--train-src", FIXTURES / "train.src", "--dev", FIXTURES / "dev.jsonl",
                         "--output", tmp_path / "d"], capsys), "--train-src and --train-tgt go together")
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa
    table = tmp_path / "t.parquet"
    pq.write_table(pa.table({"source": ["a b", "c"], "target": ["d", None]}), table)
    one_line_error(*run(["prepare", "seq2seq", "--train", table, "--dev", table, "--output", tmp_path / "d"], capsys),
                   f"{table}:2: the target ('target') is missing or empty")
    one_line_error(*run(["prepare", "seq2seq", "--train", table, "--dev", table, "--source-field", "email",
                         "--output", tmp_path / "d"], capsys), "has no column 'email'")
    monkeypatch.setitem(__import__("sys").modules, "pyarrow.parquet", None)
    one_line_error(*run(["prepare", "seq2seq", "--train", table, "--dev", table, "--output", tmp_path / "d"], capsys),
                   "reading Parquet needs pyarrow: pip install 'seqlab[parquet]'")
    assert not (tmp_path / "d").exists()


def test_a_pair_read_back_keeps_the_words_copy_attention_needs(tmp_path):
    """The words read as <unk> come back in order, so a copy model's extended ids are those of the source text."""
    (tmp_path / "s").write_text("a b c\nzz a yy\n")
    (tmp_path / "t").write_text("a b\nyy a zz\n")
    folder = seqlab.prepare("seq2seq", tmp_path / "d", progress=False, train_src=str(tmp_path / "s"),
                            train_tgt=str(tmp_path / "t"), dev_src=str(tmp_path / "s"), dev_tgt=str(tmp_path / "t"),
                            min_freq=2)
    prepared = Prepared(folder, "seq2seq")
    items = Items(prepared.split("train"))
    assert items.texts("source_unk", 1) == ["zz", "yy"] and items.texts("target_unk", 1) == ["yy", "zz"]
    vocabulary = vocabulary_of(prepared, False, 0, 0)
    vocabulary.copy = True
    pair = read_pair(items, 1, vocabulary, "truncate", LengthReport())
    V = len(vocabulary.target_vocab)
    assert pair.oovs == ["zz", "yy"] and pair.source_copy[0] == V and pair.target_copy[-1] == V

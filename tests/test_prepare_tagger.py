"""A tagger's prepared data (`seqlab prepare tagger`): the items are the in-memory encodings, the batches of the
prepared path those the in-memory encode + collate gives (with --unk-replace's draws), each DDP rank reads its
own rows, training from a folder equals training from the files, the cache, and every bad input is one line."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import one_line_error
from conftest import run_seqlab as run
from seqlab.cli.main import main
from seqlab.data.tags import convert
from seqlab.data.vocab import UNK
from seqlab.families.tagger.config import TaggerDataConfig
from seqlab.families.tagger.conll import Sentence, read_labelled
from seqlab.families.tagger.prepare import open_prepared, prepare
from seqlab.families.tagger.task import PreparedSentences, TaggerVocabulary, TaggingTask, length_batches
from seqlab.families.tagger.vocab import read_tagger_vocabulary

FIXTURES = Path(__file__).parent / "fixtures"
NER = FIXTURES / "ner.conll"
POS = FIXTURES / "tagging.conllu"
SMALL = ["--embedding-size", "8", "--hidden-size", "8", "--batch-size", "2", "--max-steps", "6", "--eval-every", "3",
         "--log-every", "1", "--no-progress", "--threads", "1"]



@pytest.fixture
def ner_files(tmp_path) -> dict[str, Path]:
    """The NER fixture as train, a dev file with a tag training never saw, and a gzipped test file."""
    dev = tmp_path / "dev.conll"
    dev.write_text(NER.read_text().replace("Berlin NNP O B-LOC", "Berlin NNP O B-DATE"))
    test = tmp_path / "test.conll.gz"
    with gzip.open(test, "wt") as handle:
        handle.write(NER.read_text())
    return {"train": NER, "dev": dev, "test": test}


def in_memory(files: dict[str, Path], target: str) -> tuple[TaggerVocabulary, dict[str, list[Sentence]]]:
    """What the old in-memory path did: read every file, convert the tags, build the vocabulary."""
    splits = {name: read_labelled(path, "conll", None, name) for name, path in files.items()}
    for sentences in splits.values():
        for sentence in sentences:
            sentence.labels = convert(sentence.labels, target)
    return TaggerVocabulary.build(splits["train"], char_features=True), splits


def test_prepare_tagger_items_are_the_in_memory_encodings(tmp_path, ner_files):
    folder = prepare(TaggerDataConfig(**{k: str(v) for k, v in ner_files.items()}, format="conll",
                                      train_scheme="bioes"), tmp_path / "data", progress=False)
    prepared = open_prepared(folder)
    vocabulary, file_scheme = read_tagger_vocabulary(folder)[0], read_tagger_vocabulary(folder)[2]
    expected, splits = in_memory(ner_files, "bioes")
    assert vocabulary.words.tokens == expected.words.tokens and vocabulary.labels == expected.labels
    assert vocabulary.chars.tokens == expected.chars.tokens and file_scheme == "iob2"
    assert prepared.options["train_scheme"] == "bioes" and prepared.manifest["scheme"] == "bioes"
    for name, sentences in splits.items():
        items = PreparedSentences(prepared.split(name), vocabulary)
        assert len(items) == len(sentences) and list(items.lengths) == [len(s) for s in sentences]
        for i, sentence in enumerate(sentences):
            got, want = items.item(i), vocabulary.encode(sentence)
            assert torch.equal(got.words, want.words) and torch.equal(got.tags, want.tags)
            assert torch.equal(got.chars, want.chars) and got.gold == want.gold
    unseen = PreparedSentences(prepared.split("dev"), vocabulary).item(2)
    assert unseen.gold[6] == "S-DATE" and unseen.tags[6] == -1                   # a tag training never saw
    assert np.array_equal(prepared.split("train").array("singletons"),
                          vocabulary.words.encode(sorted({"EU", "rejects", "German", "call", "Peter", "Blackburn",
                                                          "visited", "New", "York", "Acme", "Corp", "hired", "Anna",
                                                          "Smith", "in", "Berlin", "The", "weather", "was", "fine"})))


@pytest.mark.parametrize("unk_replace", [0.0, 0.5])
def test_prepare_tagger_batches_equal_the_in_memory_encode_and_collate(tmp_path, unk_replace):
    folder = prepare(TaggerDataConfig(train=str(POS), dev=str(POS)), tmp_path / "data", progress=False)
    vocabulary = read_tagger_vocabulary(folder)[0]
    sentences = read_labelled(POS, "conllu")
    prepared = PreparedSentences(open_prepared(folder).split("train"), vocabulary)
    task = TaggingTask(vocabulary, prepared, prepared, None, batch_size=3, eval_batch_size=4, seed=5,
                       unk_replace=unk_replace)
    memory = TaggingTask(vocabulary, sentences, sentences, None, batch_size=3, eval_batch_size=4, seed=5,
                         unk_replace=unk_replace)
    for epoch in (1, 2):
        # the reference: the old train_batches, every batch collated and its mask drawn, in batch order
        reference = length_batches([vocabulary.encode(s) for s in sentences], vocabulary, 3, 5 * 1_000_003 + epoch)
        if unk_replace:
            generator = torch.Generator().manual_seed(5 * 7919 + epoch)
            for batch in reference:
                chosen = torch.rand(batch.words.shape, generator=generator) < unk_replace
                batch.words = batch.words.masked_fill(chosen & torch.isin(batch.words, memory.singletons), UNK)
        batches = task.train_batches(epoch)
        assert len(batches) == len(reference) == len(memory.train_batches(epoch))
        for k in reversed(range(len(reference))):                   # any order: the draws are replayed
            want = reference[k]
            for got in (batches[k].rows(0, 3), memory.train_batches(epoch)[k].rows(0, 3)):
                for name in ("words", "lengths", "tags", "chars"):
                    assert torch.equal(getattr(got, name), getattr(want, name)), (epoch, k, name)
                assert got.gold == want.gold
            # two DDP ranks: each reads its rows only, padded as the whole batch, and together they are it
            first, second = batches[k].rows(0, 2), batches[k].rows(2, 3)
            assert torch.equal(torch.cat([first.words, second.words]), want.words)
            assert torch.equal(torch.cat([first.tags, second.tags]), want.tags)
            assert first.gold + second.gold == want.gold
        if unk_replace:
            assert any((b.words == UNK).any() for b in reference)
    evaluation = [(b.words, b.tags, b.gold) for b in task.valid_data]
    assert [(b.words.tolist(), b.gold) for b in memory.valid_data] == [(w.tolist(), g) for w, _, g in evaluation]


def test_prepare_tagger_reads_each_rank_its_rows(tmp_path, monkeypatch):
    """Rows read from the shards are exactly the asked ones: two ranks together read every sentence once."""
    folder = prepare(TaggerDataConfig(train=str(POS), dev=str(POS)), tmp_path / "data", progress=False)
    vocabulary = read_tagger_vocabulary(folder)[0]
    prepared = PreparedSentences(open_prepared(folder).split("train"), vocabulary)
    read: list[int] = []
    original = prepared.item
    monkeypatch.setattr(prepared, "item", lambda i: read.append(i) or original(i))
    task = TaggingTask(vocabulary, prepared, [Sentence(["a"], ["X"])], None, batch_size=2, eval_batch_size=2, seed=1)
    rank_reads = []
    for start, stop in ((0, 1), (1, 2)):
        read.clear()
        for batch in task.train_batches(0):
            batch.rows(start, stop)
        rank_reads.append(list(read))
    assert not set(rank_reads[0]) & set(rank_reads[1])
    assert sorted(rank_reads[0] + rank_reads[1]) == list(range(len(prepared) - len(prepared) % 2))


@pytest.mark.slow
def test_training_from_a_prepared_tagger_folder_equals_training_from_the_files(tmp_path, ner_files, capsys,
                                                                               monkeypatch):
    monkeypatch.delenv("SEQLAB_CACHE_DIR")                              # the files' run caches in RUN/prepared
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("3 4\neu 0.1 0.2 0.3 0.4\nberlin 1 0 1 0\nmadrid 0 1 0 1\n")
    data = ["--format", "conll", "--train-scheme", "bioes"]
    files = ["--train", ner_files["train"], "--dev", ner_files["dev"], "--test", ner_files["test"]]
    model = ["--crf", "--char-features", "cnn", "--unk-replace", "0.5", *SMALL]
    code, err = run(["prepare", "tagger", *files, *data, "--vectors", vectors, "--output", tmp_path / "data",
                     "--no-progress"], capsys)
    assert code == 0, err
    assert run(["train", "tagger", *files, *data, "--vectors", vectors, *model, "--output", tmp_path / "files"],
               capsys)[0] == 0
    code, err = run(["train", "tagger", "--data", tmp_path / "data", *model, "--output", tmp_path / "prepared"], capsys)
    assert code == 0, err
    records = [[json.loads(line) for line in (tmp_path / run_dir / "metrics.jsonl").read_text().splitlines()]
               for run_dir in ("files", "prepared")]
    for record in records:
        for line in record:
            line.pop("elapsed_s", None)
    assert records[0] == records[1] and records[0][-1]["split"] == "test"
    for name in ("vocab.json", "labels.json", "chars.json"):
        assert (tmp_path / "files" / name).read_text() == (tmp_path / "prepared" / name).read_text()
    config = json.loads((tmp_path / "prepared" / "config.json").read_text())
    assert config["data"]["prepared"] == str(tmp_path / "data") and config["data"]["train_scheme"] == "bioes"
    assert config["model"]["embedding_size"] == 4                      # the vectors' width, from the folder
    assert (tmp_path / "files" / "prepared" / "manifest.json").is_file()            # the files' run: its cache
    card = (tmp_path / "prepared" / "MODEL_CARD.md").read_text()        # its data, from the folder's manifest
    assert f"the prepared folder `{tmp_path / 'data'}`" in card
    assert hashlib.sha256(Path(ner_files["train"]).read_bytes()).hexdigest() in card
    code, err = run(["train", "tagger", "--output", tmp_path / "files", "--resume", "--max-steps", "8",
                     "--no-progress"], capsys)
    assert code == 0 and "(from the cache)" in err, err


@pytest.mark.slow
def test_prepare_tagger_cache_is_shared_and_keyed_by_the_files(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    train = tmp_path / "train.conllu"
    shutil.copy(POS, train)
    argv = ["train", "tagger", "--train", train, "--dev", POS, "--char-features", "none", *SMALL, "--max-steps", "2"]
    assert run([*argv, "--output", tmp_path / "a"], capsys)[0] == 0
    code, err = run([*argv, "--output", tmp_path / "b"], capsys)
    assert code == 0 and "(from the cache)" in err
    assert len(list((tmp_path / "cache").glob("tagger-*"))) == 1 and not (tmp_path / "a" / "prepared").exists()
    train.write_text(POS.read_text().replace("\tNOUN\t", "\tPROPN\t", 1))
    code, err = run([*argv, "--output", tmp_path / "c"], capsys)
    assert code == 0 and "(from the cache)" not in err
    assert len(list((tmp_path / "cache").glob("tagger-*"))) == 2


def test_prepare_tagger_bad_inputs_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.conllu"
    bad.write_text(POS.read_text().replace("\tNOUN\t", "\t", 1))
    code, err = run(["prepare", "tagger", "--train", bad, "--dev", POS, "--output", tmp_path / "x", "--no-progress"],
                    capsys)
    one_line_error(code, err, f"{bad}:")
    assert not (tmp_path / "x").exists()
    stray = tmp_path / "stray.conll"
    stray.write_text(NER.read_text().replace("B-MISC", "X-MISC"))
    code, err = run(["prepare", "tagger", "--train", NER, "--dev", stray, "--format", "conll", "--output",
                     tmp_path / "y", "--no-progress"], capsys)
    one_line_error(code, err, f"{stray}:5")
    train = tmp_path / "train.conllu"
    shutil.copy(POS, train)
    folder = tmp_path / "data"
    assert run(["prepare", "tagger", "--train", train, "--dev", POS, "--output", folder, "--no-progress"],
               capsys)[0] == 0
    train_run = ["train", "tagger", "--data", folder, *SMALL, "--output"]
    one_line_error(*run([*train_run, tmp_path / "r1", "--format", "conll"], capsys),
                   "--format conll: ")
    one_line_error(*run([*train_run, tmp_path / "r2", "--min-freq", "2"], capsys), "was prepared with --min-freq 1")
    one_line_error(*run([*train_run, tmp_path / "r3", "--train", NER], capsys), "is not the file")
    for damage, expect in ((lambda: (folder / "train.words.idx").write_bytes(b"\0" * 8), "edited or damaged"),
                           (lambda: (folder / "train.tokens.000.bin").write_bytes(
                               (folder / "train.tokens.000.bin").read_bytes()[:-3]), "truncated")):
        saved = tmp_path / "saved"
        shutil.rmtree(saved, ignore_errors=True)
        shutil.copytree(folder, saved)
        damage()
        one_line_error(*run([*train_run, tmp_path / "r4", "--overwrite"], capsys), expect)
        shutil.rmtree(folder)
        shutil.copytree(saved, folder)
        shutil.copy(POS, train)
    other = tmp_path / "foreign"
    assert run(["prepare", "tagger", "--train", POS, "--dev", POS, "--output", other, "--no-progress"], capsys)[0] == 0
    shutil.copy(other / "train.words.000.bin", folder / "train.words.000.bin")
    one_line_error(*run([*train_run, tmp_path / "r5"], capsys), "another prepared dataset")
    one_line_error(*run([*train_run[:3], tmp_path / "nothing", *SMALL, "--output", tmp_path / "r6"], capsys),
                   "no such folder")


@pytest.mark.slow                                                        # a spawned pool: ~5 s
def test_prepare_tagger_workers_write_the_same_items(tmp_path, ner_files, monkeypatch):
    import seqlab.families.tagger.prepare as tagger_prepare

    data = TaggerDataConfig(**{k: str(v) for k, v in ner_files.items()}, format="conll", train_scheme="bioes")
    one = prepare(data, tmp_path / "one", workers=1, progress=False)
    monkeypatch.setattr(tagger_prepare, "SMALL", 0)                   # a pool even for the small fixture
    monkeypatch.setattr(tagger_prepare, "CHUNK", 2)
    two = prepare(data, tmp_path / "two", workers=2, progress=False)
    assert json.loads((two / "manifest.json").read_text())["workers"] == 2
    for path in sorted(one.iterdir()):
        if path.name not in ("manifest.json", "verified.json") and not path.name.endswith(".bin"):
            assert path.read_bytes() == (two / path.name).read_bytes(), path.name
        elif path.name.endswith(".bin"):
            assert path.read_bytes()[64:] == (two / path.name).read_bytes()[64:], path.name   # past the header


def test_prepare_tagger_lm_features_equal_the_in_memory_ones(tmp_path):
    from seqlab.families.lm.features import load_lm_features
    from seqlab.families.tagger.task import SentenceList

    lm = tmp_path / "lm"
    assert main(["train", "lm", "--train", str(FIXTURES / "shakespeare_train.txt"), "--valid",
                 str(FIXTURES / "shakespeare_valid.txt"), "--tokenizer", "char", "--arch", "lstm", "--embedding-size",
                 "8", "--hidden-size", "8", "--seq-len", "16", "--batch-size", "4", "--max-steps", "1",
                 "--eval-every", "1", "--no-progress", "--threads", "1", "--output", str(lm)]) == 0
    sentences = read_labelled(POS, "conllu") * 12                   # more than one batch of 32 sentences
    path = tmp_path / "many.conllu"
    path.write_text("\n".join("\n".join(f"{i + 1}\t{t}\t_\t{tag}\t_\t_\t_\t_\t_\t_" for i, (t, tag) in
                                        enumerate(zip(s.tokens, s.labels, strict=True))) + "\n" for s in sentences))
    folder = prepare(TaggerDataConfig(train=str(path), dev=str(POS)), tmp_path / "data", progress=False)
    vocabulary = read_tagger_vocabulary(folder)[0]

    class Model:
        lm_features = load_lm_features([str(lm)])

    prepared = PreparedSentences(open_prepared(folder).split("train"), vocabulary, Model())
    memory = SentenceList(vocabulary, read_labelled(path, "conllu"), Model())
    assert len(prepared) == len(memory) == 60
    for i in range(len(memory)):
        assert torch.equal(prepared.item(i).lm, memory.item(i).lm)

"""Prepared data (`seqlab prepare`, `seqlab.data.prepared`): the ids are those of the in-memory path, whatever
the workers, shards and input formats; training from a folder equals training from the files; the cache; each
DDP rank reads its own rows, and the ranks together read the epoch once; every damaged input is one line."""

from __future__ import annotations

import errno
import gzip
import json
import shutil
from collections import Counter

import numpy as np
import pytest
import torch

from conftest import TEST, TRAIN, VALID, one_line_error
from conftest import run_seqlab as run
from seqlab.cli.main import main
from seqlab.data import prepare_text
from seqlab.data.batching import StreamBatches, TokenStreamBatches, TokenWindowBatches, WindowBatches
from seqlab.data.prepared import HEADER, Prepared
from seqlab.data.readers import encode_lines, read_lines
from seqlab.data.tokenizers import make_tokenizer
from seqlab.errors import SeqlabError
from seqlab.families.lm.prepare import tokenizer_and_vocab

SMALL_OPTIONS = ["--arch", "lstm", "--embedding-size", "16", "--hidden-size", "16", "--batch-size", "4",
                 "--seq-len", "8", "--max-steps", "6", "--eval-every", "3", "--log-every", "1", "--no-progress",
                 "--threads", "1"]



def prepare(tmp_path, name="data", *extra, capsys=None, tokenizer="word"):
    argv = ["prepare", "lm", "--train", TRAIN, "--valid", VALID, "--test", TEST, "--tokenizer", tokenizer,
            "--output", tmp_path / name, "--no-progress", *extra]
    assert main([str(a) for a in argv]) == 0
    return tmp_path / name


def in_memory_ids(path, kind: str, vocab_size: int = 200):
    """What the old in-memory path gave: read the lines, tokenize, build the vocabulary, encode."""
    lines = read_lines(path)
    tokenizer = make_tokenizer(kind, vocab_size)
    tokenizer.fit(read_lines(TRAIN))
    vocab = tokenizer.vocabulary(tokenizer.tokenize_lines(read_lines(TRAIN)))
    return encode_lines(tokenizer.tokenize_lines(lines), vocab).numpy(), vocab


@pytest.mark.parametrize("kind", ["word", "char", "bpe"])
def test_prepared_ids_are_the_in_memory_ids(tmp_path, kind):
    folder = prepare(tmp_path, "data", "--bpe-vocab-size", "300", tokenizer=kind)
    prepared = Prepared(folder, "lm")
    _, vocab = tokenizer_and_vocab(prepared)
    for split, path in (("train", TRAIN), ("valid", VALID), ("test", TEST)):
        expected, expected_vocab = in_memory_ids(path, kind, 300)
        assert vocab.tokens == expected_vocab.tokens
        got = prepared.split(split)
        assert np.array_equal(got.ids(), expected)
        assert got.ids().dtype == np.uint16
        lines = read_lines(path)
        offsets = np.asarray(got.lines)
        assert len(offsets) == len(lines) + 1 and offsets[-1] == len(expected)
        assert (expected[offsets[1:] - 1] == 3).all()                          # each line ends with </s>
        assert got.characters == sum(map(len, lines)) + len(lines)
        assert np.array_equal(got.counts(), np.bincount(expected, minlength=len(vocab)))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["format"] == "seqlab-prepared" and manifest["version"] == 1
    assert manifest["options"]["tokenizer"] == kind
    assert manifest["sources"]["train"][0]["sha256"] == __import__("hashlib").sha256(TRAIN.read_bytes()).hexdigest()


@pytest.mark.slow
def test_workers_shards_and_formats_give_the_same_ids(tmp_path, monkeypatch):
    """Two worker processes over small blocks, shards of 1,000 ids, and the same text gzipped, as JSON lines and
    as Parquet: the same ids as one process reading the plain file."""
    expected, _ = in_memory_ids(TRAIN, "word")
    monkeypatch.setattr(prepare_text, "SMALL", 0)
    monkeypatch.setattr(prepare_text, "BLOCK", 1000)
    lines = read_lines(TRAIN)
    gz = tmp_path / "train.txt.gz"
    gz.write_bytes(gzip.compress(TRAIN.read_bytes()))
    jsonl = tmp_path / "train.jsonl"
    jsonl.write_text("".join(json.dumps({"body": line}) + "\n" for line in lines))
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa
    parquet = tmp_path / "train.parquet"
    pq.write_table(pa.table({"body": lines}), parquet)
    for k, source in enumerate((TRAIN, gz, jsonl, parquet)):
        options = prepare_text.TextOptions("word")
        column = "body"
        folder = prepare_text.prepare_text("lm", {
            "train": prepare_text.Source(str(source), "training file", column=column),
            "valid": prepare_text.Source(str(VALID), "validation file")}, options, tmp_path / f"out{k}",
            workers=2, progress=False, shard_ids=1000)
        prepared = Prepared(folder, "lm")
        tokens = prepared.split("train").tokens
        assert len(tokens.files) == -(-len(expected) // 1000)
        assert np.array_equal(tokens.read(0, len(tokens)), expected), source
        assert np.array_equal(tokens.read(995, 2010), expected[995:2010])           # across shard boundaries
        assert np.array_equal(np.concatenate([m[:] for m in tokens.map()]), expected)


@pytest.mark.slow
def test_training_from_a_prepared_folder_equals_training_from_the_files(tmp_path, capsys):
    folder = prepare(tmp_path)
    assert main(["train", "lm", "--data", str(folder), "--output", str(tmp_path / "a"), *SMALL_OPTIONS]) == 0
    assert main(["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--test", str(TEST), "--tokenizer",
                 "word", "--output", str(tmp_path / "b"), *SMALL_OPTIONS]) == 0
    capsys.readouterr()                  # the files are prepared now, or were by an earlier test (the shared cache)

    def records(run, name):
        return [{k: v for k, v in json.loads(line).items() if k not in ("elapsed_s", "tokens_per_s", "mfu",
                                                                          "gflop_per_s", "time")}
                for line in (run / name).read_text().splitlines()]
    for name in ("train_log.jsonl", "metrics.jsonl"):
        assert records(tmp_path / "a", name) == records(tmp_path / "b", name)
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["data"]["prepared"] == str(folder) and config["data"]["tokenizer"] == "word"
    # a second run of the same files finds the cache in its run directory only when it is the same run:
    # --resume reads RUN/prepared again without tokenizing
    assert main(["train", "lm", "--output", str(tmp_path / "b"), "--resume", "--max-steps", "8",
                 "--no-progress"]) == 0
    assert "from the cache" in capsys.readouterr().err


@pytest.mark.slow
def test_the_shared_cache_serves_a_second_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("one", "two"):
        assert main(["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--tokenizer", "char",
                     "--output", str(tmp_path / name), *SMALL_OPTIONS, "--max-steps", "1"]) == 0
    err = capsys.readouterr().err
    assert err.count("preparing the data once") == 1 and err.count("from the cache") == 1
    assert len(list((tmp_path / "cache").glob("lm-*"))) == 1
    assert not (tmp_path / "two" / "prepared").exists()


class Recorder:
    """Ids 0..n-1 read by position, remembering every position read."""

    def __init__(self, n: int):
        self.ids, self.seen = np.arange(n, dtype=np.int64), []

    def __len__(self):
        return len(self.ids)

    def read(self, a, b):
        self.seen.extend(range(a, min(b, len(self.ids))))
        return self.ids[a:b]


@pytest.mark.parametrize("kind", ["stream", "windows"])
def test_each_rank_reads_its_rows_and_the_ranks_read_the_epoch_once(kind):
    """Two ranks take rows 0-1 and 2-3 of every global batch of 4: each reads only its rows, the union of
    their targets is the epoch's targets, each once, and the batches equal the in-memory ones."""
    n, B, T = 1003, 4, 7
    whole = torch.arange(n)
    reference = StreamBatches(whole, B, T) if kind == "stream" else WindowBatches(whole, B, T, 5, 2)
    targets = []
    for rank in (0, 1):
        tokens = Recorder(n)
        batches = TokenStreamBatches(tokens, B, T) if kind == "stream" else TokenWindowBatches(tokens, B, T, 5, 2)
        assert len(batches) == len(reference)
        for k in range(len(batches)):
            mine = batches[k].rows(2 * rank, 2 * rank + 2)
            assert torch.equal(mine.inputs, reference[k].inputs[2 * rank:2 * rank + 2])
            assert torch.equal(mine.targets, reference[k].targets[2 * rank:2 * rank + 2])
            targets.extend(mine.targets.flatten().tolist())
        other_rows = {int(x) for k in range(len(reference)) for x in
                      reference[k].targets[2 - 2 * rank:4 - 2 * rank].flatten()}
        assert not other_rows & (set(tokens.seen) - {int(x) for k in range(len(reference))
                                                     for x in reference[k].inputs[2 * rank:2 * rank + 2].flatten()})
    epoch = [int(x) for k in range(len(reference)) for x in reference[k].targets.flatten()]
    assert sorted(targets) == sorted(epoch) and len(set(targets)) == len(targets)


# ---------------------------------------------------------------------------------------------- bad input


def test_damaged_shards_and_manifests_are_refused(tmp_path, capsys):
    folder = prepare(tmp_path, "d")
    other = prepare(tmp_path, "other")
    base = ["train", "lm", "--data", folder, "--output", tmp_path / "run", "--max-steps", "1"]
    shard = folder / "train.000.bin"
    data = shard.read_bytes()
    shard.write_bytes(data[:-10])
    one_line_error(*run(base, capsys), "is truncated")
    shutil.copy(other / "train.000.bin", shard)
    one_line_error(*run(base, capsys), "belongs to another prepared dataset")
    shard.write_bytes(b"x" * len(data))
    one_line_error(*run(base, capsys), "is not a seqlab shard")
    shard.write_bytes(data)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "version": 99}))
    one_line_error(*run(base, capsys), "format version 99")
    (folder / "manifest.json").write_text("{not json")
    one_line_error(*run(base, capsys), "manifest.json is damaged")
    (folder / "manifest.json").unlink()
    one_line_error(*run(base, capsys), "is not a prepared dataset")
    one_line_error(*run(["train", "lm", "--data", tmp_path / "none", "--output", tmp_path / "run"], capsys),
                   "no such folder")
    assert HEADER.size == 64


def test_an_option_that_disagrees_with_the_prepared_one_is_refused(tmp_path, capsys):
    folder = prepare(tmp_path, "d")
    code, err = run(["train", "lm", "--data", folder, "--tokenizer", "char", "--output", tmp_path / "r"], capsys)
    one_line_error(code, err, "--tokenizer char: ")
    assert "prepared with --tokenizer word" in err
    code, err = run(["train", "lm", "--data", folder, "--train", VALID, "--output", tmp_path / "r"], capsys)
    one_line_error(code, err, "is not the file")
    code, err = run(["prepare", "lm", "--train", TRAIN, "--valid", VALID, "--output", folder], capsys)
    one_line_error(code, err, "--overwrite replaces it")


def test_an_interrupted_or_full_disk_prepare_leaves_no_folder(tmp_path, monkeypatch, capsys):
    def full(self, ids):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr("seqlab.data.prepared.ShardWriter.write", full)
    code, err = run(["prepare", "lm", "--train", TRAIN, "--valid", VALID, "--output", tmp_path / "d",
                     "--no-progress"], capsys)
    one_line_error(code, err, "the disk is full")
    assert list(tmp_path.iterdir()) == []                     # neither the folder nor its hidden partial one

    def killed(self, ids):
        raise KeyboardInterrupt
    monkeypatch.setattr("seqlab.data.prepared.ShardWriter.write", killed)
    code = main(["prepare", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--output", str(tmp_path / "d"),
                 "--no-progress"])
    assert code != 0 and list(tmp_path.iterdir()) == []          # interrupted (Ctrl-C): nothing left behind
    # a prepare killed outright (no chance to clean up) leaves only its hidden folder, which is not --data
    partial = tmp_path / ".d.partial-999999999"
    partial.mkdir()
    code, err = run(["train", "lm", "--data", tmp_path / "d", "--output", tmp_path / "r"], capsys)
    one_line_error(code, err, "no such folder")
    monkeypatch.undo()
    prepare(tmp_path, "d")                                    # and the next prepare removes it
    assert not partial.exists()


def test_bad_text_is_named_by_file_and_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(prepare_text, "SMALL", 0)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\nalso fine\nnot \xff utf-8\n")
    code, err = run(["prepare", "lm", "--train", bad, "--valid", VALID, "--output", tmp_path / "d", "--workers",
                     "2", "--no-progress"], capsys)
    one_line_error(code, err, f"{bad}:3")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    one_line_error(*run(["prepare", "lm", "--train", empty, "--valid", VALID, "--output", tmp_path / "d"],
                        capsys), "is empty")
    records = tmp_path / "r.jsonl"
    records.write_text('{"text": "a b"}\n{"body": "c"}\n')
    one_line_error(*run(["prepare", "lm", "--train", records, "--valid", VALID, "--output", tmp_path / "d"],
                        capsys), f"{records}:2: no text field 'text'")
    one_line_error(*run(["prepare", "lm", "--train", tmp_path / "missing.txt", "--valid", VALID, "--output",
                         tmp_path / "d"], capsys), "does not exist")
    code, err = run(["prepare", "lm", "--train", TRAIN, "--valid", VALID, "--output", tmp_path / "d", "--workers",
                     "-1"], capsys)
    assert code == 2 and "--workers" in err and "Traceback" not in err
    with pytest.raises(SeqlabError, match="does not take --canary"):
        __import__("seqlab").prepare("lm", tmp_path / "d", train=str(TRAIN), valid=str(VALID), canary="x {digits:2}")


def test_items_round_trip_through_shards_and_indexes(tmp_path):
    """Ragged columns and text columns of items (the tagger's, classifier's and seq2seq's prepared splits) read
    back item by item, with their lengths from the index alone; a truncated index is refused."""
    from seqlab.data.prepared import Writer
    from seqlab.data.prepared_items import Items, ItemWriter

    rng = np.random.default_rng(0)
    writer = Writer(tmp_path / "d")
    items = ItemWriter(writer, "train", {"words": "<u2", "tags": "<u1"}, texts=("tokens",))
    expected = []
    for _ in range(5000):
        n = int(rng.integers(0, 9))
        item = {"words": rng.integers(0, 60000, n), "tags": rng.integers(0, 200, n),
                "tokens": [f"w{k}é" for k in rng.integers(0, 99, n)]}
        items.add(**item)
        expected.append(item)
    folder = writer.commit({"family": "tagger", "splits": {"train": items.close()}})
    read = Items(Prepared(folder, "tagger").split("train"))
    assert len(read) == 5000
    for i in (0, 1, 4095, 4096, 4999):
        assert np.array_equal(read.column("words", i), expected[i]["words"])
        assert np.array_equal(read.column("tags", i), expected[i]["tags"])
        assert read.texts("tokens", i) == expected[i]["tokens"]
    assert read.lengths("words").tolist() == [len(item["words"]) for item in expected]
    index = folder / "train.tags.idx"
    index.write_bytes(index.read_bytes()[:-8])
    with pytest.raises(SeqlabError, match="train.tags.idx does not hold the contents .* edited or damaged"):
        Prepared(folder, "tagger")                        # its SHA-256 (seqlab.data.prepared_check)
    (folder / "verified.json").unlink()
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["hashes"]                                # a folder of an earlier seqlab lists no hashes
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SeqlabError, match="truncated"):
        Items(Prepared(folder, "tagger").split("train"))


@pytest.mark.parametrize("kind", ["word", "char"])
def test_the_whole_block_paths_give_the_line_by_line_ids(tmp_path, kind):
    """Word and character blocks are encoded whole (one split, line ends marked): the same ids, line lengths and
    characters as line by line, with CRLF endings, a final line without a newline (ending in a CR), a byte-order
    mark, blank lines, other whitespace and a text holding the line-end mark itself (read line by line)."""
    texts = ["\ufeffone two\r\nthree  four\n\n \t\nfive\x0bsix\u2028seven\r\r\nlast\r",
             "a \x01 b\nc\n", "no newline at all", "\n\nx\n\n"]
    for k, text in enumerate(texts):
        path = tmp_path / f"t{k}.txt"
        path.write_bytes(text.encode("utf-8"))
        lines = read_lines(path)
        tokenizer = make_tokenizer(kind)
        vocab = tokenizer.vocabulary(tokenizer.tokenize_lines(lines + ["one", "x"]))
        expected = encode_lines(tokenizer.tokenize_lines(lines), vocab).numpy()
        blocks = list(prepare_text.Source(str(path), "file").blocks())     # whole lines, and the last one
        prepare_text._init_worker(tokenizer.to_dict(), vocab.tokens, "<u2")
        encoded = [prepare_text._encode_block(block) for block in blocks]
        assert np.array_equal(np.concatenate([e[0] for e in encoded]), expected), text
        assert np.concatenate([e[1] for e in encoded]).tolist() == [len(tokenizer.tokenize(line)) + 1
                                                                    for line in lines]
        characters = sum(e[2] for e in encoded)
        assert characters == sum(map(len, lines)) + len(lines)
        counted = [prepare_text._count_block(block, kind) for block in blocks]
        assert sum((c[0] for c in counted), Counter()) == Counter(t for line in lines for t in tokenizer.tokenize(line))
        assert (sum(c[1] for c in counted), sum(c[2] for c in counted)) == (len(lines), characters)

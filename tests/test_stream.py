"""Reading in bounded memory, unit by unit: the line reader against whole-file reading (lines, cuts,
pieces, bad bytes, restarts), chunking, the input limit, BLEU / chrF / ROUGE from summed statistics,
and the language-model batches read from a file against those cut from the whole stream."""

import gzip
import random
import warnings
from collections import Counter

import pytest
import torch

from conftest import TEST, TRAIN
from seqlab.data import stream
from seqlab.data.batching import StreamBatches, sliding_windows
from seqlab.data.limits import InputLimit
from seqlab.data.readers import encode_lines, read_lines
from seqlab.data.stream import LineReader, chunked
from seqlab.data.tokenizers import CharTokenizer, WordTokenizer
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError
from seqlab.families.lm import stream as lm_stream
from seqlab.fileio import atomic_text_writer
from seqlab.metrics import CorpusScores, bleu, chrf, rouge

ALPHABET = ["a", "b", " ", "\r", "é", "€", "𝄞", "\n", "\n", "\t"]


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Blocks of 7 bytes: every line, character and cut falls across block boundaries somewhere."""
    monkeypatch.setattr(stream, "BLOCK", 7)


def outcome(read):
    try:
        return read()
    except SeqlabError as error:
        return str(error)


def test_stream_reader_gives_the_lines_of_whole_file_reading_cut_kept_or_in_pieces(tmp_path, tiny_blocks):
    rng = random.Random(0)
    for trial in range(300):
        text = "\ufeff" * (trial % 4 == 0) + "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 50)))
        path = tmp_path / ("in.txt.gz" if trial % 5 == 0 else "in.txt")
        path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
        expected = outcome(lambda path=path: read_lines(path))
        for m in (0, 1, 3, 100):
            for keep in ("head", "tail"):
                got = outcome(lambda m=m, keep=keep, path=path: list(LineReader(path, "file", m, keep)))
                if isinstance(expected, str):
                    assert got == expected                                      # "file ... is empty"
                    continue
                assert [line.text for line in got] == [e if not m or len(e) <= m else e[:m] if keep == "head"
                                                       else e[-m:] for e in expected]
                assert [line.cut for line in got] == [bool(m) and len(e) > m for e in expected]
                assert [line.length for line in got if line.cut] == [len(e) for e in expected if m and len(e) > m]
                assert [line.number for line in got] == list(range(1, len(expected) + 1))
            if m and not isinstance(expected, str):
                pieces = list(LineReader(path, "file", m, pieces=True))
                assert all(0 < len(p.text) <= m for p in pieces if p.more)
                lines: dict[int, str] = {}
                for p in pieces:
                    lines[p.number] = lines.get(p.number, "") + p.text
                assert [lines[n] for n in sorted(lines)] == expected


def test_stream_reader_refuses_bad_bytes_with_their_line_as_read_text_does(tmp_path, tiny_blocks):
    rng = random.Random(1)
    for _ in range(300):
        data = bytes(rng.choice(b"a\n\xc3\xa9\xff \xe2\x82\xac") for _ in range(rng.randint(1, 40)))
        path = tmp_path / "bad.txt"
        path.write_bytes(data)
        expected = outcome(lambda path=path: read_lines(path))
        for m in (0, 2, 100):                                   # m = 2: lines over 8 bytes are read block by block
            got = outcome(lambda m=m, path=path: [line.text for line in LineReader(path, "file", m)])
            assert got == expected if isinstance(expected, str) or not m else isinstance(got, list)
    nul = tmp_path / "nul.txt.gz"
    nul.write_bytes(gzip.compress(b"one\ntwo\nth\x00ree\n"))
    with pytest.raises(SeqlabError, match=r"nul.txt.gz:3 holds a NUL byte"):
        list(LineReader(nul, "file"))
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress("".join(f"{i}\n" for i in range(10_000)).encode())[:500])
    with pytest.raises(SeqlabError, match="is not a readable gzip file"):
        list(LineReader(broken, "file"))


def test_stream_reader_names_missing_folder_and_empty_inputs_and_standard_input(tmp_path, monkeypatch):
    with pytest.raises(SeqlabError, match="input file .*missing.txt does not exist"):
        LineReader(tmp_path / "missing.txt")
    with pytest.raises(SeqlabError, match="is a directory, expected a text file"):
        LineReader(tmp_path)
    (tmp_path / "blank.txt").write_text(" \n\n")
    with pytest.raises(SeqlabError, match="input file .*blank.txt is empty"):
        list(LineReader(tmp_path / "blank.txt"))
    with pytest.raises(SeqlabError, match="does not exist"):
        LineReader("-", stdin=False)                           # evaluation files are files
    monkeypatch.setattr("sys.stdin", __import__("io").TextIOWrapper(__import__("io").BytesIO(b"ok\nnot \xe9 ok\n")))
    reader = LineReader("-")
    with pytest.raises(SeqlabError, match=r"^standard input:2 is not valid UTF-8 \(byte 7: b'\\xe9'\)"):
        list(reader)


def test_stream_reader_starts_again_at_a_recorded_line(tmp_path):
    path = tmp_path / "in.txt.gz"
    lines = [f"line {i} " + "é" * (i % 7) for i in range(1, 300)]
    path.write_bytes(gzip.compress(("\ufeff" + "\n".join(lines) + "\n").encode()))
    read = list(LineReader(path, "file"))
    for line in read[::37]:
        again = list(LineReader(path, "file", start=(line.offset, line.number)))
        assert [(x.number, x.text) for x in again] == [(x.number, x.text) for x in read[line.number - 1:]]


def test_stream_chunked_grows_from_one_batch_and_ends_early_when_the_input_pauses():
    assert [len(c) for c in chunked(range(20), 8, first=2)] == [2, 4, 8, 6]
    assert [len(c) for c in chunked(range(20), 8)] == [8, 8, 4]
    paused = iter([True, False, True, True, True])         # the input pauses after the second item
    assert [len(c) for c in chunked(range(5), 10, ready=lambda wait: next(paused))] == [2, 3]


def test_stream_chunked_ends_a_chunk_of_long_items_at_its_character_budget(monkeypatch):
    monkeypatch.setattr(stream, "CHUNK_CHARS", 10)
    items = ["a" * 4, "b" * 4, "c" * 4, "d", "e" * 20, "f"]
    assert [len(c) for c in chunked(items, 100, chars=len)] == [3, 2, 1]


def test_limits_input_limit_truncates_names_the_first_lines_counts_and_rejects():
    limit = InputLimit(3, noun="sentence")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = [limit.apply(list("abcde"), f"input file x:{n}", n) for n in range(1, 9)]
        assert limit.apply(list("ab"), "input file x:9", 9) == ["a", "b"]
    assert kept[0] == ["a", "b", "c"] and limit.cut == 8 and limit.inputs == 9 and limit.longest == 5
    assert len(caught) == 5 and "input file x:1: the sentence is 5 tokens; read its first 3" in str(caught[0].message)
    assert limit.report("input file x") == ("input file x: truncated 8 of 9 sentences to their first 3 tokens "
                                            "(--max-input-length; lines 1, 2, 3, 4, 5, ...)")
    tail = InputLimit(2, keep="tail")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert tail.apply(list("abc"), "x:1", 1) == ["b", "c"]
        assert tail.apply(list("a"), "x:2", 2, line_cut=True) == ["a"] and tail.cut == 2
    with pytest.raises(SeqlabError, match="x:4: the source is 4 tokens, longer than the model's 3"):
        InputLimit(3, "reject", noun="source").apply(list("abcd"), "x:4", 4)
    assert InputLimit(1).chars == 65536 and InputLimit(10_000).chars == 640_000
    with pytest.raises(SeqlabError, match="reads at most 512 tokens"):
        InputLimit.resolve(600, 512, 512, "this transformer tagger")


def test_metrics_corpus_scores_from_summed_statistics_equal_the_whole_corpus_figures():
    rng = random.Random(2)
    words = "a man is sleeping on the bench . two dogs run , and".split()
    hypotheses = [" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(120)]
    references = [" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(120)]
    for tokenize in ("13a", "none"):
        scores = CorpusScores(tokenize)
        for k in range(0, 120, 7):
            scores.add(hypotheses[k:k + 7], references[k:k + 7])
        figures = scores.scores()
        assert figures["bleu"] == bleu(hypotheses, references, tokenize)
        assert figures["chrf"] == chrf(hypotheses, references)
        assert figures == pytest.approx({**figures, **rouge(hypotheses, references)}, rel=1e-12)


@pytest.mark.parametrize("tokenizer", [WordTokenizer(), CharTokenizer()])
def test_lm_stream_batches_read_from_the_file_equal_those_of_the_whole_stream(tmp_path, monkeypatch, tokenizer):
    monkeypatch.setattr(lm_stream, "CHECKPOINT", 5)          # many line starts to seek from
    vocab = Vocab.build(Counter(t for line in read_lines(TRAIN) for t in tokenizer.tokenize(line)))
    long = tmp_path / "long.txt"                              # a line over LINE_CHARS, read in pieces
    long.write_text(" ".join(read_lines(TEST)[:40]) + "\n" + TEST.read_text())
    monkeypatch.setattr(lm_stream, "LINE_CHARS", 25)          # longer than any word of the text
    for path in (TEST, long):
        ids = encode_lines(tokenizer.tokenize_lines(read_lines(path)), vocab)
        found = lm_stream.survey(path, "file", tokenizer, vocab)
        assert found.tokens == len(ids) and found.unknown == int((ids == 1).sum())
        for B, T in ((1, 7), (3, 5), (10, 35), (2000, 4)):
            whole = list(StreamBatches(ids, B, T, exact=True))
            read = list(lm_stream.stream_batches(found, tokenizer, vocab, B, T))
            assert len(read) == len(whole) == lm_stream.stream_batch_count(found, B, T)
            assert all(torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
                       for a, b in zip(read, whole, strict=True))
        for B, context, stride in ((4, 16, 8), (3, 10, 10), (5, 12, 1)):
            whole = sliding_windows(ids, B, context, stride)
            read = list(lm_stream.window_batches(found, tokenizer, vocab, B, context, stride))
            assert len(read) == len(whole) == lm_stream.window_batch_count(found, B, context, stride)
            assert all(torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
                       for a, b in zip(read, whole, strict=True))


def test_fileio_atomic_text_writer_puts_the_file_in_place_only_when_the_writing_ends_well(tmp_path):
    path = tmp_path / "out" / "hypotheses.txt"
    with atomic_text_writer(path) as out:
        out.write("one\n")
        assert not path.exists()                              # written aside until the block ends
        out.write("two\n")
    assert path.read_text() == "one\ntwo\n"
    with pytest.raises(SeqlabError, match="bad input"), atomic_text_writer(path) as out:
        out.write("three\n")
        raise SeqlabError("bad input")
    assert path.read_text() == "one\ntwo\n" and [p.name for p in path.parent.iterdir()] == ["hypotheses.txt"]

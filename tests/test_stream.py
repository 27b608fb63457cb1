"""Reading in bounded memory, unit by unit: the line reader against whole-file reading (lines, cuts,
pieces, bad bytes, restarts), and chunking."""

import gzip
import random

import pytest

from seqlab.data import stream
from seqlab.data.readers import read_lines
from seqlab.data.stream import LineReader, chunked
from seqlab.errors import SeqlabError

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

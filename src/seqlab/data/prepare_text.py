"""Texts of lines -> a prepared folder (`seqlab.data.prepared`), in streaming passes with bounded memory, the
work split over processes.

    pass 1 (fit)     the training text, block by block: word and character counts in the workers, added up
                     here (memory: the vocabulary's types), or a BPE model learned from the lines as they are
                     read (Hugging Face `tokenizers` holds its word counts, not the text)
    vocabulary       as `seqlab.data.tokenizers.Tokenizer.vocabulary` builds it from the same counts
    pass 2 (encode)  every split, block by block: each line's ids and `</s>` in the workers, written in order
                     into the split's shards here, with the index of line starts and the id counts

A block is BLOCK bytes of whole lines with the number of its first line, so a worker names the file and line
of a byte that is not UTF-8 (or a NUL) as `seqlab.fileio.read_text` does. At most 2 x workers blocks are in
flight, so memory stays flat whatever the corpus size. The ids are the ones `seqlab.data.readers.encode_lines`
gives the whole text: a run trained from a prepared folder sees the very batches of the old in-memory path.

Sources: text files (.gz too), JSON lines (.jsonl, a text field: `column`) and Parquet (.parquet, a text
column; needs pyarrow), or lines already in memory (the bundled corpus). A record's text with line breaks is
that many lines.
"""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np

from seqlab.data.prepared import Writer, id_dtype, source_record
from seqlab.data.tokenizers import Tokenizer, make_tokenizer, tokenizer_from_dict
from seqlab.data.vocab import EOS, UNK, Vocab
from seqlab.errors import SeqlabError, os_error_reason, where
from seqlab.fileio import binary_error, check_input_file, not_utf8_error

BLOCK = 8 << 20                 # bytes of a file read at a time
SMALL = 4 << 20                 # inputs of fewer bytes than this are prepared in this process
FORMATS = ("text", "jsonl", "parquet")
SENTINEL = "\x01"             # marks line ends in the fast word path (a block that holds one goes line by line)


@dataclass
class Source:
    """A split's text: a file (text, JSON lines or Parquet, named by its extension unless `fmt` says) or
    lines in memory (`lines`, with `name` for messages)."""

    path: str = ""
    what: str = "file"
    fmt: str = ""
    column: str = "text"
    lines: list[str] | None = None
    name: str = ""

    def __post_init__(self):
        if self.lines is None:
            check_input_file(Path(self.path), self.what)
            if not self.fmt:
                name = self.path.removesuffix(".gz")
                self.fmt = "jsonl" if name.endswith(".jsonl") else "parquet" if name.endswith(".parquet") else "text"
            if self.fmt not in FORMATS:
                raise SeqlabError(f"--format {self.fmt!r}: a text to prepare is one of {', '.join(FORMATS)}")

    @property
    def size(self) -> int:
        if self.lines is not None:
            return sum(len(line) + 1 for line in self.lines)
        return Path(self.path).stat().st_size

    def blocks(self) -> Iterator[tuple]:
        """(payload, the number of its first line, fmt, column, path, what): raw bytes of whole lines (text,
        JSON lines), a list of texts (Parquet rows, lines in memory)."""
        if self.lines is not None:
            yield self.lines, 1, "lines", self.column, self.name, self.what
            return
        if self.fmt == "parquet":
            yield from self._parquet_blocks()
            return
        path = Path(self.path)
        try:
            handle = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")    # noqa: SIM115
        except OSError as error:
            raise SeqlabError(f"cannot read {self.what} {path}: {os_error_reason(error)}") from None
        carry, line = b"", 1
        with handle:
            while True:
                try:
                    data = handle.read(BLOCK)
                except (EOFError, zlib.error, gzip.BadGzipFile) as error:
                    raise SeqlabError(f"{self.what} {path} is not a readable gzip file ({error})") from None
                except OSError as error:
                    raise SeqlabError(f"cannot read {self.what} {path}: {os_error_reason(error)}") from None
                if not data:
                    break
                data = carry + data
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    carry = data
                    continue
                block, carry = data[:cut], data[cut:]
                yield block, line, self.fmt, self.column, str(path), self.what
                line += block.count(b"\n")
        if carry:
            yield carry, line, self.fmt, self.column, str(path), self.what

    def _parquet_blocks(self) -> Iterator[tuple]:
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise SeqlabError("reading Parquet needs pyarrow: pip install 'seqlab[parquet]'") from None
        try:
            table = pq.ParquetFile(self.path)
            if self.column not in table.schema_arrow.names:
                raise SeqlabError(f"{self.what} {self.path} has no column {self.column!r} (it has "
                                  f"{', '.join(table.schema_arrow.names)}); name the text with --text-column")
            row = 1
            for batch in table.iter_batches(batch_size=65536, columns=[self.column]):
                texts = batch.column(0).to_pylist()
                yield texts, row, "rows", self.column, self.path, self.what
                row += len(texts)
        except SeqlabError:
            raise
        except Exception as error:                # pyarrow's own errors: not a Parquet file, damaged
            raise SeqlabError(f"{self.what} {self.path} is not a readable Parquet file ({str(error)[:120]})") from None

    def record(self) -> dict:
        return {"name": self.name, "what": self.what} if self.lines is not None else \
            {**source_record(self.path), "format": self.fmt, **({"column": self.column} if self.fmt != "text" else {})}


def block_text(payload, first: int, fmt: str, column: str, path: str, what: str) -> str | None:
    """A block of a text file as one string whose lines end with "\\n" (a final "\\r" of each dropped, as
    `_split` drops it), for the fast paths of word and character tokens; None for other blocks, or a text that
    holds SENTINEL (the fast word path marks line ends with it)."""
    if fmt != "text":
        return None
    text = _decode(payload, first, path, what)
    if "\r" in text:
        text = text.replace("\r\n", "\n").removesuffix("\r")        # as _split drops a line's final "\r"
    if text and not text.endswith("\n"):
        text += "\n"
    return None if SENTINEL in text else text


def _decode(payload: bytes, first: int, path: str, what: str) -> str:
    """Bytes of whole lines as text, strictly: a NUL or a byte that is not UTF-8 named by file and line."""
    nul = payload.find(b"\x00")
    if nul >= 0:
        line = first + payload.count(b"\n", 0, nul)
        raise binary_error(f"{what} {where(path, line)}")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as error:
        line = first + payload.count(b"\n", 0, error.start)
        raise not_utf8_error(f"{what} {where(path, line)}", error.start,
                             payload[error.start:error.start + 1]) from None
    return text.removeprefix("\ufeff") if first == 1 else text


def block_lines(payload, first: int, fmt: str, column: str, path: str, what: str) -> list[str]:
    """A block's lines, strictly decoded (see the module docstring)."""
    if fmt == "lines":
        return payload
    if fmt == "rows":
        out = []
        for k, text in enumerate(payload):
            if not isinstance(text, str):
                raise SeqlabError(f"{what} {where(path, first + k)}: the {column!r} column holds "
                                  f"{type(text).__name__}, not text")
            out.extend(_record_lines(text))
        return out
    text = _decode(payload, first, path, what)
    if fmt == "text":
        return _split(text)
    lines = _split(text)
    out = []
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise SeqlabError(f"{what} {where(path, first + k)}: not a JSON record ({error.msg})") from None
        value = record.get(column) if isinstance(record, dict) else None
        if not isinstance(value, str):
            raise SeqlabError(f"{what} {where(path, first + k)}: no text field {column!r} in the record; name it "
                              "with --text-column")
        out.extend(_record_lines(value))
    return out


def _record_lines(text: str) -> list[str]:
    """A record's text as lines: an empty text is one empty line, as an empty line of a text file is."""
    return _split(text) or [""]


def _split(text: str) -> list[str]:
    """Lines as `seqlab.data.readers.read_lines` splits them: at "\\n", a final "\\r" dropped, a final newline
    adding no line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


# ---------------------------------------------------------------------------------------------- workers

_WORKER: dict = {}


def _init_worker(tokenizer: dict | None, tokens: list[str] | None, dtype: str | None) -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _WORKER.clear()
    if tokenizer is not None:
        _WORKER["tokenizer"] = tokenizer_from_dict(tokenizer)
        _WORKER["vocab"] = Vocab(tokens)
        _WORKER["dtype"] = np.dtype(dtype)


def _count_block(args: tuple, kind: str) -> tuple[Counter, int, int, bool]:
    """(token counts, lines, characters, whether any line holds text) of a block."""
    text = block_text(*args)
    if text is not None:                          # the whole block at once: the same tokens as line by line
        counts = Counter(text.split()) if kind == "word" else Counter(text)
        counts.pop("\n", None)
        return counts, text.count("\n"), len(text), bool(text) and not text.isspace()
    lines = block_lines(*args)
    tokens = chain.from_iterable(lines) if kind == "char" else chain.from_iterable(map(str.split, lines))
    return (Counter(tokens), len(lines), sum(map(len, lines)) + len(lines), any(line.strip() for line in lines))


class _Lookup(dict):
    def __missing__(self, key):
        return UNK


def _lookup(vocab: Vocab) -> _Lookup:
    lookup = _WORKER.get("lookup")
    if lookup is None or _WORKER.get("lookup_of") is not vocab:
        lookup = _WORKER["lookup"] = _Lookup(vocab.index)
        _WORKER["lookup_of"] = vocab
    return lookup


def encode_text(text: str, kind: str, vocab: Vocab, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """`encode_lines` of a whole block at once (word and character tokens): each line end marked, the tokens
    looked up in one pass, the marks turned into `</s>` and the lines' lengths read off their positions."""
    lookup = _lookup(vocab)
    marked = dict.__new__(_Lookup)
    marked.update(lookup)
    marked[SENTINEL if kind == "word" else "\n"] = -1
    tokens = text.replace("\n", f" {SENTINEL} ").split() if kind == "word" else text
    ids = np.fromiter(map(marked.__getitem__, tokens), np.int64)
    ends = np.flatnonzero(ids == -1)
    ids[ends] = EOS
    return ids.astype(dtype), np.diff(ends, prepend=-1)


def encode_lines(lines: list[str], tokenizer: Tokenizer, vocab: Vocab,
                 dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(ids with `</s>` after each line, each line's ids counted with its `</s>`)."""
    if tokenizer.kind == "word":
        token_lines = [line.split() for line in lines]
    elif tokenizer.kind == "char":
        token_lines = lines
    else:
        token_lines = tokenizer.tokenize_lines(lines)
    get = _lookup(vocab).__getitem__
    ids: list[int] = []
    for tokens in token_lines:
        ids.extend(map(get, tokens))
        ids.append(EOS)
    lengths = np.fromiter((len(tokens) + 1 for tokens in token_lines), np.int64, len(token_lines))
    return np.array(ids, dtype=dtype), lengths


def _encode_block(args: tuple) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """(ids, line lengths, characters, whether any line holds text) of a block."""
    tokenizer = _WORKER["tokenizer"]
    text = block_text(*args) if tokenizer.kind in ("word", "char") else None
    if text is not None:
        ids, lengths = encode_text(text, tokenizer.kind, _WORKER["vocab"], _WORKER["dtype"])
        return ids, lengths, len(text), bool(text) and not text.isspace()
    lines = block_lines(*args)
    ids, lengths = encode_lines(lines, tokenizer, _WORKER["vocab"], _WORKER["dtype"])
    return ids, lengths, sum(map(len, lines)) + len(lines), any(line.strip() for line in lines)


class Workers:
    """Blocks mapped in order over `n` spawned processes (or this one, for n = 1), at most 2n in flight."""

    def __init__(self, n: int, init_args: tuple = (None, None, None)):
        self.n, self.init_args = n, init_args
        self.pool = None
        if n > 1:
            self.pool = multiprocessing.get_context("spawn").Pool(n, _init_worker, init_args)
        else:
            _init_worker(*init_args)

    def map(self, function: Callable, items: Iterator) -> Iterator:
        if self.pool is None:
            yield from map(function, items)
            return
        pending: deque = deque()
        for item in items:
            pending.append(self.pool.apply_async(function, (item,)))
            if len(pending) >= 2 * self.n:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------- the driver


@dataclass
class TextOptions:
    """What shapes the ids (a cache key holds them all)."""

    tokenizer: str = "char"
    bpe_vocab_size: int = 8000
    min_freq: int = 1
    max_vocab: int = 0
    reverse: bool = False

    def as_dict(self) -> dict:
        return {"tokenizer": self.tokenizer, "bpe_vocab_size": self.bpe_vocab_size, "min_freq": self.min_freq,
                "max_vocab": self.max_vocab, "reverse": self.reverse}


@dataclass
class Inserts:
    """Lines planted into the training text (the canaries of `seqlab.data.hooks`): `place(line count)` gives
    {position in the result: line}; `complete(vocab)` the vocabulary after."""

    place: Callable[[int], dict[int, str]]
    complete: Callable[[Vocab], Vocab] = field(default=lambda vocab: vocab)
    key: str = ""


def workers_for(workers: int, sources: list[Source]) -> int:
    """The processes to use: --workers (0: the cores), and one for inputs too small to be worth a pool."""
    total = sum(source.size for source in sources)
    if total < SMALL:
        return 1
    return max(1, workers or os.cpu_count() or 1)


def prepare_text(family: str, splits: dict[str, Source], options: TextOptions, output: str | Path,
                 workers: int = 0, overwrite: bool = False, inserts: Inserts | None = None,
                 progress: bool = True, extra: dict | None = None, shard_ids: int | None = None) -> Path:
    """Write a prepared folder of `splits` (train first) to `output` (see the module docstring); return it."""
    from seqlab.data.prepared import SHARD_IDS
    from seqlab.progress import progress_bar

    output = Path(output)
    n = workers_for(workers, list(splits.values()))
    with Writer(output, overwrite) as writer:      # removed on any error, nothing left half-written
        bar = progress_bar(None, progress, total=sum(s.size for s in splits.values()) + splits["train"].size,
                           unit="B", unit_scale=True, desc=f"preparing {output.name}", mininterval=0.5)
        with bar:
            tokenizer, vocab, train_lines, placed = fit(splits["train"], options, n, inserts, bar)
            dtype = id_dtype(len(vocab))
            records = {}
            with Workers(n, (tokenizer.to_dict(), vocab.tokens, dtype.str)) as pool:
                for name, source in splits.items():
                    records[name] = encode_split(writer, name, source, tokenizer, vocab, dtype, pool,
                                                 placed if name == "train" else {}, options.reverse, bar,
                                                 shard_ids or SHARD_IDS)
            records["train"]["source_lines"] = records["train"]["lines"] - len(placed)
        writer.save_json("tokenizer.json", tokenizer.to_dict())
        writer.save_json("vocab.json", vocab.to_dict())
        manifest = {"family": family, "options": options.as_dict(), **(extra or {}),
                    "inserts": inserts.key if inserts else "", "vocab_size": len(vocab),
                    "tokenizer_unit": tokenizer.unit,
                    "sources": {name: [source.record()] for name, source in splits.items()},
                    "splits": records, "workers": n}
        return writer.commit(manifest)


def fit(source: Source, options: TextOptions, n: int, inserts: Inserts | None, bar) -> tuple:
    """The tokenizer and vocabulary from the training text (pass 1), with the planted lines in."""
    if options.tokenizer == "bpe" and options.max_vocab:
        raise SeqlabError(f"--max-vocab {options.max_vocab}: a BPE vocabulary is every piece of its BPE model; "
                          "set its size with --bpe-vocab-size instead (--max-vocab is for word and char)")
    tokenizer = make_tokenizer(options.tokenizer, options.bpe_vocab_size)
    placed: dict[int, str] = {}
    if options.tokenizer == "bpe":
        count = sum(1 for _ in _lines(source, None)) if inserts else 0
        placed = inserts.place(count) if inserts else {}
        tokenizer.fit(_lines(source, bar, placed))
        vocab = tokenizer.vocabulary([])
        lines = count
    else:
        counts, lines, text = Counter(), 0, False
        with Workers(n) as pool:
            for block_counts, block_lines_, _, has_text in pool.map(
                    _CountBlock(options.tokenizer), _sized(source.blocks(), bar)):
                counts.update(block_counts)
                lines += block_lines_
                text = text or has_text
        if not text:
            raise SeqlabError(f"{source.what} {source.path or source.name} is empty")
        if inserts:
            placed = inserts.place(lines)
            for line in placed.values():
                counts.update(tokenizer.tokenize(line))
        vocab = Vocab.build(counts, options.min_freq, options.max_vocab or None)
    if inserts:
        vocab = inserts.complete(vocab)
    return tokenizer, vocab, lines, placed


class _CountBlock:
    def __init__(self, kind: str):
        self.kind = kind

    def __call__(self, args):
        return _count_block(args, self.kind)


def _sized(blocks: Iterator[tuple], bar) -> Iterator[tuple]:
    for block in blocks:
        yield block
        if bar is not None:
            bar.update(len(block[0]) if isinstance(block[0], bytes) else sum(len(x) + 1 for x in block[0]))


def _lines(source: Source, bar, placed: dict[int, str] | None = None) -> Iterator[str]:
    """The lines of a source in order, read here, with `placed` lines at their positions."""
    k, placed = 0, placed or {}
    for block in _sized(source.blocks(), bar):
        for line in block_lines(*block):
            while k in placed:
                yield placed[k]
                k += 1
            yield line
            k += 1
    while k in placed:
        yield placed[k]
        k += 1


def encode_split(writer: Writer, name: str, source: Source, tokenizer: Tokenizer, vocab: Vocab, dtype: np.dtype,
                 pool: Workers, placed: dict[int, str], reverse: bool, bar, shard_ids: int) -> dict:
    """Pass 2 for one split: its shards, its line index (raw int64 offsets) and its id counts."""
    shards = writer.shards(name, dtype, shard_ids)
    index_path = writer.folder / f"{name}.lines.idx"
    counts = np.zeros(len(vocab), np.int64)
    lines = characters = 0
    position = 0                                                      # ids written so far
    text = False
    with open(index_path, "wb") as index:
        index.write(np.zeros(1, "<i8").tobytes())
        pending = sorted(placed.items())
        for ids, lengths, block_characters, has_text in pool.map(_encode_block, _sized(source.blocks(), bar)):
            text = text or has_text
            if pending and pending[0][0] < lines + len(lengths) + len(pending):
                ids, lengths, pending = _insert(ids, lengths, lines, pending, tokenizer, vocab, dtype)
            shards.write(ids)
            counts += np.bincount(ids, minlength=len(vocab))[:len(vocab)]
            index.write((position + np.cumsum(lengths)).astype("<i8").tobytes())
            position += len(ids)
            lines += len(lengths)
            characters += block_characters
        if pending:                                                   # planted after the last line
            ids, lengths, pending = _insert(np.empty(0, dtype), np.empty(0, np.int64), lines, pending, tokenizer,
                                            vocab, dtype)
            shards.write(ids)
            counts += np.bincount(ids, minlength=len(vocab))[:len(vocab)]
            index.write((position + np.cumsum(lengths)).astype("<i8").tobytes())
            position += len(ids)
            lines += len(lengths)
    if not text:
        raise SeqlabError(f"{source.what} {source.path or source.name} is empty")
    record = shards.close()
    words = int(counts.sum() - counts[EOS])
    if name != "train" and words and counts[UNK] == words:
        raise SeqlabError(f"{source.what} {source.path or source.name}: all {words} tokens are unknown to the "
                          "vocabulary built from the training file; is it the same language and tokenization?")
    if reverse:
        record = reverse_split(writer, name, record, index_path, dtype, shard_ids)
    return {**record, "lines": lines, "characters": characters, "unknown": int(counts[UNK]),
            "index": index_path.name, "counts": _save_counts(writer, name, counts)}


def _save_counts(writer: Writer, name: str, counts: np.ndarray) -> str:
    writer.save_array(f"{name}.counts.npy", counts)
    return f"{name}.counts.npy"


def _insert(ids, lengths, first_line: int, pending: list, tokenizer, vocab, dtype):
    """A block's ids and line lengths with the planted lines whose positions fall in it (positions count the
    lines of the result: `first_line` is the result's line number of the block's first line)."""
    out_ids, out_lengths, starts = [], [], np.concatenate([[0], np.cumsum(lengths)])
    k, line = 0, first_line
    while k < len(lengths) or (pending and pending[0][0] == line):
        if pending and pending[0][0] == line:
            planted, _ = encode_lines([pending.pop(0)[1]], tokenizer, vocab, dtype)
            out_ids.append(planted)
            out_lengths.append(len(planted))
        else:
            out_ids.append(ids[starts[k]:starts[k + 1]])
            out_lengths.append(int(lengths[k]))
            k += 1
        line += 1
    return (np.concatenate(out_ids).astype(dtype) if out_ids else np.empty(0, dtype),
            np.array(out_lengths, np.int64), pending)


def reverse_split(writer: Writer, name: str, record: dict, index_path: Path, dtype: np.dtype,
                  shard_ids: int) -> dict:
    """The split read right to left (--reverse, characters): the last line first, each backwards, `</s>` after
    each, as `seqlab.families.lm.vocab.reverse_lines` reverses lines. Written over the forward shards."""
    from seqlab.data.prepared import TokenShards

    forward = TokenShards(writer.folder, record, writer.dataset_id)
    n = len(forward)
    backward = writer.shards(f"{name}.reversed", dtype, shard_ids)
    chunk = 1 << 24
    end = n - 1                                                        # ids[:n-1] backwards, then the last </s>
    while end > 0:
        start = max(0, end - chunk)
        backward.write(forward.read(start, end)[::-1])
        end = start
    backward.write(forward.read(n - 1, n))
    forward.close()
    reversed_record = backward.close()
    for shard in record["shards"]:
        (writer.folder / shard["file"]).unlink()
    for k, shard in enumerate(reversed_record["shards"]):
        target = f"{name}.{k:03d}.bin"
        os.replace(writer.folder / shard["file"], writer.folder / target)
        shard["file"] = target
    offsets = np.fromfile(index_path, "<i8")
    lengths = np.diff(offsets)[::-1]
    np.concatenate([[0], np.cumsum(lengths)]).astype("<i8").tofile(index_path)
    return reversed_record

"""Parallel text for sequence-to-sequence models: (source, target) pairs from two aligned files (line i
of one translates line i of the other) or from one file of pairs (TSV columns or JSON-lines fields,
chosen by name or index). Any file may be gzipped.

    train.de  ein mann schläft .          train.tsv   source<TAB>target
    train.en  a man is sleeping .         train.jsonl {"email": "...", "subject": "..."}

Files of different lengths are refused with both counts; an empty source or target line is refused
with its file and line (a pair needs both sides); the length limits are the vocabulary's
(`seqlab.families.seq2seq.vocab.PairVocabulary.encode`). `aligned_pairs` and `paired_reader` hand on one pair
at a time from the lines of `seqlab.data.stream.LineReader`s, for reading files of any size in bounded memory.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from seqlab.data.documents import Columns, document_reader, text_documents
from seqlab.data.sniff import FORMAT, FormatOption
from seqlab.data.stream import Line, LineReader
from seqlab.errors import SeqlabError

PAIRED_FORMATS = ("tsv", "jsonl")


@dataclass
class Pair:
    """A source text and its target (None where only sources are given), with the 1-based line."""

    source: str
    target: str | None
    line: int = 0
    cut: bool = False            # the source's line was too long to read whole: `source` is the part read


def read_aligned(source_path: str | Path, target_path: str | Path | None, what: str = "file") -> list[Pair]:
    """Pairs from two aligned files (or sources only, with `target_path` None)."""
    with contextlib.ExitStack() as stack:
        sources = stack.enter_context(LineReader(source_path, f"{what} source", stdin=False))
        targets = None if target_path is None else \
            stack.enter_context(LineReader(target_path, f"{what} target", stdin=False))
        return list(aligned_pairs(sources, targets, source_path, target_path, what))


def aligned_pairs(sources: Iterable[Line], targets: Iterable[Line] | None, source_path, target_path,
                  what: str = "file") -> Iterator[Pair]:
    """Pairs from the lines of two aligned files, read side by side (sources only with targets None);
    files of different lengths are refused with both counts once the shorter one ends."""
    source_texts = text_documents(sources, source_path, f"{what} source")
    if targets is None:
        for document in source_texts:
            yield Pair(document.text, None, document.line, document.cut)
        return
    target_texts = text_documents(targets, target_path, f"{what} target")
    count = 0
    for source, target in itertools.zip_longest(source_texts, target_texts):
        if source is None or target is None:
            rest = 1 + sum(1 for _ in (source_texts if target is None else target_texts))
            counts = (count + rest, count) if target is None else (count, count + rest)
            raise SeqlabError(f"{what}: {source_path} has {counts[0]:,} lines but {target_path} has "
                              f"{counts[1]:,}; line i of one must translate line i of the other")
        count += 1
        yield Pair(source.text, target.text, count, source.cut)


def read_paired(path: str | Path, fmt: str, source_field: str = "source", target_field: str = "target",
                what: str = "file", with_targets: bool = True) -> list[Pair]:
    """Pairs from one TSV (header names or 0-based indexes) or JSON-lines file (field names)."""
    read = paired_reader(fmt, source_field, target_field, path, what, with_targets)
    with LineReader(path, what, stdin=False) as lines:
        return list(read(lines))


def paired_reader(fmt: str, source_field: str = "source", target_field: str = "target", path="",
                  what: str = "file", with_targets: bool = True,
                  option: FormatOption | None = FORMAT) -> Callable[[Iterable[Line]], Iterator[Pair]]:
    """A function from the lines of a file of pairs (a LineReader) to its pairs, one at a time. A refused
    file that the other format reads says so, naming `option` (`seqlab.data.sniff`; None: it does not)."""
    if fmt not in PAIRED_FORMATS:
        raise SeqlabError(f"--format {fmt!r}: a file of pairs is one of {', '.join(PAIRED_FORMATS)}")
    read = document_reader(fmt, Columns(source_field, target_field, label_is_text=True), path, what,
                           labelled=with_targets, formats=PAIRED_FORMATS, option=option)

    def pairs(lines: Iterable[Line]) -> Iterator[Pair]:
        for d in read(lines):
            yield Pair(d.text, d.label if with_targets else None, d.line)
    return pairs

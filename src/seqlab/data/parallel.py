"""Parallel text for sequence-to-sequence models: (source, target) pairs from two aligned files (line i
of one translates line i of the other) or from one file of pairs (TSV columns or JSON-lines fields,
chosen by name or index). Any file may be gzipped.

    train.de  ein mann schläft .          train.tsv   source<TAB>target
    train.en  a man is sleeping .         train.jsonl {"email": "...", "subject": "..."}

Files of different lengths are refused with both counts; an empty source or target line is refused
with its file and line (a pair needs both sides). `skip_long` drops training pairs longer than a
limit and says how many.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from seqlab.data.documents import Columns, nonblank_lines, read_documents
from seqlab.errors import SeqlabError

PAIRED_FORMATS = ("tsv", "jsonl")


@dataclass
class Pair:
    """A source text and its target (None where only sources are given), with the 1-based line."""

    source: str
    target: str | None
    line: int = 0


def read_aligned(source_path: str | Path, target_path: str | Path | None, what: str = "file") -> list[Pair]:
    """Pairs from two aligned files (or sources only, with `target_path` None)."""
    sources = nonblank_lines(source_path, f"{what} source")
    if target_path is None:
        return [Pair(text, None, number) for number, text in enumerate(sources, start=1)]
    targets = nonblank_lines(target_path, f"{what} target")
    if len(sources) != len(targets):
        raise SeqlabError(f"{what}: {source_path} has {len(sources):,} lines but {target_path} has "
                          f"{len(targets):,}; line i of one must translate line i of the other")
    return [Pair(s, t, number) for number, (s, t) in enumerate(zip(sources, targets, strict=True), start=1)]


def read_paired(path: str | Path, fmt: str, source_field: str = "source", target_field: str = "target",
                what: str = "file", with_targets: bool = True) -> list[Pair]:
    """Pairs from one TSV (header names or 0-based indexes) or JSON-lines file (field names)."""
    if fmt not in PAIRED_FORMATS:
        raise SeqlabError(f"--format {fmt!r}: a file of pairs is one of {', '.join(PAIRED_FORMATS)}")
    documents = read_documents(path, fmt, Columns(source_field, target_field, label_is_text=True), what,
                               labelled=with_targets)
    return [Pair(d.text, d.label if with_targets else None, d.line) for d in documents]


def skip_long(pairs: list, source_lengths: list[int], target_lengths: list[int], max_source: int,
              max_target: int) -> tuple[list, int]:
    """The pairs within both limits (0: no limit), and how many were dropped."""
    kept = [p for p, s, t in zip(pairs, source_lengths, target_lengths, strict=True)
            if (not max_source or s <= max_source) and (not max_target or t <= max_target)]
    return kept, len(pairs) - len(kept)

"""The pairs of a split as the data options name them, one pair at a time: two aligned files (--train-src,
--train-tgt), one file of pairs (--train, --format tsv or jsonl, .gz too) or a Parquet file (--train x.parquet,
its --source-field and --target-field columns; needs pyarrow). Every reader streams, so a split of any size is
read in bounded memory (`seqlab prepare seq2seq` reads each split twice: to fit, then to encode)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from seqlab.data.stream import LineReader
from seqlab.errors import SeqlabError, place
from seqlab.families.seq2seq.parallel import Pair, aligned_pairs, paired_reader
from seqlab.fileio import check_input_file

WHAT = {"train": "training", "dev": "development", "test": "test"}
PARQUET_ROWS = 65536            # rows of a Parquet file read at a time


def is_parquet(path: str | Path) -> bool:
    return str(path).endswith(".parquet")


@dataclass
class PairFiles:
    """One split's files: a file of pairs (`paired`), or aligned `source` and `target` files."""

    split: str
    paired: str = ""
    source: str = ""
    target: str = ""
    fmt: str = "jsonl"
    source_field: str = "source"
    target_field: str = "target"

    @property
    def what(self) -> str:
        return f"{WHAT[self.split]} file"

    @property
    def reads(self) -> str:
        """How the split is read: aligned, parquet, or a file of pairs' --format."""
        return "aligned" if not self.paired else "parquet" if is_parquet(self.paired) else self.fmt

    @property
    def path(self) -> str:
        """How messages name the split (its file of pairs, or its sources)."""
        return self.paired or self.source

    @property
    def files(self) -> list[str]:
        return [self.paired] if self.paired else [self.source, self.target]

    @property
    def size(self) -> int:
        return sum(Path(f).stat().st_size for f in self.files)

    def check(self) -> PairFiles:
        """Refuse a missing file or a folder by name, before anything is read or hashed."""
        for name, side in ((self.paired, ""), (self.source, " source"), (self.target, " target")):
            if name:
                check_input_file(Path(name), f"{self.what}{side}")
        return self

    def pairs(self) -> Iterator[Pair]:
        """The split's pairs in order, with their 1-based lines (rows of a Parquet file)."""
        if self.paired and is_parquet(self.paired):
            yield from parquet_pairs(self.paired, self.source_field, self.target_field, self.what)
        elif self.paired:
            with LineReader(self.paired, self.what, stdin=False) as lines:
                yield from paired_reader(self.fmt, self.source_field, self.target_field, self.paired,
                                         self.what)(lines)
        else:
            with contextlib.ExitStack() as stack:
                sources = stack.enter_context(LineReader(self.source, f"{self.what} source", stdin=False))
                targets = stack.enter_context(LineReader(self.target, f"{self.what} target", stdin=False))
                yield from aligned_pairs(sources, targets, self.source, self.target, self.what)


def pair_files(data, split: str, required: bool = False) -> PairFiles | None:
    """The files of a split of a `Seq2SeqDataConfig` (None when not given)."""
    paired, source, target = getattr(data, split), getattr(data, f"{split}_src"), getattr(data, f"{split}_tgt")
    what = WHAT[split]
    if paired and (source or target):
        raise SeqlabError(f"give --{split} (a file of pairs) or --{split}-src and --{split}-tgt, not both")
    fields = {"fmt": data.format, "source_field": data.source_field, "target_field": data.target_field}
    if paired:
        return PairFiles(split, paired=paired, **fields)
    if source or target:
        if not (source and target):
            raise SeqlabError(f"--{split}-src and --{split}-tgt go together; only one was given")
        return PairFiles(split, source=source, target=target, **fields)
    if required:
        raise SeqlabError(f"sequence to sequence needs {what} pairs: --{split}-src and --{split}-tgt (aligned files) "
                          f"or --{split} (a file of pairs)")
    return None


def parquet_pairs(path: str | Path, source_field: str, target_field: str, what: str = "file",
                  with_targets: bool = True) -> Iterator[Pair]:
    """The pairs of a Parquet file: its `source_field` and `target_field` columns, row by row (row k is line
    k in messages); an empty or non-text cell is refused with its row, as a JSON-lines record's would be."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise SeqlabError("reading Parquet needs pyarrow: pip install 'seqlab[parquet]'") from None
    columns = [source_field, target_field] if with_targets else [source_field]
    try:
        table = pq.ParquetFile(path)
        names = table.schema_arrow.names
        missing = [c for c in columns if c not in names]
        if missing:
            raise SeqlabError(f"{place(what, path)} has no column {missing[0]!r} (it has {', '.join(names)}); name "
                              "the columns with --source-field and --target-field")
        row, count = 1, 0
        for batch in table.iter_batches(batch_size=PARQUET_ROWS, columns=columns):
            values = [batch.column(k).to_pylist() for k in range(len(columns))]
            for k in range(batch.num_rows):
                source = _cell(values[0][k], source_field, "source", path, row, what)
                target = _cell(values[1][k], target_field, "target", path, row, what) if with_targets else None
                yield Pair(source, target, row)
                row, count = row + 1, count + 1
    except SeqlabError:
        raise
    except Exception as error:                    # pyarrow's own errors: not a Parquet file, damaged
        raise SeqlabError(f"{place(what, path)} is not a readable Parquet file ({str(error)[:120]})") from None
    if not count:
        raise SeqlabError(f"{place(what, path)} holds no documents")


def _cell(value, field: str, side: str, path, row: int, what: str) -> str:
    if value is not None and not isinstance(value, str):
        raise SeqlabError(f"{place(what, path, row)}: the {side} ({field!r}) is {type(value).__name__}, expected "
                          "a string")
    if value is None or not value.strip():
        raise SeqlabError(f"{place(what, path, row)}: the {side} ({field!r}) is missing or empty")
    return value

"""The format that would have read a file its reader refused, named in the refusal.

A family reads its training and evaluation files in one of several formats (`--format`). A file given
in the wrong one is refused at its first malformed line, and that message says what is wrong with the
line but not what to do. `hinted` wraps the chosen format's reader: when it refuses a file, the
family's other readers try the file's first lines (a bounded sniff: at most SNIFF_LINES lines and
about SNIFF_BYTES bytes, never the whole file), and the first that reads them cleanly, past the line
the refusal names, is named at the end of the message:

    training file train.txt:1: expected 10 tab-separated CoNLL-U columns, found 1 in 'Melbourne NP B-LOC'
    (this looks like conll: pass --format conll, or format="conll" in Python)

The message is otherwise the reader's, word for word; it is exactly the reader's when no other reader
reads the first lines, when the refused line lies past them (a file that is right for the first
thousand lines and wrong at one is more likely a bad line than a wrong format), when the refusal
is not about the format at all (a byte that is not UTF-8, a line too long to read whole), or when the
reader found the format right and named the options that read the file (`RightFormat`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from seqlab.data.stream import Line, LineReader
from seqlab.errors import SeqlabError

SNIFF_LINES = 50          # the most lines a sniff reads
SNIFF_BYTES = 1 << 16     # a sniff reads no line that starts past this byte, and no piece of a longer line

Read = Callable[[Iterable[Line]], Iterator]      # the lines of a file -> its items (sentences, documents, ...)


class RightFormat(Exception):
    """The cause of a refusal that found the file in its own format and names the options that read it
    (`raise SeqlabError(...) from RightFormat()`: a table whose first row is data, not a header): `hinted`
    names no other format after it."""


@dataclass(frozen=True)
class FormatOption:
    """How the caller names the format: its command-line flag, and the keyword of the Python call that
    read the file. A reader's messages reach the command line and the Python API alike, so the hint
    names both."""

    flag: str = "--format"
    keyword: str = "format"

    def hint(self, fmt: str) -> str:
        return f" (this looks like {fmt}: pass {self.flag} {fmt}, or {self.keyword}=\"{fmt}\" in Python)"


FORMAT = FormatOption()                      # a training config's `format` (seqlab train / prepare)
EVALUATED = FormatOption("--format", "fmt")  # seqlab evaluate, and Trained*.evaluate_file(path, fmt=...)


def hinted(read: Read, fmt: str, formats: Sequence[str], reader: Callable[[str], Read], path,
           option: FormatOption | None = FORMAT) -> Read:
    """`read` (the reader of format `fmt`), whose refusal of a file names the first other of `formats` (the
    family's, the strictest first) whose reader, `reader(name)`, reads the file's first lines cleanly.
    `option` None: `read` itself (no hint, as for --input-format, often standard input)."""
    if option is None:
        return read

    def read_hinted(lines: Iterable[Line]) -> Iterator:
        seen = _Seen(lines)
        try:
            yield from read(seen)
        except SeqlabError as error:
            if seen.failed or seen.last is None or seen.last.cut or isinstance(error.__cause__, RightFormat):
                raise                                                   # the file, or its options, not its format
            found = sniff(path, [name for name in formats if name != fmt], reader, seen.last.number)
            if found is None:
                raise
            raise SeqlabError(f"{error}{option.hint(found)}") from None
    return read_hinted


def sniff(path, formats: Sequence[str], reader: Callable[[str], Read], through: int = 1) -> str | None:
    """The first of `formats` whose reader reads the first lines of `path` cleanly (every line without
    an error, at least one item), those lines reaching line `through`; None when none does, or when the
    file's first lines cannot be read (standard input cannot be read twice)."""
    if not formats or not path or str(path) == "-":
        return None
    try:
        lines = first_lines(path)
    except (SeqlabError, OSError):
        return None
    if not lines or lines[-1].number < through:
        return None
    for name in formats:
        try:
            if sum(1 for _ in reader(name)(lines)):        # every line read, not only the first item
                return name
        except SeqlabError:
            continue
    return None


def first_lines(path, count: int = SNIFF_LINES, size: int = SNIFF_BYTES) -> list[Line]:
    """The first `count` lines of `path` that start within its first `size` bytes, each whole; a line
    longer than `size` characters ends them, unread past its first `size` characters."""
    lines = []
    with LineReader(path, "file", max_chars=size, pieces=True, stdin=False) as reader:
        for line in reader:
            if len(lines) >= count or line.offset >= size or line.more:
                break
            lines.append(line)
    return lines


class _Seen:
    """The lines a reader is given, passed on unchanged; remembers the last one, and whether reading
    the file itself failed (a missing file, an invalid byte: not a question of format)."""

    def __init__(self, lines: Iterable[Line]):
        self.lines = iter(lines)
        self.last: Line | None = None
        self.failed = False

    def __iter__(self) -> Iterator[Line]:
        while True:
            try:
                line = next(self.lines)
            except StopIteration:
                return
            except SeqlabError:
                self.failed = True
                raise
            self.last = line
            yield line

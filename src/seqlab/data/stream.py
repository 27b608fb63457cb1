"""Lines of a file or of standard input, strictly decoded and numbered, read in bounded memory.

Every command that reads user text which may be large (tag, classify, translate, summarize,
evaluate) reads it through `LineReader`, one block of bytes at a time:

    bytes of a file, a .gz file (decompressed as it is read) or standard input ("-")
      -> lines, split at "\\n" only (a final "\\r" dropped; a byte-order mark at the start dropped)
      -> each line decoded as UTF-8, strictly: an invalid byte or a NUL is refused with
         "input file in.txt:LINE ..." or "standard input:LINE ...", the messages of
         `seqlab.fileio.read_text`, which reads a whole file at once
      -> Line(number, text, ...)

A line longer than `max_chars` characters is never held whole: its first (keep="head") or last
("tail") max_chars characters are kept and the rest is read, checked and dropped, and the Line says
that it was cut; with `pieces=True` the line comes instead as consecutive pieces of max_chars
characters. Memory is then bounded by the block size and 4 x max_chars bytes, whatever the input.

`ready(wait)` says whether the next line is at hand without waiting on a slow pipe; `chunked` uses
it to hand on what has arrived, so that a command answers the first line of a pipe as soon as it
comes, not when its chunk is full.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import os
import select
import stat
import sys
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple, TypeVar

from seqlab.errors import STDIN, SeqlabError, os_error_reason, place
from seqlab.fileio import binary_error, check_input_file, not_utf8_error

BLOCK = 1 << 16          # bytes per read
BYTES_PER_CHAR = 4       # the most a UTF-8 character takes
CHUNK_SIZE = 4096        # inputs per chunk unless told otherwise (--chunk-size)
CHUNK_CHARS = 1 << 24    # characters of input a chunk holds at most (see chunked)

T = TypeVar("T")


class Line(NamedTuple):
    """One line (or, with pieces, one piece of a line) without its newline.

    number: 1-based; cut: the line was longer than max_chars and `text` holds its first (or last)
    max_chars characters; length: the whole line's characters, when cut; offset: the byte offset of
    the line's start (a LineReader can start again there); more: a piece the next Line continues."""

    number: int
    text: str
    cut: bool = False
    length: int = 0
    offset: int = 0
    more: bool = False


class LineReader:
    """The lines of one file or of standard input (see the module docstring); iterate over it once.

    `path` "-" is standard input unless stdin=False (evaluation files are files, read twice).
    `start`: (byte offset, line number) of a line start recorded from an earlier reading of the same
    file (Line.offset), to read on from there. A file (or standard input) without any text is refused
    as empty when the reading reaches its end, as `read_text` refuses it."""

    def __init__(self, path, what: str = "input file", max_chars: int = 0, keep: str = "head",
                 pieces: bool = False, stdin: bool = True, start: tuple[int, int] | None = None):
        if keep not in ("head", "tail"):
            raise ValueError(f"keep must be head or tail, got {keep!r}")
        self.path, self.what, self.max_chars, self.keep, self.pieces = path, what, max_chars, keep, pieces
        self.offset, self.number = start or (0, 1)        # of the next line to split off
        self._buffer = bytearray()
        self._pending: deque[Line] = deque()
        self._eof = False
        self._saw_text = start is not None                 # only a whole file must hold some text
        self._fd: int | None = None                        # a pipe or terminal that select() can wait on
        self._handle = None
        self._read = self._open_stdin() if stdin and str(path) == STDIN else self._open_file(Path(path))
        self._lines = self._produce()

    def place(self, line: int | None = None) -> str:
        """"input file in.txt:3" or "standard input:3", for messages."""
        return place(self.what, self.path, line)

    def __iter__(self) -> Iterator[Line]:
        return self._lines

    def __enter__(self) -> LineReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    @property
    def interactive(self) -> bool:
        """Whether lines come from a pipe or a terminal (standard input that is not a file): then the
        first chunk is kept small and a chunk ends when the input pauses, so that output follows input."""
        return self._fd is not None

    def ready(self, wait: float = 0.0) -> bool:
        """Whether the next line (or the end) is at hand, waiting at most `wait` seconds for a pipe."""
        if self._pending or self._eof or self._fd is None or b"\n" in self._buffer:
            return True
        try:
            return bool(select.select([self._fd], [], [], wait)[0])
        except (OSError, ValueError):
            return True

    # ------------------------------------------------------------------------ opening and reading

    def _open_file(self, path: Path) -> Callable[[], bytes]:
        check_input_file(path, self.what)
        gz = path.suffix == ".gz"
        try:
            self._handle = gzip.open(path, "rb") if gz else open(path, "rb", buffering=0)   # noqa: SIM115
        except OSError as error:
            raise SeqlabError(f"cannot read {self.what} {path}: {os_error_reason(error)}") from None

        seek = self.offset                                  # where a reading that starts mid-file begins

        def read() -> bytes:
            nonlocal seek
            try:
                if seek:
                    self._handle.seek(seek)                 # a .gz file decompresses its way there
                    seek = 0
                return self._handle.read(BLOCK)
            except (EOFError, zlib.error, gzip.BadGzipFile) as error:
                raise SeqlabError(f"{self.what} {path} is not a readable gzip file ({error})") from None
            except OSError as error:
                raise SeqlabError(f"cannot read {self.what} {path}: {os_error_reason(error)}") from None
        return read

    def _open_stdin(self) -> Callable[[], bytes]:
        stream = sys.stdin
        if stream is None:                                 # started with standard input closed (<&-)
            raise SeqlabError("standard input is closed: give a file, or pipe the input in")
        binary = getattr(stream, "buffer", None)
        try:
            fd = stream.fileno() if binary is not None else None
        except (OSError, ValueError, AttributeError):       # io.UnsupportedOperation is both
            fd = None
        if fd is not None:
            with contextlib.suppress(OSError):
                self._fd = None if stat.S_ISREG(os.fstat(fd).st_mode) else fd   # a file (< in.txt) never waits
            read = lambda: os.read(fd, BLOCK)               # noqa: E731 (returns what a pipe has, at once)
        elif binary is not None:
            read = lambda: (binary.read1 if hasattr(binary, "read1") else binary.read)(BLOCK)   # noqa: E731
        else:                                              # a text stream (io.StringIO in tests)
            read = lambda: stream.read(BLOCK).encode("utf-8", "surrogatepass")   # noqa: E731

        def checked() -> bytes:
            try:
                return read()
            except OSError as error:
                raise SeqlabError(f"cannot read standard input: {os_error_reason(error)}") from None
        return checked

    # ------------------------------------------------------------------------ lines

    def _produce(self) -> Iterator[Line]:
        cap = BYTES_PER_CHAR * self.max_chars if self.max_chars else 0
        while True:
            while self._pending:
                yield self._pending.popleft()
            last = self._buffer.rfind(b"\n")
            if last >= 0:
                self._split(last + 1)
            elif cap and len(self._buffer) > cap:
                yield from self._long_line()
            elif self._eof:
                break
            else:
                data = self._read()
                if data:
                    self._buffer += data
                else:
                    self._eof = True
                    if self._buffer:
                        self._split(len(self._buffer))
        self.close()
        if not self._saw_text:
            raise SeqlabError(f"{self.place()} is empty")

    def _split(self, end: int) -> None:
        """Decode the complete lines in buffer[:end] into pending Lines."""
        block = bytes(self._buffer[:end])
        del self._buffer[:end]
        raws = block.split(b"\n")
        if raws[-1] == b"":
            raws.pop()                                     # what follows the last newline: no line
        for raw in raws:
            if b"\x00" in raw:
                raise binary_error(self.place(self.number))
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise self._not_utf8(self.offset + error.start, raw[error.start:error.start + 1]) from None
            if self.offset == 0:
                text = text.removeprefix("\ufeff")
            if text.endswith("\r"):
                text = text[:-1]
            if not self._saw_text and text.strip():
                self._saw_text = True
            self._add(text)
            self.offset += len(raw) + 1
            self.number += 1

    def _add(self, text: str) -> None:
        m = self.max_chars
        if not m or len(text) <= m:
            self._pending.append(Line(self.number, text, offset=self.offset))
        elif self.pieces:
            for k in range(0, len(text), m):
                self._pending.append(Line(self.number, text[k:k + m], offset=self.offset, more=k + m < len(text)))
        else:
            kept = text[:m] if self.keep == "head" else text[-m:]
            self._pending.append(Line(self.number, kept, True, len(text), self.offset))

    def _long_line(self) -> Iterator[Line]:
        """The line that starts the buffer, over 4 x max_chars bytes with no newline yet: read on to
        its end block by block, decoding and checking every byte, keeping max_chars characters (or
        handing on pieces of max_chars)."""
        m, number, start = self.max_chars, self.number, self.offset
        decoder = codecs.getincrementaldecoder("utf-8")()
        kept, length, last, position = "", 0, "", start      # position: offset of buffer[0]
        while True:
            newline = self._buffer.find(b"\n")
            part = bytes(self._buffer[:newline if newline >= 0 else len(self._buffer)])
            if b"\x00" in part:
                raise binary_error(self.place(number))
            held = decoder.getstate()[0]                   # bytes of a character begun in the last part
            try:
                text = decoder.decode(part, newline >= 0 or self._eof)
            except UnicodeDecodeError as error:
                raise self._not_utf8(position - len(held) + error.start,
                                     (held + part)[error.start:error.start + 1]) from None
            if position == 0:
                text = text.removeprefix("\ufeff")
            if not self._saw_text and text.strip():
                self._saw_text = True
            position += len(part)
            length += len(text)
            last = text[-1:] or last
            if self.pieces:
                kept += text
                while len(kept) > m:                       # one character held back: the last piece is
                    yield Line(number, kept[:m], offset=start, more=True)   # never empty
                    kept = kept[m:]
            elif self.keep == "head":
                kept += text[:max(0, m - len(kept))]
            else:
                kept = (kept + text)[-(m + 1):]            # one more, for a final "\r"
            if newline >= 0:
                del self._buffer[:newline + 1]
                break
            self._buffer.clear()
            if self._eof:
                break
            data = self._read()
            self._buffer += data
            self._eof = not data
        if last == "\r":
            length -= 1
            if self.pieces or self.keep == "tail":
                kept = kept[:-1]
        if not self.pieces and self.keep == "tail":
            kept = kept[-m:]
        self.offset, self.number = position + 1, number + 1
        yield Line(number, kept, length > m and not self.pieces, length, start)

    def _not_utf8(self, offset: int, byte: bytes) -> SeqlabError:
        """The error for an invalid byte at `offset` of the line being decoded (self.number)."""
        return not_utf8_error(self.place(self.number), offset, byte)


def chunked(items: Iterable[T], size: int, first: int = 0, ready: Callable[[float], bool] | None = None,
            wait: float = 0.05, chars: Callable[[T], int] | None = None) -> Iterator[list[T]]:
    """Consecutive lists of at most `size` items, in order. With `first`, the first list holds at most
    `first` items and each next one twice as many, up to `size`, so that the first output comes soon;
    with `ready` (LineReader.ready) a list also ends when no next item arrives within `wait` seconds,
    so that a command on a slow pipe answers what has come instead of waiting for a full chunk; with
    `chars` (an item's size in characters) a list also ends at CHUNK_CHARS characters, so that a
    chunk of long lines stays as small in memory as a chunk of short ones."""
    limit = max(1, min(first or size, size))
    chunk: list[T] = []
    held = 0
    for item in items:
        chunk.append(item)
        held += chars(item) if chars is not None else 0
        if len(chunk) >= limit or held >= CHUNK_CHARS or (ready is not None and not ready(wait)):
            yield chunk
            chunk, held = [], 0
            limit = min(2 * limit, size)
    if chunk:
        yield chunk



def refuse_cut(line: Line, where: str, fmt: str) -> None:
    """Stop at a line of a structured format (a TSV row, a JSON record, a CoNLL token, a tree) that was
    too long to read whole: such a line cannot be cut and still be read."""
    if line.cut:
        raise SeqlabError(f"{where}: the line is {line.length:,} characters, more than the {len(line.text):,} "
                          f"read per line; a {fmt} line cannot be cut (raise --max-input-length to read longer "
                          "lines)")


def interactive(lines: LineReader, batch_size: int) -> tuple[int, Callable[[float], bool] | None]:
    """`chunked`'s `first` and `ready` for reading `lines` in batches of `batch_size`: from a pipe or a
    terminal, a first chunk of one batch and chunks that end when the input pauses; from a file, full
    chunks from the start (a file of up to one chunk is then batched exactly as if read whole)."""
    return (batch_size, lines.ready) if lines.interactive else (0, None)

"""Reading user text files with clear errors, and writing files atomically.

Every write goes to a temporary file in the same folder, is flushed and fsynced, then renamed over
the target (`os.replace` is atomic on POSIX): a crash leaves either the old file or the new one,
never a half-written one.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

from seqlab.errors import SeqlabError, where


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """Read a UTF-8 text file (gzipped if its name ends in .gz), refusing missing, empty, binary and
    non-UTF-8 files by name."""
    path = Path(path)
    if not path.exists():
        raise SeqlabError(f"{what} {path} does not exist")
    if path.is_dir():
        raise SeqlabError(f"{what} {path} is a directory, expected a text file")
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise SeqlabError(f"{what} {path} is not a readable gzip file ({error})") from None
    if not data.strip():
        raise SeqlabError(f"{what} {path} is empty")
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise SeqlabError(f"{what} {where(path, line)} holds a NUL byte: this looks like a binary file, "
                          "expected UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise SeqlabError(f"{what} {where(path, line)} is not valid UTF-8 (byte {error.start}: "
                          f"{data[error.start:error.start + 1]!r}); convert it to UTF-8") from None


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Call `write(tmp_path)` to produce the file, then move it into place atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp)
    try:
        write(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def append_line(path: str | os.PathLike, line: str, sync: bool = True) -> None:
    """Append one line, and fsync it unless sync=False (metrics.jsonl is synced: a crash loses at most
    the line being written; the frequent training-loss log is only flushed, as a lost tail of it
    costs a few points of a curve and fsync costs milliseconds on slow disks)."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line.rstrip("\n") + "\n")
        handle.flush()
        if sync:
            os.fsync(handle.fileno())


def read_json(path: str | os.PathLike, what: str = "file") -> dict:
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise SeqlabError(f"{what} {where(path, error.lineno)} is not valid JSON: {error.msg}") from None


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

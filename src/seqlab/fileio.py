"""Reading user text files with clear errors, and writing files atomically.

Every write goes to a temporary file in the same folder, is flushed and fsynced, then renamed over
the target (`os.replace` is atomic on POSIX): a crash leaves either the old file or the new one,
never a half-written one.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath

from seqlab.errors import SeqlabError, os_error_reason, where


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """Read a UTF-8 text file (gzipped if its name ends in .gz), refusing missing, empty, binary and
    non-UTF-8 files by name. A byte-order mark at the start (as Windows editors write) is dropped."""
    path = Path(path)
    check_input_file(path, what)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SeqlabError(f"cannot read {what} {path}: {os_error_reason(error)}") from None
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise SeqlabError(f"{what} {path} is not a readable gzip file ({error})") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise binary_error(f"{what} {where(path, data.count(NEWLINE, 0, nul) + 1)}")
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line = data.count(NEWLINE, 0, error.start) + 1
        raise not_utf8_error(f"{what} {where(path, line)}", error.start, data[error.start:error.start + 1]) from None
    if not text.strip():
        raise SeqlabError(f"{what} {path} is empty")
    return text


NEWLINE = b"\n"


def check_input_file(path: Path, what: str) -> None:
    """Refuse a missing input file, or a folder given as one (every reader of user files asks this)."""
    if not path.exists():
        raise SeqlabError(f"{what} {path} does not exist")
    if path.is_dir():
        raise SeqlabError(f"{what} {path} is a directory, expected a text file")


def binary_error(place: str) -> SeqlabError:
    """A NUL byte at `place` ("training file x.txt:3"): the messages of every strict reader."""
    return SeqlabError(f"{place} holds a NUL byte: this looks like a binary file, expected UTF-8 text")


def not_utf8_error(place: str, offset: int, byte: bytes) -> SeqlabError:
    return SeqlabError(f"{place} is not valid UTF-8 (byte {offset}: {byte!r}); convert it to UTF-8")


@contextlib.contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary file beside `path`, with the mode a new file of this process gets (0666 less the
    umask: 0644 by default), that takes the place of `path` (fsynced, then renamed: `os.replace` is
    atomic on POSIX) when the block ends without an error, and is removed when it does not. An
    operating-system error (a full disk, a read-only folder) is a SeqlabError naming `path`; the file
    that was there before, if any, is left as it was."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
        tmp = Path(name)
        os.fchmod(fd, 0o666 & ~umask())
        os.close(fd)
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as error:
        raise SeqlabError(f"cannot write {path}: {os_error_reason(error)}"
                          f"{' (the previous file is intact)' if path.is_file() else ''}") from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Call `write(tmp_path)` to produce the file, then move it into place atomically (`replacing`)."""
    with replacing(path) as tmp:
        write(tmp)


@contextlib.contextmanager
def atomic_text_writer(path: str | os.PathLike) -> Iterator[TextWriter]:
    """A text file written piece by piece that takes the place of `path` only when the block ends
    without an error (`replacing`): a long output can be written as it is produced and still never be
    left half-written."""
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        yield TextWriter(handle, Path(path))


class TextWriter:
    """What `atomic_text_writer` gives: write(text), with an OS error (a full disk) a SeqlabError."""

    def __init__(self, handle, path: Path):
        self.handle, self.path = handle, path

    def write(self, text: str) -> None:
        try:
            self.handle.write(text)
        except OSError as error:
            raise SeqlabError(f"cannot write {self.path}: {os_error_reason(error)}") from None


def umask() -> int:
    """This process's umask (read once: os.umask can only be read by setting it)."""
    global _UMASK
    if _UMASK is None:
        _UMASK = os.umask(0o022)
        os.umask(_UMASK)
    return _UMASK


_UMASK: int | None = None
TMP_SUFFIX = ".tmp"


def remove_stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Delete the temporary files an interrupted `atomic_write` left in `folder` (call it only while no
    other process writes there, e.g. holding the run's lock); return them."""
    stale = [p for p in Path(folder).glob(f".*{TMP_SUFFIX}") if p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def check_writable(path: str | os.PathLike, what: str, folder: bool = False) -> None:
    """Refuse, before any work, an output path that cannot be written: a file where a folder is meant (or
    the reverse), a folder that cannot be created, or one this process may not write in. Creates the
    folders on the way."""
    path = Path(path)
    target = path if folder else path.parent
    if folder and path.exists() and not path.is_dir():
        raise SeqlabError(f"{what} {path} is a file, not a folder: choose another path")
    if not folder and path.is_dir():
        raise SeqlabError(f"{what} {path} is a folder: give a file name")
    try:
        target.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=target, prefix=".seqlab-write-test.", suffix=TMP_SUFFIX)
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise SeqlabError(f"cannot write {what} {path}: {os_error_reason(error)}") from None


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
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line.rstrip("\n") + "\n")
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
    except OSError as error:
        raise SeqlabError(f"cannot append to {path}: {os_error_reason(error)}") from None


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


def file_sha256(path: str | Path, name: str = "file") -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as error:
        raise SeqlabError(f"cannot read --{name.replace('_', '-')} {path}: {os_error_reason(error)}") from None
    return digest.hexdigest()


def safetensors_metadata(path: str | os.PathLike) -> dict:
    """A seqlab safetensors file's header metadata alone, without reading (or checking) its tensors: which
    weights a model card describes, and the trainer's position (steps, tokens seen, time) in a checkpoint.
    {} for a file that is missing or not a seqlab safetensors file."""
    try:
        with open(path, "rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            if not 2 <= size <= 100_000_000:
                return {}
            metadata = json.loads(handle.read(size)).get("__metadata__", {}) or {}
    except (OSError, ValueError, UnicodeDecodeError, AttributeError):
        return {}
    return metadata if isinstance(metadata, dict) and metadata.get("format") == "seqlab" else {}



# ------------------------------------------------------------------------------ folders read from a manifest


def escape(folder: Path, name) -> str | None:
    """Why `name`, a path that a folder's manifest names (an export's, a prepared dataset's), is not a file inside
    `folder`: "no file name", "outside" (absolute, or through `..`) or "a link" (one that leads out); None where
    it is one."""
    if not isinstance(name, str) or not name or "\x00" in name:
        return "no file name"
    if PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute() or name.startswith("\\") \
            or ".." in PurePosixPath(name.replace("\\", "/")).parts:
        return "outside"
    return None if inside(Path(folder).resolve(), Path(folder) / name) else "a link"


def outward_link(folder: Path) -> Path | None:
    """The first link anywhere in `folder` that leads out of it (its path in the resolved folder), or None."""
    root = Path(folder).resolve()
    for parent, dirs, files in os.walk(root):
        for entry in [*dirs, *files]:
            path = Path(parent) / entry
            if path.is_symlink() and not inside(root, path):
                return path
    return None


def inside(root: Path, path: Path) -> bool:
    """Whether `path`, its links followed, lies in the (resolved) folder `root`."""
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):          # a link loop
        return False

"""A prepared dataset: a folder of token ids in memory-mappable shards, written once by `seqlab prepare` and
read by every training run, every --resume and every DDP rank without tokenizing again (as nanoGPT's
`prepare.py`, fairseq's `fairseq-preprocess` and Megatron-LM's indexed datasets do).

    DIR/manifest.json        format and version, the family, the options, each source's SHA-256, the counts, the
                             SHA-256 of each shard's ids and of every other file, the command that prepared it
    DIR/verified.json        which files were hashed, and when (`seqlab.data.prepared_check`)
    DIR/tokenizer.json       the tokenizer and the vocabulary, as a run directory holds them
    DIR/vocab.json
    DIR/train.000.bin ...    shards: a 64-byte header, then the ids as little-endian uint16 (a vocabulary of
                             at most 65,536 tokens) or uint32
    DIR/train.lines.idx      the index: where each sequence (a line, for a language model) starts, raw
                             little-endian int64, one more than the sequences (np.memmap maps it)
    DIR/train.counts.npy     how often each id occurs (the adaptive softmax orders its clusters by them)

A shard's header: b"SEQLABTK", the format version (uint32), the bytes per id (uint32), the ids (uint64) and
the dataset's id (16 bytes, also in the manifest), so a shard from another folder or a truncated one is
refused with one line. Reading never holds a split in memory: `TokenShards.read(a, b)` reads ids a..b with
positioned reads (the kernel's page cache keeps what is read often, outside the process), so a training
run's resident memory stays flat in the corpus size (the leak nanoGPT avoids by re-creating its memmap each
batch); `TokenShards.map()` gives the numpy memory maps for your own use.

The folder is written under a hidden name beside DIR and renamed into place when complete (`Writer`): a
prepare that is killed or runs out of disk leaves no folder that looks complete. Opening it (`Prepared`) checks
it (`seqlab.data.prepared_check`): every file it names inside it, every file's SHA-256 (hashed where it changed
since the last check), each shard's ids within the family's vocabulary (`Prepared.check_ids`), its sources.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seqlab.data.prepared_check import (
    HEADER_BYTES,
    RECORD,
    check_links,
    confine,
    confined,
    file_hashes,
    first_record,
    take_ranges,
    verify,
)
from seqlab.errors import SeqlabError, os_error_reason
from seqlab.fileio import atomic_write_json, read_json
from seqlab.owned import alive, listing, strangers

FORMAT = "seqlab-prepared"
VERSION = 1
MAGIC = b"SEQLABTK"
HEADER = struct.Struct("<8sIIQ16s24x")          # magic, version, bytes per id, ids, dataset id: 64 bytes
assert HEADER.size == HEADER_BYTES
SHARD_IDS = 1 << 28                              # ids per shard (512 MB of uint16)
MANIFEST = "manifest.json"


def id_dtype(vocab_size: int) -> np.dtype:
    """uint16 where every id fits, else uint32."""
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


def source_record(path: str | Path) -> dict:
    """What the manifest keeps of a source file: its absolute path, SHA-256, size and modification time."""
    from seqlab.fileio import file_sha256

    path = Path(path).resolve()
    stat = path.stat()
    return {"path": str(path), "sha256": file_sha256(path), "bytes": stat.st_size, "mtime": stat.st_mtime}


# ---------------------------------------------------------------------------------------------- writing


class ShardWriter:
    """One split's ids, appended in order, into shards of SHARD_IDS ids; `close` returns the split's record."""

    def __init__(self, folder: Path, split: str, dtype: np.dtype, dataset_id: bytes, shard_ids: int = SHARD_IDS):
        self.folder, self.split, self.dtype, self.dataset_id = folder, split, dtype, dataset_id
        self.shard_ids = shard_ids
        self.shards: list[dict] = []
        self.handle = None
        self.in_shard = 0
        self.total = 0
        self.hash = None
        self.low = self.high = None                      # the shard's smallest and largest id (integer dtypes)

    def _open(self) -> None:
        name = f"{self.split}.{len(self.shards):03d}.bin"
        self.handle = open(self.folder / name, "wb")                       # noqa: SIM115 (closed in _seal)
        self.handle.write(HEADER.pack(MAGIC, VERSION, self.dtype.itemsize, 0, self.dataset_id))
        self.hash = hashlib.sha256()
        self.shards.append({"file": name, "ids": 0})
        self.in_shard = 0
        self.low = self.high = None

    def _seal(self) -> None:
        if self.handle is None:
            return
        self.handle.seek(0)
        self.handle.write(HEADER.pack(MAGIC, VERSION, self.dtype.itemsize, self.in_shard, self.dataset_id))
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        self.handle = None
        self.shards[-1].update(ids=self.in_shard, sha256=self.hash.hexdigest())
        if self.low is not None:                         # for the folder's first record (`prepared_check`)
            self.shards[-1].update(min=self.low, max=self.high)

    def write(self, ids: np.ndarray) -> None:
        ids = np.ascontiguousarray(ids, dtype=self.dtype)
        while len(ids):
            if self.handle is None or self.in_shard == self.shard_ids:
                self._seal()
                self._open()
            take = ids[:self.shard_ids - self.in_shard]
            data = take.tobytes()
            self.handle.write(data)
            self.hash.update(data)
            if self.dtype.kind in "iu" and len(take):
                low, high = int(take.min()), int(take.max())
                self.low = low if self.low is None else min(self.low, low)
                self.high = high if self.high is None else max(self.high, high)
            self.in_shard += len(take)
            self.total += len(take)
            ids = ids[len(take):]

    def close(self) -> dict:
        if self.handle is None and not self.shards:
            self._open()                                       # an empty split still has its one shard
        self._seal()
        return {"ids": self.total, "dtype": self.dtype.str, "shards": self.shards}


class Writer:
    """A prepared folder written under a hidden name beside `output` and renamed into place by `commit`.

    `output` must not exist unless `overwrite` (then it must be a prepared folder: nothing else is ever
    replaced). A Writer left without `commit` (an error, a kill) is removed by `abort`, or by the next
    prepare into the same place when its process is gone."""

    def __init__(self, output: str | Path, overwrite: bool = False):
        self.output = Path(output)
        check_output(self.output, overwrite)
        self.overwrite = overwrite
        parent = self.output.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            for stale in parent.glob(f".{self.output.name}.partial-*"):
                pid = stale.name.rsplit("-", 1)[-1]
                if pid.isdigit() and not alive(int(pid)):
                    shutil.rmtree(stale, ignore_errors=True)
            self.folder = parent / f".{self.output.name}.partial-{os.getpid()}"
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir()
        except OSError as error:
            raise SeqlabError(f"cannot write the prepared folder {self.output}: {os_error_reason(error)}") from None
        self.dataset_id = os.urandom(16)

    def shards(self, split: str, dtype: np.dtype, shard_ids: int = SHARD_IDS) -> ShardWriter:
        return ShardWriter(self.folder, split, dtype, self.dataset_id, shard_ids)

    def save_array(self, name: str, array: np.ndarray) -> None:
        with open(self.folder / name, "wb") as handle:
            np.save(handle, array, allow_pickle=False)

    def save_json(self, name: str, obj) -> None:
        atomic_write_json(self.folder / name, obj)

    def commit(self, manifest: dict) -> Path:
        """Write the manifest (with the SHA-256 of every file but the shards, whose ids were hashed as they were
        written) and the record of what was hashed (`prepared_check`), then move the folder into place
        (replacing the old one with --overwrite)."""
        manifest = {"format": FORMAT, "version": VERSION, "id": self.dataset_id.hex(), **manifest,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "files": sorted(path.name for path in self.folder.iterdir())}     # what --overwrite replaces
        ranges = take_ranges(manifest)
        manifest["hashes"] = file_hashes(self.folder, manifest)
        atomic_write_json(self.folder / MANIFEST, manifest)
        first_record(self.folder, manifest, ranges)
        old = None
        if self.output.exists():
            old = self.output.parent / f".{self.output.name}.old-{os.getpid()}"
            os.replace(self.output, old)
        os.replace(self.folder, self.output)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.output

    def abort(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        """On any error (a kill, Ctrl-C, a full disk) the hidden folder goes: nothing looks complete; an OSError
        becomes the one-line message of `disk_error`."""
        if error is None:
            return
        self.abort()
        if isinstance(error, OSError):
            raise disk_error(error, self.output) from None


def check_output(output: Path, overwrite: bool) -> None:
    """Refuse to write over anything but a prepared folder (and that only with --overwrite, when the folder holds
    nothing its manifest does not account for: seqlab never deletes what it did not write)."""
    if output.exists() or output.is_symlink():
        if not output.is_dir():
            raise SeqlabError(f"--output {output} is a file, not a folder")
        if not (output / MANIFEST).exists() and any(output.iterdir()):
            raise SeqlabError(f"--output {output} holds files but is not a prepared dataset (no {MANIFEST}); "
                              "choose another folder")
        if (output / MANIFEST).exists() and not overwrite:
            raise SeqlabError(f"--output {output} holds a prepared dataset already; --overwrite replaces it")
        if (output / MANIFEST).exists():
            known = prepared_files(output)
            if known is None:
                raise SeqlabError(f"--output {output} holds a {MANIFEST} that is not a prepared dataset's: "
                                  "--overwrite replaces only a prepared dataset, and seqlab never deletes what it "
                                  "did not write; choose another folder")
            foreign = strangers(output, known)
            if foreign:
                raise SeqlabError(f"--output {output} holds {listing(foreign)}, which `seqlab prepare` did not write "
                                  f"there (its {MANIFEST} does not list it): seqlab never deletes what it did not "
                                  "write; move it out, or choose another folder")


LEGACY_SUFFIXES = (".bin", ".idx", ".npy", ".json")    # every file of a prepared folder of before its "files" list


def prepared_files(folder: Path) -> set[str] | None:
    """The files seqlab wrote in the prepared folder `folder` (its manifest's "files", manifest.json among them),
    or None where its manifest is not a prepared dataset's. A folder of before that list: its shards, indexes,
    arrays and JSON files, which are all a prepared folder ever held (a user's file among them is refused by
    its name: a text, a document)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None
    files = manifest.get("files")
    if isinstance(files, list) and all(isinstance(name, str) for name in files):
        return {MANIFEST, RECORD, *files}      # verified.json: written after the list, by every run that checks
    return {path.name for path in folder.iterdir() if path.is_file() and not path.is_symlink()
            and path.name.endswith(LEGACY_SUFFIXES)}


def disk_error(error: OSError, output: Path) -> SeqlabError:
    if error.errno == errno.ENOSPC:
        return SeqlabError(f"the disk is full: preparing {output} stopped and left nothing behind; free some space "
                           "or give another --output")
    return SeqlabError(f"cannot write the prepared folder {output}: {os_error_reason(error)}")


# ---------------------------------------------------------------------------------------------- reading


class TokenShards:
    """One split's ids across its shards, read by position (`read(a, b)`), never held whole."""

    def __init__(self, folder: Path, record: dict, dataset_id: bytes):
        self.folder = folder
        self.dtype = np.dtype(record["dtype"])
        self.files: list[Path] = []
        self.starts = [0]
        for shard in record["shards"]:
            path = confined(folder, shard["file"])
            check_shard(path, shard["ids"], self.dtype, dataset_id, folder)
            self.files.append(path)
            self.starts.append(self.starts[-1] + shard["ids"])
        if self.starts[-1] != record["ids"]:
            raise SeqlabError(f"{folder}/{MANIFEST} is damaged: its shards hold {self.starts[-1]:,} ids, not the "
                              f"{record['ids']:,} it lists; prepare again")
        self._fds: dict[int, int] = {}

    def __len__(self) -> int:
        return self.starts[-1]

    def _fd(self, k: int) -> int:
        if k not in self._fds:
            self._fds[k] = os.open(self.files[k], os.O_RDONLY)
        return self._fds[k]

    def read(self, start: int, stop: int) -> np.ndarray:
        """ids[start:stop] (clipped to the split), as a fresh numpy array of the shards' dtype."""
        start, stop = max(0, start), min(stop, len(self))
        if stop <= start:
            return np.empty(0, self.dtype)
        size = self.dtype.itemsize
        parts = []
        k = int(np.searchsorted(self.starts, start, side="right")) - 1
        while start < stop:
            end = min(stop, self.starts[k + 1])
            offset = HEADER.size + (start - self.starts[k]) * size
            data = os.pread(self._fd(k), (end - start) * size, offset)
            parts.append(np.frombuffer(data, self.dtype))
            start, k = end, k + 1
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def map(self) -> list[np.memmap]:
        """Each shard's ids as a read-only numpy memory map."""
        return [np.memmap(path, self.dtype, "r", offset=HEADER.size, shape=(self.starts[k + 1] - self.starts[k],))
                for k, path in enumerate(self.files)]

    def __getstate__(self):
        return {**self.__dict__, "_fds": {}}               # descriptors are per process

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __del__(self):
        try:
            self.close()
        except Exception:                                 # noqa: BLE001 (interpreter shutdown)
            pass


def check_shard(path: Path, ids: int, dtype: np.dtype, dataset_id: bytes, folder: Path) -> None:
    """Refuse a missing, foreign, truncated or differently typed shard, by name."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(HEADER.size)
            size = os.fstat(handle.fileno()).st_size
    except FileNotFoundError:
        raise SeqlabError(f"{folder} is damaged: its shard {path.name} is missing; prepare again") from None
    except OSError as error:
        raise SeqlabError(f"cannot read the shard {path}: {os_error_reason(error)}") from None
    if len(head) < HEADER.size or head[:8] != MAGIC:
        raise SeqlabError(f"{path} is not a seqlab shard (no {MAGIC.decode()} header); prepare the folder again")
    _, version, itemsize, count, owner = HEADER.unpack(head)
    if owner != dataset_id:
        raise SeqlabError(f"{path} belongs to another prepared dataset than {folder}/{MANIFEST} (a shard copied in "
                          "from elsewhere); prepare the folder again")
    if version != VERSION or itemsize != dtype.itemsize or count != ids:
        raise SeqlabError(f"{path} does not match {folder}/{MANIFEST} (version {version}, {itemsize}-byte ids, "
                          f"{count:,} of them; the manifest lists {ids:,}); prepare the folder again")
    expected = HEADER.size + ids * itemsize
    if size != expected:
        raise SeqlabError(f"{path} is truncated: {size:,} bytes where its {ids:,} ids take {expected:,}; prepare "
                          "the folder again")


@dataclass
class Split:
    """One split of a prepared folder: its ids (`tokens`), its index and its counts, and any other streams a
    family keeps beside them (`stream(name)`: a tagger's tags, a pair's target side), each with the record of
    `ShardWriter.close` under the split record's "streams"."""

    name: str
    tokens: TokenShards | None
    record: dict
    folder: Path
    dataset_id: bytes = b""

    def stream(self, name: str) -> TokenShards:
        streams = self.record.get("streams", {})
        if name not in streams:
            raise SeqlabError(f"{self.folder}/{MANIFEST} is damaged: split {self.name} has no {name} stream; "
                              "prepare again")
        return TokenShards(self.folder, streams[name], self.dataset_id)

    def path(self, key: str) -> Path:
        """The file the split record's `key` names, confined to the folder."""
        return confined(self.folder, self.record[key])

    def array(self, key: str) -> np.ndarray:
        """A per-item array the family saved (`Writer.save_array`), named by the split record's `key`."""
        return np.load(self.path(key), allow_pickle=False)

    @property
    def lines(self) -> np.ndarray:
        """Where each sequence starts, and the end (int64, memory-mapped)."""
        return np.memmap(self.path("index"), "<i8", "r")

    def counts(self) -> np.ndarray:
        return np.load(self.path("counts"), allow_pickle=False)

    def ids(self) -> np.ndarray:
        """The whole split's ids in memory (validation and test splits, which evaluation holds whole)."""
        return self.tokens.read(0, len(self.tokens))

    def __getattr__(self, name):
        record = self.__dict__.get("record", {})
        if name in record:
            return record[name]
        raise AttributeError(name)


class Prepared:
    """A prepared folder, checked as it is opened (`seqlab.data.prepared_check`): its format, version and family;
    every file it names inside it; each shard's header; every file's SHA-256 (hashed where it changed since
    the last check, or all of them with `rehash`); and its sources (a warning for one that changed, with
    `check_sources`). `flag` is how messages name the folder (`--data`, `--verify`)."""

    def __init__(self, folder: str | Path, family: str | None = None, check_sources: bool = True,
                 rehash: bool = False, flag: str = "--data"):
        self.folder = folder = Path(folder)
        if not folder.is_dir():
            raise SeqlabError(f"{flag} {folder}: no such folder" if not folder.exists() else
                              f"{flag} {folder} is a file; give the folder `seqlab prepare` wrote")
        check_links(folder)
        if not (folder / MANIFEST).is_file():
            raise SeqlabError(f"{flag} {folder} is not a prepared dataset (no {MANIFEST}: a prepare that did not "
                              "finish, or another folder); run seqlab prepare")
        try:
            manifest = read_json(folder / MANIFEST, "manifest")
        except SeqlabError as error:
            raise SeqlabError(f"{folder}/{MANIFEST} is damaged ({error}); prepare again") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise SeqlabError(f"{folder}/{MANIFEST} is not a seqlab prepared-dataset manifest; prepare again")
        if manifest.get("version") != VERSION:
            raise SeqlabError(f"{folder} was prepared in format version {manifest.get('version')}; this seqlab "
                              f"reads version {VERSION}: prepare it again with this version")
        if family is not None and manifest.get("family") != family:
            raise SeqlabError(f"{flag} {folder} was prepared for {manifest.get('family')}, not {family}: "
                              f"seqlab prepare {family} ...")
        try:
            confine(folder, manifest)
            self.dataset_id = bytes.fromhex(manifest["id"])
            self.splits = {name: Split(name, TokenShards(folder, record, self.dataset_id) if "shards" in record
                                       else None, record, folder, self.dataset_id)
                           for name, record in manifest["splits"].items()}
            for split in self.splits.values():
                for stream in split.record.get("streams", {}).values():
                    TokenShards(folder, stream, self.dataset_id).close()      # checked now, read when asked
            self.ranges, self.checked = verify(folder, manifest, rehash, check_sources)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise SeqlabError(f"{folder}/{MANIFEST} is damaged (missing {error}); prepare again") from None
        self.manifest = manifest

    def check_ids(self, stream: str | None, below: int, what: str, at_least: int = 0) -> None:
        """Refuse, in one line, a split whose ids of `stream` (None: the split's own shards, a language model's
        tokens) fall outside [at_least, below): ids the model's tables (`what`, e.g. "the 10,000 words of
        vocab.json") cannot index. From each shard's smallest and largest id, found when it was hashed: no id
        is read."""
        for split in self.splits.values():
            if stream is None:
                run = split.record if "shards" in split.record else None
            else:
                run = split.record.get("streams", {}).get(stream)
            for shard in run["shards"] if run is not None else ():
                found = self.ranges.get(shard["file"])
                if found is None:
                    continue
                low, high = found
                if high >= below or low < at_least:
                    bad = high if high >= below else low
                    raise SeqlabError(f"{self.folder}/{shard['file']} holds the id {bad:,}, outside the {what} "
                                      f"(ids {at_least:,} to {below - 1:,}): the shard or the vocabulary was edited, "
                                      "or comes from elsewhere; prepare the folder again")

    @property
    def options(self) -> dict:
        return self.manifest.get("options", {})

    def shaped(self, names) -> dict:
        """The options `names` that shaped the prepared data, as its manifest records them."""
        try:
            return {name: self.options[name] for name in names}
        except KeyError as error:
            raise SeqlabError(f"{self.folder}/{MANIFEST} is damaged (no option {error}); prepare again") from None

    def split(self, name: str) -> Split | None:
        return self.splits.get(name)

    def path(self, name: str) -> Path:
        """The folder's file `name` (as its manifest names it), confined to the folder."""
        return confined(self.folder, name)

    def read_json(self, name: str) -> dict:
        try:
            return read_json(self.path(name), name)
        except SeqlabError as error:
            raise SeqlabError(f"{self.folder}: {error}; prepare again") from None


def record_command(folder: str | Path, command: str) -> None:
    """Keep in the manifest the command that prepared the folder (`seqlab.api.prepare_command`), for the
    warning of a run that finds a source changed since."""
    path = Path(folder) / MANIFEST
    atomic_write_json(path, {**read_json(path, "manifest"), "command": command})


def content_key(parts: dict) -> str:
    """A cache key: the SHA-256 of the sources' hashes and the options that shape the ids."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


CACHE_ENV = "SEQLAB_CACHE_DIR"


def cached(family: str, key: dict, run_dir: Path, rank: int, barrier, log, write, shared: bool = True) -> Path:
    """The cache folder of a run's plain files: $SEQLAB_CACHE_DIR/FAMILY-KEY (shared by every run with the same
    files and options; `shared=False` keeps it in the run) or RUN/prepared, KEY the hash of `key` (the files'
    SHA-256 and the options that shape the data). On a miss rank 0 calls `write(folder, extra)` (the family's
    prepare, `extra` for its manifest) while the other ranks wait at `barrier`; every family's training data
    path goes through here."""
    digest = content_key(key)
    root = os.environ.get(CACHE_ENV)
    folder = Path(root) / f"{family}-{digest}" if root and shared else Path(run_dir) / "prepared"
    hit = (folder / MANIFEST).is_file() and _cache_key_of(folder) == digest
    if not hit and rank == 0:
        log(f"preparing the data once into {folder} (memory-mapped shards; later runs, --resume and every DDP "
            "process read it from there)")
        write(folder, {"cache_key": digest, "key": key})
    barrier()
    if hit:
        log(f"prepared data: {folder} (from the cache)")
    return folder


def _cache_key_of(folder: Path) -> str:
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("cache_key", "")
    except (OSError, ValueError, AttributeError):
        return ""


def check_given(prepared: Prepared, given: list[tuple[str, str, str]]) -> None:
    """Files named beside --data ((flag, path, split)) must be the ones the folder was prepared from (the first
    source recorded for that split), by SHA-256."""
    from seqlab.fileio import file_sha256

    for flag, path, split in given:
        recorded = prepared.manifest.get("sources", {}).get(split) or []
        if path and recorded and recorded[0].get("sha256") and file_sha256(path, flag) != recorded[0]["sha256"]:
            raise SeqlabError(f"{flag} {path} is not the file {prepared.folder} was prepared from "
                              f"({recorded[0].get('path')}): leave {flag} out, or prepare again")

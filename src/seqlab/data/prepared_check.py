"""The checks a prepared folder passes as it is opened (`seqlab.data.prepared.Prepared`), so that its data is
never trusted blindly:

- confinement: every file its manifest names is a name inside the folder (no absolute path, no `..`, no link
  that leads out), and no link anywhere in the folder leads out of it, as an export is confined
  (`seqlab.export.manifest.confine`; both through `seqlab.fileio.escape` and `outward_link`);
- integrity: each shard's ids and each other file the manifest lists (its "hashes") have the SHA-256 the
  manifest records. Hashing costs about 2 s per GB here (2 cores), so it is done once and recorded in
  `verified.json` (each file's size, modification and change times, inode and SHA-256, and each shard's
  smallest and largest id); a later open hashes only the files whose size, times or inode differ from the
  record (`seqlab prepare` writes the record as it writes the folder, so a first run hashes nothing).
  `seqlab prepare --verify DIR` hashes every file again, whatever the record says (a disk that rots bits keeps
  the times);
- the ids' range: the smallest and largest id of each shard, from the record, for the family to check against
  the vocabulary it reads (`Prepared.check_ids`): reading no id;
- the sources: a source file still at its path whose size or time differ from the manifest's is hashed (once,
  recorded), and if its SHA-256 differs, a warning names it and the command that prepares the folder again.
  A source that is gone says nothing: the folder stands on its own.

A file that changes in the same clock tick as the record was written cannot be told from an unchanged one by
its times, so such an entry ("racy", as git calls it) is hashed again on the next open.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

from seqlab.errors import SeqlabError, SeqlabWarning, os_error_reason
from seqlab.fileio import atomic_write_json, escape, outward_link

MANIFEST = "manifest.json"
RECORD = "verified.json"
RECORD_FORMAT = "seqlab-prepared-verified"
HEADER_BYTES = 64                       # a shard's header (seqlab.data.prepared.HEADER), not hashed
CHUNK = 1 << 24                         # bytes read at a time while hashing
SETTLE_S = 2.0                          # the longest the record waits for the clock to pass what it records
_WARNED: set[tuple] = set()             # the warnings this process gave (a run opens its folder more than once)


# ---------------------------------------------------------------------------------------------- confinement


def confined(folder: Path, name, where: str = MANIFEST) -> Path:
    """`folder / name`, refused in one line unless `name` is a path inside the folder that stays inside it
    (links followed)."""
    problem = escape(folder, name)
    if problem == "no file name":
        raise SeqlabError(f"{folder}/{where} names the file {name!r}, which is no file name; prepare the folder "
                          "again")
    if problem == "outside":
        raise SeqlabError(f"{folder}/{where} names {name!r}, outside the prepared folder; a prepared folder is "
                          "read only from the files inside it")
    if problem == "a link":
        raise SeqlabError(f"{folder}/{where} names {name!r}, a link that leads outside the prepared folder; a "
                          "prepared folder is read only from the files inside it")
    return folder / name


def check_links(folder: Path) -> None:
    """Refuse a link anywhere in the folder that leads out of it (the fixed names, vocab.json and the rest,
    included)."""
    link = outward_link(folder)
    if link is not None:
        raise SeqlabError(f"{folder}: {link.relative_to(folder.resolve())} is a link to {os.readlink(link)}, outside "
                          "the prepared folder; a prepared folder is read only from the files inside it")


def shard_records(manifest: dict) -> list[dict]:
    """Every record of a run of shards the manifest lists ({"ids", "dtype", "shards"}): each split's own and
    its streams'."""
    found = []
    for split in manifest["splits"].values():
        if "shards" in split:
            found.append(split)
        found.extend(split.get("streams", {}).values())
    return found


def named_files(manifest: dict) -> list:
    """Every file name the manifest gives: the shards, each split's index and counts, the items' indexes, the
    files of its "hashes", and each split's arrays (`Split.array`) are confined where they are read."""
    names = [shard.get("file") for record in shard_records(manifest) for shard in record["shards"]]
    for split in manifest["splits"].values():
        names += [split[key] for key in ("index", "counts") if key in split]
        names += list(split.get("indexes", {}).values())
    return names + list(manifest.get("hashes", {}))


def confine(folder: Path, manifest: dict) -> None:
    """Refuse, in one line, a manifest that names a file outside the folder."""
    for name in named_files(manifest):
        confined(folder, name)


# ---------------------------------------------------------------------------------------------- integrity


def _stat(stat: os.stat_result) -> dict:
    return {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "ctime_ns": stat.st_ctime_ns,
            "inode": stat.st_ino}


def hash_file(path: Path, skip: int = 0, dtype: np.dtype | None = None) -> tuple[str, int | None, int | None]:
    """The SHA-256 of a file's bytes after the first `skip`, and with an integer `dtype` the smallest and largest
    of them read as ids (None for none)."""
    digest = hashlib.sha256()
    low = high = None
    ids = dtype is not None and dtype.kind in "iu"
    with open(path, "rb") as handle:
        handle.seek(skip)
        rest = b""
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
            if ids:
                chunk = rest + chunk
                whole = len(chunk) - len(chunk) % dtype.itemsize
                values, rest = np.frombuffer(chunk[:whole], dtype), chunk[whole:]
                if len(values):
                    low = int(values.min()) if low is None else min(low, int(values.min()))
                    high = int(values.max()) if high is None else max(high, int(values.max()))
    return digest.hexdigest(), low, high


class Record:
    """verified.json: what was hashed, when the file's size, times and inode were these."""

    def __init__(self, folder: Path, dataset_id: str):
        self.folder, self.dataset_id = folder, dataset_id
        self.files: dict[str, dict] = {}
        self.sources: dict[str, dict] = {}
        self.written_ns = 0                     # the record's own modification time, on the folder's clock
        self.changed = False
        try:
            with open(folder / RECORD, "rb") as handle:
                self.written_ns = os.fstat(handle.fileno()).st_mtime_ns
                saved = json.loads(handle.read())
            if saved.get("format") == RECORD_FORMAT and saved.get("id") == dataset_id:
                self.files, self.sources = dict(saved["files"]), dict(saved["sources"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass                                # none, or damaged: everything is hashed again

    def known(self, entries: dict, key: str, stat: os.stat_result, sha256: str | None = None) -> dict | None:
        """The entry of `key` if the file is as it was when hashed (and had `sha256`), else None."""
        entry = entries.get(key)
        if not isinstance(entry, dict) or any(entry.get(k) != v for k, v in _stat(stat).items()):
            return None
        if sha256 is not None and entry.get("sha256") != sha256:
            return None
        if stat.st_ctime_ns >= self.written_ns:        # changed in the tick the record was written: hash again
            return None
        return entry

    def note(self, entries: dict, key: str, stat: os.stat_result, **values) -> dict:
        entries[key] = {**_stat(stat), **values}
        self.changed = True
        return entries[key]

    def save(self) -> None:
        """Write the record if anything was hashed; a folder that cannot be written is checked again next time
        (said once)."""
        if not self.changed:
            return
        newest = max((entry["ctime_ns"] for entry in self.files.values()), default=0)
        waited = 0.0
        try:
            while True:
                atomic_write_json(self.folder / RECORD, {"format": RECORD_FORMAT, "id": self.dataset_id,
                                                         "files": self.files, "sources": self.sources})
                # a file changed in the tick the record is written would look unchanged, so its entries would be
                # hashed again next time: write it once the file system's clock has passed them (one tick of
                # a few milliseconds, a second where the file system keeps whole seconds)
                if (self.folder / RECORD).stat().st_mtime_ns > newest or waited >= SETTLE_S:
                    break
                time.sleep(0.005)
                waited += 0.005
        except (SeqlabError, OSError) as error:
            _warn_once(("record", str(self.folder)), f"{self.folder}: the checked SHA-256 of its files cannot be "
                       f"recorded ({error}); every run hashes the changed files again")
        self.changed = False


def verify(folder: Path, manifest: dict, everything: bool = False,
           sources: bool = True) -> tuple[dict[str, tuple[int, int] | None], dict]:
    """Check each shard's ids and each listed file against the SHA-256 of the manifest: from the record where
    the file is unchanged, else (or with `everything`) by hashing it; then, with `sources`, the sources
    (`check_sources`). Returns each shard's (smallest, largest) id (None: empty, or not ids) and what was done:
    {"files", "bytes", "hashed", "hashed_bytes", "seconds"}."""
    started = time.monotonic()
    record = Record(folder, manifest["id"])
    ranges: dict[str, tuple[int, int] | None] = {}
    done = {"files": 0, "bytes": 0, "hashed": 0, "hashed_bytes": 0}
    expected = [(shard["file"], shard.get("sha256"), np.dtype(run["dtype"]), HEADER_BYTES)
                for run in shard_records(manifest) for shard in run["shards"]]
    expected += [(name, sha256, None, 0) for name, sha256 in manifest.get("hashes", {}).items()]
    for name, sha256, dtype, skip in expected:
        path = folder / name
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise SeqlabError(f"{folder} is damaged: its file {name} is missing; prepare the folder again") from None
        except OSError as error:
            raise SeqlabError(f"cannot read {path}: {os_error_reason(error)}") from None
        if not isinstance(sha256, str):
            raise SeqlabError(f"{folder}/{MANIFEST} is damaged: it lists no SHA-256 of {name}; prepare the folder "
                              "again")
        done["files"] += 1
        done["bytes"] += stat.st_size
        entry = None if everything else record.known(record.files, name, stat, sha256)
        if entry is None:
            try:
                got, low, high = hash_file(path, skip, dtype)
            except OSError as error:
                raise SeqlabError(f"cannot read {path}: {os_error_reason(error)}") from None
            done["hashed"] += 1
            done["hashed_bytes"] += stat.st_size
            if got != sha256:
                what = "the ids" if dtype is not None else "the contents"
                raise SeqlabError(f"{path} does not hold {what} {folder}/{MANIFEST} lists (SHA-256 {got[:12]}..., "
                                  f"not {sha256[:12]}...): it was edited or damaged since it was prepared; prepare "
                                  "the folder again")
            entry = record.note(record.files, name, stat, sha256=got, min=low, max=high)
        if dtype is not None:
            low, high = entry.get("min"), entry.get("max")
            ranges[name] = (low, high) if isinstance(low, int) and isinstance(high, int) else None
    if sources:
        check_sources(folder, manifest, record)
    record.save()
    return ranges, {**done, "seconds": time.monotonic() - started}


def take_ranges(manifest: dict) -> dict[str, tuple]:
    """Each shard's (smallest, largest) id that `ShardWriter` noted in its manifest entry, taken out of it (the
    record keeps them, not the manifest)."""
    return {shard["file"]: (shard.pop("min", None), shard.pop("max", None))
            for run in shard_records(manifest) for shard in run["shards"]}


def first_record(folder: Path, manifest: dict, ranges: dict[str, tuple]) -> None:
    """The record `seqlab prepare` writes into the folder it has just written, from what it hashed while
    writing (each shard's SHA-256, and its `ranges`): the first run hashes nothing. Written after every other
    file (its time is what tells a file changed since)."""
    record = Record(folder, manifest["id"])
    for run in shard_records(manifest):
        for shard in run["shards"]:
            low, high = ranges.get(shard["file"], (None, None))
            record.note(record.files, shard["file"], (folder / shard["file"]).stat(), sha256=shard["sha256"],
                        min=low, max=high)
    for name, sha256 in manifest.get("hashes", {}).items():
        record.note(record.files, name, (folder / name).stat(), sha256=sha256, min=None, max=None)
    record.save()


def file_hashes(folder: Path, manifest: dict) -> dict[str, str]:
    """The SHA-256 of every file of a folder being written but its shards (hashed as they were written), its
    manifest and its record: the manifest's "hashes"."""
    shards = {shard["file"] for run in shard_records(manifest) for shard in run["shards"]}
    return {path.name: hash_file(path)[0] for path in sorted(folder.iterdir())
            if path.is_file() and path.name not in shards | {MANIFEST, RECORD}}


# ---------------------------------------------------------------------------------------------- the sources


def check_sources(folder: Path, manifest: dict, record: Record) -> None:
    """Warn about each source still at its path whose contents changed since the folder was prepared from it
    (its size and time first; its SHA-256, once, recorded, where those differ). A source that is gone, or
    cannot be read, says nothing: the prepared folder stands on its own."""
    for records in manifest.get("sources", {}).values():
        for source in records if isinstance(records, list) else []:
            if not isinstance(source, dict) or "path" not in source or "sha256" not in source:
                continue                                         # lines from memory (the bundled corpus)
            path = Path(source["path"])
            try:
                stat = path.stat()
            except OSError:
                continue
            if stat.st_size == source.get("bytes") and stat.st_mtime == source.get("mtime"):
                continue
            entry = record.known(record.sources, str(path), stat)
            if entry is None:
                try:
                    got = hash_file(path)[0]
                except OSError:
                    continue
                entry = record.note(record.sources, str(path), stat, sha256=got)
            if entry["sha256"] != source["sha256"]:
                _warn_once((str(folder.resolve()), str(path), entry["sha256"]), changed_source(folder, manifest, path,
                                                                                              source["sha256"]))


def changed_source(folder: Path, manifest: dict, path: Path, sha256: str) -> str:
    command = manifest.get("command") or f"seqlab prepare {manifest.get('family', 'FAMILY')} ... --output {folder}"
    if "--overwrite" not in command.split():
        command += " --overwrite"
    return (f"{path} changed since {folder} was prepared from it (then SHA-256 {sha256[:12]}...): this run trains "
            f"on the ids prepared from the file as it was; to train on it as it is now, prepare again: {command}")


def _warn_once(key: tuple, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, SeqlabWarning, stacklevel=3)

"""Items of a prepared split (sentences with their tags, documents with their labels, source and target pairs):
named columns, each a stream of ids in shards (`seqlab.data.prepared.ShardWriter`) with an index of where each
item's part starts, so that item i is read by position and no split is ever held whole.

    writer = ItemWriter(prepared_writer, "train", {"words": "<u2", "tags": "<u1"}, texts=("tokens",))
    writer.add(words=[5, 9, 3], tags=[1, 0, 2], tokens=["The", "cat", "sat"])
    record = writer.close()            # the split's record for the manifest: {"items": n, "streams": ...}

    items = Items(prepared.split("train"))
    items.column("words", 0)           # array([5, 9, 3], dtype=uint16)
    items.texts("tokens", 0)           # ["The", "cat", "sat"]
    items.lengths("words")             # every item's length (bucketing), from the index alone

A text column keeps non-empty strings as their UTF-8 bytes separated by NUL (no text seqlab reads holds a NUL: the
readers refuse one), for what needs the words themselves: a tagger's character features and gold tags, LM
features, a copy model's source words.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from seqlab.data.prepared import MANIFEST, ShardWriter, Split, TokenShards, Writer
from seqlab.data.prepared_check import confined
from seqlab.errors import SeqlabError

TEXT_DTYPE = np.dtype("<u1")


class ItemWriter:
    """One split's items, added in order (see the module docstring)."""

    def __init__(self, writer: Writer, split: str, columns: dict[str, str | np.dtype], texts: tuple[str, ...] = ()):
        self.writer, self.split = writer, split
        self.columns = {name: np.dtype(dtype) for name, dtype in columns.items()}
        self.texts = tuple(texts)
        self.streams: dict[str, ShardWriter] = {}
        self.indexes = {}
        self.ends: dict[str, int] = {}
        for name, dtype in [*self.columns.items(), *((t, TEXT_DTYPE) for t in self.texts)]:
            self.streams[name] = writer.shards(f"{split}.{name}", dtype)
            self.indexes[name] = open(writer.folder / f"{split}.{name}.idx", "wb")     # noqa: SIM115 (closed in close)
            self.indexes[name].write(np.zeros(1, "<i8").tobytes())
            self.ends[name] = 0
        self.items = 0
        self._pending: dict[str, list[np.ndarray]] = {name: [] for name in self.streams}
        self._offsets: dict[str, list[int]] = {name: [] for name in self.streams}

    def add(self, **parts) -> None:
        """One item: each column's ids (any int sequence) and each text column's strings."""
        for name, dtype in self.columns.items():
            values = np.asarray(parts[name], dtype=np.int64)
            if len(values) and (values.min() < np.iinfo(dtype).min or values.max() > np.iinfo(dtype).max):
                raise SeqlabError(f"an id of column {name} does not fit {dtype}")
            self._append(name, values.astype(dtype))
        for name in self.texts:
            data = "\0".join(parts[name]).encode("utf-8")
            self._append(name, np.frombuffer(data, TEXT_DTYPE))
        self.items += 1
        if self.items % 4096 == 0:
            self._flush()

    def _append(self, name: str, values: np.ndarray) -> None:
        self._pending[name].append(values)
        self.ends[name] += len(values)
        self._offsets[name].append(self.ends[name])

    def _flush(self) -> None:
        for name, parts in self._pending.items():
            if parts:
                self.streams[name].write(np.concatenate(parts))
                self.indexes[name].write(np.asarray(self._offsets[name], "<i8").tobytes())
            self._pending[name], self._offsets[name] = [], []

    def close(self) -> dict:
        """The split's record for the manifest."""
        self._flush()
        for handle in self.indexes.values():
            handle.close()
        return {"items": self.items, "streams": {name: stream.close() for name, stream in self.streams.items()},
                "indexes": {name: f"{self.split}.{name}.idx" for name in self.streams},
                "texts": list(self.texts)}


class Items:
    """A prepared split's items, read by position (see the module docstring)."""

    def __init__(self, split: Split):
        self.split, self.folder = split, Path(split.folder)
        record = split.record
        if "items" not in record or "indexes" not in record:
            raise SeqlabError(f"{self.folder}/{MANIFEST} is damaged: split {split.name} lists no items; prepare again")
        self.count = record["items"]
        self.streams: dict[str, TokenShards] = {name: split.stream(name) for name in record["streams"]}
        self.offsets: dict[str, np.ndarray] = {}
        for name, file in record["indexes"].items():
            path = confined(self.folder, file)
            size = path.stat().st_size if path.exists() else -1
            if size != 8 * (self.count + 1):
                raise SeqlabError(f"{path} is {'missing' if size < 0 else 'truncated'}: the index of {self.count:,} "
                                  f"items takes {8 * (self.count + 1):,} bytes; prepare the folder again")
            self.offsets[name] = np.memmap(path, "<i8", "r")
        self.text_columns = set(record.get("texts", ()))

    def __len__(self) -> int:
        return self.count

    def column(self, name: str, i: int) -> np.ndarray:
        offsets = self.offsets[name]
        return self.streams[name].read(int(offsets[i]), int(offsets[i + 1]))

    def texts(self, name: str, i: int) -> list[str]:
        data = self.column(name, i).tobytes().decode("utf-8")
        return data.split("\0") if data else []

    def lengths(self, name: str) -> np.ndarray:
        """Every item's length in `name` (ids, or bytes for a text column), from the index."""
        return np.diff(np.asarray(self.offsets[name]))

    def close(self) -> None:
        for stream in self.streams.values():
            stream.close()

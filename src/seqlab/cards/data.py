"""The training data section of a model card (Gebru et al. 2018, "Datasheets for Datasets"), from the run's
own files: per file its sheet (`seqlab.cards.datasheet`: identity, size, character set, duplicates); per split
its units, labels and duplicates, and the contamination of each evaluation split by train (GPT-3's 13-gram
test, 50 characters for character models) with its out-of-vocabulary rate. Each family reads its splits
with its own readers (its `cards` part: `read_split`, `side_unit`, `training_data`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from seqlab.cards import datasheet as sheets
from seqlab.cards.splits import OOVCount, Split, unit_tokens
from seqlab.contract import Family


def training_data(family: Family, config: Any) -> dict[str, Any]:
    """The datasheet section: per file its sheet; per split its units, labels, duplicates and
    contamination by train (each split read by the family's `cards` part); or, when the family says what
    its data was without files (a language model on the bundled corpus), its own sheet.

    Every file and split is streamed (`SplitFigures`): the evaluation splits are read first, their lines
    indexed (`datasheet.EvalIndex`), then the training split once past them, then the evaluation splits
    again for their contamination and out-of-vocabulary figures. Memory holds the vocabulary, 8 bytes a
    line and the evaluation splits' n-grams, whatever the size of the training text."""
    reading = family.part("cards")
    own = reading.training_data(config)
    if own is not None:
        return own
    if getattr(config.data, "prepared", ""):
        return prepared_sheet(config.data.prepared, family)
    splits = {option: split for option, _ in family.splits if (split := reading.read_split(config, option))}
    train = splits.get("train")
    indexes = {side: sheets.EvalIndex(unit=reading.side_unit(config, side)) for side in train.sides} if train \
        else {}
    figures = {name: SplitFigures(split) for name, split in splits.items()}
    for name, split in splits.items():                      # the evaluation splits' lines, to look for
        if name != "train":
            figures[name].read(want=[indexes.get(side) for side in split.sides])
    if train is not None:                                   # the training text, once, past them
        figures["train"].read(scan=[indexes[side] for side in train.sides])
    files = {}
    for name, split in splits.items():
        for option, path in split.files.items():
            units = figures[name].units if len(split.files) == 1 or option == split.name else None
            files[option] = sheets.file_sheet(path, option, family.unit if units is not None else "lines", units)
    out: dict[str, Any] = {"unit": family.unit, "files": files, "splits": {}, "contamination": {}, "oov": {}}
    for name in splits:
        out["splits"][name] = figures[name].sheet()
    if train is not None:
        checks = {name: figures[name].check(indexes, figures["train"].known) for name in splits if name != "train"}
        for side in train.sides:
            for name in checks:
                key = name if side == "text" else f"{name} ({side})"
                out["contamination"][key], out["oov"][key] = checks[name][side]
    return out


class SplitFigures:
    """A split's figures, from its units read one at a time: the units, labels and duplicates per side; on
    the training split the tokens each side knows (for out-of-vocabulary rates)."""

    def __init__(self, split: Split):
        self.split = split
        self.units = 0
        self.labels: Counter[str] = Counter()
        self.duplicates = {side: sheets.DuplicateCount() for side in split.sides}
        self.known: dict[str, set[str]] = {}

    def read(self, want: list[Any] | None = None, scan: list[Any] | None = None) -> None:
        """One pass over the split: its own figures, and each side's lines given to `want` (an evaluation
        split's, to look for) or to `scan` (the training split's, looked through; their tokens kept)."""
        sides = self.split.sides
        if scan is not None:
            self.known = {side: set() for side in sides}
        for texts, labels in self.split.read():
            self.units += 1
            self.labels.update(labels)
            for k, side in enumerate(sides):
                text = texts[k] or ""
                line = sheets.normalise(text)
                if line:
                    self.duplicates[side].add(line)
                if want is not None and want[k] is not None:
                    want[k].want(text)
                if scan is not None:
                    scan[k].scan(text)
                    self.known[side].update(unit_tokens(text, scan[k].unit))

    def sheet(self) -> dict[str, Any]:
        return {"units": self.units, **({"labels": sheets.label_distribution(self.labels)} if self.labels else {}),
                "duplicates": {side: count.result() for side, count in self.duplicates.items()}}

    def check(self, indexes: dict[str, Any],
              known: dict[str, set[str]]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """An evaluation split read again: per side of the training split, its contamination (against what
        the training text held of it) and its out-of-vocabulary rate."""
        sides = [side for side in indexes if side in self.split.sides]
        tallies = {side: indexes[side].tally() for side in sides}
        unseen = {side: OOVCount(known[side], indexes[side].unit) for side in sides}
        positions = {side: self.split.sides.index(side) for side in sides}
        for texts, _ in self.split.read():
            for side in sides:
                text = texts[positions[side]] or ""
                tallies[side].add(text, indexes[side].texts, indexes[side].ngrams)
                unseen[side].add(text)
        return {side: (tallies[side].result(), unseen[side].result()) for side in sides}


def prepared_sheet(folder: str, family: Family) -> dict[str, Any]:
    """A run trained from a prepared folder (--data): what its manifest says (the sources with their bytes and
    SHA-256, each split's units and ids); the data are not read again, so no duplicates or contamination."""
    import json

    try:
        manifest = json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    sources = {(name if len(records) == 1 else f"{name} ({k + 1})"): record
               for name, records in manifest.get("sources", {}).items() for k, record in enumerate(records)}
    splits = {}
    for name, split in manifest.get("splits", {}).items():
        ids = split.get("ids") or sum(stream.get("ids", 0) for stream in split.get("streams", {}).values())
        splits[name] = {"units": split.get("items", split.get("lines", 0)), "tokens": ids, "duplicates": {}}
    return {"unit": family.unit, "bundled": f"the prepared folder `{folder}` (`seqlab prepare {family.name}`)",
            "files": {}, "sources": sources, "splits": splits, "contamination": {}, "oov": {}}


def read_units(path: str | Path, task: str, fmt: str = "text", columns: Any = None,
               fields: tuple[str, str] = ("source", "target")) -> dict[str, Any]:
    """A family's units of a file, their texts (for contamination) and labels, read by seqlab's own readers
    (the family's `cards` part: `read_units`): a language model's lines; a tagger's sentences of a `conll` /
    `conllu` file (labels: its tags); a classifier's documents of `fmt` (labels: its classes); a
    sequence-to-sequence model's source-target pairs of `fmt` (texts: the sources). `columns` (a
    `seqlab.data.documents.Columns`) and `fields` (source and target field names) are passed to the
    readers that take them. Returns {"unit", "units", "texts", "labels"}."""
    from seqlab.registry import FAMILIES

    if task not in FAMILIES:
        raise ValueError(f"task must be one of {', '.join(FAMILIES)}, not {task!r}")
    return FAMILIES[task].part("cards").read_units(path, fmt, columns=columns, fields=fields)

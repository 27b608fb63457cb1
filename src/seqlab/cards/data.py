"""The training data section of a model card (Gebru et al. 2018, "Datasheets for Datasets"), from the run's
own files: per file its sheet (`seqlab.cards.datasheet`: identity, size, character set, duplicates); per split
its units, labels and duplicates, and the contamination of each evaluation split by train (GPT-3's 13-gram
test, 50 characters for character models) with its out-of-vocabulary rate. Each family reads its splits
with its own readers (its `cards` part: `read_split`, `side_unit`, `training_data`)."""

from __future__ import annotations

from pathlib import Path

from seqlab.cards import datasheet as sheets
from seqlab.cards.splits import nonblank, oov_rate, tokens_of
from seqlab.families.contract import Family


def training_data(family: Family, config) -> dict:
    """The datasheet section: per file its sheet; per split its units, labels, duplicates and
    contamination by train (each split read by the family's `cards` part); or, when the family says what
    its data was without files (a language model on the bundled corpus), its own sheet."""
    reading = family.part("cards")
    own = reading.training_data(config)
    if own is not None:
        return own
    if getattr(config.data, "prepared", ""):
        return prepared_sheet(config.data.prepared, family)
    splits = {option: split for option, _ in family.splits if (split := reading.read_split(config, option))}
    files = {}
    for split in splits.values():
        for option, path in split.files.items():
            units = split.units if len(split.files) == 1 or option == split.name else None
            sheet = sheets.file_sheet(path, option, family.unit if units is not None else "lines", units)
            files[option] = sheet
    train = splits.get("train")
    out = {"unit": family.unit, "files": files, "splits": {}, "contamination": {}, "oov": {}}
    for name, split in splits.items():
        out["splits"][name] = {"units": split.units,
                               **({"labels": sheets.label_distribution(split.labels)} if split.labels else {}),
                               "duplicates": {side: sheets.duplicate_lines(nonblank(texts))
                                              for side, texts in split.texts.items()}}
    if train is not None:
        for side, texts in train.texts.items():
            unit = reading.side_unit(config, side)
            index = sheets.TrainIndex(texts, unit=unit)
            known = set(tokens_of(texts, unit))
            for name, split in splits.items():
                if name == "train":
                    continue
                key = name if side == "text" else f"{name} ({side})"
                out["contamination"][key] = index.check(split.texts[side])
                out["oov"][key] = oov_rate(split.texts[side], known, unit)
    return out


def prepared_sheet(folder: str, family: Family) -> dict:
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


def read_units(path: str | Path, task: str, fmt: str = "text", columns=None,
               fields: tuple[str, str] = ("source", "target")) -> dict:
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

"""The training data section of a model card (Gebru et al. 2018, "Datasheets for Datasets"), from the run's
own files: per file its sheet (`seqlab.cards.datasheet`: identity, size, character set, duplicates); per split
its units, labels and duplicates, and the contamination of each evaluation split by train (GPT-3's 13-gram
test, 50 characters for character models) with its out-of-vocabulary rate. Each family reads its splits
with its own readers (its `cards` part: `read_split`, `side_unit`, `training_data`)."""

from __future__ import annotations

import dataclasses

from seqlab.cards import datasheet as sheets
from seqlab.families.contract import Family


@dataclasses.dataclass
class Split:
    """One split as the task reads it: its files, units, the texts compared for contamination (per side
    for pairs), and labels."""
    name: str
    files: dict[str, str]                 # {option: path}
    units: int
    texts: dict[str, list[str]]           # {"text"} or {"source", "target"}
    labels: list[str]


def training_data(family: Family, config) -> dict:
    """The datasheet section: per file its sheet; per split its units, labels, duplicates and
    contamination by train (each split read by the family's `cards` part); or, when the family says what
    its data was without files (a language model on the bundled corpus), its own sheet."""
    reading = family.part("cards")
    own = reading.training_data(config)
    if own is not None:
        return own
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
                               "duplicates": {side: sheets.duplicate_lines(_nonblank(texts))
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


def _nonblank(texts: list[str]) -> list[str]:
    return [text for text in map(sheets.normalise, texts) if text]


def tokens_of(texts: list[str], unit: str) -> list[str]:
    """The units a model of `unit` reads: whitespace tokens, or characters (spaces left out)."""
    if unit == "char":
        return [char for text in texts for char in text if not char.isspace()]
    return [token for text in texts for token in text.split()]


def oov_rate(texts: list[str], known: set[str], unit: str = "word") -> dict:
    """Tokens (characters, for character models) of `texts` never seen in the training split's texts: as a
    share of the tokens, and the number of such types."""
    tokens = tokens_of(texts, unit)
    unseen = [token for token in tokens if token not in known]
    return {"unit": unit, "tokens": len(tokens), "unseen_tokens": len(unseen),
            "token_rate": len(unseen) / len(tokens) if tokens else 0.0,
            "types": len(set(tokens)), "unseen_types": len(set(unseen))}


# What most families' `cards` parts say (they import these under the contract's names):

def word_units(config, side: str) -> str:
    """`side_unit`: every side is compared by words (13-grams)."""
    return "word"


def no_own_sheet(config) -> None:
    """`training_data`: the family's files, read as every family's (`training_data` above)."""
    return None


def one_file(data, option: str) -> tuple[str, dict, list[str]] | None:
    """`evaluation_file`: the split's one file (its data option's value), no options for its evaluation."""
    path = getattr(data, option, "")
    return (path, {}, [path]) if path else None

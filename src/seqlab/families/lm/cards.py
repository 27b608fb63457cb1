"""A language model's model card data (`seqlab.cards`): each split a file of lines (or the bundled corpus,
split 90/10, when the run read no --train), compared by characters for a character model; no bootstrap
intervals (the evaluation scores a file as one stream of tokens, not a sum over lines that could be
resampled: `seqlab.cards.intervals`)."""

from __future__ import annotations

from pathlib import Path

from seqlab.cards import datasheet as sheets
from seqlab.cards.splits import Split, nonblank, oov_rate, tokens_of


def read_split(config, option: str) -> Split | None:
    """A split of the run's data config: its non-blank lines (None when not given)."""
    path = getattr(config.data, option)
    if not path:
        return None
    lines = sheets.read_lines(path)
    return Split(option, {option: path}, len(lines), {"text": lines}, [])


def read_units(path: str | Path, fmt: str = "text", **options) -> dict:
    """A file's units (lines), their texts and labels (none), for `seqlab.cards.datasheet.read_units`."""
    texts = sheets.read_lines(path)
    return {"unit": "lines", "units": len(texts), "texts": texts, "labels": []}


def side_unit(config, side: str) -> str:
    """"char" where the model reads characters (50-character n-grams), else "word" (13-grams)."""
    return "char" if config.data.tokenizer == "char" else "word"


def training_data(config) -> dict | None:
    """The bundled corpus's sheet when the run read no --train (None: its files, read as every family's)."""
    return None if config.data.train else bundled_corpus_sheet(config)


def bundled_corpus_sheet(config) -> dict:
    """An LM trained on the bundled Tiny Shakespeare (no --train): the file, its 90/10 split (see
    `seqlab.data.readers.default_corpus`), and contamination of the 10% by the 90%."""
    from importlib import resources

    from seqlab.data.readers import DEFAULT_CORPUS, default_corpus

    train_lines, valid_lines = default_corpus()
    path = Path(str(resources.files("seqlab.corpora").joinpath(DEFAULT_CORPUS)))
    train, valid = nonblank(train_lines), nonblank(valid_lines)
    unit = side_unit(config, "text")
    index = sheets.TrainIndex(train, unit=unit)
    known = set(tokens_of(train, unit))
    return {"unit": "lines", "bundled": f"the bundled {DEFAULT_CORPUS}: train = its lines up to 90% of its "
                                        "characters, valid = the rest",
            "files": {"corpus": sheets.file_sheet(path, "corpus")},
            "splits": {"train": {"units": len(train), "duplicates": {"text": sheets.duplicate_lines(train)}},
                       "valid": {"units": len(valid), "duplicates": {"text": sheets.duplicate_lines(valid)}}},
            "contamination": {"valid": index.check(valid)}, "oov": {"valid": oov_rate(valid, known, unit)}}



def evaluation_file(data, option: str) -> None:
    """No evaluation file gets intervals (the module's docstring)."""
    return None


def interval_items(trained, path, progress, read_options: dict) -> None:
    """No per-line items (the module's docstring)."""
    return None

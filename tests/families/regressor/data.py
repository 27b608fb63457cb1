"""A regressor's data, torch-free (the ONNX runtime reads it too): the items of a file, one 'VALUE<TAB>text'
line each, and the vocabulary of the training texts."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError


def tokens(text: str, lowercase: bool) -> list[str]:
    return (text.lower() if lowercase else text).split()


def read_items(path: str | Path, what: str) -> list[tuple[str, float]]:
    """(text, value) of each line of `path`; a line that is not 'VALUE<TAB>text' is one error naming it."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise SeqlabError(f"{what} {path}: {error.strerror or error}") from None
    items = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        value, tab, text = line.partition("\t")
        try:
            number_value = float(value)
        except ValueError:
            number_value = math.nan
        if not tab or not text.strip() or not math.isfinite(number_value):
            raise SeqlabError(f"{what} {path}:{number}: expected 'VALUE<TAB>text' with a finite number, found "
                              f"{line[:60]!r}")
        items.append((text, number_value))
    if not items:
        raise SeqlabError(f"{what} {path} holds no items")
    return items


def build_vocab(items: list[tuple[str, float]], lowercase: bool) -> Vocab:
    return Vocab.build(Counter(t for text, _ in items for t in tokens(text, lowercase)))


def read_vocab(folder: str | Path) -> Vocab:
    """vocab.json of a run (or of an export's seqlab/ folder)."""
    path = Path(folder) / "vocab.json"
    try:
        return Vocab.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise SeqlabError(f"{path} cannot be read ({error}); retrain into this directory with --overwrite") from None


def ids(vocab: Vocab, text: str, lowercase: bool) -> list[int]:
    """A text's ids (an empty text reads as one <unk>)."""
    return vocab.encode(tokens(text, lowercase)) or [1]

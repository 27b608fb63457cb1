"""What a family's `cards` part reads its data into for a model card (`seqlab.cards.data` drives it): a
`Split` (files, sides, and its units read one at a time), the units a side is compared by, out-of-vocabulary
rates, and the answers of the cards contract that most families share (`word_units`, `no_own_sheet`,
`one_file`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from seqlab.cards import datasheet as sheets

Unit = tuple[tuple[str, ...], Iterable[str]]      # one unit's texts (one per side) and its labels


@dataclasses.dataclass
class Split:
    """One split as the task reads it: its files, the sides its texts are compared by for contamination
    ("text", or "source" and "target" for pairs), and `read`, which reads the split again at each call and
    gives its units one at a time, each as (its texts, one per side, its labels): never the split whole."""
    name: str
    files: dict[str, str]                 # {option: path}
    sides: tuple[str, ...]                # ("text",) or ("source", "target")
    read: Callable[[], Iterator[Unit]]


def nonblank(texts: list[str]) -> list[str]:
    return [text for text in map(sheets.normalise, texts) if text]


def tokens_of(texts: list[str], unit: str) -> list[str]:
    """The units a model of `unit` reads: whitespace tokens, or characters (spaces left out)."""
    if unit == "char":
        return [char for text in texts for char in text if not char.isspace()]
    return [token for text in texts for token in text.split()]


def unit_tokens(text: str, unit: str) -> list[str] | str:
    """`tokens_of` one text: its whitespace tokens, or its characters but spaces."""
    return "".join(text.split()) if unit == "char" else text.split()


class OOVCount:
    """`oov_rate`, streamed: the tokens of evaluation texts added one text at a time against the training
    split's `known` tokens (memory: the evaluation split's types)."""

    def __init__(self, known: set[str], unit: str = "word"):
        self.known, self.unit = known, unit
        self.tokens = self.unseen = 0
        self.types: set[str] = set()
        self.unseen_types: set[str] = set()

    def add(self, text: str) -> None:
        tokens = unit_tokens(text, self.unit)
        self.tokens += len(tokens)
        self.types.update(tokens)
        for token in tokens:
            if token not in self.known:
                self.unseen += 1
                self.unseen_types.add(token)

    def result(self) -> dict[str, Any]:
        return {"unit": self.unit, "tokens": self.tokens, "unseen_tokens": self.unseen,
                "token_rate": self.unseen / self.tokens if self.tokens else 0.0,
                "types": len(self.types), "unseen_types": len(self.unseen_types)}


def oov_rate(texts: list[str], known: set[str], unit: str = "word") -> dict[str, Any]:
    """Tokens (characters, for character models) of `texts` never seen in the training split's texts: as a
    share of the tokens, and the number of such types."""
    tokens = tokens_of(texts, unit)
    unseen = [token for token in tokens if token not in known]
    return {"unit": unit, "tokens": len(tokens), "unseen_tokens": len(unseen),
            "token_rate": len(unseen) / len(tokens) if tokens else 0.0,
            "types": len(set(tokens)), "unseen_types": len(set(unseen))}


# What most families' `cards` parts say (they import these under the contract's names):

def word_units(config: Any, side: str) -> str:
    """`side_unit`: every side is compared by words (13-grams)."""
    return "word"


def no_own_sheet(config: Any) -> None:
    """`training_data`: the family's files, read as every family's (`training_data` above)."""
    return None


def one_file(data: Any, option: str) -> tuple[str, dict[str, Any], list[str]] | None:
    """`evaluation_file`: the split's one file (its data option's value), no options for its evaluation."""
    path = getattr(data, option, "")
    return (path, {}, [path]) if path else None

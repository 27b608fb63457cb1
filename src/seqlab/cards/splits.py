"""What a family's `cards` part reads its data into for a model card (`seqlab.cards.data` drives it): a
`Split` (files, units, texts, labels), the units a side is compared by, out-of-vocabulary rates, and the
answers of the cards contract that most families share (`word_units`, `no_own_sheet`, `one_file`)."""

from __future__ import annotations

import dataclasses

from seqlab.cards import datasheet as sheets


@dataclasses.dataclass
class Split:
    """One split as the task reads it: its files, units, the texts compared for contamination (per side
    for pairs), and labels."""
    name: str
    files: dict[str, str]                 # {option: path}
    units: int
    texts: dict[str, list[str]]           # {"text"} or {"source", "target"}
    labels: list[str]


def nonblank(texts: list[str]) -> list[str]:
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

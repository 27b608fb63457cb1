"""Documents -> hand-built feature vectors, for the classifiers (their tokens and n-grams:
`seqlab.data.words`).

The built-in features are those of the chapter's sentiment example (SLP 6.4.1, taken from the
logistic-regression chapter's Fig. 5.2), generalised from two lexicons to one per class:

    x_c  count of the document's words in the lexicon of class c      (one feature per lexicon class)
    x    1 if a negation word is in the document ("no", "not", "n't", "never", ...), else 0
    x    count of first- and second-person pronouns
    x    1 if "!" is in the document, else 0
    x    ln(word count)

The lexicon is a file of "word class" lines, or is derived from the training split: for each class,
the words (seen in at least `min_count` training documents) whose smoothed log-odds of appearing in
that class's documents against the others' is highest. Features are standardised with the training
split's mean and standard deviation (kept in the run directory), so one learning rate suits them all.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from seqlab.errors import SeqlabError, where
from seqlab.fileio import read_text

if TYPE_CHECKING:
    from torch import Tensor

NEGATIONS = frozenset("no not n't never nothing nobody none neither nor nowhere cannot without".split())
PRONOUNS = frozenset("i me my mine myself we us our ours ourselves you your yours yourself yourselves".split())


def derive_lexicon(token_lists: list[list[str]], labels: list[str], size: int = 100,
                   min_count: int = 5) -> dict[str, str]:
    """word -> class: for each class, the `size` words (in >= `min_count` documents) with the highest
    log-odds of appearing in that class's documents rather than in the others', add-one smoothed."""
    classes = sorted(set(labels))
    in_class = {c: Counter() for c in classes}
    documents = Counter(labels)
    for tokens, label in zip(token_lists, labels, strict=True):
        in_class[label].update(set(tokens))
    total = Counter()
    for counts in in_class.values():
        total.update(counts)
    lexicon: dict[str, str] = {}
    for c in classes:
        others = len(labels) - documents[c]

        def log_odds(word: str, c=c, others=others) -> float:
            inside, outside = in_class[c][word], total[word] - in_class[c][word]
            p_in = (inside + 1) / (documents[c] + 2)
            p_out = (outside + 1) / (others + 2)
            return math.log(p_in / (1 - p_in)) - math.log(p_out / (1 - p_out))

        candidates = sorted((w for w, n in total.items() if n >= min_count and w not in lexicon),
                            key=lambda w: (-log_odds(w), w))
        lexicon.update({w: c for w in candidates[:size] if log_odds(w) > 0})
    return lexicon


def read_lexicon(path: str | Path, lowercase: bool = True) -> dict[str, str]:
    """A lexicon file: "word class" per line (whitespace-separated; '#' starts a comment line)."""
    lexicon = {}
    for number, line in enumerate(read_text(path, "lexicon file").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            raise SeqlabError(f"lexicon file {where(path, number)}: expected 'word class', found {len(fields)} "
                              f"fields in {line.strip()[:60]!r}")
        lexicon[fields[0].lower() if lowercase else fields[0]] = fields[1]
    if not lexicon:
        raise SeqlabError(f"lexicon file {path} lists no words")
    return lexicon


class FeatureExtractor:
    """Documents -> standardised feature vectors (N, F): the built-in features (with `lexicon`), then
    the numeric columns the user gave, in that order."""

    def __init__(self, lexicon: dict[str, str] | None, num_columns: int = 0,
                 mean: list[float] | None = None, std: list[float] | None = None):
        self.lexicon = lexicon
        self.classes = sorted(set(lexicon.values())) if lexicon is not None else []
        self.num_columns = num_columns
        self.mean, self.std = mean, std

    @property
    def names(self) -> list[str]:
        builtin = ([f"lexicon:{c}" for c in self.classes] + ["negation", "pronouns", "exclamation", "log_length"]
                   if self.lexicon is not None else [])
        return builtin + [f"column:{i}" for i in range(self.num_columns)]

    def raw(self, tokens: list[str], columns: list[float] | None) -> list[float]:
        values = []
        if self.lexicon is not None:
            found = Counter(self.lexicon[t] for t in tokens if t in self.lexicon)
            values += [float(found[c]) for c in self.classes]                       # SLP Fig. 5.2 x1, x2
            values.append(float(any(t in NEGATIONS for t in tokens)))                 # x3 ("no" in doc)
            values.append(float(sum(t in PRONOUNS for t in tokens)))                  # x4
            values.append(float("!" in tokens))                                       # x5
            values.append(math.log(max(len(tokens), 1)))                              # x6 ln(word count)
        if self.num_columns:
            if columns is None or len(columns) != self.num_columns:
                raise SeqlabError(f"this classifier reads {self.num_columns} feature columns; the document "
                                  "has none: give the input in the training format (--input-format)")
            values += columns
        return values

    def fit(self, rows: list[list[float]]) -> None:
        """The training split's mean and standard deviation per feature."""
        import torch  # here: reading texts into features needs no torch (the ONNX runtime)

        table = torch.tensor(rows, dtype=torch.float64)                               # (N, F)
        self.mean = table.mean(0).tolist()
        self.std = [s if s > 1e-12 else 1.0 for s in table.std(0, unbiased=False).tolist()]

    def __call__(self, rows: list[list[float]]) -> Tensor:
        """Standardised features (N, F)."""
        import torch

        table = torch.tensor(rows, dtype=torch.float32)                               # (N, F)
        return (table - torch.tensor(self.mean)) / torch.tensor(self.std)

    def to_dict(self) -> dict:
        return {"lexicon": self.lexicon, "num_columns": self.num_columns, "mean": self.mean, "std": self.std,
                "names": self.names}

    @classmethod
    def from_dict(cls, data: dict) -> FeatureExtractor:
        return cls(data["lexicon"], data["num_columns"], data["mean"], data["std"])

"""Documents -> tokens and bags of n-grams: the words of a text, read the same by training, the trained
model, the ONNX runtime and the exercises (torch-free).

Tokenizers: `whitespace` splits on whitespace (for pre-tokenized files such as SST); `words` first
drops HTML tags (IMDB's "<br />"), then keeps runs of letters and digits with their inner
apostrophes and hyphens ("don't", "re-imagining", "n't", "'s") and every other symbol as its own
token.
"""

from __future__ import annotations

import re

from seqlab.errors import SeqlabError

TOKENIZERS = ("words", "whitespace")

_TAG = re.compile(r"<[^>]{0,40}>")
_WORD = re.compile(r"\w+(?:['\-]\w+)*|'\w+|[^\w\s]")


def tokenize(text: str, kind: str = "words", lowercase: bool = True) -> list[str]:
    """One document -> its tokens."""
    if lowercase:
        text = text.lower()
    if kind == "whitespace":
        return text.split()
    if kind != "words":
        raise SeqlabError(f"--tokenizer {kind!r}: choose one of {', '.join(TOKENIZERS)}")
    return _WORD.findall(_TAG.sub(" ", text))


def with_ngrams(tokens: list[str], n: int) -> list[str]:
    """The tokens followed by their 2- to n-grams ("a fine film" -> ..., "a fine", "fine film"); the
    bag of n-grams of fastText (Joulin et al. 2017) for the pooled classifier."""
    grams = list(tokens)
    for size in range(2, n + 1):
        grams += map(" ".join, zip(*(tokens[k:] for k in range(size)), strict=False))   # shifted copies
    return grams

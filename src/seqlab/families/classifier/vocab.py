"""Documents -> ids for the classifiers: `DocumentVocabulary` (texts -> token ids or feature vectors,
labels -> class ids) and the batches it collates (`DocBatch`).

Importing it needs no PyTorch: the ONNX runtime (`seqlab.export.runtime`) reads texts into ids with it;
the methods that build tensors import torch when called.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING

from seqlab.data.documents import Document
from seqlab.data.vocab import PAD, UNK, Vocab
from seqlab.data.words import tokenize, with_ngrams
from seqlab.errors import DAMAGED, SeqlabError, where
from seqlab.families.classifier.features import FeatureExtractor
from seqlab.fileio import read_json

if TYPE_CHECKING:
    from torch import Tensor


@dataclass
class DocBatch:
    """B right-padded documents: words (B, T) and lengths (B,) (None for the features classifier),
    features (B, F) or None, labels (B,) (-1: none), and the words' LM features (B, T, Fl) or None
    (`seqlab.nn.lm_features`)."""

    words: Tensor | None
    lengths: Tensor | None
    features: Tensor | None
    labels: Tensor
    lm: Tensor | None = None

    def rows(self, start: int, stop: int) -> DocBatch:
        def cut(t):
            return None if t is None else t[start:stop]
        return DocBatch(cut(self.words), cut(self.lengths), cut(self.features), self.labels[start:stop],
                        cut(self.lm))

    def to(self, device) -> DocBatch:
        def move(t):
            return None if t is None else t.to(device)
        return DocBatch(move(self.words), move(self.lengths), move(self.features), self.labels.to(device),
                        move(self.lm))

    @property
    def num_tokens(self) -> int:
        """What the loss is averaged over: documents."""
        return len(self.labels)


@dataclass
class EncodedDoc:
    words: Tensor | None          # (n,)
    features: list[float] | None
    label: int
    tokens: list[str] | None = None   # the tokens read, kept for LM features (`keep_tokens`)
    lm: Tensor | None = None          # (n, Fl): the tokens' LM features (`seqlab.families.classifier.task`)


@dataclass
class Truncation:
    """How many documents were longer than the maximum length, and were cut."""

    documents: int = 0
    truncated: int = 0
    longest: int = 0

    def report(self, what: str, max_length: int, keep: str) -> str | None:
        if not self.truncated:
            return None
        return (f"{what}: {self.truncated:,} of {self.documents:,} documents ({self.truncated / self.documents:.1%}) "
                f"are longer than --max-length {max_length} tokens (the longest: {self.longest:,}) and were "
                f"truncated to their {'first' if keep == 'head' else 'last'} {max_length}")


class DocumentVocabulary:
    """Texts -> token ids (or feature vectors) and labels -> class ids; vocabulary, labels, lexicon
    and feature statistics come from the training documents only."""

    def __init__(self, words: Vocab | None, labels: list[str], tokenizer: str = "words", lowercase: bool = True,
                 ngrams: int = 1, max_length: int = 0, truncate: str = "head",
                 features: FeatureExtractor | None = None, lowercase_fallback: bool = False):
        self.words, self.labels, self.tokenizer, self.lowercase = words, labels, tokenizer, lowercase
        self.ngrams, self.max_length, self.truncate, self.features = ngrams, max_length, truncate, features
        self.lowercase_fallback = lowercase_fallback
        self.label_index = {label: i for i, label in enumerate(labels)}
        self.keep_tokens = False      # encode_all keeps each document's tokens (a model with LM features)

    def tokens(self, text: str) -> list[str]:
        return tokenize(text, self.tokenizer, self.lowercase)

    def cut(self, tokens: list[str], counter: Truncation | None = None) -> list[str]:
        """The first (or last) max_length tokens, counting what was truncated."""
        if counter is not None:
            counter.documents += 1
        if self.max_length and len(tokens) > self.max_length:
            if counter is not None:
                counter.truncated += 1
                counter.longest = max(counter.longest, len(tokens))
            return tokens[:self.max_length] if self.truncate == "head" else tokens[-self.max_length:]
        return tokens

    def word_ids(self, tokens: list[str]) -> list[int]:
        index = self.words.index
        if self.lowercase_fallback:
            ids = [index[t] if t in index else index.get(t.lower(), UNK) for t in tokens]
        else:
            ids = list(map(index.get, tokens, repeat(UNK)))      # a third faster than a comprehension
        return ids or [UNK]                                # a document of no tokens reads as one <unk>

    def label_id(self, document: Document, path, what: str) -> int:
        if document.label is None:
            return -1
        if document.label not in self.label_index:
            raise SeqlabError(f"{what} {where(path, document.line)}: label {document.label!r} never occurs in the "
                              f"training data; the classifier knows {', '.join(map(repr, self.labels))}")
        return self.label_index[document.label]

    def encode_all(self, documents: list[Document], path="", what: str = "file", counter: Truncation | None = None,
                   token_lists: list[list[str]] | None = None) -> list[EncodedDoc]:
        """The documents as ids (and features); `token_lists`: their tokens, when already at hand."""
        import torch

        encoded = []
        for i, document in enumerate(documents):
            tokens = self.cut(token_lists[i] if token_lists is not None else self.tokens(document.text), counter)
            words = features = None
            if self.words is not None:
                grams = with_ngrams(tokens, self.ngrams) if self.ngrams > 1 else tokens
                words = torch.tensor(self.word_ids(grams), dtype=torch.long)         # (n,)
            if self.features is not None:
                features = self.features.raw(tokens, document.features)
            encoded.append(EncodedDoc(words, features, self.label_id(document, path, what),
                                      tokens if self.keep_tokens else None))
        return encoded

    def collate(self, items: list[EncodedDoc]) -> DocBatch:
        import torch
        from torch.nn.utils.rnn import pad_sequence

        words = lengths = features = None
        if self.words is not None:
            lengths = torch.tensor([len(item.words) for item in items])
            words = torch.full((len(items), int(lengths.max())), PAD, dtype=torch.long)   # (B, T)
            for b, item in enumerate(items):
                words[b, :len(item.words)] = item.words
        if self.features is not None:
            features = self.features([item.features for item in items])                  # (B, F)
        lm = None
        if words is not None and items[0].lm is not None:                       # one row per word: (B, T, Fl)
            lm = pad_sequence([item.lm for item in items], batch_first=True)
        return DocBatch(words, lengths, features, torch.tensor([item.label for item in items]), lm)


def read_document_vocabulary(run_dir: Path, tokenizer: str, lowercase: bool, ngrams: int, max_length: int,
                             truncate: str) -> DocumentVocabulary:
    """A classifier's vocabulary (vocab.json and / or features.json) and labels, read as its run's data
    options say (--tokenizer, --lowercase, --ngrams, --max-length, --truncate)."""
    try:
        labels = read_json(run_dir / "labels.json", "labels file")["labels"]
        words, fallback = None, False
        if (run_dir / "vocab.json").exists():
            vocab = read_json(run_dir / "vocab.json", "vocabulary file")
            words, fallback = Vocab.from_dict(vocab), bool(vocab.get("lowercase_fallback"))
        features = FeatureExtractor.from_dict(read_json(run_dir / "features.json", "features file")) \
            if (run_dir / "features.json").exists() else None
    except DAMAGED as error:
        raise SeqlabError(f"{run_dir}: vocab.json, labels.json or features.json is damaged ({error}); retrain "
                          "into this directory with --overwrite") from None
    if words is None and features is None:
        raise SeqlabError(f"{run_dir} has neither vocab.json nor features.json")
    return DocumentVocabulary(words, list(labels), tokenizer, lowercase, ngrams, max_length, truncate, features,
                              fallback)


@dataclass
class Prediction:
    """The predicted class, its probability, and every class's probability."""

    label: str
    probability: float
    probabilities: dict[str, float]

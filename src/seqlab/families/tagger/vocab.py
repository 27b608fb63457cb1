"""Sentences -> ids for the taggers: `TaggerVocabulary` (words, characters and tags -> ids) and the
batches it collates (`TagBatch`).

Importing it needs no PyTorch: the ONNX runtime (`seqlab.export.runtime`) reads sentences into ids with
it; the methods that build tensors import torch when called.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from seqlab.data.tags import is_entity_tagset
from seqlab.data.vocab import PAD, UNK, Vocab
from seqlab.errors import DAMAGED, SeqlabError
from seqlab.families.tagger.conll import Sentence
from seqlab.fileio import read_json

if TYPE_CHECKING:
    from torch import Tensor

UNKNOWN_LABEL = -1


@dataclass
class TagBatch:
    """B right-padded sentences: words (B, T), lengths (B,), tags (B, T) (-1: padding or a tag
    training never saw), chars (B, T, C) or None, the gold tag strings, and the words' LM features
    (B, T, Fl) or None (`seqlab.nn.lm_features`)."""

    words: Tensor
    lengths: Tensor
    tags: Tensor
    chars: Tensor | None
    gold: list[list[str]]
    lm: Tensor | None = None

    def rows(self, start: int, stop: int) -> TagBatch:
        chars = self.chars[start:stop] if self.chars is not None else None
        lm = self.lm[start:stop] if self.lm is not None else None
        return TagBatch(self.words[start:stop], self.lengths[start:stop], self.tags[start:stop], chars,
                        self.gold[start:stop], lm)

    def to(self, device) -> TagBatch:
        chars = self.chars.to(device) if self.chars is not None else None
        lm = self.lm.to(device) if self.lm is not None else None
        return TagBatch(self.words.to(device), self.lengths.to(device), self.tags.to(device), chars, self.gold, lm)

    @property
    def mask(self) -> Tensor:
        import torch

        return torch.arange(self.words.size(1), device=self.words.device)[None, :] < self.lengths[:, None]

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())


@dataclass
class Encoded:
    """One sentence as ids: words (n,), tags (n,), chars (n, C) or None, its gold tag strings, and its
    words' LM features (n, Fl) or None (set by `seqlab.families.tagger.task.with_lm_features`)."""

    words: Tensor
    tags: Tensor
    chars: Tensor | None
    gold: list[str]
    lm: Tensor | None = None


class TaggerVocabulary:
    """Words, characters and tags -> ids, with vocabularies from the training sentences only."""

    def __init__(self, words: Vocab, labels: list[str], chars: Vocab | None = None, max_word_chars: int = 20,
                 lowercase_fallback: bool = False):
        """`lowercase_fallback`: a word not in the vocabulary reads as its lowercase form when that is
        (set with pretrained vectors, whose files are often lowercased)."""
        self.words, self.labels, self.chars, self.max_word_chars = words, labels, chars, max_word_chars
        self.lowercase_fallback = lowercase_fallback
        self.label_index = {label: i for i, label in enumerate(labels)}

    @classmethod
    def build(cls, sentences: list[Sentence], min_freq: int = 1, max_size: int | None = None,
              char_features: bool = False) -> TaggerVocabulary:
        words = Vocab.build(Counter(t for s in sentences for t in s.tokens), min_freq, max_size)
        labels = sorted({label for s in sentences for label in s.labels})
        chars = Vocab.build(Counter(c for s in sentences for t in s.tokens for c in t)) if char_features else None
        return cls(words, labels, chars)

    @property
    def entity_tags(self) -> bool:
        return is_entity_tagset(self.labels)

    def word_ids(self, tokens: list[str]) -> list[int]:
        if not self.lowercase_fallback:
            return self.words.encode(tokens)
        index = self.words.index
        return [index[t] if t in index else index.get(t.lower(), UNK) for t in tokens]

    def encode(self, sentence: Sentence) -> Encoded:
        """One sentence as ids, once: training re-batches the same encodings every epoch."""
        import torch

        return Encoded(torch.tensor(self.word_ids(sentence.tokens), dtype=torch.long),
                       torch.tensor([self.label_index.get(label, UNKNOWN_LABEL) for label in sentence.labels],
                                    dtype=torch.long), self.spell(sentence.tokens), sentence.labels)

    def spell(self, tokens: list[str]) -> Tensor | None:
        """The words' characters as ids (n, C), C the longest word's up to `max_word_chars`; None without
        character features. From the words themselves, so an unseen word is spelled too."""
        if self.chars is None:
            return None
        import torch

        C = min(self.max_word_chars, max((len(t) for t in tokens), default=1))
        index = self.chars.index
        spelled = [[index.get(c, UNK) for c in token[:C]] for token in tokens]
        return torch.tensor([ids + [PAD] * (C - len(ids)) for ids in spelled],
                            dtype=torch.long).reshape(len(tokens), C)                # (n, C)

    def collate(self, items: list[Encoded], width: tuple[int, int] | None = None) -> TagBatch:
        """Encoded sentences -> one right-padded batch; `width` (T, C): pad to these (the whole global batch's,
        when these items are one process's rows of it) rather than to the items' own longest."""
        import torch

        B, T = len(items), max(len(item.words) for item in items)
        C = max(item.chars.size(1) for item in items) if self.chars is not None else 0
        if width is not None:
            T, C = width
        words = torch.full((B, T), PAD, dtype=torch.long)
        tags = torch.full((B, T), UNKNOWN_LABEL, dtype=torch.long)
        chars = torch.full((B, T, C), PAD, dtype=torch.long) if self.chars is not None else None
        lm = None
        if items[0].lm is not None:
            lm = torch.zeros((B, T, items[0].lm.size(-1)), dtype=items[0].lm.dtype)   # (B, T, Fl)
            for b, item in enumerate(items):
                lm[b, :len(item.lm)] = item.lm
        for b, item in enumerate(items):
            n = len(item.words)
            words[b, :n], tags[b, :n] = item.words, item.tags
            if chars is not None:
                chars[b, :n, :item.chars.size(1)] = item.chars
        lengths = torch.tensor([len(item.words) for item in items])
        return TagBatch(words, lengths, tags, chars, [item.gold for item in items], lm)

    def batch(self, sentences: list[Sentence]) -> TagBatch:
        return self.collate([self.encode(s) for s in sentences])


def read_tagger_vocabulary(run_dir: Path) -> tuple[TaggerVocabulary, str, str]:
    """A tagger's vocabulary, the scheme the model tags in and the training file's scheme."""
    try:
        vocab = read_json(run_dir / "vocab.json", "vocabulary file")
        words = Vocab.from_dict(vocab)
        labels = read_json(run_dir / "labels.json", "labels file")
        chars = Vocab.from_dict(read_json(run_dir / "chars.json", "characters file")) \
            if (run_dir / "chars.json").exists() else None
        fallback = bool(vocab.get("lowercase_fallback"))
        vocabulary = TaggerVocabulary(words, list(labels["labels"]), chars, lowercase_fallback=fallback)
        return vocabulary, labels["scheme"], labels.get("file_scheme", labels["scheme"])
    except DAMAGED as error:
        raise SeqlabError(f"{run_dir}: vocab.json, labels.json or chars.json is damaged ({error}); retrain into this "
                          "directory with --overwrite") from None

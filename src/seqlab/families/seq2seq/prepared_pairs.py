"""A prepared split's pairs read back (`seqlab.families.seq2seq.prepare` writes them): the training pairs as
batches read by position, the development and test pairs as `EncodedPair` lists.

A prepared pair is its ids as the tokenizers and vocabularies give them, whole (no length limit: the limits
belong to the model, `resolve_lengths`), in the item columns of `seqlab.data.prepared_items`:

    source, target           the ids of each side (`PairVocabulary.encode` before its limits)
    source_unk, target_unk   the words of each side read as <unk>, in order (text columns): with the
                             vocabularies they give back every token's string, which copy attention's
                             extended vocabulary needs (See et al. 2017; `PairVocabulary.extend`)

The limits are applied here as `PairVocabulary.encode` applies them: which training pairs --long-pairs skip
drops, and every batch's lengths, come from the column indexes alone; a pair is read and cut when a batch's
rows are asked for. The training batches are those of the in-memory path (`pair_batches`): the same
`length_batches` over the same lengths and seed, each global batch padded to its own widths whichever rows of
it a process reads (`seqlab.data.batching.RowBatch`), so under DDP each process reads only its rows.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from seqlab.data.batching import RowBatch, length_batches
from seqlab.data.prepared import Split
from seqlab.data.prepared_items import Items
from seqlab.data.vocab import UNK
from seqlab.families.seq2seq.vocab import EncodedPair, LengthReport, PairVocabulary

COLUMNS = ("source", "target")
TEXTS = ("source_unk", "target_unk")


def read_pair(items: Items, i: int, vocabulary: PairVocabulary, long: str, report: LengthReport) -> EncodedPair | None:
    """Item i as `PairVocabulary.encode` gives it (None: skipped)."""
    source, target = items.column("source", i).tolist(), items.column("target", i).tolist()
    source_tokens = target_tokens = None
    if vocabulary.copy:                             # every token's string, for the extended vocabulary
        source_tokens = _tokens(source, vocabulary.source_vocab.tokens, items.texts("source_unk", i))
        target_tokens = _tokens(target, vocabulary.target_vocab.tokens, items.texts("target_unk", i))
    return vocabulary.within_limits(source, target, long, report, source_tokens, target_tokens, i + 1)


def _tokens(ids: list[int], tokens: list[str], unknown: list[str]) -> list[str]:
    words = iter(unknown)
    return [next(words) if i == UNK else tokens[i] for i in ids]


def read_pairs(split: Split, vocabulary: PairVocabulary, report: LengthReport) -> list[EncodedPair]:
    """A development or test split in memory, truncated to the limits (counted in `report`)."""
    items = Items(split)
    try:
        return [read_pair(items, i, vocabulary, "truncate", report) for i in range(len(items))]
    finally:
        items.close()


def read_tokens(split: Split, vocabulary: PairVocabulary, side: str, n: int) -> list[list[str]]:
    """The first n pairs' tokens of one side ("source" or "target"), whole (no length limit): every token's
    string, the words read as <unk> given back."""
    items = Items(split)
    try:
        words = getattr(vocabulary, f"{side}_vocab").tokens
        return [_tokens(items.column(side, i).tolist(), words, items.texts(f"{side}_unk", i))
                for i in range(min(n, len(items)))]
    finally:
        items.close()


def read_targets(split: Split, vocabulary: PairVocabulary, n: int) -> list[str]:
    """The first n targets of a split as text, joined by the target tokenizer: the references the outputs are
    scored against during training (`seqlab.families.seq2seq.task_metric`)."""
    return [vocabulary.target_tokenizer.detokenize(tokens) for tokens in read_tokens(split, vocabulary, "target", n)]


def unknown_words(split: Split, side: str) -> Counter:
    """How often each word of one side was read as <unk> in the split (only the pairs that have one are read)."""
    items = Items(split)
    try:
        name = f"{side}_unk"
        return Counter(word for i in np.flatnonzero(items.lengths(name)) for word in items.texts(name, int(i)))
    finally:
        items.close()


class PreparedPairs:
    """The training pairs of a prepared split: which are kept, their lengths, and each epoch's batches."""

    def __init__(self, split: Split, vocabulary: PairVocabulary, long: str, report: LengthReport):
        self.items, self.vocabulary, self.long = Items(split), vocabulary, long
        source = np.maximum(self.items.lengths("source"), 1)            # an empty source is read as <unk>
        target = self.items.lengths("target")
        S, T = vocabulary.max_source, vocabulary.max_target
        source_over = source > S if S else np.zeros(len(source), bool)
        target_over = target > T if T else np.zeros(len(target), bool)
        report.pairs += len(source)
        if long == "skip":
            self.kept = np.flatnonzero(~(source_over | target_over))
            report.skipped += len(source) - len(self.kept)
        else:
            self.kept = np.arange(len(source))
            report.truncated_sources += int(source_over.sum())
            report.truncated_targets += int(target_over.sum())
        self.source_lengths = np.minimum(source[self.kept], S) if S else source[self.kept]
        self.target_lengths = np.minimum(target[self.kept], T) if T else target[self.kept]

    def __len__(self) -> int:
        return len(self.kept)

    def mean_positions(self) -> float:
        """The mean of `decoder_positions` over the pairs."""
        positions = self.target_lengths + 1 + (self.source_lengths if self.vocabulary.joint else 0)
        return int(positions.sum()) / max(len(self), 1)

    def lengths(self) -> list[int]:
        """`pair_lengths`: the length batches are grouped by."""
        return (self.source_lengths + self.target_lengths).tolist()

    def batches(self, batch_size: int, seed: int | None) -> PairBatches:
        return PairBatches(self, length_batches(self.lengths(), batch_size, seed))

    def widths(self, group: list[int]) -> tuple[int, int]:
        """(S, T) of the batch `collate` makes of the pairs at `group`: the longest source, and the decoder's
        positions (<s> + target, or the lm's source <sep> target </s> less one)."""
        S, T = self.source_lengths[group], self.target_lengths[group]
        return int(S.max()), int((S + T + 1).max() if self.vocabulary.joint else (T + 1).max())

    def read(self, group: list[int], widths: tuple[int, int]):
        if not group:                                 # a process with no rows of a short batch
            return self.read([0], widths).rows(0, 0)
        report = LengthReport()                       # counted once, from the lengths
        pairs = [read_pair(self.items, int(self.kept[k]), self.vocabulary, "truncate", report) for k in group]
        return self.vocabulary.collate(pairs, widths)


class PairBatches:
    """One epoch's global batches, each read when its rows are asked for (`RowBatch`)."""

    def __init__(self, pairs: PreparedPairs, groups: list[list[int]]):
        self.pairs, self.groups = pairs, groups

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, k: int) -> RowBatch:
        if not 0 <= k < len(self):
            raise IndexError(k)
        group = self.groups[k]
        widths = self.pairs.widths(group)
        return RowBatch(len(group), lambda first, last: self.pairs.read(group[first:last], widths))

    def __iter__(self):
        return (self[k] for k in range(len(self)))

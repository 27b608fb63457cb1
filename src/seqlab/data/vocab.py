"""Token <-> id with fixed special ids, built from the training split only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from seqlab.errors import SeqlabError

PAD, UNK, BOS, EOS, SEP = 0, 1, 2, 3, 4
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>", "<sep>")
NEVER_GENERATED = (PAD, BOS, SEP)       # ids that are never a model's output (`seqlab.decoding.processors`)


class Vocab:
    """A list of tokens whose first five are always `<pad> <unk> <s> </s> <sep>` (ids 0-4)."""

    def __init__(self, tokens: list[str]):
        if not isinstance(tokens, list) or tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise SeqlabError(f"a vocabulary must be a list starting with {SPECIALS}, got {str(tokens)[:80]}")
        if not all(isinstance(t, str) for t in tokens):
            raise SeqlabError("a vocabulary lists tokens as strings; this one holds "
                              f"{next(t for t in tokens if not isinstance(t, str))!r}")
        self.tokens = list(tokens)
        self.index = {token: i for i, token in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            raise SeqlabError("the vocabulary lists a token twice")

    @classmethod
    def build(cls, counts: Counter, min_freq: int = 1, max_size: int | None = None) -> Vocab:
        """Most frequent first (ties by token, so the result is deterministic)."""
        kept = sorted((t for t, n in counts.items() if n >= min_freq and t not in SPECIALS),
                      key=lambda t: (-counts[t], t))
        if max_size is not None:
            kept = kept[: max(0, max_size - len(SPECIALS))]
        return cls(list(SPECIALS) + kept)

    @classmethod
    def of_pieces(cls, pieces: Iterable[str]) -> Vocab:
        """The specials, then `pieces` in their order (a subword model's own vocabulary). A piece spelled
        like a special is left out (byte-level BPE cannot learn one: its pre-tokenizer splits `<s>`
        into `<`, `s`, `>`)."""
        return cls(list(SPECIALS) + [piece for piece in pieces if piece not in SPECIALS])

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self.index

    def encode(self, tokens: Iterable[str]) -> list[int]:
        index = self.index
        return [index.get(t, UNK) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.tokens[i] for i in ids]

    def to_dict(self) -> dict:
        return {"tokens": self.tokens}

    @classmethod
    def from_dict(cls, data: dict) -> Vocab:
        return cls(data["tokens"])

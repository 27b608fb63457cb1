"""Characters, whitespace words and BPE subwords behind one interface, each saved as JSON.

A tokenizer turns one line (without its newline) into token strings and back. The end of a line is
the vocabulary's `</s>`, added by the caller (see `seqlab.data.readers.encode_lines`): one `</s>`
per line, the convention of PTB and wikitext-2. For characters `</s>` is the newline character, so
a character stream has exactly the tokens of nanoGPT's `shakespeare_char` (65 symbols).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from seqlab.errors import SeqlabError


class Tokenizer:
    """One line of text <-> a list of token strings."""

    kind = ""
    unit = "token"           # what perplexity is measured per, for reports
    joiner = ""              # how detokenized lines are joined within a line

    def fit(self, lines: Iterable[str]) -> None:
        """Learn from the training lines (only BPE learns anything)."""

    def tokenize(self, line: str) -> list[str]:
        raise NotImplementedError

    def tokenize_lines(self, lines: list[str]) -> list[list[str]]:
        return [self.tokenize(line) for line in lines]

    def detokenize(self, tokens: list[str]) -> str:
        """Tokens of one line (no </s>) -> text."""
        return self.joiner.join(tokens)

    def to_dict(self) -> dict:
        return {"kind": self.kind}


class CharTokenizer(Tokenizer):
    kind, unit, joiner = "char", "character", ""

    def tokenize(self, line: str) -> list[str]:
        return list(line)


class WordTokenizer(Tokenizer):
    """Whitespace-separated words, as PTB and wikitext-2 ship them (already tokenized)."""

    kind, unit, joiner = "word", "word", " "

    def tokenize(self, line: str) -> list[str]:
        return line.split()


class BPETokenizer(Tokenizer):
    """Byte-level BPE (GPT-2 style) learned on the training split with Hugging Face `tokenizers`.

    Byte-level means every string is representable: BPE never produces an unknown token for text
    whose bytes occurred in training.
    """

    kind, unit = "bpe", "BPE token"

    def __init__(self, vocab_size: int = 8000, min_frequency: int = 2, state: str | None = None):
        from tokenizers import Tokenizer as HFTokenizer

        self.vocab_size = vocab_size
        self.min_frequency = min_frequency
        self._hf = HFTokenizer.from_str(state) if state is not None else None

    def fit(self, lines: Iterable[str]) -> None:
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, pre_tokenizers, trainers

        hf = HFTokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        hf.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=self.vocab_size, min_frequency=self.min_frequency,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        hf.train_from_iterator((_prefix_space(line) for line in lines), trainer=trainer)
        self._hf = hf

    @property
    def hf(self):
        if self._hf is None:
            raise SeqlabError("the BPE tokenizer has not been trained: call fit() on the training lines")
        return self._hf

    def tokenize(self, line: str) -> list[str]:
        return self.hf.encode(_prefix_space(line)).tokens

    def tokenize_lines(self, lines: list[str]) -> list[list[str]]:
        return [encoding.tokens for encoding in self.hf.encode_batch([_prefix_space(x) for x in lines])]

    def detokenize(self, tokens: list[str]) -> str:
        text = self.hf.decoder.decode(tokens)
        return text[1:] if text.startswith(" ") else text

    def to_dict(self) -> dict:
        return {"kind": self.kind, "vocab_size": self.vocab_size, "min_frequency": self.min_frequency,
                "state": json.loads(self.hf.to_str())}


def _prefix_space(line: str) -> str:
    """The line as the byte-level pre-tokenizer must see it for `detokenize` to give it back.

    `add_prefix_space` adds a space only to a line that does not start with one, and `detokenize`
    removes one, so a line that starts with a space (every wikitext-2 line) would lose it: give such
    a line its prefix space explicitly. Other lines are unchanged.
    """
    return " " + line if line.startswith(" ") else line


TOKENIZERS = {"char": CharTokenizer, "word": WordTokenizer, "bpe": BPETokenizer}


def make_tokenizer(kind: str, bpe_vocab_size: int = 8000) -> Tokenizer:
    if kind not in TOKENIZERS:
        raise SeqlabError(f"unknown tokenizer {kind!r}: choose one of {', '.join(TOKENIZERS)}")
    return BPETokenizer(bpe_vocab_size) if kind == "bpe" else TOKENIZERS[kind]()


def tokenizer_from_dict(data: dict) -> Tokenizer:
    kind = data.get("kind")
    if kind == "bpe":
        return BPETokenizer(data["vocab_size"], data["min_frequency"], state=json.dumps(data["state"]))
    if kind not in TOKENIZERS:
        raise SeqlabError(f"unknown tokenizer kind {kind!r} in tokenizer.json")
    return TOKENIZERS[kind]()

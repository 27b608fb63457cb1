"""Characters, whitespace words, BPE subwords and Moses words (raw text) behind one interface, each saved as JSON.

A tokenizer turns one line (without its newline) into token strings and back. The end of a line is
the vocabulary's `</s>`, added by the caller (see `seqlab.data.readers.encode_lines`): one `</s>`
per line, the convention of PTB and wikitext-2. For characters `</s>` is the newline character, so
a character stream has exactly the tokens of nanoGPT's `shakespeare_char` (65 symbols).

Each tokenizer also says which vocabulary its tokens get ids from (`vocabulary`): words and
characters those seen in training (`min_freq`, `max_size`); byte-level BPE every piece of its own
model, so that no text ever gets an `<unk>`.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Iterable

from seqlab.data.vocab import Vocab
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

    def token_bytes(self, token: str) -> bytes:
        """The bytes a token stands for (its UTF-8; a byte-level BPE piece's bytes, which may be part of a
        character)."""
        return token.encode("utf-8")

    def vocabulary(self, token_lines: list[list[str]], min_freq: int = 1, max_size: int | None = None) -> Vocab:
        """The vocabulary of a model over these tokens: the tokens of the training lines seen at least
        `min_freq` times, the `max_size` most frequent (specials included), the rest read as `<unk>`."""
        counts = Counter(token for tokens in token_lines for token in tokens)
        return Vocab.build(counts, min_freq, max_size)

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

    Byte-level means every string is representable: any UTF-8 text is a sequence of the 256 byte
    symbols, which are pieces of the model whether or not training saw them, so with the model's own
    vocabulary (`vocabulary`) no text ever gets an `<unk>`.
    """

    kind, unit = "bpe", "BPE token"

    def __init__(self, vocab_size: int = 8000, min_frequency: int = 2, state: str | None = None):
        from tokenizers import Tokenizer as HFTokenizer

        self.vocab_size = vocab_size
        self.min_frequency = min_frequency
        try:
            self._hf = HFTokenizer.from_str(state) if state is not None else None
        except Exception as error:           # the tokenizers library raises a plain Exception
            raise SeqlabError(f"the saved BPE tokenizer cannot be read ({str(error)[:120]}); the run directory's "
                              "tokenizer.json is damaged") from None

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

    def token_bytes(self, token: str) -> bytes:
        """The bytes of a piece, each written as a character of GPT-2's byte-level alphabet (`byte_of`)."""
        alphabet = byte_of()
        if all(char in alphabet for char in token):
            return bytes(alphabet[char] for char in token)
        return token.encode("utf-8")                   # a special token (<unk>, ...): not bytes of the text

    def pieces(self) -> list[str]:
        """Every piece of the trained BPE model in the model's id order: the 256 byte symbols (sorted),
        then each merge's result in the order the merges were learned."""
        ids = self.hf.get_vocab()
        return sorted(ids, key=ids.__getitem__)

    def vocabulary(self, token_lines: list[list[str]], min_freq: int = 1, max_size: int | None = None) -> Vocab:
        """The BPE model's own pieces after the five specials, whatever training used: `min_freq` and
        `max_size` do not apply (the size is the model's, `--bpe-vocab-size`)."""
        return Vocab.of_pieces(self.pieces())

    def to_dict(self) -> dict:
        return {"kind": self.kind, "vocab_size": self.vocab_size, "min_frequency": self.min_frequency,
                "state": json.loads(self.hf.to_str())}


class MosesTokenizer(Tokenizer):
    """Raw text split as Moses's `tokenizer.perl -a -no-escape -l LANG` splits it, with sacremoses (the port
    fairseq and Hugging Face use): punctuation apart from words (`dog.` -> `dog .`), numbers whole (`5,300.50`),
    the language's abbreviations whole (en `U.S.`, de `z.B.`), English clitics as `doesn 't`, French and
    Italian elisions as `l' homme`, hyphens as `well @-@ known`. `detokenize` is Moses's detokenizer for the
    language, so decoded tokens come back as ordinary text (`dog .` -> `dog.`).

    Other languages than en, fr and it have their apostrophes split (`geht ' s`); a language without a Moses list
    of abbreviations keeps those of every list."""

    kind, unit, joiner = "moses", "word", " "

    def __init__(self, lang: str = "en"):
        try:
            from sacremoses import MosesDetokenizer
            from sacremoses import MosesTokenizer as Moses
        except ImportError:
            raise SeqlabError("the moses tokenizer needs the sacremoses package: pip install sacremoses") from None

        self.lang = lang
        self._tokenizer, self._detokenizer = Moses(lang), MosesDetokenizer(lang)

    def tokenize(self, line: str) -> list[str]:
        return self._tokenizer.tokenize(line, aggressive_dash_splits=True, escape=False)

    def detokenize(self, tokens: list[str]) -> str:
        return self._detokenizer.detokenize(tokens, unescape=False)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "lang": self.lang}


@functools.cache
def byte_of() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the character that stands for each byte in a byte-level BPE piece ->
    the byte (the printable bytes stand for themselves; the others are shifted past 255 in order: " " is "Ġ")."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [byte for byte in range(256) if byte not in printable]
    return {**{chr(byte): byte for byte in printable}, **{chr(256 + k): byte for k, byte in enumerate(shifted)}}


def _prefix_space(line: str) -> str:
    """The line as the byte-level pre-tokenizer must see it for `detokenize` to give it back.

    `add_prefix_space` adds a space only to a line that does not start with one, and `detokenize`
    removes one, so a line that starts with a space (every wikitext-2 line) would lose it: give such
    a line its prefix space explicitly. Other lines are unchanged.
    """
    return " " + line if line.startswith(" ") else line


TOKENIZERS = {"char": CharTokenizer, "word": WordTokenizer, "bpe": BPETokenizer}
# tokenizers by a language's rules, for families that tokenize a line at a time through `tokenize`
# (sequence to sequence); the language model's prepare reads words and characters its own way, so it
# offers TOKENIZERS only
RULE_TOKENIZERS = {"moses": MosesTokenizer}


def make_tokenizer(kind: str, bpe_vocab_size: int = 8000, lang: str = "en") -> Tokenizer:
    """A tokenizer of `kind`; `bpe_vocab_size` for bpe, `lang` (a language code) for moses."""
    if kind == "moses":
        return MosesTokenizer(lang)
    if kind not in TOKENIZERS:
        raise SeqlabError(f"unknown tokenizer {kind!r}: choose one of {', '.join([*TOKENIZERS, *RULE_TOKENIZERS])}")
    return BPETokenizer(bpe_vocab_size) if kind == "bpe" else TOKENIZERS[kind]()


def tokenizer_from_dict(data: dict) -> Tokenizer:
    kind = data.get("kind")
    if kind == "bpe":
        return BPETokenizer(data["vocab_size"], data["min_frequency"], state=json.dumps(data["state"]))
    if kind == "moses":
        return MosesTokenizer(data.get("lang", "en"))
    if kind not in TOKENIZERS:
        raise SeqlabError(f"unknown tokenizer kind {kind!r} in tokenizer.json")
    return TOKENIZERS[kind]()

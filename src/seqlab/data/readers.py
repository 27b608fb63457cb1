"""Plain-text corpora: a file of lines -> token strings -> one stream of ids with `</s>` per line."""

from __future__ import annotations

from collections import Counter
from importlib import resources
from pathlib import Path

import torch

from seqlab.data.tokenizers import Tokenizer
from seqlab.data.vocab import EOS, UNK, Vocab
from seqlab.errors import SeqlabError
from seqlab.fileio import read_text

DEFAULT_CORPUS = "tinyshakespeare.txt"


def read_lines(path: str | Path, what: str = "file") -> list[str]:
    """The lines of a UTF-8 text file, without their newlines (a final newline adds no line)."""
    text = read_text(path, what)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def default_corpus() -> tuple[list[str], list[str]]:
    """The bundled Tiny Shakespeare, split 90/10 at the line nearest 90% of the characters."""
    text = resources.files("seqlab.corpora").joinpath(DEFAULT_CORPUS).read_text(encoding="utf-8")
    lines = text.split("\n")[:-1]
    target, seen, cut = 0.9 * len(text), 0, 0
    while seen < target:
        seen += len(lines[cut]) + 1
        cut += 1
    return lines[:cut], lines[cut:]


def count_tokens(token_lines: list[list[str]]) -> Counter:
    counts = Counter()
    for tokens in token_lines:
        counts.update(tokens)
    return counts


def encode_lines(token_lines: list[list[str]], vocab: Vocab) -> torch.Tensor:
    """One id stream: each line's ids followed by `</s>` (the PTB / wikitext-2 convention)."""
    ids: list[int] = []
    for tokens in token_lines:
        ids.extend(vocab.encode(tokens))
        ids.append(EOS)
    return torch.tensor(ids, dtype=torch.long)


def count_characters(lines: list[str]) -> int:
    """The characters of a text as a language model's bits per character count them: every character
    (Unicode code point) of each line as read, plus one per line for its line break, the `</s>` that
    ends each line of the token stream (so a last line without a final newline is counted as ended
    too, and a CRLF counts as one break). For a character-level model this is the number of tokens
    scored."""
    return sum(len(line) for line in lines) + len(lines)


def read_stream(source: str | Path | list[str], tokenizer: Tokenizer, vocab: Vocab,
                what: str = "file") -> tuple[torch.Tensor, int]:
    """Read, tokenize and encode a file (or lines already read) -> (ids, characters, see
    `count_characters`); refuse a file that is all unknowns."""
    lines = read_lines(source, what) if not isinstance(source, list) else source
    ids = encode_lines(tokenizer.tokenize_lines(lines), vocab)
    words = ids[ids != EOS]
    if len(words) and bool((words == UNK).all()):
        raise SeqlabError(f"{what} {source if not isinstance(source, list) else '(text)'}: all "
                          f"{len(words)} tokens are unknown to the vocabulary built from the training "
                          f"file; is it the same language and tokenization?")
    return ids, count_characters(lines)

"""The tokenizer and vocabulary files of an export that need no seqlab to read (`seqlab.export.onnx` writes
them through each family's `graphs` part):

    token lists    vocab.txt, labels.txt, ...: one token per line, the line number (from 0) its id; the file
                   ends with a line break. A token may be a space, a tab or another character that Python's
                   `splitlines` takes for a line end, so read it as `read_tokens` does (no newline translation,
                   split on "\\n" only); no token holds a "\\n"
    BPE            a Hugging Face `tokenizers` file (`tokenizers.Tokenizer.from_file`) over one line of text
                   whose ids are the graph's: seqlab's byte-level BPE model with its pieces at their ids in
                   the run's vocabulary (after the five specials, so 5 above the BPE model's own ids)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from seqlab.data.vocab import SPECIALS, Vocab
from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_text

# how an example reads a file of `write_tokens` (`token_list`, `TOKEN_LIST_NOTE`), {path} a Python expression
READ_TOKENS = 'open({path}, encoding="utf-8", newline="").read().split("\\n")[:-1]'


def write_tokens(path: Path, tokens: list[str]) -> None:
    """`tokens` one per line (see the module's docstring); a token holding a line break cannot be written so."""
    broken = [t for t in tokens if "\n" in t]
    if broken:
        raise SeqlabError(f"{path.name}: the token {broken[0]!r} holds a line break, which a file of one token per "
                          "line cannot hold")
    atomic_write_text(path, "".join(f"{token}\n" for token in tokens))


def read_tokens(path: Path) -> list[str]:
    """A file of `write_tokens`, as the exports' READMEs read it (`READ_TOKENS`)."""
    with open(path, encoding="utf-8", newline="") as file:
        return file.read().split("\n")[:-1]


def bpe_state(tokenizer: Any, vocab: Vocab) -> dict[str, Any]:
    """The `tokenizers` state of seqlab's BPE `tokenizer` (a `seqlab.data.tokenizers.BPETokenizer`) with the ids of
    `vocab`, the run's vocabulary: the specials at 0-4 and every BPE piece after them."""
    state: dict[str, Any] = json.loads(tokenizer.hf.to_str())
    pieces = state["model"]["vocab"]
    missing = [piece for piece in pieces if piece not in vocab.index]
    if missing:
        raise SeqlabError(f"the BPE piece {missing[0]!r} has no id in the run's vocabulary; retrain the run")
    state["model"]["vocab"] = dict(vocab.index)
    return state


def bpe_tokenizer(tokenizer: Any, vocab: Vocab) -> Any:
    """A `tokenizers.Tokenizer` that reads one line of text as seqlab's BPE does (`tokenize`, then the
    vocabulary's ids; no specials added) and decodes ids back as its `detokenize` does: the line with a
    space before it (a Prepend normalizer; seqlab's `_prefix_space`), byte-level pieces, and that space
    dropped again when decoding."""
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers

    hf = Tokenizer.from_str(json.dumps(bpe_state(tokenizer, vocab)))
    hf.normalizer = normalizers.Prepend(" ")
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 1, 0)])
    return hf


def special_ids() -> dict[str, int]:
    """The five special tokens' fixed ids, {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3, "<sep>": 4}."""
    return {token: i for i, token in enumerate(SPECIALS)}


def token_list(path: str) -> str:
    """How an example reads a file of `write_tokens` into a list (the token of id i at index i)."""
    return READ_TOKENS.format(path=f'"{path}"')


TOKEN_LINES = "one token per line, the line number (from 0) its id"
TOKEN_LIST_NOTE = (f"{TOKEN_LINES}; read it with `{READ_TOKENS.format(path='path')}` (a token may be a space or a "
                   "character that `splitlines` would take for a line end)")

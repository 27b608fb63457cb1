"""Pretrained static word vectors from a text file: word2vec's text format or GloVe's.

    word2vec:  a header line "COUNT DIM", then "word v1 v2 ... vDIM" per line
    GloVe:     no header, "word v1 v2 ... vDIM" per line

Either may be gzipped (`.gz`). The width is read from the header or the first vector. A word may hold
spaces (GloVe's 840B release has a few): the last DIM fields are the vector and the rest is the
word. The first vector of a word that is listed twice is kept. Every malformed line is refused with
the file and line.

SLP 9.2.4 initialises a tagger's embedding layer with such vectors (trained by word2vec, SLP 6.8).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from seqlab.data.vocab import SPECIALS, Vocab
from seqlab.errors import SeqlabError, where


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_vectors(path: str | Path, limit: int = 0) -> tuple[list[str], Tensor]:
    """The words and their vectors (N, DIM) from a word2vec or GloVe text file; `limit` reads only the
    first `limit` vectors (files are usually sorted by frequency)."""
    path = Path(path)
    if not path.exists():
        raise SeqlabError(f"vectors file {path} does not exist")
    if path.is_dir():
        raise SeqlabError(f"vectors file {path} is a directory, expected a word2vec or GloVe text file")
    words: list[str] = []
    rows: list[np.ndarray] = []
    seen: set[str] = set()
    dim = 0
    read = 0
    line_no = 0
    try:
        with _open(path) as handle:
            for line_no, raw in enumerate(handle, 1):
                line = raw.decode("utf-8")                     # line by line, so an error names its line
                fields = line.rstrip("\r\n").rstrip(" ").split(" ")
                if not line.strip():
                    continue
                if line_no == 1 and len(fields) == 2 and all(f.isdigit() for f in fields):
                    dim = int(fields[1])                       # the word2vec header: COUNT DIM
                    if dim < 1:
                        raise SeqlabError(f"vectors file {where(path, 1)}: the header gives width {dim}")
                    continue
                if not dim:
                    dim = len(fields) - 1
                    if dim < 1:
                        raise SeqlabError(f"vectors file {where(path, line_no)}: expected a word and its "
                                          f"numbers, got {line.strip()[:60]!r}")
                if len(fields) < dim + 1:
                    raise SeqlabError(f"vectors file {where(path, line_no)}: expected a word and {dim} numbers, "
                                      f"got {len(fields) - 1} fields after the first")
                word = " ".join(fields[:-dim])
                if not word:
                    raise SeqlabError(f"vectors file {where(path, line_no)}: the word is missing")
                read += 1
                if word not in seen:
                    try:
                        vector = np.array(fields[-dim:], dtype=np.float32)   # 4 bytes a number, not 32
                    except ValueError:
                        raise SeqlabError(f"vectors file {where(path, line_no)}: the vector of {word!r} holds "
                                          "something that is not a number") from None
                    if not np.isfinite(vector).all():
                        raise SeqlabError(f"vectors file {where(path, line_no)}: the vector of {word!r} is not "
                                          "finite")
                    seen.add(word)
                    words.append(word)
                    rows.append(vector)
                if limit and read >= limit:
                    break
    except UnicodeDecodeError as error:
        raise SeqlabError(f"vectors file {where(path, line_no)} is not valid UTF-8 ({error.reason})") from None
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise SeqlabError(f"vectors file {path} cannot be read: {error}") from None
    if not read:
        raise SeqlabError(f"vectors file {path} holds no vectors")
    return words, torch.from_numpy(np.stack(rows)) if rows else torch.zeros(0, dim)


def write_vectors(path: str | Path, words: list[str], vectors: Tensor) -> None:
    """Write word2vec's text format (with its "COUNT DIM" header)."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"{len(words)} {vectors.size(1)}\n")
        for word, vector in zip(words, vectors.tolist(), strict=True):
            handle.write(word + " " + " ".join(f"{x:.6g}" for x in vector) + "\n")


def lookup(words: list[str], vector_words: list[str], vectors: Tensor) -> tuple[Tensor, Tensor]:
    """Each of `words`' vector: the exact word's, else its lowercase form's (GloVe is lowercased).
    Returns (len(words), DIM) vectors and a bool mask of the words that got one."""
    index = {w: i for i, w in enumerate(vector_words)}
    out = torch.zeros(len(words), vectors.size(1))
    found = torch.zeros(len(words), dtype=torch.bool)
    for i, word in enumerate(words):
        j = index.get(word, index.get(word.lower()))
        if j is not None:
            out[i], found[i] = vectors[j], True
    return out, found


def extend_vocab(words: Vocab, path: str | Path, limit: int = 0) -> tuple[Vocab, Tensor, Tensor, str]:
    """The vocabulary with the vectors file's words added (training words first, ids unchanged), each
    word's vector (V, DIM), the mask of words that have one (exact match, else the lowercase form),
    and a line saying how many training words the file covers."""
    vector_words, table = read_vectors(path, limit=limit)
    known = set(words.tokens)
    extended = Vocab(words.tokens + [w for w in vector_words if w not in known])
    vectors, found = lookup(extended.tokens, vector_words, table)
    trained = len(words) - len(SPECIALS)
    covered = int(found[len(SPECIALS):len(words)].sum())
    message = (f"{path}: {len(vector_words):,} vectors of width {table.size(1)}; {covered:,} of the {trained:,} "
               f"training words ({covered / max(trained, 1):.1%}) have one; {len(extended) - len(words):,} words "
               "added from the file")
    return extended, vectors, found, message


@torch.no_grad()
def fill_embeddings(embedding: torch.nn.Embedding, vectors: Tensor, found: Tensor) -> None:
    """Pretrained vectors (V, E) into an embedding table where `found` (V,); the other rows get random
    vectors of the same scale, the padding row zeros."""
    scale = vectors[found].std().item() if found.sum() > 1 else 1.0
    weight = embedding.weight
    weight.normal_(0.0, scale)
    weight[found] = vectors[found].to(weight)
    if embedding.padding_idx is not None:
        weight[embedding.padding_idx] = 0.0

"""The classifier's documents as a prepared folder reads them (torch-free: `seqlab prepare classifier`'s worker
processes import this module alone): the documents of a file one at a time (its format, or Parquet by the
extension), and chunks of them counted (pass 1) or encoded (pass 2) exactly as `DocumentVocabulary.encode_all`
encodes them in memory.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from seqlab.data.documents import Columns, Document, document_reader
from seqlab.data.stream import LineReader
from seqlab.data.vocab import Vocab
from seqlab.data.words import tokenize, with_ngrams
from seqlab.errors import SeqlabError
from seqlab.families.classifier.features import FeatureExtractor

CHUNK = 2048                   # documents a worker counts or encodes at a time
PARQUET_MISSING = "reading Parquet needs pyarrow: pip install 'seqlab[parquet]'"


def is_parquet(path: str | Path) -> bool:
    return str(path).endswith(".parquet")


def read_documents(path: str, fmt: str, columns: Columns, what: str, sst_classes: int = 5,
                   phrases: bool = False) -> Iterator[Document]:
    """A labelled file's documents, one at a time (`seqlab.data.documents`; Parquet: a row per document)."""
    if is_parquet(path):
        yield from parquet_documents(path, columns, what)
        return
    read = document_reader(fmt, columns, path, what, True, sst_classes, phrases)
    with LineReader(path, what, stdin=False) as lines:
        yield from read(lines)


def parquet_documents(path: str, columns: Columns, what: str) -> Iterator[Document]:
    """The rows of a Parquet file as documents: the text, label and feature columns named (or 0-based indexes)
    by --text-column, --label-column and --feature-columns; each row checked as a table row is."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise SeqlabError(PARQUET_MISSING) from None
    from seqlab.data.documents import _document  # a row's checks, as the other formats' rows get them

    try:
        table = pq.ParquetFile(path)
        names = table.schema_arrow.names
    except Exception as error:                        # noqa: BLE001 (pyarrow's own errors: not Parquet, damaged)
        raise SeqlabError(f"{what} {path} is not a readable Parquet file ({str(error)[:120]})") from None
    wanted = []
    for column in (columns.text, columns.label, *columns.features):
        name = names[int(column)] if str(column).isdigit() and int(column) < len(names) else str(column)
        if name not in names:
            raise SeqlabError(f"{what} {path} has no column {column!r} (it has {', '.join(names)}); name it with "
                              "--text-column, --label-column or --feature-columns")
        wanted.append(name)
    row, count = 1, 0
    try:
        for batch in table.iter_batches(batch_size=8192, columns=sorted(set(wanted), key=wanted.index)):
            values = {name: batch.column(name).to_pylist() for name in set(wanted)}
            for k in range(batch.num_rows):
                fields = [values[name][k] for name in wanted]
                if isinstance(fields[1], float) and fields[1].is_integer():
                    fields[1] = int(fields[1])                      # 1.0 is the class 1
                yield _document(fields, list(range(len(wanted))), columns, path, row + k, what, True)
                count += 1
            row += batch.num_rows
    except SeqlabError:
        raise
    except Exception as error:                        # noqa: BLE001
        raise SeqlabError(f"{what} {path} is not a readable Parquet file ({str(error)[:120]})") from None
    if not count:
        raise SeqlabError(f"{what} {path} holds no documents")


def chunks(documents: Iterator[Document], size: int = CHUNK) -> Iterator[list[Document]]:
    chunk = []
    for document in documents:
        chunk.append(document)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def cut(tokens: list[str], max_length: int, truncate: str) -> list[str]:
    """`DocumentVocabulary.cut` without its counter."""
    if max_length and len(tokens) > max_length:
        return tokens[:max_length] if truncate == "head" else tokens[-max_length:]
    return tokens


class CountGrams:
    """Pass 1 (words): each chunk's counts of the (cut) tokens, or of their n-grams, as `build_vocabulary`
    counts them."""

    def __init__(self, tokenizer: str, lowercase: bool, ngrams: int, max_length: int, truncate: str):
        self.tokenizer, self.lowercase, self.ngrams = tokenizer, lowercase, ngrams
        self.max_length, self.truncate = max_length, truncate

    def __call__(self, texts: list[str]) -> Counter:
        counts: Counter = Counter()
        for text in texts:
            tokens = cut(tokenize(text, self.tokenizer, self.lowercase), self.max_length, self.truncate)
            counts.update(with_ngrams(tokens, self.ngrams) if self.ngrams > 1 else tokens)
        return counts


_VOCABULARIES: dict[str, object] = {}


class EncodeChunk:
    """Pass 2: a chunk of (document, split) -> per document (its split, word ids or None, raw features or None,
    class id, the tokens kept or None) and each split's truncation counts. The vocabulary is read once per process from
    the files `state` names (a worker gets this small object with every chunk, never the vocabulary itself)."""

    def __init__(self, state: str):
        self.state = state

    def vocabulary(self):
        if self.state not in _VOCABULARIES:
            from seqlab.families.classifier.vocab import DocumentVocabulary

            with open(self.state, encoding="utf-8") as handle:
                saved = json.load(handle)
            words = Vocab.from_dict(saved["words"]) if saved["words"] else None
            features = FeatureExtractor.from_dict(saved["features"]) if saved["features"] else None
            vocabulary = DocumentVocabulary(words, saved["labels"], saved["tokenizer"], saved["lowercase"],
                                            saved["ngrams"], saved["max_length"], saved["truncate"], features,
                                            saved["lowercase_fallback"])
            vocabulary.keep_tokens = saved["keep_tokens"]
            _VOCABULARIES.clear()
            _VOCABULARIES[self.state] = vocabulary
        return _VOCABULARIES[self.state]

    def __call__(self, chunk: list[tuple[Document, str, str, str]]) -> tuple[list[tuple], dict]:
        """`chunk`: (document, split, path, what) each."""
        from seqlab.families.classifier.vocab import Truncation

        vocabulary = self.vocabulary()
        counters: dict[str, Truncation] = {}
        out = []
        for document, split, path, what in chunk:
            counter = counters.setdefault(split, Truncation())
            tokens = vocabulary.cut(vocabulary.tokens(document.text), counter)
            words = features = None
            if vocabulary.words is not None:
                words = vocabulary.word_ids(with_ngrams(tokens, vocabulary.ngrams) if vocabulary.ngrams > 1
                                            else tokens)
            if vocabulary.features is not None:
                features = vocabulary.features.raw(tokens, document.features)
            out.append((split, words, features, vocabulary.label_id(document, path, what),
                        tokens if vocabulary.keep_tokens else None))
        return out, {split: (c.documents, c.truncated, c.longest) for split, c in counters.items()}


def save_state(path: Path, vocabulary, keep_tokens: bool) -> None:
    """What `EncodeChunk` reads in each process."""
    state = {"words": vocabulary.words.to_dict() if vocabulary.words is not None else None,
             "features": vocabulary.features.to_dict() if vocabulary.features is not None else None,
             "labels": vocabulary.labels, "tokenizer": vocabulary.tokenizer, "lowercase": vocabulary.lowercase,
             "ngrams": vocabulary.ngrams, "max_length": vocabulary.max_length, "truncate": vocabulary.truncate,
             "lowercase_fallback": vocabulary.lowercase_fallback, "keep_tokens": keep_tokens}
    path.write_text(json.dumps(state), encoding="utf-8")


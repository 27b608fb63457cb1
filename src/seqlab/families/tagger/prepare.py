"""A tagger's prepared data (`seqlab prepare tagger`, `seqlab.prepare("tagger", ...)`), and the one data path of
`seqlab train tagger`: the folder given with --data, or its CoNLL files prepared into a cache on first use.

    seqlab prepare tagger --train train.conllu --dev dev.conllu --test test.conllu --output data/ewt
    seqlab train tagger --data data/ewt --char-features lstm ...

Each split's sentences are items (`seqlab.data.prepared_items`): the columns `words` (word ids) and `tags` (tag
ids; -1 for a tag training never saw), and the text columns `tokens` (the words themselves, for character
features and LM features, unseen words included) and `gold` (the tags in the scheme the model tags in, which
evaluation compares). Beside them, the files a run directory holds: vocab.json, labels.json and chars.json
(always: a run with --char-features reads it, one without leaves it), vectors.npy and vectors_found.npy with
--vectors; and train.singletons.npy (the ids of the words seen once in training, for --unk-replace) and
train.word_chars.npy (each sentence's longest word in characters: a batch's characters are padded without
reading its every row).

The training file is read in streaming passes: (1) word, character and tag counts; (2) only for entity tags
whose scheme is detected or converted, each scheme's errors and the converted tag set; then every split once
more, written in order. Sentences are parsed here (the readers name the file and line of a bad one); their
checks, scheme conversion and ids are computed in chunks by --workers processes. The cache is keyed by the
files' SHA-256 and the options that shape the items (`cache_key`): RUN/prepared, or $SEQLAB_CACHE_DIR.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from seqlab.data.prepare_text import SMALL, Workers
from seqlab.data.prepared import Prepared, Writer, cached, check_given, id_dtype, source_record
from seqlab.data.prepared_items import ItemWriter
from seqlab.data.stream import LineReader
from seqlab.data.tags import convert, detect_scheme, invalid_positions, is_entity_tag, looks_like_entity_tags
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError, place
from seqlab.families.tagger.conll import Sentence, labelled_sentences
from seqlab.fileio import check_input_file, file_sha256

FAMILY = "tagger"
SPLITS = (("train", "train", "training file"), ("dev", "dev", "development file"), ("test", "test", "test file"))
SKIP = ("prepared", "unk_replace", "lm_features")    # data options of training, not of `seqlab prepare tagger`
SHAPED = ("format", "label_column", "scheme", "train_scheme", "min_freq", "max_vocab", "vectors", "vectors_limit")
CHUNK = 1024                                         # sentences a worker checks and encodes at a time


def prepare(data, output: str | Path, workers: int = 0, overwrite: bool = False, progress: bool = True,
            extra: dict | None = None, log=None) -> Path:
    """Prepare the splits of a `TaggerDataConfig` into `output` (see the module docstring)."""
    from seqlab.progress import progress_bar
    from seqlab.runs.directory import log as run_log

    log = log or run_log
    if not data.train or not data.dev:
        raise SeqlabError("seqlab prepare tagger needs --train and --dev files")
    files = {name: getattr(data, option) for option, name, _ in SPLITS if getattr(data, option)}
    for _, name, what in SPLITS:
        if name in files:
            check_input_file(Path(files[name]), what)
    labelled_sentences(None, data.format, data.label_column or None, files["train"], "training file")  # options
    size = sum(Path(path).stat().st_size for path in files.values())
    n = 1 if size < SMALL else max(1, workers or os.cpu_count() or 1)
    output = Path(output)
    with Writer(output, overwrite) as writer:      # removed on any error, nothing left half-written
        bar = progress_bar(None, progress, unit=" sentences", desc=f"preparing {output.name}", mininterval=0.5)
        with bar:
            shape = fit(data, files["train"], bar)
            vocabulary = shape.pop("vocabulary")
            singletons = shape.pop("singletons")
            vocabulary = write_vocabulary(writer, vocabulary, shape["target"], shape["scheme"], data, log)
            shape["vocab_size"] = len(vocabulary.words)
            writer.save_array("train.singletons.npy", np.asarray(vocabulary.words.encode(singletons), np.int64))
            records = {}
            with Workers(n) as pool:
                for _, name, what in SPLITS:
                    if name in files:
                        records[name] = encode_split(writer, name, files[name], what, data, shape, pool, bar, log)
        manifest = {"family": FAMILY, "options": {k: getattr(data, k) for k in SHAPED}, **(extra or {}),
                    "scheme": shape["target"], "file_scheme": shape["scheme"], "entity": shape["entity"],
                    "sources": {name: [source_record(path)] for name, path in files.items()}, "splits": records,
                    "workers": n}
        if data.vectors:
            manifest["sources"]["vectors"] = [source_record(data.vectors)]
        return writer.commit(manifest)


def sentences_of(path: str, data, what: str, bar=None) -> Iterator[Sentence]:
    """A file's sentences, one at a time, read as `seqlab train tagger` reads it."""
    read = labelled_sentences(None, data.format, data.label_column or None, path, what)
    with LineReader(path, what, stdin=False) as lines:
        for sentence in read(lines):
            yield sentence
            if bar is not None:
                bar.update(1)


def fit(data, path: str, bar) -> dict:
    """Pass 1 (and 2 for entity tags): the vocabulary, the tag set and the schemes, from the training file."""
    from seqlab.families.tagger.vocab import TaggerVocabulary

    counts: Counter = Counter()
    labels: set[str] = set()
    plain = ""                               # the first tag that is no entity tag, for --scheme's message
    for sentence in sentences_of(path, data, "training file", bar):
        counts.update(sentence.tokens)
        labels.update(sentence.labels)
        if not plain and data.scheme not in ("auto", "none"):
            plain = next((label for label in sentence.labels if not is_entity_tag(label)), "")
    entity = data.scheme != "none" and looks_like_entity_tags(labels)
    if data.scheme not in ("auto", "none") and not entity:
        example = plain
        raise SeqlabError(f"--scheme {data.scheme}: the tags of {path} are not entity tags (e.g. {example!r}); "
                          "use --scheme none (or auto) for plain tags such as POS")
    scheme = "none" if not entity else data.scheme
    converted: set[str] = set()
    if entity and (data.scheme == "auto" or data.train_scheme not in ("", data.scheme)):
        def sequences() -> Iterator[list[str]]:
            for sentence in sentences_of(path, data, "training file", bar):
                if all(map(is_entity_tag, sentence.labels)):   # else refused with its line when written
                    if data.train_scheme:
                        converted.update(convert(sentence.labels, data.train_scheme))
                    yield sentence.labels
        if data.scheme == "auto":
            scheme = detect_scheme(sequences())
        else:
            for _ in sequences():
                pass
    target = data.train_scheme or scheme
    if entity and target != scheme:
        labels = converted
    chars: Counter = Counter()
    for token, count in counts.items():
        for character in token:
            chars[character] += count
    words = Vocab.build(counts, data.min_freq, data.max_vocab or None)
    vocabulary = TaggerVocabulary(words, sorted(labels), Vocab.build(chars))
    singletons = sorted(token for token, count in counts.items() if count == 1)
    return {"vocabulary": vocabulary, "singletons": singletons, "entity": entity, "scheme": scheme,
            "target": target}


def refuse_stray_tags(sentences: list[Sentence], path: str, what: str) -> None:
    """In a file of entity tags, a tag that fits no scheme (`I-`, `X-PER`) is an error naming its line: read
    as a plain label it would silently turn the whole run into plain tagging (accuracy instead of entity F1,
    no CRF constraints)."""
    for sentence in sentences:
        for i, tag in enumerate(sentence.labels):
            if not is_entity_tag(tag):
                raise SeqlabError(f"{place(what, path, sentence.line_of(i))}: the tag {tag!r} fits no entity scheme; "
                                  "the other tags are O and B-/I-/E-/S- plus a type (e.g. B-PER): correct it, or "
                                  "pass --scheme none to read every tag as a plain label")


def prepare_tags(sentences: list[Sentence], scheme: str, target: str, path: str, warn=None) -> None:
    """Report invalid entity sequences (file and line; scored as conlleval would) to `warn` (default: the
    log) and convert the tags to the scheme the model uses, in place."""
    if scheme == "none":
        return
    if warn is None:
        from seqlab.runs.directory import log as warn
    for sentence in sentences:
        bad = invalid_positions(sentence.labels, scheme)
        if bad:
            warn(f"warning: {path}:{sentence.line_of(bad[0])}: {sentence.labels[bad[0]]!r} breaks the {scheme.upper()} "
                "scheme; read as conlleval reads it")
        if target != scheme:
            sentence.labels = convert(sentence.labels, target)



def with_vectors(vocabulary, path: str, limit: int = 0, log=print):
    """The vocabulary with the vectors file's words added to its vocabulary (training words first, ids
    unchanged) and lowercase fallback on, and each word's vector with a mask of the words that have one
    (exact match, else the lowercase form)."""
    from seqlab.data.vectors import extend_vocab
    from seqlab.families.tagger.vocab import TaggerVocabulary

    words, vectors, found, message = extend_vocab(vocabulary.words, path, limit)
    log(message)
    return TaggerVocabulary(words, vocabulary.labels, vocabulary.chars, lowercase_fallback=True), (vectors, found)


def write_vocabulary(writer: Writer, vocabulary, scheme: str, file_scheme: str, data, log):
    """vocab.json, labels.json and chars.json as a run directory holds them, and the --vectors; the vocabulary
    the items are encoded with."""
    if data.vectors:
        vocabulary, (vectors, found) = with_vectors(vocabulary, data.vectors, data.vectors_limit, log)
        writer.save_array("vectors.npy", vectors.numpy())
        writer.save_array("vectors_found.npy", found.numpy())
    writer.save_json("vocab.json", {**vocabulary.words.to_dict(), "lowercase_fallback": vocabulary.lowercase_fallback})
    writer.save_json("labels.json", {"labels": vocabulary.labels, "scheme": scheme, "file_scheme": file_scheme})
    writer.save_json("chars.json", vocabulary.chars.to_dict())
    return vocabulary


def encode_split(writer: Writer, name: str, path: str, what: str, data, shape: dict, pool: Workers, bar,
                 log) -> dict:
    """One split's items, in order: its sentences read here, checked and encoded in chunks by the workers."""
    items = ItemWriter(writer, name, {"words": id_dtype(shape["vocab_size"]), "tags": "<i4"}, texts=("tokens", "gold"))
    longest: list[np.ndarray] = []
    encode = _EncodeChunk(str(writer.folder), path, what, shape["entity"], shape["scheme"], shape["target"])
    for encoded, warnings in pool.map(encode, _chunks(sentences_of(path, data, what, bar))):
        for message in warnings:
            log(message)
        for words, tags, tokens, gold in encoded:
            items.add(words=words, tags=tags, tokens=tokens, gold=gold)
        longest.append(np.fromiter((max(map(len, tokens), default=0) for _, _, tokens, _ in encoded), np.int64,
                                   len(encoded)))
    record = items.close()
    if name == "train":
        record["singletons"] = "train.singletons.npy"
    writer.save_array(f"{name}.word_chars.npy", np.concatenate(longest).astype(np.uint32) if longest
                      else np.zeros(0, np.uint32))
    record["word_chars"] = f"{name}.word_chars.npy"
    return record


def _chunks(sentences: Iterator[Sentence]) -> Iterator[list[Sentence]]:
    chunk = []
    for sentence in sentences:
        chunk.append(sentence)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


_VOCABULARY: dict = {}                 # per process: the folder's vocabulary, read once


class _EncodeChunk:
    """A chunk of sentences -> ([(word ids, tag ids, tokens, tags)], warnings), in a worker: stray entity tags
    refused with their line, invalid sequences warned of, the tags converted to the model's scheme."""

    def __init__(self, folder: str, path: str, what: str, entity: bool, scheme: str, target: str):
        self.folder, self.path, self.what = folder, path, what
        self.entity, self.scheme, self.target = entity, scheme, target

    def __call__(self, sentences: list[Sentence]) -> tuple[list, list[str]]:
        if _VOCABULARY.get("folder") != self.folder:
            from seqlab.families.tagger.vocab import read_tagger_vocabulary

            _VOCABULARY.update(folder=self.folder, vocabulary=read_tagger_vocabulary(Path(self.folder))[0])
        vocabulary = _VOCABULARY["vocabulary"]
        if self.entity:
            refuse_stray_tags(sentences, self.path, self.what)
        warnings: list[str] = []
        prepare_tags(sentences, self.scheme, self.target, self.path, warnings.append)
        index = vocabulary.label_index
        return [(vocabulary.word_ids(s.tokens), [index.get(label, -1) for label in s.labels], s.tokens, s.labels)
                for s in sentences], warnings


def open_prepared(folder: str | Path) -> Prepared:
    """A tagger's prepared folder, checked: its shards, every split's item index and per-sentence arrays."""
    from seqlab.data.prepared_items import Items

    prepared = Prepared(folder, FAMILY)
    for name in ("train", "dev"):
        if prepared.split(name) is None:
            raise SeqlabError(f"--data {folder} has no {name} split; prepare it with --train and --dev")
    for split in prepared.splits.values():
        items = Items(split)
        try:
            word_chars = len(split.array("word_chars"))
        except (OSError, ValueError, KeyError) as error:
            raise SeqlabError(f"{folder}: the arrays of split {split.name} are damaged ({error}); prepare again") \
                from None
        if word_chars != len(items):
            raise SeqlabError(f"{folder}/{split.record['word_chars']} is damaged ({word_chars} sentences, not "
                              f"{len(items)}); prepare again")
        items.close()
    return prepared


def check_ids(prepared: Prepared, vocabulary) -> None:
    """Every word id of the folder's shards one of vocab.json's, every tag id one of labels.json's (or -1, a tag
    training never saw): from each shard's range, recorded when it was hashed."""
    words, labels = len(vocabulary.words), len(vocabulary.labels)
    prepared.check_ids("words", words, f"{words:,} words of vocab.json")
    prepared.check_ids("tags", labels, f"{labels:,} tags of labels.json", at_least=-1)


def shaped_options(prepared: Prepared) -> dict:
    """The data options that shaped the prepared items, as config values."""
    return prepared.shaped(SHAPED)


def cache_key(data) -> dict:
    """What the prepared items depend on: every file's SHA-256 (the vectors' too) and the options."""
    files = {}
    for option, name, what in SPLITS:
        if getattr(data, option):
            check_input_file(Path(getattr(data, option)), what)
            files[name] = file_sha256(getattr(data, option), what)
    if data.vectors:
        if not Path(data.vectors).exists():
            raise SeqlabError(f"vectors file {data.vectors} does not exist")
        files["vectors"] = file_sha256(data.vectors, "vectors file")
    return {"family": FAMILY, "files": files, "options": {k: getattr(data, k) for k in SHAPED if k != "vectors"}}


def for_run(config, run_dir: Path, rank: int, barrier, log) -> Prepared:
    """The run's prepared data: --data, or the cache of its files (prepared here by rank 0 on a miss; the other
    ranks wait at `barrier`)."""
    data = config.data
    if data.prepared:
        prepared = open_prepared(data.prepared)
        check_given(prepared, [(f"--{option}", getattr(data, option), name) for option, name, _ in SPLITS])
        return prepared
    if not data.train or not data.dev:
        raise SeqlabError("a tagger needs --train and --dev files (or --data, a folder of seqlab prepare tagger)")
    def write(folder: Path, extra: dict) -> None:
        prepare(data, folder, workers=0, overwrite=True, progress=config.train.progress, extra=extra, log=log)
    return open_prepared(cached(FAMILY, cache_key(data), run_dir, rank, barrier, log, write))

"""A classifier's prepared data (`seqlab prepare classifier`, `seqlab.prepare("classifier", ...)`), and the one data
path of `seqlab train classifier`: the folder given with --data, or its plain files prepared into a cache on first use.

    seqlab prepare classifier --train train.tsv --dev dev.tsv --output data/sentiment
    seqlab train classifier --data data/sentiment --arch lstm ...

The training file is read in streaming passes (the documents one at a time, chunks of them tokenized in --workers
processes): with --dev-fraction a count of its documents (which are held out is drawn from the count and the
seed, as training always drew them); pass 1 fits what the pipeline fits from the training documents (the classes;
the words and n-grams; the features classifier's lexicon); pass 2 encodes every split in order. Each split's
documents are items (`seqlab.data.prepared_items`):

    words      the word (and n-gram) ids of each document, cut to --max-length: its length is what batches group by
    label      one id per document, the class
    tokens     the (cut) tokens as text, kept only for --lm-features (the character LMs read the words themselves)
    features   the features classifier's raw vectors: a stream of F float32 per document beside the items (no
               index: every document has F); standardised when a batch is collated, with the training split's
               mean and deviation (features.json), as in memory

beside the run files the vocabulary makes (vocab.json, labels.json, features.json), --vectors' table and mask
(vectors.npy, vectors_found.npy), and the manifest (the options that shaped the data, the sources' SHA-256, each
split's truncation counts, the training classes' counts). `seqlab prepare classifier` writes words and features
both (an architecture is chosen when training); a run's cache holds what its architecture reads.

The cache is keyed by the files' SHA-256, the options that shape the data and, with --dev-fraction, the seed
(`cache_key`): it lives in the run directory (RUN/prepared) or, with $SEQLAB_CACHE_DIR set, in that folder shared
by every run, so a second run, a --resume and every DDP rank start without reading the files again.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from seqlab.data.prepare_text import Source, Workers, workers_for
from seqlab.data.prepared import Prepared, Writer, cached, id_dtype, source_record
from seqlab.data.prepared_items import ItemWriter
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError
from seqlab.families.classifier.encode import (
    CountGrams,
    EncodeChunk,
    chunks,
    cut,
    is_parquet,
    read_documents,
    save_state,
)
from seqlab.families.classifier.features import FeatureExtractor, derive_lexicon, read_lexicon
from seqlab.families.classifier.vocab import DocumentVocabulary
from seqlab.fileio import check_input_file, file_sha256

FAMILY = "classifier"
SPLITS = (("train", "train", "training file"), ("dev", "dev", "development file"), ("test", "test", "test file"))
SKIP = ("prepared", "class_weights", "metric")     # data options that are not for `seqlab prepare classifier`
# the data options that shape the prepared documents (a cache key holds them all; --data takes them from it)
SHAPING = ("format", "text_column", "label_column", "feature_columns", "header", "sst_classes", "phrases",
           "tokenizer", "lowercase", "ngrams", "max_length", "truncate", "min_freq", "max_vocab", "vectors",
           "vectors_limit", "features", "lexicon", "lexicon_size", "lexicon_min_count", "labels", "dev_fraction")
FILES = ("vectors", "lexicon")                      # shaping options that name files
# the options that shape only the features classifier's vectors, and only the word ids
FEATURE_OPTIONS = ("features", "feature_columns", "lexicon", "lexicon_size", "lexicon_min_count")
WORD_OPTIONS = ("ngrams", "min_freq", "max_vocab", "vectors", "vectors_limit")
HOLDOUT_SEED = 1111         # `seqlab prepare --dev-fraction` draws the held-out documents as a run of --seed 1111
WORDS, FEATURES, TOKENS = "words", "features", "tokens"


def contents_for(arch: str, data) -> tuple[str, ...]:
    """What a run of `arch` reads: word ids, or the features classifier's vectors; the tokens for LM features."""
    return (FEATURES if arch == "features" else WORDS,) + ((TOKENS,) if data.lm_features else ())


def prepare(data, output: str | Path, workers: int = 0, overwrite: bool = False, progress: bool = True) -> Path:
    """Prepare the splits of a `ClassifierDataConfig` into `output` (see the module docstring)."""
    return write_prepared(data, output, (WORDS, FEATURES) + ((TOKENS,) if data.lm_features else ()), HOLDOUT_SEED,
                          workers, overwrite, progress)


def open_prepared(folder: str | Path) -> Prepared:
    prepared = Prepared(folder, FAMILY)
    for name in ("train", "dev"):
        if prepared.split(name) is None:
            raise SeqlabError(f"--data {folder} has no {name} split; prepare it with --train and --dev")
    return prepared


def shaped_options(prepared: Prepared, arch: str) -> dict:
    """The data options that shaped what a run of `arch` reads of the prepared documents, as config values."""
    other = WORD_OPTIONS if arch == "features" else FEATURE_OPTIONS
    return {name: prepared.options[name] for name in SHAPING if name in prepared.options and name not in other}


def cache_key(data, contents: tuple[str, ...], seed: int) -> dict:
    """What the prepared documents depend on: every source's SHA-256, the options, what is kept, the hold-out seed."""
    named = [(name, getattr(data, option), what) for option, name, what in SPLITS]
    named += [(name, getattr(data, name), f"{name} file") for name in FILES]
    files = {}
    for name, path, what in named:
        if path:
            check_input_file(Path(path), what)            # each file checked, as its reader would, before it is hashed
            files[name] = file_sha256(path, name)
    return {"family": FAMILY, "files": files, "options": {name: getattr(data, name) for name in SHAPING},
            "contents": list(contents), "seed": seed if data.dev_fraction and not data.dev else None}


def for_run(config, run_dir: Path, rank: int, barrier, log) -> Prepared:
    """The run's prepared data: --data (checked for what the architecture reads), or the cache of its files,
    prepared here by rank 0 on a miss (the other ranks wait at `barrier`)."""
    data = config.data
    contents = contents_for(config.model.arch, data)
    if data.prepared:
        prepared = open_prepared(data.prepared)
        for option, name, what in SPLITS:
            given = getattr(data, option)
            recorded = prepared.manifest.get("sources", {}).get(name)
            if given and not recorded:
                raise SeqlabError(f"--{option} {given}: {data.prepared} was prepared without a {what}; leave "
                                  f"--{option} out, or prepare again")
            if given and recorded[0].get("sha256") and file_sha256(given, option) != recorded[0]["sha256"]:
                raise SeqlabError(f"--{option} {given} is not the file {data.prepared} was prepared from "
                                  f"({recorded[0].get('path')}): leave --{option} out, or prepare again")
        missing = [part for part in contents if part not in prepared.manifest.get("contents", ())]
        if missing:
            need = {WORDS: f"word ids (--arch {config.model.arch})", FEATURES: "feature vectors (--arch features)",
                    TOKENS: "the tokens (--lm-features)"}[missing[0]]
            raise SeqlabError(f"--data {data.prepared} holds no {need}; prepare it with seqlab prepare classifier"
                              f"{' --lm-features ...' if missing[0] == TOKENS else ''}")
        return prepared
    def write(folder: Path, extra: dict) -> None:
        write_prepared(data, folder, contents, config.train.seed, workers=0, overwrite=True,
                       progress=config.train.progress, extra=extra, log=_quiet)
    return open_prepared(cached(FAMILY, cache_key(data, contents, config.train.seed), run_dir, rank, barrier, log,
                                write))


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _quiet(message: str) -> None:
    """A run's own prepare says nothing: the run logs the manifest's notes, prepared now or read from a cache."""


# ---------------------------------------------------------------------------------------------- writing


def write_prepared(data, output: str | Path, contents: tuple[str, ...], seed: int, workers: int = 0,
                   overwrite: bool = False, progress: bool = True, extra: dict | None = None, log=_stderr) -> Path:
    """The prepared folder of `data`'s splits, keeping `contents`; the documents held out by `seed`."""
    from seqlab.progress import progress_bar

    if not data.train or not (data.dev or data.dev_fraction):
        raise SeqlabError("a classifier needs --train and --dev files (or --dev-fraction to hold out part of the "
                          "training file)")
    files = {option: getattr(data, option) for option, _, _ in SPLITS if getattr(data, option)}
    sources = [Source(path, what) for (option, _, what) in SPLITS if (path := files.get(option))]
    n = workers_for(workers, sources)
    output = Path(output)
    notes: dict[str, str] = {}              # what a run logs again from the manifest: holdout, lexicon, vectors

    def note(kind: str, message: str) -> None:
        notes[kind] = message
        log(message)

    with Writer(output, overwrite) as writer:      # removed on any error, nothing left half-written
        bar = progress_bar(None, progress, desc=f"preparing {output.name}", unit=" documents", mininterval=0.5)
        with bar, Workers(n) as pool:
            held = _held_out(data, seed, note) if not data.dev else None
            vocabulary, vectors, labels = _fit(data, contents, held, pool, note)
            records, rows = _encode(writer, data, vocabulary, contents, held, pool, bar)
        if vocabulary.features is not None:
            vocabulary.features.fit(rows)                          # the training split's mean and deviation
        records["train"]["labels"] = labels
        _save_vocabulary(writer, vocabulary, vectors)
        options = {name: getattr(data, name) for name in SHAPING}
        sources_ = {name: [source_record(files[option])] for option, name, _ in SPLITS if option in files}
        sources_.update({name: [source_record(getattr(data, name))] for name in FILES if getattr(data, name)})
        manifest = {"family": FAMILY, "options": options, **(extra or {}), "contents": list(contents),
                    "holdout_seed": seed if held is not None else None, "sources": sources_, "splits": records,
                    "notes": notes, "workers": n}
        if vectors is not None:
            manifest["vectors"] = {"table": "vectors.npy", "found": "vectors_found.npy"}
        return writer.commit(manifest)


def _training_documents(data):
    return read_documents(data.train, data.format, data.columns, "training file", data.sst_classes, data.phrases)


def _held_out(data, seed: int, note) -> set[int]:
    """The training documents held out as the development set (--dev-fraction), drawn as the in-memory path
    drew them: a shuffle of their positions by `seed`."""
    count = sum(1 for _ in _training_documents(data))
    order = list(range(count))
    random.Random(seed).shuffle(order)
    held = set(order[:max(1, round(data.dev_fraction * count))])
    note("holdout", f"holding out {len(held):,} of the {count:,} training documents as the development set")
    return held


def _kept(data, held: set[int] | None):
    return (d for i, d in enumerate(_training_documents(data)) if held is None or i not in held)


def _fit(data, contents, held, pool: Workers, note) -> tuple[DocumentVocabulary, tuple | None, dict]:
    """Pass 1: the classes, the words (and n-grams) or the features, from the training documents."""
    counts: Counter = Counter()
    grams: Counter = Counter()

    def texts():
        for chunk in chunks(_kept(data, held)):
            counts.update(d.label for d in chunk)
            yield [d.text for d in chunk]

    if WORDS in contents:
        for found in pool.map(CountGrams(data.tokenizer, data.lowercase, data.ngrams, data.max_length,
                                         data.truncate), texts()):
            grams.update(found)
    else:
        for _ in texts():
            pass
    labels = check_labels(sorted(counts), data)
    vocabulary = DocumentVocabulary(None, labels, data.tokenizer, data.lowercase, data.ngrams, data.max_length,
                                    data.truncate)
    if FEATURES in contents:
        vocabulary.features = _feature_extractor(data, vocabulary, held, note)
    vectors = None
    if WORDS in contents:
        vocabulary.words = Vocab.build(grams, data.min_freq, data.max_vocab or None)
        if data.vectors:
            from seqlab.data.vectors import extend_vocab

            words, table, found, message = extend_vocab(vocabulary.words, data.vectors, data.vectors_limit)
            note("vectors", message)
            vocabulary.words, vocabulary.lowercase_fallback = words, True
            vectors = (table.numpy(), found.numpy())
    elif data.vectors:
        raise SeqlabError("--vectors is for classifiers over words, not --arch features")
    return vocabulary, vectors, {label: counts[label] for label in labels}


def check_labels(labels: list[str], data) -> list[str]:
    """The classes: those of the training file, or --labels (each with training examples, none beside)."""
    if data.labels:
        declared = [label.strip() for label in data.labels.split(",") if label.strip()]
        missing = [label for label in declared if label not in labels]
        if missing:
            raise SeqlabError(f"--labels: class {missing[0]!r} has no training examples in {data.train}; "
                              "every class needs some")
        extra = sorted(set(labels) - set(declared))
        if extra:
            raise SeqlabError(f"{data.train}: label {extra[0]!r} is not among --labels ({', '.join(declared)})")
        labels = declared
    if len(labels) < 2:
        raise SeqlabError(f"{data.train}: a classifier needs at least two classes; the file has only "
                          f"{', '.join(map(repr, labels))}")
    return labels


def _feature_extractor(data, vocabulary: DocumentVocabulary, held, note) -> FeatureExtractor:
    """The features classifier's lexicon (given, or derived from the training documents in one more pass)."""
    lexicon = None
    if data.features in ("builtin", "both"):
        if data.lexicon:
            lexicon = read_lexicon(data.lexicon, data.lowercase)
        else:
            labels = [d.label for d in _kept(data, held)]
            tokens = (cut(vocabulary.tokens(d.text), data.max_length, data.truncate) for d in _kept(data, held))
            lexicon = derive_lexicon(tokens, labels, data.lexicon_size, data.lexicon_min_count)
        note("lexicon", f"lexicon: {len(lexicon):,} words over {len(set(lexicon.values()))} classes"
            f"{f' from {data.lexicon}' if data.lexicon else ' derived from the training split'}")
    columns = len(data.columns.features) if data.features in ("columns", "both") else 0
    if data.features in ("columns", "both") and not columns:
        raise SeqlabError(f"--features {data.features} needs --feature-columns")
    if data.format not in ("tsv", "csv", "jsonl") and columns and not is_parquet(data.train):
        raise SeqlabError("--feature-columns are read from tsv, csv, jsonl or Parquet files")
    return FeatureExtractor(lexicon, columns)


def _encode(writer: Writer, data, vocabulary: DocumentVocabulary, contents, held, pool: Workers,
            bar) -> tuple[dict, np.ndarray | None]:
    """Pass 2: every split's items, in order (the held-out documents of the training file into dev); and the
    training split's raw features (float64, N x F: what the features' statistics are fitted on)."""
    state = writer.folder / "encode_state.json"
    save_state(state, vocabulary, TOKENS in contents)
    columns = {"label": "<i4"}
    if vocabulary.words is not None:
        columns = {"words": id_dtype(len(vocabulary.words)).str, **columns}
    texts = (TOKENS,) if TOKENS in contents else ()
    splits = {"train": ItemWriter(writer, "train", columns, texts), "dev": ItemWriter(writer, "dev", columns, texts)}
    if data.test:
        splits["test"] = ItemWriter(writer, "test", columns, texts)
    width = len(vocabulary.features.names) if vocabulary.features is not None else 0
    feature_streams = {name: writer.shards(f"{name}.features", np.dtype("<f4")) for name in splits} if width else {}
    truncation = {name: [0, 0, 0] for name in splits}
    rows: list[np.ndarray] = []
    held_path = f"{data.train} (held out)"

    def documents():
        for k, document in enumerate(_training_documents(data)):
            if held is not None and k in held:
                yield document, "dev", held_path, "development file"
            else:
                yield document, "train", data.train, "training file"
        for option, what in (("dev", "development file"), ("test", "test file")):
            path = getattr(data, option)
            if path:
                for document in read_documents(path, data.format, data.columns, what, data.sst_classes):
                    yield document, option, path, what

    for encoded, counters in pool.map(EncodeChunk(str(state)), chunks(documents())):
        train_rows = []
        for split, words, features, label, tokens in encoded:
            parts = {"label": [label]}
            if words is not None:
                parts["words"] = words
            if texts:
                parts[TOKENS] = tokens
            splits[split].add(**parts)
            if width:
                feature_streams[split].write(np.asarray(features, np.float32))
                if split == "train":
                    train_rows.append(features)
        if train_rows:
            rows.append(np.asarray(train_rows, np.float64))
        for split, (documents_, truncated, longest) in counters.items():
            counter = truncation[split]
            counter[0] += documents_
            counter[1] += truncated
            counter[2] = max(counter[2], longest)
        bar.update(len(encoded))
    state.unlink()
    records = {}
    for name, items in splits.items():
        record = items.close()
        if width:
            record["streams"]["features"] = feature_streams[name].close()
            record["num_features"] = width
        where_ = held_path if name == "dev" and held is not None else getattr(data, name)
        record.update(path=where_, truncation=truncation[name])
        if not record["items"]:
            raise SeqlabError(f"{where_} holds no documents")
        records[name] = record
    return records, (np.concatenate(rows) if rows else np.zeros((0, width))) if width else None



def _save_vocabulary(writer: Writer, vocabulary: DocumentVocabulary, vectors: tuple | None) -> None:
    """The run files the vocabulary makes, as `pipeline.write_run_files` writes them; --vectors' table and mask."""
    if vocabulary.words is not None:
        writer.save_json("vocab.json", {**vocabulary.words.to_dict(),
                                        "lowercase_fallback": vocabulary.lowercase_fallback})
    writer.save_json("labels.json", {"labels": vocabulary.labels})
    if vocabulary.features is not None:
        writer.save_json("features.json", vocabulary.features.to_dict())
    if vectors is not None:
        writer.save_array("vectors.npy", vectors[0])
        writer.save_array("vectors_found.npy", vectors[1])


# ---------------------------------------------------------------------------------------------- reading


def prepared_vocabulary(prepared: Prepared, data, arch: str) -> DocumentVocabulary:
    """The vocabulary of a prepared folder, as a run of `arch` reads it: words, or the features."""
    from seqlab.families.classifier.vocab import read_document_vocabulary

    vocabulary = read_document_vocabulary(prepared.folder, data.tokenizer, data.lowercase, data.ngrams,
                                          data.max_length, data.truncate)
    if vocabulary.words is not None:        # every id of the shards one of the vocabulary's (their recorded range)
        prepared.check_ids("words", len(vocabulary.words), f"{len(vocabulary.words):,} words of vocab.json")
    prepared.check_ids("label", len(vocabulary.labels), f"{len(vocabulary.labels):,} labels of labels.json",
                       at_least=-1)
    if arch == "features":
        vocabulary.words, vocabulary.lowercase_fallback = None, False
    else:
        vocabulary.features = None
    return vocabulary


def prepared_vectors(prepared: Prepared) -> tuple[np.ndarray, np.ndarray] | None:
    """--vectors' table (V, E) and mask (V,) of the words that have one, or None."""
    record = prepared.manifest.get("vectors")
    if not record:
        return None
    try:
        return (np.load(prepared.path(record["table"]), allow_pickle=False),
                np.load(prepared.path(record["found"]), allow_pickle=False))
    except (OSError, ValueError, KeyError) as error:
        raise SeqlabError(f"{prepared.folder}: the vectors are damaged ({error}); prepare again") from None

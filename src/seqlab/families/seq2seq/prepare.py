"""A sequence-to-sequence model's prepared data (`seqlab prepare seq2seq`, `seqlab.prepare("seq2seq", ...)`), and
the one data path of `seqlab train seq2seq`: the folder given with --data, or its files prepared into a cache on
first use.

    seqlab prepare seq2seq --train-src train.de --train-tgt train.en --dev-src val.de --dev-tgt val.en \\
        --tokenizer bpe --output data/de-en
    seqlab train seq2seq --data data/de-en --arch gru --attention dot ...

    pass 1 (fit)     the training pairs as they are read: word and character counts of each side (in the
                     workers), or each side's BPE model learned from its lines (sources then targets for
                     --shared-vocab, as `build_vocabulary` reads them)
    pass 2 (encode)  every split, a chunk of pairs at a time: each side's ids and the words read as <unk> (in
                     the workers), written in order as items (`seqlab.families.seq2seq.prepared_pairs`)

The folder holds tokenizer.json and vocab.json as a run directory holds them. The length limits are not applied
here (they depend on the model: `resolve_lengths`), so one folder serves every architecture.

The cache is keyed by the files' SHA-256 and the options that shape the ids (`cache_key`): it lives in the run
directory (RUN/prepared) or, with $SEQLAB_CACHE_DIR set, in that folder shared by every run, so a second run,
a --resume and every DDP rank start without tokenizing again. With --init-from the pairs are encoded with that
run's vocabulary (and the key holds it).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from itertools import chain
from pathlib import Path
from types import SimpleNamespace

from seqlab.data.prepare_text import Workers, workers_for
from seqlab.data.prepared import Prepared, Writer, cached, id_dtype, source_record
from seqlab.data.prepared_items import ItemWriter
from seqlab.data.stream import chunked
from seqlab.data.tokenizers import make_tokenizer
from seqlab.data.vocab import UNK, Vocab
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq.sources import PairFiles, pair_files
from seqlab.families.seq2seq.vocab import PairVocabulary, read_pair_vocabulary
from seqlab.fileio import file_sha256

FAMILY = "seq2seq"
SPLITS = ("train", "dev", "test")
SKIP = ("prepared", "max_source_length", "max_target_length", "long_pairs")   # not for `seqlab prepare seq2seq`
SHAPED = ("tokenizer", "source_tokenizer", "target_tokenizer", "shared_vocab", "bpe_vocab_size", "min_freq",
          "max_vocab", "source_lang", "target_lang")                           # the options that shape the ids
LANGUAGES = {"source_lang": "en", "target_lang": "en"}   # their defaults, for folders prepared before they were
CHUNK = 2048                    # pairs a worker encodes at a time


def splits_of(data) -> dict[str, PairFiles]:
    """The splits' files (train and dev needed), each checked before it is read or hashed."""
    found = {split: pair_files(data, split, required=split != "test") for split in SPLITS}
    return {split: files.check() for split, files in found.items() if files is not None}


def shaping(data) -> dict:
    return {name: getattr(data, name) for name in SHAPED}


def check_options(data) -> None:
    """Vocabulary options that cannot go together, refused before any work."""
    if data.max_vocab and {data.side_tokenizer("source"), data.side_tokenizer("target")} == {"bpe"}:
        raise SeqlabError(f"--max-vocab {data.max_vocab}: a BPE vocabulary is every piece of its BPE model; set its "
                          "size with --bpe-vocab-size instead (--max-vocab is for word and char vocabularies)")
    if data.shared_vocab and data.side_tokenizer("source") != data.side_tokenizer("target"):
        raise SeqlabError("--shared-vocab needs the same tokenizer on both sides")
    for side in ("source", "target"):
        lang = getattr(data, f"{side}_lang")
        if not re.fullmatch(r"[a-z]{2,3}", lang):
            raise SeqlabError(f"--{side}-lang {lang!r}: give the language's ISO 639 code in lower case (en, de, "
                              "fr, ...)")
        if data.side_tokenizer(side) != "moses" and lang != LANGUAGES[f"{side}_lang"]:
            raise SeqlabError(f"--{side}-lang {lang}: only the moses tokenizer reads a language; add "
                              f"--{side}-tokenizer moses, or leave --{side}-lang out")
    if data.shared_vocab and data.side_tokenizer("source") == "moses" and data.source_lang != data.target_lang:
        raise SeqlabError(f"--shared-vocab reads both sides with one moses tokenizer, but --source-lang is "
                          f"{data.source_lang} and --target-lang {data.target_lang}: give them the same language, or "
                          "drop --shared-vocab")


def prepare(data, output: str | Path, workers: int = 0, overwrite: bool = False, progress: bool = True) -> Path:
    """Prepare the splits of a `Seq2SeqDataConfig` into `output` (see the module docstring); warn about its
    training text as training would (`seqlab.families.seq2seq.text_checks`)."""
    import warnings

    from seqlab.families.seq2seq.text_checks import text_warnings

    folder = write_prepared(splits_of(data), data, output, workers, overwrite, progress)
    prepared = open_prepared(folder)
    for message in text_warnings(prepared, vocabulary_of(prepared, False, 0, 0), data):
        warnings.warn(message, stacklevel=2)
    return folder


def write_prepared(splits: dict[str, PairFiles], data, output: str | Path, workers: int = 0,
                   overwrite: bool = False, progress: bool = True, vocabulary: PairVocabulary | None = None,
                   extra: dict | None = None) -> Path:
    """Fit the vocabularies on the training pairs (or take `vocabulary`), encode every split, and write the
    folder (under a hidden name, renamed into place when complete)."""
    from seqlab.progress import progress_bar

    check_options(data)
    output = Path(output)
    n = workers_for(workers, [SimpleNamespace(size=files.size) for files in splits.values()])
    with Writer(output, overwrite) as writer:      # removed on any error, nothing left half-written
        with Workers(n) as pool, progress_bar(None, progress, desc=f"preparing {output.name}", unit="pair",
                                              mininterval=0.5) as bar:
            fitted = vocabulary is None
            vocabulary = fit(splits["train"], data, pool) if fitted else vocabulary
            shared = vocabulary.source_vocab is vocabulary.target_vocab
            writer.save_json("tokenizer.json", {"shared": shared, "source": vocabulary.source_tokenizer.to_dict(),
                                                **({} if shared else
                                                   {"target": vocabulary.target_tokenizer.to_dict()})})
            writer.save_json("vocab.json", {"shared": shared, "source": vocabulary.source_vocab.tokens,
                                            **({} if shared else {"target": vocabulary.target_vocab.tokens})})
            records = {split: encode_split(writer, split, files, vocabulary, pool, bar)
                       for split, files in splits.items()}
        manifest = {"family": FAMILY, "options": shaping(data), **(extra or {}),
                    "vocabulary": "fitted" if fitted else "given",
                    "source_vocab_size": len(vocabulary.source_vocab),
                    "target_vocab_size": len(vocabulary.target_vocab),
                    "files": {split: {"paired": f.paired, "source": f.source, "target": f.target, "format": f.reads,
                                      "source_field": f.source_field, "target_field": f.target_field}
                              for split, f in splits.items()},
                    "sources": {split: [source_record(path) for path in f.files] for split, f in splits.items()},
                    "splits": records}
        return writer.commit(manifest)


def fit(train: PairFiles, data, pool: Workers) -> PairVocabulary:
    """`build_vocabulary` streaming: the same tokenizers and vocabularies from the training pairs."""
    kinds = {side: data.side_tokenizer(side) for side in ("source", "target")}
    max_size = data.max_vocab or None
    sides = ("source", "target") if not data.shared_vocab else ("source",)
    langs = {side: getattr(data, f"{side}_lang") for side in ("source", "target")}
    tokenizers = {side: make_tokenizer(kinds[side], data.bpe_vocab_size, langs[side]) for side in sides}
    for side, tokenizer in tokenizers.items():          # a BPE model learns from its side's lines (or both)
        if tokenizer.kind == "bpe":
            read = ("source", "target") if data.shared_vocab else (side,)
            tokenizer.fit(chain.from_iterable(_side_lines(train, s) for s in read))
    counts = {side: Counter() for side in sides}        # a word or char vocabulary from the tokens' counts
    if any(tokenizer.kind != "bpe" for tokenizer in tokenizers.values()):
        jobs = ((kinds, langs, [p.source for p in chunk], [p.target for p in chunk])
                for chunk in chunked(train.pairs(), CHUNK, chars=_chars))
        for source_counts, target_counts in pool.map(_count_chunk, jobs):
            counts["source"].update(source_counts)
            counts[sides[-1]].update(target_counts)     # shared: both sides' tokens in one vocabulary
    vocabs = {side: Vocab.of_pieces(tokenizers[side].pieces()) if tokenizers[side].kind == "bpe" else
              Vocab.build(counts[side], data.min_freq, max_size) for side in sides}
    if data.shared_vocab:
        return PairVocabulary(tokenizers["source"], tokenizers["source"], vocabs["source"], vocabs["source"], False)
    return PairVocabulary(tokenizers["source"], tokenizers["target"], vocabs["source"], vocabs["target"], False)


def _side_lines(files: PairFiles, side: str):
    return (getattr(pair, side) for pair in files.pairs())


def _chars(pair) -> int:
    return len(pair.source) + len(pair.target or "")


def _count_chunk(job: tuple) -> tuple[Counter, Counter]:
    """(source token counts, target token counts) of a chunk of pairs (word, char and moses tokenizers)."""
    kinds, langs, sources, targets = job
    out = []
    for side, lines in (("source", sources), ("target", targets)):
        tokenizer = make_tokenizer(kinds[side], lang=langs[side]) if kinds[side] != "bpe" else None
        out.append(Counter(chain.from_iterable(tokenizer.tokenize_lines(lines))) if tokenizer else Counter())
    return out[0], out[1]


# ---------------------------------------------------------------------------------------------- encoding

_VOCABULARIES: dict[str, PairVocabulary] = {}


def _encode_chunk(job: tuple) -> list[tuple]:
    """Each pair of a chunk: (source ids, target ids, source words read as <unk>, target words read as <unk>),
    with the vocabularies of the folder being written (read once per process)."""
    folder, dataset, sources, targets = job
    vocabulary = _VOCABULARIES.get(dataset)
    if vocabulary is None:
        _VOCABULARIES.clear()
        vocabulary = _VOCABULARIES[dataset] = read_pair_vocabulary(Path(folder), False, 0, 0)
    out = []
    source_index, target_index = vocabulary.source_vocab.index, vocabulary.target_vocab.index
    for source, target in zip(vocabulary.source_tokens(sources), vocabulary.target_tokens(targets), strict=True):
        source_ids = [source_index.get(t, UNK) for t in source]
        target_ids = [target_index.get(t, UNK) for t in target]
        out.append((source_ids, target_ids, [t for t, i in zip(source, source_ids, strict=True) if i == UNK],
                    [t for t, i in zip(target, target_ids, strict=True) if i == UNK]))
    return out


def encode_split(writer: Writer, split: str, files: PairFiles, vocabulary: PairVocabulary, pool: Workers,
                 bar) -> dict:
    """A split's pairs as items, in order; its record for the manifest."""
    items = ItemWriter(writer, split, {"source": id_dtype(len(vocabulary.source_vocab)),
                                       "target": id_dtype(len(vocabulary.target_vocab))},
                       texts=("source_unk", "target_unk"))
    folder, dataset = str(writer.folder), writer.dataset_id.hex()       # the folder's id: one vocabulary per folder
    jobs = ((folder, dataset, [p.source for p in chunk], [p.target for p in chunk])
            for chunk in chunked(files.pairs(), CHUNK, chars=_chars))
    unknown = [0, 0]
    for encoded in pool.map(_encode_chunk, jobs):
        for source, target, source_unk, target_unk in encoded:
            items.add(source=source, target=target, source_unk=source_unk, target_unk=target_unk)
            unknown[0] += len(source_unk)
            unknown[1] += len(target_unk)
        bar.update(len(encoded))
    return {**items.close(), "path": files.path, "unknown_source": unknown[0], "unknown_target": unknown[1]}


# ---------------------------------------------------------------------------------------------- reading


def open_prepared(folder: str | Path) -> Prepared:
    prepared = Prepared(folder, FAMILY)
    for name, flag in (("train", "--train"), ("dev", "--dev")):
        if prepared.split(name) is None:
            raise SeqlabError(f"--data {folder} has no {name} split; prepare it with {flag} (or {flag}-src and "
                              f"{flag}-tgt)")
    return prepared


def token_options(prepared: Prepared) -> dict:
    """The data options that shaped the prepared ids, as config values."""
    older = {name: default for name, default in LANGUAGES.items() if name not in prepared.options}
    return {**prepared.shaped([name for name in SHAPED if name not in older]), **older}


def split_name(prepared: Prepared, split: str) -> str:
    """How messages name a prepared split: the file it was read from."""
    found = prepared.split(split)
    return (found.record.get("path") if found is not None else "") or f"{prepared.folder} ({split})"


def vocabulary_of(prepared: Prepared, joint: bool, max_source: int, max_target: int) -> PairVocabulary:
    """The folder's tokenizers and vocabularies, with a run's length limits; every id of its shards checked to be
    one of theirs (from each shard's range, recorded when it was hashed)."""
    try:
        vocabulary = read_pair_vocabulary(prepared.folder, joint, max_source, max_target)
    except SeqlabError as error:
        raise SeqlabError(f"{str(error).split('; retrain')[0]}; prepare again") from None
    for side, vocab in (("source", vocabulary.source_vocab), ("target", vocabulary.target_vocab)):
        prepared.check_ids(side, len(vocab), f"{len(vocab):,} {side} tokens of vocab.json")
    return vocabulary


def vocabulary_digest(vocabulary: PairVocabulary) -> str:
    """A given vocabulary (--init-from, --resume) as part of a cache key."""
    parts = [vocabulary.source_tokenizer.to_dict(), vocabulary.source_vocab.tokens,
             vocabulary.target_tokenizer.to_dict(), vocabulary.target_vocab.tokens]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def cache_key(splits: dict[str, PairFiles], data, given: PairVocabulary | None) -> dict:
    """What the prepared ids depend on: every file's SHA-256, how it is read, the options, and a given
    vocabulary."""
    files = {split: {"sha256": [file_sha256(path, f.what) for path in f.files],
                     "read": [f.reads, f.source_field, f.target_field] if f.paired else "aligned"}
             for split, f in splits.items()}
    return {"family": FAMILY, "files": files, "options": shaping(data),
            "vocabulary": vocabulary_digest(given) if given is not None else ""}


def for_run(config, run_dir: Path, given: PairVocabulary | None, rank: int, barrier, log) -> Prepared:
    """The run's prepared data: --data, or the cache of its files (prepared here by rank 0 on a miss, with the
    `given` vocabulary of --init-from if any; the other ranks wait at `barrier`)."""
    data = config.data
    if data.prepared:
        prepared = open_prepared(data.prepared)
        check_given_files(data, prepared)
        return prepared
    splits = splits_of(data)                     # each file checked (missing, a folder) before it is hashed
    def write(folder: Path, extra: dict) -> None:
        write_prepared(splits, data, folder, workers=0, overwrite=True, progress=config.train.progress,
                       vocabulary=given, extra=extra)
    key = cache_key(splits, data, given if config.model.init_from else None)
    return open_prepared(cached(FAMILY, key, run_dir, rank, barrier, log, write))


def check_given_files(data, prepared: Prepared) -> None:
    """Files given beside --data must be the ones it was prepared from."""
    for split in SPLITS:
        files = pair_files(data, split)
        recorded = prepared.manifest.get("sources", {}).get(split) or []
        if files is None or not recorded:
            continue
        for path, record in zip(files.check().files, recorded, strict=False):
            if record.get("sha256") and file_sha256(path, files.what) != record["sha256"]:
                flag = f"--{split}" if files.paired else f"--{split}-{'src' if path == files.source else 'tgt'}"
                raise SeqlabError(f"{flag} {path} is not the file {prepared.folder} was prepared from "
                                  f"({record.get('path')}): leave {flag} out, or prepare again")

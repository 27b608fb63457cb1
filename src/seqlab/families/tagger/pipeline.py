"""Sequence labelling, end to end: `train_tagger(config)` and `load_tagger(run_dir)`.

    import seqlab
    config = seqlab.resolve_tagger_config(overrides={"train": "en_ewt-ud-train.conllu",
                                                     "dev": "en_ewt-ud-dev.conllu", "format": "conllu"})
    seqlab.train_tagger(config)
    tagger = seqlab.load_tagger("runs/tagger")
    tagger.tag(["The", "cat", "sat", "."])        # [("DET", 0.99), ("NOUN", 0.98), ...]

A run directory holds config.json (data, model and train groups, a format version, "task":
"tagger"), vocab.json (words), chars.json (characters, with character features), labels.json (the
tags, and the entity scheme), model.safetensors (the best weights), checkpoint.safetensors (for
--resume), metrics.jsonl, train_log.jsonl and curves.png; and prepared/, the CoNLL files prepared once
(`seqlab.families.tagger.prepare`), unless the run read --data or $SEQLAB_CACHE_DIR holds them. Training reads
only prepared data: a global batch's sentences are read from the shards when its rows are asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from seqlab.data.tags import allowed_transitions
from seqlab.data.vectors import fill_embeddings
from seqlab.errors import SeqlabError
from seqlab.families.contract import Pipeline
from seqlab.families.lm.features import (
    copy_lm_files,
    lm_features_note,
    load_lm_features,
    rebuild_lm_features,
)
from seqlab.families.runs import (
    check_sizes,
    load_best,
    log,
    refuse_fused_output,
    start_run,
    train_in_run,
)
from seqlab.families.tagger import FAMILY
from seqlab.families.tagger.config import (
    CONFIG_GROUPS,
    TRAIN_DEFAULTS,
    TaggerTrainConfig,
    prepare,  # noqa: F401  (re-exported)
    read_run_config,
    resolve_tagger_config,
)
from seqlab.families.tagger.prepare import check_ids, for_run, with_vectors  # noqa: F401  (re-exported)
from seqlab.families.tagger.task import PreparedSentences, TaggerVocabulary, TaggingTask
from seqlab.families.tagger.trained import TrainedTagger
from seqlab.families.tagger.vocab import read_tagger_vocabulary as read_vocabulary
from seqlab.fileio import atomic_write_json
from seqlab.models.tagger import Tagger
from seqlab.progress import Reading, data_files
from seqlab.training import distributed
from seqlab.training.trainer import Trainer


def train_tagger(config: TaggerTrainConfig, resume: bool = False, overwrite: bool = False,
                 callback: Callable[[dict], None] | None = None) -> dict:
    """Train a tagger into `config.train.output`; return the final dev/test figures."""
    return train_in_run(config, resume, overwrite, lambda config, run_dir, device: _train_tagger(
        config, run_dir, device, resume, overwrite, callback))


def _train_tagger(config, run_dir, device, resume, overwrite, callback) -> dict:
    data = config.data
    refuse_fused_output(config.train, "a tagger")
    rank = distributed.world()[0]
    lm_features = None
    if data.lm_features:      # resumed: the run's own copies (the weights come back with the checkpoint)
        lm_features = (rebuild_lm_features(run_dir, config.model.lm_feature_size) if resume
                       else load_lm_features(data.lm_features))
    reading = Reading(data_files(data), log)        # hashing, preparing or opening them can take minutes
    prepared = for_run(config, run_dir, rank, distributed.barrier, log)      # the one data path: --data or a cache
    vocabulary, target, scheme = read_vocabulary(prepared.folder)
    check_ids(prepared, vocabulary)
    reading.done(f"{prepared.split('train').record['items']:,} training sentences")
    if config.model.char_features == "none":
        vocabulary = TaggerVocabulary(vocabulary.words, vocabulary.labels, None,
                                      lowercase_fallback=vocabulary.lowercase_fallback)
    vectors = None
    if resume:
        run_vocabulary, _, _ = read_vocabulary(run_dir)
        if run_vocabulary.words.tokens != vocabulary.words.tokens or run_vocabulary.labels != vocabulary.labels:
            raise SeqlabError(f"--resume: the prepared data ({prepared.folder}) has another vocabulary or tag set "
                              f"than the run in {run_dir}; resume with the data the run was trained on")
    elif (prepared.folder / "vectors.npy").is_file():
        vectors = tuple(torch.from_numpy(np.load(prepared.folder / name, allow_pickle=False))
                        for name in ("vectors.npy", "vectors_found.npy"))
        config = dataclasses.replace(config, model=dataclasses.replace(config.model,
                                                                       embedding_size=vectors[0].size(1)))
    crf = target != "none" if config.model.crf is None else config.model.crf      # the default: entity tags get one
    if config.model.crf is None and rank == 0:
        log(f"{'a CRF output layer: the tags are entity tags' if crf else 'per-token softmax: the tags are plain'} "
            f"({'--no-crf' if crf else '--crf'} for the other)")
    model_config = dataclasses.replace(config.model, crf=crf, vocab_size=len(vocabulary.words),
                                       num_labels=len(vocabulary.labels),
                                       char_vocab_size=len(vocabulary.chars) if vocabulary.chars else 0,
                                       lm_feature_size=lm_features.output_size if lm_features else 0)
    config = dataclasses.replace(config, model=model_config)
    constraints = None
    if model_config.crf and target != "none":
        constraints = tuple(torch.tensor(m) for m in allowed_transitions(vocabulary.labels, target))
    torch.manual_seed(config.train.seed)
    model = Tagger(model_config, constraints, lm_features)
    if vectors is not None:
        fill_embeddings(model.embedding, *vectors)
    model = model.to(device)
    torch.manual_seed(config.train.seed + rank)
    sentences = prepared.split("train").record["items"]
    log(f"{sentences:,} training sentences, {len(vocabulary.words):,} words, {len(vocabulary.labels)} tags"
        f"{f' ({target.upper()})' if target != 'none' else ''}; {model_config.encoder} tagger with "
        f"{model.num_parameters():,} parameters on {device}"
        f"{lm_features_note(model) if lm_features else ''}")
    if rank == 0 and not resume:
        write_run_files(run_dir, config, vocabulary, target, scheme, overwrite)
    distributed.barrier()
    train, dev, test = (PreparedSentences(prepared.split(name), vocabulary, model) if prepared.split(name) else None
                        for name in ("train", "dev", "test"))
    task = TaggingTask(vocabulary, train, dev, test, config.train.batch_size, config.train.eval_batch_size,
                       config.train.seed, data.unk_replace, model)
    return Trainer(task, model, config.train, run_dir, device, callback).fit(resume=resume)


def write_run_files(run_dir: Path, config: TaggerTrainConfig, vocabulary: TaggerVocabulary, scheme: str,
                    file_scheme: str, overwrite: bool = False) -> None:
    """`scheme`: the one the model tags in; `file_scheme`: the training file's."""
    start_run(run_dir, FAMILY, config, overwrite)
    atomic_write_json(run_dir / "vocab.json", {**vocabulary.words.to_dict(), "lowercase_fallback":
                                               vocabulary.lowercase_fallback})
    atomic_write_json(run_dir / "labels.json", {"labels": vocabulary.labels, "scheme": scheme,
                                                "file_scheme": file_scheme})
    if vocabulary.chars is not None:
        atomic_write_json(run_dir / "chars.json", vocabulary.chars.to_dict())
    else:
        (run_dir / "chars.json").unlink(missing_ok=True)                 # an overwritten run's
    copy_lm_files(run_dir, config.data.lm_features)


def load_tagger(run_dir: str | Path, device: str = "cpu") -> TrainedTagger:
    """A trained tagger from its run directory (the best weights)."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir)
    vocabulary, scheme, file_scheme = read_vocabulary(run_dir)
    check_sizes(run_dir, config, {"vocab_size": ("vocab.json", len(vocabulary.words)),
                                  "num_labels": ("labels.json", len(vocabulary.labels)),
                                  "char_vocab_size": ("chars.json", len(vocabulary.chars) if vocabulary.chars else 0)})
    lm_features = rebuild_lm_features(run_dir, config.model.lm_feature_size)
    model, device = load_best(run_dir, Tagger(config.model, lm_features=lm_features), device)
    return TrainedTagger(model, vocabulary, scheme, config, device, file_scheme).from_run(run_dir)


PIPELINE = Pipeline(
    config=TaggerTrainConfig, groups=CONFIG_GROUPS, train_defaults=TRAIN_DEFAULTS,
    derived=("vocab_size", "num_labels", "char_vocab_size", "lm_feature_size"), resolve=resolve_tagger_config,
    train=train_tagger,
    load=load_tagger, evaluate=TrainedTagger.evaluate_file,
    next_steps=("seqlab tag {output} FILE", "seqlab evaluate {output} FILE"))

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

from seqlab.contract import Pipeline
from seqlab.data.tags import allowed_transitions
from seqlab.data.vectors import fill_embeddings
from seqlab.errors import SeqlabError
from seqlab.families.lm.features import (
    copy_lm_files,
    lm_features_note,
    load_lm_features,
    rebuild_lm_features,
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
from seqlab.families.tagger.model import Tagger
from seqlab.families.tagger.prepare import check_ids, for_run, with_vectors  # noqa: F401  (re-exported)
from seqlab.families.tagger.task import PreparedSentences, TaggerVocabulary, TaggingTask
from seqlab.families.tagger.trained import TrainedTagger
from seqlab.families.tagger.vocab import read_tagger_vocabulary as read_vocabulary
from seqlab.fileio import atomic_write_json
from seqlab.runs.directory import (
    check_sizes,
    load_best,
    log,
    refuse_fused_output,
    start_run,
)
from seqlab.runs.skeleton import Hooks, Run, train_family
from seqlab.training import distributed


def train_tagger(config: TaggerTrainConfig, resume: bool = False, overwrite: bool = False,
                 callback: Callable[[dict], None] | None = None) -> dict:
    """Train a tagger into `config.train.output`; return the final dev/test figures."""
    return train_family(Training, config, resume, overwrite, callback)


class Training(Hooks):
    """The tagger's hooks of the training pipeline (`seqlab.runs.skeleton`)."""

    def refuse(self, config: TaggerTrainConfig) -> TaggerTrainConfig:
        refuse_fused_output(config.train, "a tagger")
        return config

    def start(self, config: TaggerTrainConfig, run: Run) -> None:
        self.lm_features = None
        if config.data.lm_features:      # resumed: the run's own copies (the weights come back with the checkpoint)
            self.lm_features = (rebuild_lm_features(run.run_dir, config.model.lm_feature_size) if run.resume
                                else load_lm_features(config.data.lm_features))

    def read(self, config: TaggerTrainConfig, run: Run) -> TaggerTrainConfig:
        run_dir, lm_features = run.run_dir, self.lm_features
        prepared = for_run(config, run_dir, run.rank, distributed.barrier, log)   # the one data path: --data or a cache
        vocabulary, target, scheme = read_vocabulary(prepared.folder)
        check_ids(prepared, vocabulary)
        run.reading.done(f"{prepared.split('train').record['items']:,} training sentences")
        if config.model.char_features == "none":
            vocabulary = TaggerVocabulary(vocabulary.words, vocabulary.labels, None,
                                          lowercase_fallback=vocabulary.lowercase_fallback)
        self.vectors = None
        if run.resume:
            run_vocabulary, _, _ = read_vocabulary(run_dir)
            if run_vocabulary.words.tokens != vocabulary.words.tokens or run_vocabulary.labels != vocabulary.labels:
                raise SeqlabError(f"--resume: the prepared data ({prepared.folder}) has another vocabulary or tag "
                                  f"set than the run in {run_dir}; resume with the data the run was trained on")
        elif (prepared.folder / "vectors.npy").is_file():
            self.vectors = tuple(torch.from_numpy(np.load(prepared.folder / name, allow_pickle=False))
                                 for name in ("vectors.npy", "vectors_found.npy"))
            config = dataclasses.replace(config, model=dataclasses.replace(config.model,
                                                                           embedding_size=self.vectors[0].size(1)))
        crf = target != "none" if config.model.crf is None else config.model.crf    # the default: entity tags get one
        if config.model.crf is None and run.rank == 0:
            log(f"{'a CRF output layer: the tags are entity tags' if crf else 'per-token softmax: the tags are plain'} "
                f"({'--no-crf' if crf else '--crf'} for the other)")
        model_config = dataclasses.replace(config.model, crf=crf, vocab_size=len(vocabulary.words),
                                           num_labels=len(vocabulary.labels),
                                           char_vocab_size=len(vocabulary.chars) if vocabulary.chars else 0,
                                           lm_feature_size=lm_features.output_size if lm_features else 0)
        self.constraints = None
        if model_config.crf and target != "none":
            self.constraints = tuple(torch.tensor(m) for m in allowed_transitions(vocabulary.labels, target))
        self.prepared, self.vocabulary, self.target, self.scheme = prepared, vocabulary, target, scheme
        return dataclasses.replace(config, model=model_config)

    def build(self, config: TaggerTrainConfig, run: Run) -> Tagger:
        model = Tagger(config.model, self.constraints, self.lm_features)
        if self.vectors is not None:
            fill_embeddings(model.embedding, *self.vectors)
        return model.to(run.device)

    def task(self, config: TaggerTrainConfig, model: Tagger, run: Run) -> TaggingTask:
        prepared = self.prepared
        train, dev, test = (PreparedSentences(prepared.split(name), self.vocabulary, model) if prepared.split(name)
                            else None for name in ("train", "dev", "test"))
        return TaggingTask(self.vocabulary, train, dev, test, config.train.batch_size, config.train.eval_batch_size,
                           config.train.seed, config.data.unk_replace, model)

    def describe(self, config: TaggerTrainConfig, model: Tagger, task: TaggingTask, run: Run) -> str:
        vocabulary, target = self.vocabulary, self.target
        sentences = self.prepared.split("train").record["items"]
        return (f"{sentences:,} training sentences, {len(vocabulary.words):,} words, {len(vocabulary.labels)} tags"
                f"{f' ({target.upper()})' if target != 'none' else ''}; {config.model.encoder} tagger with "
                f"{model.num_parameters():,} parameters on {run.device}"
                f"{lm_features_note(model) if self.lm_features else ''}")

    def write_run_files(self, config: TaggerTrainConfig, run: Run) -> None:
        write_run_files(run.run_dir, config, self.vocabulary, self.target, self.scheme, run.overwrite)


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

"""Sequence classification, end to end: `train_classifier(config)` and `load_classifier(run_dir)`.

    import seqlab
    config = seqlab.resolve_classifier_config(overrides={
        "train": "stsa.binary.train", "dev": "stsa.binary.dev", "format": "labeled-lines", "arch": "lstm"})
    seqlab.train_classifier(config)
    clf = seqlab.load("runs/classifier")
    clf.classify(["a fine film", "a dull , lifeless mess"])   # [Prediction(label='1', probability=0.93, ...), ...]

A run directory holds config.json (data, model and train groups, a format version, "task":
"classifier"), vocab.json (words and n-grams), labels.json (the classes), features.json (the
features classifier's lexicon and feature statistics), model.safetensors (the best weights),
checkpoint.safetensors (for --resume), metrics.jsonl, train_log.jsonl, curves.png and the
confusion matrices of the final evaluation (confusion_valid.png, confusion_test.png).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch

from seqlab.contract import Pipeline
from seqlab.data.documents import Document
from seqlab.data.prepared_items import Items
from seqlab.data.vectors import fill_embeddings
from seqlab.data.vocab import Vocab
from seqlab.data.words import with_ngrams
from seqlab.errors import SeqlabError
from seqlab.families.classifier import FAMILY
from seqlab.families.classifier.config import (
    CONFIG_GROUPS,
    TRAIN_DEFAULTS,
    ClassifierTrainConfig,
    read_run_config,
    resolve_classifier_config,
    uses_features,
)
from seqlab.families.classifier.features import FeatureExtractor, derive_lexicon, read_lexicon
from seqlab.families.classifier.model import Classifier
from seqlab.families.classifier.prepare import check_labels, for_run, prepared_vectors, prepared_vocabulary
from seqlab.families.classifier.task import (
    ClassificationTask,
    DocumentVocabulary,
    PreparedDocuments,
    Truncation,
    class_weights,
)
from seqlab.families.classifier.trained import TrainedClassifier
from seqlab.families.classifier.vocab import read_document_vocabulary
from seqlab.families.lm.features import (
    copy_lm_files,
    lm_features_note,
    load_lm_features,
    rebuild_lm_features,
)
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
from seqlab.training.plots import plot_confusion


def train_classifier(config: ClassifierTrainConfig, resume: bool = False, overwrite: bool = False,
                     callback: Callable[[dict], None] | None = None) -> dict:
    """Train a classifier into `config.train.output`; return the final dev/test figures."""
    return train_family(Training, config, resume, overwrite, callback)


class Training(Hooks):
    """The classifier's hooks of the training pipeline (`seqlab.runs.skeleton`)."""

    def refuse(self, config: ClassifierTrainConfig) -> ClassifierTrainConfig:
        data, model_config = config.data, config.model
        if not data.prepared and (not data.train or not (data.dev or data.dev_fraction)):
            raise SeqlabError("a classifier needs --train and --dev files (or --dev-fraction to hold out part of "
                              "the training file), or a prepared folder (--data DIR)")
        refuse_fused_output(config.train, "a classifier")
        if data.lm_features and model_config.arch not in ("rnn", "lstm", "gru", "transformer"):
            raise SeqlabError(f"--lm-features gives each token a vector for an encoder to read: use --arch lstm, "
                              f"gru, rnn or transformer, not {model_config.arch}")
        if model_config.arch != "features" and data.features != "builtin":
            raise SeqlabError(f"--features {data.features} is for --arch features")
        if data.ngrams > 1 and model_config.arch != "pooled":
            raise SeqlabError("--ngrams is for --arch pooled (a bag of n-grams has no order for an encoder to read)")
        if model_config.arch == "transformer":
            limit = model_config.max_positions - (model_config.document_pooling == "cls")
            if not data.max_length or data.max_length > limit:
                if data.prepared:
                    raise SeqlabError(f"--arch transformer reads at most {limit} tokens: {data.prepared} was "
                                      f"prepared with --max-length {data.max_length} (0: no limit); prepare it with "
                                      f"--max-length {limit}")
                config = dataclasses.replace(config, data=dataclasses.replace(data, max_length=limit))
        return config

    def read(self, config: ClassifierTrainConfig, run: Run) -> ClassifierTrainConfig:
        data, model_config, run_dir = config.data, config.model, run.run_dir
        prepared = for_run(config, run_dir, run.rank, distributed.barrier, log)
        notes = prepared.manifest.get("notes", {})
        for kind in ("holdout", "lexicon" if model_config.arch == "features" else "vectors"):
            if kind in notes:
                log(notes[kind])
        if data.prepared and prepared.manifest.get("holdout_seed") not in (None, config.train.seed):
            log(f"the development set is the one {data.prepared} holds out (drawn with --seed "
                f"{prepared.manifest['holdout_seed']}), whatever this run's --seed")
        vocabulary = prepared_vocabulary(prepared, data, model_config.arch)
        self.vectors = None
        if run.resume:
            saved = read_vocabulary(run_dir, config)
            if saved.labels != vocabulary.labels or (saved.words is not None and vocabulary.words is not None
                                                     and saved.words.tokens != vocabulary.words.tokens):
                raise SeqlabError(f"--resume: the prepared data ({prepared.folder}) has another vocabulary than the "
                                  f"run in {run_dir}; resume with the data the run was trained on")
            vocabulary = saved
        elif vocabulary.words is not None and (found := prepared_vectors(prepared)) is not None:
            self.vectors = (torch.from_numpy(found[0]), torch.from_numpy(found[1]))
            model_config = dataclasses.replace(model_config, embedding_size=self.vectors[0].size(1))
        self.counts = Counter(prepared.split("train").record.get("labels", {}))
        lm_features = None
        if data.lm_features:      # resumed: the run's own copies (the weights come back with the checkpoint)
            lm_features = (rebuild_lm_features(run_dir, config.model.lm_feature_size) if run.resume
                           else load_lm_features(data.lm_features))
        vocabulary.keep_tokens = lm_features is not None
        model_config = dataclasses.replace(
            model_config, vocab_size=len(vocabulary.words) if vocabulary.words is not None else 0,
            num_labels=len(vocabulary.labels),
            num_features=len(vocabulary.features.names) if vocabulary.features else 0,
            lm_feature_size=lm_features.output_size if lm_features else 0)
        self.prepared, self.vocabulary, self.lm_features = prepared, vocabulary, lm_features
        return dataclasses.replace(config, model=model_config)

    def build(self, config: ClassifierTrainConfig, run: Run) -> Classifier:
        data, vocabulary, lm_features = config.data, self.vocabulary, self.lm_features
        model = Classifier(config.model, lm_features)
        if self.vectors is not None:
            fill_embeddings(model.embedding, *self.vectors)
        model = model.to(run.device)
        splits = [self.prepared.split(name) for name in ("train", "dev", "test")]
        for split in splits:
            if split is not None:
                message = Truncation(*split.record.get("truncation", (0, 0, 0))).report(
                    split.record.get("path", split.name), data.max_length, data.truncate)
                if message:
                    log(message)
        train, dev, test = (None if split is None else PreparedDocuments(
            Items(split), vocabulary.words is not None, vocabulary.features is not None,
            model if lm_features else None) for split in splits)
        self.dev = dev.read(range(len(dev)))               # evaluation holds its documents (LM features: once)
        self.test = test.read(range(len(test))) if test is not None else None
        self.train = train
        run.reading.done(f"{len(train):,} training documents")
        return model

    def task(self, config: ClassifierTrainConfig, model: Classifier, run: Run) -> ClassificationTask:
        weights = class_weights(config.data.class_weights, self.vocabulary.labels, self.counts)
        return ClassificationTask(self.vocabulary, self.train, self.dev, self.test or None, config.train.batch_size,
                                  config.train.eval_batch_size, config.train.seed, weights, config.data.metric)

    def describe(self, config: ClassifierTrainConfig, model: Classifier, task: ClassificationTask, run: Run) -> str:
        vocabulary, counts = self.vocabulary, self.counts
        sizes = ", ".join(f"{label} {counts[label]:,}" for label in vocabulary.labels)
        return (f"{len(self.train):,} training documents ({sizes}); "
                f"{f'{len(vocabulary.words):,} words, ' if vocabulary.words is not None else ''}"
                f"{len(vocabulary.labels)} classes; "
                f"{config.model.arch} classifier with {model.num_parameters():,} parameters on {run.device}"
                f"{lm_features_note(model) if self.lm_features else ''}")

    def write_run_files(self, config: ClassifierTrainConfig, run: Run) -> None:
        write_run_files(run.run_dir, config, self.vocabulary, run.overwrite)

    def finish(self, results: dict, run: Run) -> dict:
        if run.rank == 0:
            for split, figures in results.items():
                plot_confusion(figures["confusion"], self.vocabulary.labels, run.run_dir / f"confusion_{split}.png",
                               f"{run.run_dir.name}: {split} ({figures['accuracy']:.2f}% accuracy)")
        return results


def build_vocabulary(train: list[Document], token_lists: list[list[str]],
                     config: ClassifierTrainConfig) -> DocumentVocabulary:
    """Vocabulary, classes and features from the training documents (and their tokens) only, in memory: what
    `seqlab.families.classifier.prepare` fits in streaming passes (the reference its tests compare with)."""
    data = config.data
    labels = check_labels(sorted({d.label for d in train}), data)
    vocabulary = DocumentVocabulary(None, labels, data.tokenizer, data.lowercase, data.ngrams, data.max_length,
                                    data.truncate)
    tokens = [vocabulary.cut(t) for t in token_lists]
    if uses_features(config):
        lexicon = None
        if data.features in ("builtin", "both"):
            lexicon = read_lexicon(data.lexicon, data.lowercase) if data.lexicon else \
                derive_lexicon(tokens, [d.label for d in train], data.lexicon_size,
                               data.lexicon_min_count)
            log(f"lexicon: {len(lexicon):,} words over {len(set(lexicon.values()))} classes"
                f"{f' from {data.lexicon}' if data.lexicon else ' derived from the training split'}")
        columns = len(data.columns.features) if data.features in ("columns", "both") else 0
        if data.features in ("columns", "both") and not columns:
            raise SeqlabError(f"--features {data.features} needs --feature-columns")
        if data.format not in ("tsv", "csv", "jsonl") and columns:
            raise SeqlabError("--feature-columns are read from tsv, csv or jsonl files")
        vocabulary.features = FeatureExtractor(lexicon, columns)
        vocabulary.features.fit([vocabulary.features.raw(t, d.features) for t, d in zip(tokens, train, strict=True)])
        return vocabulary
    grams = (with_ngrams(t, data.ngrams) for t in tokens) if data.ngrams > 1 else tokens
    vocabulary.words = Vocab.build(Counter(g for doc in grams for g in doc), data.min_freq, data.max_vocab or None)
    return vocabulary


def write_run_files(run_dir: Path, config: ClassifierTrainConfig, vocabulary: DocumentVocabulary,
                    overwrite: bool = False) -> None:
    start_run(run_dir, FAMILY, config, overwrite)
    for name, written in (("vocab.json", vocabulary.words is not None), ("features.json", vocabulary.features
                                                                          is not None)):
        if not written:
            (run_dir / name).unlink(missing_ok=True)                       # an overwritten run's
    for picture in run_dir.glob("confusion_*.png") if overwrite else ():
        picture.unlink()                                                   # of the replaced model
    if vocabulary.words is not None:
        atomic_write_json(run_dir / "vocab.json", {**vocabulary.words.to_dict(),
                                                   "lowercase_fallback": vocabulary.lowercase_fallback})
    atomic_write_json(run_dir / "labels.json", {"labels": vocabulary.labels})
    if vocabulary.features is not None:
        atomic_write_json(run_dir / "features.json", vocabulary.features.to_dict())
    copy_lm_files(run_dir, config.data.lm_features)


def read_vocabulary(run_dir: Path, config: ClassifierTrainConfig) -> DocumentVocabulary:
    data = config.data
    return read_document_vocabulary(run_dir, data.tokenizer, data.lowercase, data.ngrams, data.max_length,
                                    data.truncate)


def load_classifier(run_dir: str | Path, device: str = "cpu") -> TrainedClassifier:
    """A trained classifier from its run directory (the best weights)."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir)
    vocabulary = read_vocabulary(run_dir, config)
    check_sizes(run_dir, config, {"vocab_size": ("vocab.json", len(vocabulary.words) if vocabulary.words else 0),
                                  "num_labels": ("labels.json", len(vocabulary.labels)),
                                  "num_features": ("features.json", len(vocabulary.features.names)
                                                   if vocabulary.features else 0)})
    lm_features = rebuild_lm_features(run_dir, config.model.lm_feature_size)
    vocabulary.keep_tokens = lm_features is not None
    model, device = load_best(run_dir, Classifier(config.model, lm_features), device)
    return TrainedClassifier(model, vocabulary, config, device).from_run(run_dir)


PIPELINE = Pipeline(
    config=ClassifierTrainConfig, groups=CONFIG_GROUPS, train_defaults=TRAIN_DEFAULTS,
    derived=("vocab_size", "num_labels", "num_features", "lm_feature_size"), resolve=resolve_classifier_config,
    train=train_classifier, load=load_classifier, evaluate=TrainedClassifier.evaluate_file,
    next_steps=("seqlab classify {output} FILE", "seqlab evaluate {output} FILE"))

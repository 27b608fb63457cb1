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
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch

from seqlab.data.documents import Document
from seqlab.data.text_features import (
    FeatureExtractor,
    derive_lexicon,
    read_lexicon,
    tokenize,
    with_ngrams,
)
from seqlab.data.vectors import extend_vocab, fill_embeddings
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError
from seqlab.families.classifier import FAMILY
from seqlab.families.classifier.config import (
    CONFIG_GROUPS,
    TRAIN_DEFAULTS,
    ClassifierTrainConfig,
    read_run_config,
    read_split,
    resolve_classifier_config,
    uses_features,
)
from seqlab.families.classifier.task import (
    ClassificationTask,
    DocumentVocabulary,
    Truncation,
    class_weights,
    with_lm_features,
)
from seqlab.families.classifier.trained import TrainedClassifier
from seqlab.families.classifier.vocab import read_document_vocabulary
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
from seqlab.fileio import atomic_write_json
from seqlab.models.classifier import Classifier
from seqlab.training import distributed
from seqlab.training.plots import plot_confusion
from seqlab.training.trainer import Trainer


def train_classifier(config: ClassifierTrainConfig, resume: bool = False, overwrite: bool = False,
                     callback: Callable[[dict], None] | None = None) -> dict:
    """Train a classifier into `config.train.output`; return the final dev/test figures."""
    return train_in_run(config, resume, overwrite, lambda config, run_dir, device: _train(
        config, run_dir, device, resume, overwrite, callback))


def _train(config: ClassifierTrainConfig, run_dir: Path, device, resume: bool, overwrite: bool, callback) -> dict:
    data, model_config = config.data, config.model
    if not data.train or not (data.dev or data.dev_fraction):
        raise SeqlabError("a classifier needs --train and --dev files (or --dev-fraction to hold out part of "
                          "the training file)")
    refuse_fused_output(config.train, "a classifier")
    if data.lm_features and model_config.arch not in ("rnn", "lstm", "gru", "transformer"):
        raise SeqlabError(f"--lm-features gives each token a vector for an encoder to read: use --arch lstm, gru, "
                          f"rnn or transformer, not {model_config.arch}")
    if model_config.arch != "features" and data.features != "builtin":
        raise SeqlabError(f"--features {data.features} is for --arch features")
    if data.ngrams > 1 and model_config.arch != "pooled":
        raise SeqlabError("--ngrams is for --arch pooled (a bag of n-grams has no order for an encoder to read)")
    train = read_split(data.train, data, "training file", training=True)
    if data.dev:
        dev, dev_path = read_split(data.dev, data, "development file"), data.dev
    else:
        order = list(range(len(train)))
        random.Random(config.train.seed).shuffle(order)
        held = set(order[:max(1, round(data.dev_fraction * len(train)))])
        dev = [d for i, d in enumerate(train) if i in held]
        train = [d for i, d in enumerate(train) if i not in held]
        dev_path = f"{data.train} (held out)"
        log(f"holding out {len(dev):,} of the {len(train) + len(dev):,} training documents as the development set")
    test = read_split(data.test, data, "test file") if data.test else None
    if model_config.arch == "transformer":
        limit = model_config.max_positions - (model_config.document_pooling == "cls")
        if not data.max_length or data.max_length > limit:
            data = dataclasses.replace(data, max_length=limit)
            config = dataclasses.replace(config, data=data)
    vectors = None
    train_tokens = [tokenize(d.text, data.tokenizer, data.lowercase) for d in train]    # once, for both uses
    if resume:
        vocabulary = read_vocabulary(run_dir, config)
    else:
        vocabulary = build_vocabulary(train, train_tokens, config)
        if data.vectors:
            if vocabulary.words is None:
                raise SeqlabError("--vectors is for classifiers over words, not --arch features")
            words, table, found, message = extend_vocab(vocabulary.words, data.vectors, data.vectors_limit)
            log(message)
            vocabulary.words, vocabulary.lowercase_fallback, vectors = words, True, (table, found)
            model_config = dataclasses.replace(model_config, embedding_size=table.size(1))
    counts = Counter(d.label for d in train)
    lm_features = None
    if data.lm_features:      # resumed: the run's own copies (the weights come back with the checkpoint)
        lm_features = (rebuild_lm_features(run_dir, config.model.lm_feature_size) if resume
                       else load_lm_features(data.lm_features))
    vocabulary.keep_tokens = lm_features is not None
    model_config = dataclasses.replace(
        model_config, vocab_size=len(vocabulary.words) if vocabulary.words is not None else 0,
        num_labels=len(vocabulary.labels), num_features=len(vocabulary.features.names) if vocabulary.features else 0,
        lm_feature_size=lm_features.output_size if lm_features else 0)
    config = dataclasses.replace(config, model=model_config)
    torch.manual_seed(config.train.seed)
    model = Classifier(model_config, lm_features)
    if vectors is not None:
        fill_embeddings(model.embedding, *vectors)
    model = model.to(device)
    truncation = [Truncation(), Truncation(), Truncation()]
    encoded = [vocabulary.encode_all(train, data.train, "training file", truncation[0], train_tokens),
               vocabulary.encode_all(dev, dev_path, "development file", truncation[1]),
               vocabulary.encode_all(test or [], data.test, "test file", truncation[2])]
    encoded = [with_lm_features(model, items) for items in encoded]         # once: the LMs are frozen
    for counter, path in zip(truncation, (data.train, dev_path, data.test), strict=True):
        message = counter.report(path, data.max_length, data.truncate)
        if message:
            log(message)
    rank = distributed.world()[0]
    torch.manual_seed(config.train.seed + rank)
    sizes = ", ".join(f"{label} {counts[label]:,}" for label in vocabulary.labels)
    log(f"{len(train):,} training documents ({sizes}); "
        f"{f'{len(vocabulary.words):,} words, ' if vocabulary.words is not None else ''}"
        f"{len(vocabulary.labels)} classes; "
        f"{model_config.arch} classifier with {model.num_parameters():,} parameters on {device}"
        f"{lm_features_note(model) if lm_features else ''}")
    if rank == 0 and not resume:
        write_run_files(run_dir, config, vocabulary, overwrite)
    distributed.barrier()
    weights = class_weights(data.class_weights, vocabulary.labels, counts)
    task = ClassificationTask(vocabulary, encoded[0], encoded[1], encoded[2] or None, config.train.batch_size,
                              config.train.eval_batch_size, config.train.seed, weights, data.metric)
    results = Trainer(task, model, config.train, run_dir, device, callback).fit(resume=resume)
    if rank == 0:
        for split, figures in results.items():
            plot_confusion(figures["confusion"], vocabulary.labels, run_dir / f"confusion_{split}.png",
                           f"{run_dir.name}: {split} ({figures['accuracy']:.2f}% accuracy)")
    return results


def build_vocabulary(train: list[Document], token_lists: list[list[str]],
                     config: ClassifierTrainConfig) -> DocumentVocabulary:
    """Vocabulary, classes and features from the training documents (and their tokens) only."""
    data = config.data
    labels = sorted({d.label for d in train})
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
    if vocabulary.words is not None:
        atomic_write_json(run_dir / "vocab.json", {**vocabulary.words.to_dict(),
                                                   "lowercase_fallback": vocabulary.lowercase_fallback})
    atomic_write_json(run_dir / "labels.json", {"labels": vocabulary.labels})
    if vocabulary.features is not None:
        atomic_write_json(run_dir / "features.json", vocabulary.features.to_dict())
    if config.data.lm_features:
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

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

import copy
import dataclasses
import random
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from seqlab.config import check_fields, option
from seqlab.data.batching import length_batches
from seqlab.data.documents import FORMATS, Columns, Document, document_reader, read_documents, text_documents
from seqlab.data.limits import DEFAULT_MAX_TOKENS, InputLimit
from seqlab.data.stream import CHUNK_SIZE, LineReader, chunked, interactive
from seqlab.data.text_features import (
    TOKENIZERS,
    FeatureExtractor,
    derive_lexicon,
    read_lexicon,
    tokenize,
    with_ngrams,
)
from seqlab.data.vectors import extend_vocab, fill_embeddings
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError, place
from seqlab.fileio import atomic_write_json
from seqlab.models.classifier import Classifier, ClassifierConfig
from seqlab.pipelines.lm_feature_runs import (
    check_paths,
    copy_lm_files,
    lm_features_note,
    load_lm_features,
    rebuild_lm_features,
)
from seqlab.pipelines.outputs import Prediction
from seqlab.pipelines.run_files import FromRun, read_document_vocabulary
from seqlab.pipelines.runs import (
    Pipeline,
    check_sizes,
    load_best,
    log,
    read_run_config_as,
    refuse_fused_output,
    resolve_run_config,
    start_run,
    train_in_run,
)
from seqlab.progress import progress_bar
from seqlab.tasks.classification import (
    ClassificationTask,
    DocumentVocabulary,
    Truncation,
    class_weights,
    document_batches,
    document_lengths,
    probabilities,
    with_lm_features,
)
from seqlab.training import distributed
from seqlab.training.plots import plot_confusion
from seqlab.training.trainer import TrainConfig, Trainer

# what a classifier trains with unless told otherwise (the trainer's defaults suit language models)
TRAIN_DEFAULTS = {"output": "runs/classifier", "epochs": 10, "batch_size": 32, "eval_batch_size": 128,
                  "optimizer": "adam", "lr": 1e-3, "grad_clip": 5.0, "log_every": 50}


@dataclass
class ClassifierDataConfig:
    """Where the labelled documents come from and how they become tokens (saved under "data")."""

    train: str = option("", "training file", file=True)
    dev: str = option("", "development file: evaluated every epoch, for the best weights", file=True)
    test: str = option("", "test file, scored with the best weights at the end", file=True)
    dev_fraction: float = option(0.0, "with no --dev: hold out this fraction of the training documents "
                                      "(a random choice fixed by --seed) as the development set", at_least=0, below=1)
    format: str = option("tsv", "file format", choices=FORMATS)
    text_column: str = option("text", "tsv / csv / jsonl: the text's column (a header name, or a 0-based "
                                      "index for files without a header) or JSON field")
    label_column: str = option("label", "tsv / csv / jsonl: the label's column or field")
    feature_columns: str = option("", "tsv / csv / jsonl: numeric columns (comma-separated) for the "
                                      "features classifier")
    header: str = option("auto", "tsv / csv: whether the first row names the columns (auto: yes when "
                                 "columns are given by name)", choices=("auto", "yes", "no"))
    sst_classes: int = option(5, "sst-tree: 5 (the root's label 0-4) or 2 (0-1 -> 0, 3-4 -> 1, neutral "
                                 "dropped)", choices=(5, 2))
    phrases: bool = option(False, "sst-tree: train on every labelled phrase (subtree) of the training "
                                  "trees, not only the sentences; evaluation stays on sentences")
    tokenizer: str = option("words", "words: split off punctuation and drop HTML tags; whitespace: the "
                                     "file is already tokenized", choices=TOKENIZERS)
    lowercase: bool = option(True, "lowercase the text before tokenizing")
    ngrams: int = option(1, "pooled classifier: add the 2- to N-grams of each document as tokens "
                            "(fastText's bag of n-grams)", at_least=1)
    max_length: int = option(0, "truncate documents to this many tokens, reported (0: no limit; the "
                                "transformer: its --max-positions)", at_least=0)
    truncate: str = option("head", "keep the first (head) or last (tail) --max-length tokens",
                           choices=("head", "tail"))
    min_freq: int = option(1, "keep words seen at least this often in training; the rest become <unk>", at_least=1)
    max_vocab: int = option(0, "keep at most this many words (and n-grams), specials included (0: no limit)",
                            at_least=0)
    vectors: str = option("", "pretrained word vectors (word2vec or GloVe text, may be .gz) that "
                              "initialise the embeddings; their words join the vocabulary", file=True)
    vectors_limit: int = option(0, "read only the first N vectors of --vectors (0: all)", at_least=0)
    features: str = option("builtin", "features classifier: the built-in features (lexicon counts, "
                                      "negation, pronouns, '!', log length), the --feature-columns, or both",
                           choices=("builtin", "columns", "both"))
    lexicon: str = option("", "features classifier: 'word class' lines (default: derived from the "
                              "training split)", file=True)
    lexicon_size: int = option(100, "derived lexicon: words per class", at_least=1)
    lexicon_min_count: int = option(5, "derived lexicon: only words in at least this many training documents",
                                    at_least=1)
    class_weights: str = option("none", "weight the loss per class: none, balanced (n / (K n_c)), or "
                                        "label=weight,... (others 1)")
    labels: str = option("", "the classes, comma-separated (default: those of the training file); each "
                             "must have training examples")
    metric: str = option("accuracy", "the development figure that picks the best weights",
                         choices=("accuracy", "macro_f1"))
    lm_features: list[str] = option([], "contextual string embeddings (Akbik et al. 2018): one or two character-LM "
                                        "run directories, FWD_RUN [BWD_RUN] (seqlab train lm --tokenizer char, the "
                                        "second with --reverse), run over each document's tokens joined by spaces; "
                                        "each token's LM states join its embedding; frozen, copied into this run "
                                        "(add --no-lowercase to give the LMs the text's own case)")

    def __post_init__(self):
        check_fields(self)
        check_paths(self.lm_features)

    @property
    def columns(self) -> Columns:
        features = tuple(c.strip() for c in self.feature_columns.split(",") if c.strip())
        return Columns(self.text_column, self.label_column, features, self.header)


@dataclass
class ClassifierTrainConfig:
    """A classifier training run: data, model and training options."""

    data: ClassifierDataConfig = field(default_factory=ClassifierDataConfig)
    model: ClassifierConfig = field(default_factory=ClassifierConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(**TRAIN_DEFAULTS))


CONFIG_GROUPS = {"data": ClassifierDataConfig, "model": ClassifierConfig, "train": TrainConfig}


def resolve_classifier_config(config_file: str | Path | None = None, overrides: dict | None = None,
                              resume: bool = False) -> ClassifierTrainConfig:
    """Defaults (TRAIN_DEFAULTS for the trainer) < the config file < overrides (the command line). With
    `resume`, the run's own config.json is the base and only options of the `train` group may change."""
    return resolve_run_config(ClassifierTrainConfig, CONFIG_GROUPS, config_file, overrides, resume,
                              read_run_config, TRAIN_DEFAULTS)


def read_split(path: str, data: ClassifierDataConfig, what: str, training: bool = False,
               labelled: bool = True, fmt: str | None = None) -> list[Document]:
    return read_documents(path, fmt or data.format, data.columns, what, labelled, data.sst_classes,
                          phrases=training and data.phrases)


def uses_features(config: ClassifierTrainConfig) -> bool:
    return config.model.arch == "features"


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
    start_run(run_dir, "classifier", config, overwrite)
    if vocabulary.words is not None:
        atomic_write_json(run_dir / "vocab.json", {**vocabulary.words.to_dict(),
                                                   "lowercase_fallback": vocabulary.lowercase_fallback})
    atomic_write_json(run_dir / "labels.json", {"labels": vocabulary.labels})
    if vocabulary.features is not None:
        atomic_write_json(run_dir / "features.json", vocabulary.features.to_dict())
    if config.data.lm_features:
        copy_lm_files(run_dir, config.data.lm_features)


def read_run_config(run_dir: str | Path) -> ClassifierTrainConfig:
    return read_run_config_as(run_dir, "classifier", ClassifierTrainConfig, CONFIG_GROUPS)


def read_vocabulary(run_dir: Path, config: ClassifierTrainConfig) -> DocumentVocabulary:
    data = config.data
    return read_document_vocabulary(run_dir, data.tokenizer, data.lowercase, data.ngrams, data.max_length,
                                    data.truncate)


# ---------------------------------------------------------------------------- a trained classifier

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


class TrainedClassifier(FromRun):
    """A loaded classifier: texts in, classes (with their probabilities) out."""

    def __init__(self, model: Classifier, vocabulary: DocumentVocabulary, config: ClassifierTrainConfig, device):
        self.model, self.vocabulary, self.config, self.device = model, vocabulary, config, device

    @property
    def labels(self) -> list[str]:
        return self.vocabulary.labels

    def classify(self, texts: list[str] | str, batch_size: int = 64, progress: bool | None = False):
        """The Prediction for each text (for one text given as a string, one Prediction). Texts longer
        than the training --max-length are truncated as in training, with a warning."""
        if isinstance(texts, str):
            return self.classify([texts], batch_size, progress)[0]
        empty = [i for i, t in enumerate(texts) if not t.strip()]
        if empty:
            raise SeqlabError(f"text {empty[0] + 1} of {len(texts)} is empty; there is nothing to classify")
        return self.classify_documents([Document(t, None, i + 1) for i, t in enumerate(texts)], batch_size, progress)

    def classify_documents(self, documents: list[Document], batch_size: int = 64, progress: bool | None = False,
                           what: str = "input") -> list[Prediction]:
        """The Prediction for each document (its label, if any, is ignored), in order."""
        counter = Truncation()
        unlabelled = [dataclasses.replace(d, label=None) for d in documents]
        encoded = self.vocabulary.encode_all(unlabelled, "", what, counter)
        message = counter.report(what, self.vocabulary.max_length, self.vocabulary.truncate)
        if message:
            warnings.warn(message, stacklevel=2)
        return self._predict(encoded, batch_size, progress)

    @torch.no_grad()
    def _predict(self, encoded: list, batch_size: int, progress: bool | None = False) -> list[Prediction]:
        results: list[Prediction | None] = [None] * len(encoded)
        encoded = with_lm_features(self.model, encoded)
        groups = length_batches(document_lengths(encoded), batch_size, None)   # shortest first: little padding
        for group in progress_bar(groups, progress, desc="classifying", unit="batch", leave=False):
            batch = self.vocabulary.collate([encoded[i] for i in group]).to(self.device)
            p = probabilities(self.model, self.model(batch.words, batch.lengths, batch.features, batch.lm))  # (B, K)
            for i, row in zip(group, p.tolist(), strict=True):
                best = max(range(len(row)), key=row.__getitem__)
                results[i] = Prediction(self.labels[best], row[best], dict(zip(self.labels, row, strict=True)))
        return results

    def input_limit(self, max_input_length: int | None = None, long_input: str = "truncate") -> InputLimit:
        """The longest document this classifier reads (`seqlab.data.limits`): its training --max-length
        (a transformer's is its positions), else DEFAULT_MAX_TOKENS, unless `max_input_length` says
        otherwise; longer ones keep their first (or, trained with --truncate tail, last) tokens."""
        model, data = self.config.model, self.config.data
        hard = model.max_positions - (model.document_pooling == "cls") if model.arch == "transformer" else None
        return InputLimit.resolve(max_input_length, data.max_length or hard or DEFAULT_MAX_TOKENS, hard,
                                  f"this {model.arch} classifier", long_input, data.truncate, "document")

    def classify_stream(self, path: str | Path = "-", input_format: str = "text", batch_size: int = 64,
                        chunk_size: int = CHUNK_SIZE, max_input_length: int | None = None, long_input: str = "truncate",
                        what: str = "input file") -> Iterator[list[Prediction]]:
        """Classify a file (or standard input, "-") a chunk of documents at a time: each chunk's
        Predictions, in input order, as soon as they are made; memory does not grow with the input.

        input_format: text (a document per line) or a training format (its labels, if any, ignored).
        A chunk holds at most `chunk_size` documents, sorted by length into batches (from a pipe or a
        terminal the first chunk is one batch, then twice as many each time, and a chunk ends early
        when the input pauses: `seqlab.data.stream.chunked`).
        Documents over the limit (`input_limit`) are truncated with a warning, or refused."""
        limit = self.input_limit(max_input_length, long_input)
        data = self.config.data
        with LineReader(path, what, limit.chars, limit.keep if input_format == "text" else "head") as lines:
            if input_format == "text":
                documents = text_documents(lines, path, what)
            else:
                documents = document_reader(input_format, data.columns, path, what, labelled=False,
                                            sst_classes=data.sst_classes)(lines)
            for chunk in chunked(documents, chunk_size, *interactive(lines, batch_size),
                                 chars=lambda d: len(d.text)):
                unlabelled = [dataclasses.replace(d, label=None) for d in chunk]
                yield self._predict(self._encode_within(unlabelled, limit, lines.place, path, what), batch_size)
        limit.warn(place(what, path))

    def _encode_within(self, documents: list[Document], limit: InputLimit, where, path, what: str) -> list:
        """The documents as ids, each cut to the limit first (or refused); `where(line)` names a line."""
        vocabulary = copy.copy(self.vocabulary)
        vocabulary.max_length, vocabulary.truncate = limit.tokens, limit.keep
        tokens = [limit.apply(vocabulary.tokens(d.text), where(d.line), d.line, line_cut=d.cut) for d in documents]
        return vocabulary.encode_all(documents, path, what, None, tokens)

    def evaluate_file(self, path: str | Path, fmt: str | None = None, confusion_png: str | Path | None = None,
                      progress: bool | None = False, chunk_size: int = CHUNK_SIZE, max_input_length: int | None = None,
                      long_input: str = "truncate", on_predictions: Callable | None = None) -> dict:
        """Accuracy, per-class P/R/F1, macro-F1 and the confusion matrix on a labelled file (a label
        training never saw is an error naming its line); optionally the matrix as a PNG heat map.
        `on_predictions(gold, predicted)` is called with each chunk's class indices, for figures per
        document (`seqlab.harms.intervals`).

        The file is read a chunk of documents at a time, in memory that does not grow with it; the
        confusion matrix (and the loss) are sums over documents, so the chunks give the figures of the
        whole file (the loss to float rounding)."""
        what = "evaluation file"
        data = self.config.data
        limit = self.input_limit(max_input_length, long_input)
        read = document_reader(fmt or data.format, data.columns, path, what, sst_classes=data.sst_classes)
        task = ClassificationTask(self.vocabulary, [], [], None, batch_size=1, eval_batch_size=128, seed=0,
                                  metric=data.metric)
        task.keep_predictions = on_predictions is not None
        totals: dict = {}
        bar = tqdm(desc="evaluating", unit="document", leave=False, disable=True if progress is False else None)
        with LineReader(path, what, limit.chars, stdin=False) as lines, bar:
            for chunk in chunked(read(lines), chunk_size, chars=lambda d: len(d.text)):
                encoded = with_lm_features(self.model, self._encode_within(chunk, limit, lines.place, path, what))
                for key, value in task.evaluate(self.model, document_batches(encoded, self.vocabulary, 128, None),
                                                self.device).items():
                    totals[key] = totals.get(key, 0) + value
                if on_predictions is not None:
                    on_predictions(*task.predictions)
                bar.update(len(chunk))
        result = task.summarize(totals)
        result["truncated"] = limit.cut
        limit.warn(place(what, path))
        if confusion_png:
            plot_confusion(result["confusion"], self.labels, confusion_png, f"{Path(path).name}: "
                           f"{result['accuracy']:.2f}% accuracy")
        return result


PIPELINE = Pipeline(
    name="classifier", title="a classifier",
    summary="a text classifier (features, pooled, rnn, lstm, gru, transformer) on TSV, CSV, JSON lines, "
            "'label text' lines or SST trees",
    config=ClassifierTrainConfig, groups=CONFIG_GROUPS, train_defaults=TRAIN_DEFAULTS,
    derived=("vocab_size", "num_labels", "num_features", "lm_feature_size"), resolve=resolve_classifier_config,
    train=train_classifier, load=load_classifier, evaluate=TrainedClassifier.evaluate_file,
    next_steps=("seqlab classify {output} FILE", "seqlab evaluate {output} FILE"))

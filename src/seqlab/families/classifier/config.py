"""The options of `seqlab train classifier` (and `seqlab.ClassifierTrainConfig`): the labelled files and how
they are read (data), the classifier (`seqlab.families.classifier.model.ClassifierConfig`) and how to train it (train),
saved as the three groups of a run's config.json; and the documents of a file read as the data options say."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from seqlab.config import check_fields, option
from seqlab.data.documents import FORMATS, Columns, Document, document_reader
from seqlab.data.stream import LineReader
from seqlab.data.words import TOKENIZERS
from seqlab.errors import SeqlabError
from seqlab.families.classifier import FAMILY
from seqlab.families.classifier.model import ClassifierConfig
from seqlab.families.lm.features import (
    check_paths,
)
from seqlab.runs.directory import (
    read_run_config_as,
    resolve_run_config,
)
from seqlab.training.config import TrainConfig

# what a classifier trains with unless told otherwise (the trainer's defaults suit language models)
TRAIN_DEFAULTS = {"output": "runs/classifier", "epochs": 10, "batch_size": 32, "eval_batch_size": 128,
                  "optimizer": "adam", "lr": 1e-3, "grad_clip": 5.0, "log_every": 50}


@dataclass
class ClassifierDataConfig:
    """Where the labelled documents come from and how they become tokens (saved under "data")."""

    prepared: str = option("", "a prepared dataset folder (`seqlab prepare classifier`): its documents, vocabulary and "
                               "classes, read from memory-mapped shards instead of --train/--dev/--test", flag="data")
    train: str = option("", "training file (.gz too; .parquet: the --text-column and --label-column columns)",
                        file=True)
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
    `resume`, the run's own config.json is the base and only options of the `train` group may change. With
    --data, the options that shaped the prepared documents come from its manifest; given otherwise, they are
    refused."""
    config = resolve_run_config(ClassifierTrainConfig, CONFIG_GROUPS, config_file, overrides, resume,
                                read_run_config, TRAIN_DEFAULTS)
    if resume or not config.data.prepared:
        return config
    from seqlab.families.classifier.prepare import FILES, open_prepared, shaped_options

    prepared = open_prepared(config.data.prepared)
    shaped = shaped_options(prepared, config.model.arch)
    config = resolve_run_config(ClassifierTrainConfig, CONFIG_GROUPS, config_file, overrides, resume,
                                read_run_config, {**TRAIN_DEFAULTS, **shaped})
    for name, value in shaped.items():
        given = getattr(config.data, name)
        same = given == value or (name in FILES and given and value and Path(given).resolve() == Path(value).resolve())
        if not same:
            raise SeqlabError(f"{_shown(name, given)}: {config.data.prepared} was prepared with {_shown(name, value)}; "
                              "leave the option out, or prepare again")
    return config


def _shown(name: str, value) -> str:
    """An option as the command line gives it: --ngrams 2, --no-lowercase, --labels ''."""
    flag = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{flag}" if value else f"--no-{flag}"
    return f"--{flag} {value!r}" if value == "" else f"--{flag} {value}"


def read_split(path: str, data: ClassifierDataConfig, what: str, training: bool = False,
               labelled: bool = True, fmt: str | None = None) -> list[Document]:
    """A file's documents, read whole (the in-memory reference): its format, or Parquet."""
    return list(iter_split(path, data, what, training, labelled, fmt))


def iter_split(path: str, data: ClassifierDataConfig, what: str, training: bool = False,
               labelled: bool = True, fmt: str | None = None) -> Iterator[Document]:
    """`read_split`, one document at a time (a model card's datasheet streams them)."""
    from seqlab.families.classifier.encode import is_parquet, parquet_documents

    if is_parquet(path):
        yield from parquet_documents(path, data.columns, what)
        return
    read = document_reader(fmt or data.format, data.columns, path, what, labelled, data.sst_classes,
                           phrases=training and data.phrases)
    with LineReader(path, what, stdin=False) as lines:
        yield from read(lines)


def uses_features(config: ClassifierTrainConfig) -> bool:
    return config.model.arch == "features"


def read_run_config(run_dir: str | Path) -> ClassifierTrainConfig:
    return read_run_config_as(run_dir, FAMILY, ClassifierTrainConfig, CONFIG_GROUPS)

"""The options of `seqlab train tagger` (and `seqlab.TaggerTrainConfig`): the CoNLL files and how they are
read (data), the tagger (`seqlab.families.tagger.model.TaggerConfig`) and how to train it (train), saved as the three
groups of a run's config.json; and the sentences of a file read as the data options say."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from seqlab.config import check_fields, option
from seqlab.data.stream import LineReader
from seqlab.data.tags import (
    SCHEMES,
)
from seqlab.errors import SeqlabError
from seqlab.families.lm.features import (
    check_paths,
)
from seqlab.families.tagger import FAMILY
from seqlab.families.tagger.conll import FORMATS, Sentence, labelled_sentences, read_labelled
from seqlab.families.tagger.model import TaggerConfig
from seqlab.families.tagger.prepare import prepare_tags as prepare  # noqa: F401  (re-exported)
from seqlab.families.tagger.prepare import refuse_stray_tags  # noqa: F401  (re-exported)
from seqlab.runs.directory import (
    read_run_config_as,
    resolve_run_config,
)
from seqlab.training.config import TrainConfig

# what a tagger trains with unless told otherwise (the trainer's defaults suit language models): the rate of the
# tuned recipes (configs/ud-pos-bilstm-char.yaml, conll2003-ner-bilstm-crf-char.yaml), which at 3 and 5 epochs
# beat 2e-3 by 2 points of UD English-EWT accuracy (benchmarks/results/defaults_new_data.md)
TRAIN_DEFAULTS = {"output": "runs/tagger", "epochs": 20, "batch_size": 32, "eval_batch_size": 64,
                  "optimizer": "adam", "lr": 5e-3, "grad_clip": 5.0, "log_every": 50}
# the transformer encoder's instead: a lower rate and a warm-up (the tagger table's transformer rows)
TRANSFORMER_DEFAULTS = {"lr": 1e-3, "warmup_steps": 500}


@dataclass
class TaggerDataConfig:
    """Where the labelled sentences come from (saved under "data")."""

    prepared: str = option("", "a prepared dataset folder (`seqlab prepare tagger`): its splits, vocabulary and tags, "
                               "read from memory-mapped shards instead of --train/--dev/--test", flag="data")
    train: str = option("", "training file (CoNLL-U or CoNLL-2003 columns)", file=True)
    dev: str = option("", "development file: evaluated every epoch, for early stopping and the best weights", file=True)
    test: str = option("", "test file, scored with the best weights at the end", file=True)
    format: str = option("conllu", "file format", choices=FORMATS)
    label_column: str = option("", "the label column: a CoNLL-U name (upos, xpos, ...) or index; for CoNLL, "
                                   "an index (default: upos / the last column)")
    scheme: str = option("auto", "entity tag scheme of the files (auto: detected; none: plain tags such as "
                                 "POS)", choices=("auto", "none", *SCHEMES))
    train_scheme: str = option("", "train and predict in this entity scheme (e.g. bioes); default: the "
                                    "files' own", choices=("", *SCHEMES))
    min_freq: int = option(1, "keep words seen at least this often in training; the rest become <unk>", at_least=1)
    unk_replace: float = option(0.0, "training: read each word seen only once as <unk> with this probability, "
                                     "so that <unk> (any unseen word) gets a trained embedding (Lample et al. "
                                     "2016 use 0.5)", at_least=0, at_most=1)
    max_vocab: int = option(0, "keep at most this many words, specials included (0: no limit)", at_least=0)
    vectors: str = option("", "pretrained word vectors (word2vec or GloVe text format, may be .gz) that "
                              "initialise the word embeddings; their words join the vocabulary, so a word "
                              "unseen in training but in the file keeps its vector", file=True)
    vectors_limit: int = option(0, "read only the first N vectors of --vectors (0: all)", at_least=0)
    lm_features: list[str] = option([], "contextual string embeddings (Akbik et al. 2018): one or two character-LM "
                                        "run directories, FWD_RUN [BWD_RUN] (seqlab train lm --tokenizer char, the "
                                        "second with --reverse); each word also gets the forward LM's state after "
                                        "its last character and the backward LM's after its first; the LMs are "
                                        "frozen and copied into this run")

    def __post_init__(self):
        check_fields(self)
        check_paths(self.lm_features)


@dataclass
class TaggerTrainConfig:
    """A tagger training run: data, model and training options."""

    data: TaggerDataConfig = field(default_factory=TaggerDataConfig)
    model: TaggerConfig = field(default_factory=TaggerConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(**TRAIN_DEFAULTS))


CONFIG_GROUPS = {"data": TaggerDataConfig, "model": TaggerConfig, "train": TrainConfig}


def resolve_tagger_config(config_file: str | Path | None = None, overrides: dict | None = None,
                          resume: bool = False) -> TaggerTrainConfig:
    """Defaults (TRAIN_DEFAULTS for the trainer) < the config file < overrides (the command line). With
    `resume`, the run's own config.json is the base and only options of the `train` group may change. With
    --data, the options that shaped the prepared items (format, scheme, vocabulary) come from its manifest;
    given otherwise, they are refused."""
    config = resolve_run_config(TaggerTrainConfig, CONFIG_GROUPS, config_file, overrides, resume, read_run_config,
                                TRAIN_DEFAULTS)
    defaults = TRAIN_DEFAULTS
    if not resume and config.model.encoder == "transformer":      # its own rate and warm-up, unless given
        defaults = {**TRAIN_DEFAULTS, **TRANSFORMER_DEFAULTS}
        config = resolve_run_config(TaggerTrainConfig, CONFIG_GROUPS, config_file, overrides, resume,
                                    read_run_config, defaults)
    if resume or not config.data.prepared:
        return config
    from seqlab.families.tagger.prepare import open_prepared, shaped_options

    shaped = shaped_options(open_prepared(config.data.prepared))
    config = resolve_run_config(TaggerTrainConfig, CONFIG_GROUPS, config_file, overrides, resume, read_run_config,
                                {**defaults, **shaped})
    for name, value in shaped.items():
        given = getattr(config.data, name)
        if given != value:
            flag = f"--{name.replace('_', '-')}"
            raise SeqlabError(f"{flag} {given or repr(given)}: {config.data.prepared} was prepared with {flag} "
                              f"{value or repr(value)}; leave the option out, or prepare again")
    return config


def read_sentences(path: str, data: TaggerDataConfig, what: str) -> list[Sentence]:
    return read_labelled(path, data.format, data.label_column or None, what)


def iter_sentences(path: str, data: TaggerDataConfig, what: str) -> Iterator[Sentence]:
    """`read_sentences`, one sentence at a time (a model card's datasheet streams them)."""
    read = labelled_sentences(None, data.format, data.label_column or None, path, what)
    with LineReader(path, what, stdin=False) as lines:
        yield from read(lines)


def read_run_config(run_dir: str | Path) -> TaggerTrainConfig:
    return read_run_config_as(run_dir, FAMILY, TaggerTrainConfig, CONFIG_GROUPS)

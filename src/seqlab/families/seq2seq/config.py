"""The options of `seqlab train seq2seq` (and `seqlab.Seq2SeqTrainConfig`): the pairs and how they are read
and cut (data), the model (`seqlab.families.seq2seq.model.Seq2SeqConfig`) and how to train it (train), saved as the
three groups of a run's config.json; and the pairs of a split read as the data options say."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from seqlab.config import check_fields, option
from seqlab.data.tokenizers import RULE_TOKENIZERS, TOKENIZERS
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq import FAMILY
from seqlab.families.seq2seq.model import Seq2SeqConfig
from seqlab.families.seq2seq.parallel import PAIRED_FORMATS, Pair
from seqlab.runs.directory import (
    read_run_config_as,
    resolve_run_config,
)
from seqlab.training.config import TrainConfig

SIDE_TOKENIZERS = (*TOKENIZERS, *RULE_TOKENIZERS)
TRAIN_DEFAULTS = {"output": "runs/seq2seq", "epochs": 10, "batch_size": 64, "eval_batch_size": 128,
                  "optimizer": "adam", "lr": 1e-3, "grad_clip": 1.0, "log_every": 50}


@dataclass
class Seq2SeqDataConfig:
    """Where the pairs come from and how they become tokens (saved under "data")."""

    prepared: str = option("", "a prepared dataset folder (`seqlab prepare seq2seq`): its splits, tokenizers and "
                               "vocabularies, read from memory-mapped shards instead of --train/--dev/--test",
                           flag="data")
    train_src: str = option("", "training sources, one per line (with --train-tgt: line i translates to line i)",
                            file=True)
    train_tgt: str = option("", "training targets, aligned with --train-src", file=True)
    dev_src: str = option("", "development sources: scored every epoch, for the best weights", file=True)
    dev_tgt: str = option("", "development targets", file=True)
    test_src: str = option("", "test sources, scored with the best weights at the end", file=True)
    test_tgt: str = option("", "test targets", file=True)
    train: str = option("", "instead of --train-src/--train-tgt: one file of pairs (--format tsv or jsonl; a .parquet "
                            "file is read as Parquet, its --source-field and --target-field columns)", file=True)
    dev: str = option("", "instead of --dev-src/--dev-tgt: a file of pairs", file=True)
    test: str = option("", "instead of --test-src/--test-tgt: a file of pairs", file=True)
    format: str = option("jsonl", "files of pairs: tsv (columns by header name or 0-based index) or jsonl",
                         choices=PAIRED_FORMATS)
    source_field: str = option("source", "files of pairs: the source's column (TSV, Parquet) or JSON field")
    target_field: str = option("target", "files of pairs: the target's column (TSV, Parquet) or JSON field")
    tokenizer: str = option("word", "both sides: word (whitespace-separated, for tokenised text), char, bpe "
                                    "(byte-level BPE learned on the training split), or moses (raw text split by "
                                    "Moses's rules for --source-lang / --target-lang)", choices=SIDE_TOKENIZERS)
    source_tokenizer: str = option("", "the source side's tokenizer, if not --tokenizer",
                                   choices=("", *SIDE_TOKENIZERS))
    target_tokenizer: str = option("", "the target side's tokenizer, if not --tokenizer",
                                   choices=("", *SIDE_TOKENIZERS))
    source_lang: str = option("en", "moses: the sources' language code (its abbreviations; en: doesn 't, fr / it: "
                                    "l' homme; other languages split apostrophes)")
    target_lang: str = option("en", "moses: the targets' language code (how outputs are split and joined back)")
    raw_text: str = option("warn", "--tokenizer word on text that looks untokenised (more than 2% of a side's words "
                                   "with punctuation attached, `water.`): warn and train, or refuse (what recipes "
                                   "for tokenised text set, such as configs/multi30k-gru-dot.yaml)",
                           choices=("warn", "refuse"))
    shared_vocab: bool = option(False, "one tokenizer and vocabulary learned on both sides (needed by --arch lm "
                                       "and --share-embeddings)")
    bpe_vocab_size: int = option(8000, "bpe: pieces per BPE model (the 256 bytes included); its vocabulary is "
                                       "these pieces and the 5 specials", at_least=1)
    min_freq: int = option(1, "word / char: keep tokens seen at least this often in training; the rest are <unk> "
                              "(BPE keeps every piece of its model)", at_least=1)
    max_vocab: int = option(0, "word / char: keep at most this many tokens per vocabulary, specials included (0: no "
                               "limit; refused when every side is BPE: use --bpe-vocab-size)", at_least=0)
    max_source_length: int = option(0, "longest source in tokens (0: no limit for rnn / lstm / gru; the "
                                       "transformer: --max-positions; lm: what --max-target-length leaves)", at_least=0)
    max_target_length: int = option(0, "longest target in tokens (0: no limit for rnn / lstm / gru; the "
                                       "transformer: --max-positions - 1; lm: --max-positions / 4)", at_least=0)
    long_pairs: str = option("skip", "training pairs over the limits: skip them (counted) or truncate them "
                                     "(development and test pairs are always truncated, counted)",
                             choices=("skip", "truncate"))

    def __post_init__(self):
        check_fields(self)

    def side_tokenizer(self, side: str) -> str:
        return getattr(self, f"{side}_tokenizer") or self.tokenizer


@dataclass
class Seq2SeqTrainOptions(TrainConfig):
    """How to train a sequence-to-sequence model: the trainer's options and the one only this family has (saved
    under "train")."""

    eval_decode: int = option(500, "at every evaluation, decode the first N dev pairs greedily and score them "
                                   "(BLEU, chrF, ROUGE-1/2/L against the dev targets; at the end the first N test "
                                   "pairs too); 0: the loss alone. The dev loss still picks the best weights",
                              at_least=0)


@dataclass
class Seq2SeqTrainConfig:
    """A sequence-to-sequence training run: data, model and training options."""

    data: Seq2SeqDataConfig = field(default_factory=Seq2SeqDataConfig)
    model: Seq2SeqConfig = field(default_factory=Seq2SeqConfig)
    train: Seq2SeqTrainOptions = field(default_factory=lambda: Seq2SeqTrainOptions(**TRAIN_DEFAULTS))


CONFIG_GROUPS = {"data": Seq2SeqDataConfig, "model": Seq2SeqConfig, "train": Seq2SeqTrainOptions}


def resolve_seq2seq_config(config_file: str | Path | None = None, overrides: dict | None = None,
                           resume: bool = False) -> Seq2SeqTrainConfig:
    """Defaults (TRAIN_DEFAULTS for the trainer) < the config file < overrides (the command line). With --data,
    the options that shaped the prepared ids (tokenizers, vocabularies) come from its manifest; given
    otherwise, they are refused."""
    config = resolve_run_config(Seq2SeqTrainConfig, CONFIG_GROUPS, config_file, overrides, resume,
                                read_run_config, TRAIN_DEFAULTS)
    if resume or not config.data.prepared:
        return config
    from seqlab.families.seq2seq.prepare import open_prepared, token_options

    shaped = token_options(open_prepared(config.data.prepared))
    config = resolve_run_config(Seq2SeqTrainConfig, CONFIG_GROUPS, config_file, overrides, resume,
                                read_run_config, {**TRAIN_DEFAULTS, **shaped})
    for name, value in shaped.items():
        given = getattr(config.data, name)
        if given != value:
            raise SeqlabError(f"{_flag(name, given)}: {config.data.prepared} was prepared with "
                              f"{_flag(name, value)}; leave the option out, or prepare again")
    return config


def _flag(name: str, value) -> str:
    """An option as the command line gives it: --shared-vocab, --no-shared-vocab, --tokenizer word."""
    flag = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{flag}" if value else f"--no-{flag}"
    return f"--{flag} {value if value != '' else repr('')}"


def read_pairs(data: Seq2SeqDataConfig, split: str, required: bool = False) -> tuple[list[Pair] | None, str]:
    """A split's pairs (None when not given) and how to name its file in messages."""
    from seqlab.families.seq2seq.sources import pair_files

    files = pair_files(data, split, required)
    return (list(files.pairs()), files.path) if files is not None else (None, "")


def resolve_lengths(data: Seq2SeqDataConfig, model: Seq2SeqConfig) -> Seq2SeqDataConfig:
    """Concrete length limits for the architecture (saved, so decoding applies the same ones)."""
    P = model.max_positions
    source, target = data.max_source_length, data.max_target_length
    if model.arch == "transformer":
        source, target = min(source or P, P), min(target or P - 1, P - 1)
    elif model.arch == "lm":
        target = min(target or P // 4, P - 2)
        source = min(source or P - 1 - target, P - 1 - target)       # source <sep> target fits the window
    return dataclasses.replace(data, max_source_length=source, max_target_length=target)


def read_run_config(run_dir: str | Path) -> Seq2SeqTrainConfig:
    return read_run_config_as(run_dir, FAMILY, Seq2SeqTrainConfig, CONFIG_GROUPS)

"""The options of `seqlab train lm` (and `seqlab.LMTrainConfig`): where the text comes from and how it
becomes tokens (data), the model (`seqlab.families.lm.model.LMConfig`) and how to train it (train), saved as the three
groups of a run's config.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from seqlab.config import check_fields, option
from seqlab.data.tokenizers import TOKENIZERS
from seqlab.errors import SeqlabError
from seqlab.families.lm import FAMILY
from seqlab.families.lm.model import LMConfig
from seqlab.runs.directory import (
    read_run_config_as,
    resolve_run_config,
)
from seqlab.training.config import TrainConfig


@dataclass
class LMDataConfig:
    """Where the text comes from and how it becomes tokens (saved under "data")."""

    prepared: str = option("", "a prepared dataset folder (`seqlab prepare lm`): its splits, tokenizer and vocabulary, "
                               "read from memory-mapped shards instead of --train/--valid/--test", flag="data")
    train: str = option("", "training text file (default: the bundled Tiny Shakespeare, first 90%); .gz, .jsonl "
                            "and .parquet too (--text-column)", file=True)
    valid: str = option("", "validation (development) text file (default with the bundled corpus: its last 10%)",
                        flag="dev", file=True)
    test: str = option("", "test text file, scored with the best weights at the end", file=True)
    text_column: str = option("text", "the text field of .jsonl records and the text column of .parquet files")
    tokenizer: str = option("char", "tokens: characters, whitespace words (PTB, wikitext) or BPE",
                            choices=tuple(TOKENIZERS))
    min_freq: int = option(1, "word / char: keep tokens seen at least this often in training; the rest become "
                              "<unk> (BPE keeps every piece of its model)", at_least=1)
    max_vocab: int = option(0, "word / char: keep at most this many tokens, specials included (0: no limit; "
                               "refused with BPE: use --bpe-vocab-size)", at_least=0)
    bpe_vocab_size: int = option(8000, "BPE: learn merges until the model has this many pieces (the 256 bytes "
                                       "included); the vocabulary is these pieces and the 5 specials", at_least=1)
    canary: str = option("", "plant random secrets in the training text (Carlini et al. 2019): a template with "
                            "one slot, {digits:N} or {letters:N}, e.g. 'my pin is {digits:6}'; its symbols are "
                            "written space-separated with word/BPE tokenizers; see `seqlab audit exposure`")
    canary_repeats: list[int] = option([], "with --canary: one secret per count, inserted that many times "
                                           "(default 1 4 16 64)", at_least=1)
    reverse: bool = option(False, "read every text right to left: the character order of the whole stream is "
                                  "reversed (last line first, each line backwards), for the backward LM of "
                                  "contextual string embeddings (Akbik et al. 2018); evaluation reverses its "
                                  "text the same way", when={"tokenizer": ("char",)})

    def __post_init__(self):
        check_fields(self)
        if self.canary_repeats and not self.canary:
            raise SeqlabError("--canary-repeats needs --canary (the template of the secrets to insert)")
        if self.canary:
            from seqlab.data.canaries import DEFAULT_REPEATS, parse_template

            parse_template(self.canary)                    # a bad template is refused before any work
            self.canary_repeats = list(self.canary_repeats or DEFAULT_REPEATS)
        if self.prepared and self.canary:
            raise SeqlabError("--canary plants its secrets while the training text is prepared: give --train and "
                              "--valid instead of --data")
        if self.train and not self.valid and not self.prepared:
            raise SeqlabError("--train needs --valid (a held-out file for perplexity and early stopping)")
        if self.valid and not self.train and not self.prepared:
            raise SeqlabError("--valid needs --train")
        if self.reverse and self.tokenizer != "char":
            raise SeqlabError(f"--reverse applies to --tokenizer char only, not {self.tokenizer}: leave it out")


@dataclass
class LMTrainOptions(TrainConfig):
    """How to train a language model: the trainer's options and the two that only language models have
    (saved under "train")."""

    output: str = option("runs/lm", "run directory for the config, vocabulary, checkpoints and metrics")
    seq_len: int = option(35, "tokens per segment for truncated BPTT (rnn, lstm, gru, ffn); the "
                          "transformer trains on windows of its context", at_least=1)
    eval_stride: int = option(0, "transformer evaluation: sliding-window stride (default context / 2)", at_least=0)


@dataclass
class LMTrainConfig:
    """A language-model training run: data, model and training options."""

    data: LMDataConfig = field(default_factory=LMDataConfig)
    model: LMConfig = field(default_factory=LMConfig)
    train: LMTrainOptions = field(default_factory=LMTrainOptions)


CONFIG_GROUPS = {"data": LMDataConfig, "model": LMConfig, "train": LMTrainOptions}


def resolve_lm_config(config_file: str | Path | None = None, overrides: dict | None = None,
                         resume: bool = False) -> LMTrainConfig:
    """Defaults < the config file < overrides (the command line). With `resume`, the run's own
    config.json is the base and only options of the `train` group may change. With --data, the options that
    shaped the prepared ids (tokenizer, vocabulary) come from its manifest; given otherwise, they are refused."""
    config = resolve_run_config(LMTrainConfig, CONFIG_GROUPS, config_file, overrides, resume, read_run_config)
    if resume or not config.data.prepared:
        return config
    from seqlab.families.lm.prepare import open_prepared, token_options

    prepared = open_prepared(config.data.prepared)
    shaped = token_options(prepared)
    overrides = {**(overrides or {}), "prepared": str(Path(config.data.prepared).resolve())}  # as config.json keeps it
    config = resolve_run_config(LMTrainConfig, CONFIG_GROUPS, config_file, overrides, resume, read_run_config,
                                defaults=shaped)
    for name, value in shaped.items():
        given = getattr(config.data, name)
        if given != value:
            raise SeqlabError(f"--{name.replace('_', '-')} {given}: {config.data.prepared} was prepared with "
                              f"--{name.replace('_', '-')} {value}; leave the option out, or prepare again")
    return config


def read_run_config(run_dir: str | Path) -> LMTrainConfig:
    return read_run_config_as(run_dir, FAMILY, LMTrainConfig, CONFIG_GROUPS)

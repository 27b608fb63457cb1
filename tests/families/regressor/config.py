"""The options of `seqlab train regressor`: the files (data), the network (model) and the trainer's (train),
saved as the three groups of a run's config.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from regressor import FAMILY
from seqlab.config import option
from seqlab.runs.directory import read_run_config_as, resolve_run_config
from seqlab.training.trainer import TrainConfig

TRAIN_DEFAULTS = {"output": "runs/regressor", "epochs": 20, "batch_size": 8, "eval_batch_size": 64,
                  "optimizer": "adam", "lr": 0.01, "log_every": 10}


@dataclass
class RegressorDataConfig:
    """Where the items come from (saved under "data")."""

    train: str = option("", "training file: one 'VALUE<TAB>text' line per item", file=True)
    dev: str = option("", "development file: evaluated every epoch, for the best weights", file=True)
    test: str = option("", "test file, scored with the best weights at the end", file=True)
    lowercase: bool = option(True, "lowercase the text before splitting it at whitespace")


@dataclass
class RegressorModelConfig:
    """The network (saved under "model")."""

    arch: str = option("mean", "how the tokens' vectors become one: their mean or their elementwise max",
                       choices=("mean", "max"))
    embedding_size: int = option(8, "the width of a token's vector", at_least=1)
    vocab_size: int = option(0, "tokens in the vocabulary (set from the training file)", at_least=0)


@dataclass
class RegressorTrainConfig:
    """A regressor training run: data, model and training options."""

    data: RegressorDataConfig = field(default_factory=RegressorDataConfig)
    model: RegressorModelConfig = field(default_factory=RegressorModelConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(**TRAIN_DEFAULTS))


CONFIG_GROUPS = {"data": RegressorDataConfig, "model": RegressorModelConfig, "train": TrainConfig}


def read_run_config(run_dir: str | Path) -> RegressorTrainConfig:
    return read_run_config_as(run_dir, FAMILY, RegressorTrainConfig, CONFIG_GROUPS)


def resolve_regressor_config(config_file: str | Path | None = None, overrides: dict | None = None,
                             resume: bool = False) -> RegressorTrainConfig:
    """Defaults < the config file < overrides (the command line); resumed, the run's own config.json."""
    return resolve_run_config(RegressorTrainConfig, CONFIG_GROUPS, config_file, overrides, resume, read_run_config,
                              TRAIN_DEFAULTS)

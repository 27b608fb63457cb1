"""A regressor end to end: `train_regressor(config)` into a run directory (config.json, vocab.json,
model.safetensors, metrics.jsonl, ...) through seqlab's one training skeleton (`seqlab.runs.skeleton`: the
family fills in its hooks, as seqlab's own families do), and `load_regressor(run_dir)`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from regressor import FAMILY
from regressor.config import (
    CONFIG_GROUPS,
    TRAIN_DEFAULTS,
    RegressorTrainConfig,
    read_run_config,
    resolve_regressor_config,
)
from regressor.data import build_vocab, ids, read_items, read_vocab
from regressor.model import MeanRegressor
from regressor.task import RegressionTask
from regressor.trained import TrainedRegressor
from seqlab.contract import Pipeline
from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_json
from seqlab.runs.directory import check_sizes, load_best, refuse_fused_output, start_run
from seqlab.runs.skeleton import Hooks, Run, train_family


class Training(Hooks):
    """The regressor's hooks of the training pipeline: what it reads, builds and writes; the skeleton does the
    rest (the seeds, the log line, the barrier, the trainer)."""

    def refuse(self, config: RegressorTrainConfig) -> RegressorTrainConfig:
        if not config.data.train or not config.data.dev:
            raise SeqlabError("a regressor needs --train and --dev files")
        refuse_fused_output(config.train, FAMILY.title)
        return config

    def read(self, config: RegressorTrainConfig, run: Run) -> RegressorTrainConfig:
        data = config.data
        self.train = read_items(data.train, "train file")
        self.dev = read_items(data.dev, "dev file")
        self.test = read_items(data.test, "test file") if data.test else None
        self.vocab = read_vocab(run.run_dir) if run.resume else build_vocab(self.train, data.lowercase)
        if run.reading is not None:
            run.reading.done(f"{len(self.train):,} training texts")
        return dataclasses.replace(config, model=dataclasses.replace(config.model, vocab_size=len(self.vocab)))

    def build(self, config: RegressorTrainConfig, run: Run) -> MeanRegressor:
        return MeanRegressor(config.model).to(run.device)

    def task(self, config: RegressorTrainConfig, model: MeanRegressor, run: Run) -> RegressionTask:
        def encode(items):
            return [(ids(self.vocab, text, config.data.lowercase), value) for text, value in items]

        return RegressionTask(encode(self.train), encode(self.dev), encode(self.test) if self.test else None,
                              config.train.batch_size, config.train.eval_batch_size, config.train.seed)

    def describe(self, config: RegressorTrainConfig, model: MeanRegressor, task: RegressionTask, run: Run) -> str:
        return (f"{len(self.train):,} training texts, {len(self.vocab):,} tokens; {config.model.arch} regressor with "
                f"{model.num_parameters():,} parameters on {run.device}")

    def write_run_files(self, config: RegressorTrainConfig, run: Run) -> None:
        start_run(run.run_dir, FAMILY, config, run.overwrite)
        atomic_write_json(run.run_dir / "vocab.json", self.vocab.to_dict())


def train_regressor(config: RegressorTrainConfig, resume: bool = False, overwrite: bool = False,
                    callback=None) -> dict:
    """Train a regressor into `config.train.output`; return the final dev/test figures."""
    return train_family(Training, config, resume, overwrite, callback)


def load_regressor(run_dir: str | Path, device: str = "cpu") -> TrainedRegressor:
    """A trained regressor from its run directory (the best weights)."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir)
    vocab = read_vocab(run_dir)
    check_sizes(run_dir, config, {"vocab_size": ("vocab.json", len(vocab))})
    model, device = load_best(run_dir, MeanRegressor(config.model), device)
    return TrainedRegressor(model, vocab, config, device).from_run(run_dir)


PIPELINE = Pipeline(
    config=RegressorTrainConfig, groups=CONFIG_GROUPS, train_defaults=TRAIN_DEFAULTS, derived=("vocab_size",),
    resolve=resolve_regressor_config, train=train_regressor, load=load_regressor,
    evaluate=TrainedRegressor.evaluate_file,
    next_steps=("seqlab regress {output} FILE", "seqlab evaluate {output} FILE"))

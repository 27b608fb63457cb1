"""One training pipeline for every family (fairseq's train.py over a task's hooks): the steps every run takes, in
one order, with what differs between families filled in by the family's `TrainingHooks`.

    refuse options -> rank -> start (what must exist before the data is read) -> reading the data (vocabulary,
    resume check, vectors, the model config) -> seed -> build the model -> seed + rank -> the Task -> one log
    line -> the run's files (rank 0, a new run) -> barrier -> `Trainer.fit` -> finish (pictures of the results)

The two seeds are the ones every run has always drawn at those points: the model's initialisation follows
`--seed`, the data order and dropout `--seed` + rank. A family's pipeline module holds only its hooks and calls
`train_family`. Nothing here names a family.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from seqlab.progress import Reading, data_files
from seqlab.runs.directory import log, train_in_run
from seqlab.training import distributed
from seqlab.training.task import Task
from seqlab.training.trainer import Trainer


@dataclass
class Run:
    """What the hooks know of the run being trained."""

    run_dir: Path                 # the run directory (locked by `train_in_run`)
    device: torch.device          # where the model trains
    rank: int                     # this process's rank (0 without DDP)
    resume: bool                  # --resume: continue the run from its checkpoint
    overwrite: bool               # --overwrite: replace the run in run_dir
    reading: Reading | None = None  # the data's reading, opened before `read` (the hooks say when it is done)


class TrainingHooks(Protocol):
    """What a family fills in of the training pipeline; one object per run (it may keep what `read` found for the
    later steps)."""

    def refuse(self, config: Any) -> Any:
        """Refuse options that do not fit together (one SeqlabError line); the config with what they resolve."""

    def start(self, config: Any, run: Run) -> None:
        """What comes before the data is read (a data hook's planted secrets, the weights a run starts from)."""

    def read(self, config: Any, run: Run) -> Any:
        """Read the data, its vocabulary (checked against the run's on --resume) and vectors; the config with the
        model fields the data sets (vocab_size, ...)."""

    def build(self, config: Any, run: Run) -> Any:
        """The model on `run.device`, built right after `torch.manual_seed(seed)` (and what needs the model before
        the data-order seed: pretrained vectors into it, the evaluation data its LM features read)."""

    def task(self, config: Any, model: Any, run: Run) -> Task:
        """The trainer's Task over the data read."""

    def describe(self, config: Any, model: Any, task: Task, run: Run) -> str:
        """The log line that says what is trained on what."""

    def write_run_files(self, config: Any, run: Run) -> None:
        """config.json and the vocabulary / label files of a new run (rank 0)."""

    def finish(self, results: dict, run: Run) -> dict:
        """What comes after training (pictures of the final figures); the final figures."""


def train(hooks: TrainingHooks, config: Any, run_dir: Path, device: torch.device, resume: bool, overwrite: bool,
          callback: Callable[[dict], None] | None) -> dict:
    """Train `config` into `run_dir` through the family's `hooks`; return the final figures."""
    config = hooks.refuse(config)
    run = Run(Path(run_dir), device, distributed.world()[0], resume, overwrite)
    hooks.start(config, run)
    run.reading = Reading(data_files(config.data), log)     # hashing, preparing or opening them can take minutes
    config = hooks.read(config, run)
    torch.manual_seed(config.train.seed)
    model = hooks.build(config, run)
    torch.manual_seed(config.train.seed + run.rank)
    task = hooks.task(config, model, run)
    log(hooks.describe(config, model, task, run))
    if run.rank == 0 and not resume:
        hooks.write_run_files(config, run)
    distributed.barrier()
    results = Trainer(task, model, config.train, run.run_dir, device, callback).fit(resume=resume)
    return hooks.finish(results, run)


def train_family(make_hooks: Callable[[], TrainingHooks], config: Any, resume: bool = False, overwrite: bool = False,
                 callback: Callable[[dict], None] | None = None) -> dict:
    """Train `config` into `config.train.output` (locked, resolved and checked by `train_in_run`) through hooks
    made for this run; return the final figures."""
    return train_in_run(config, resume, overwrite, lambda config, run_dir, device: train(
        make_hooks(), config, run_dir, device, resume, overwrite, callback))


class Hooks:
    """Defaults of the optional hooks (a family's hooks may subclass it)."""

    def refuse(self, config: Any) -> Any:
        return config

    def start(self, config: Any, run: Run) -> None:
        return None

    def finish(self, results: dict, run: Run) -> dict:
        return results

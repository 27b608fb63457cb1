"""Shared fixtures: tiny corpora and tiny configurations that train in a second."""

from __future__ import annotations

import os
from pathlib import Path

# Commands the tests start as subprocesses (the CLI, torchrun workers) use one thread each too: on two
# busy cores, PyTorch's default of one thread per core makes its threads wait on each other.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch

from seqlab.models.lm import LMConfig
from seqlab.pipelines.lm import LMDataConfig, LMTrainConfig, LMTrainOptions

FIXTURES = Path(__file__).parent / "fixtures"
TRAIN = FIXTURES / "shakespeare_train.txt"
VALID = FIXTURES / "shakespeare_valid.txt"
TEST = FIXTURES / "shakespeare_test.txt"
ARCHS = ("ffn", "rnn", "lstm", "gru", "transformer")


@pytest.fixture(autouse=True)
def _one_thread():
    """Tests are tiny: one thread each avoids oversubscribing the two CI cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_config(output, arch: str = "lstm", tokenizer: str = "word", **train) -> LMTrainConfig:
    model = LMConfig(arch=arch, embedding_size=16, hidden_size=24, num_layers=2, dropout=0.1,
                     num_heads=2, context=16 if arch == "transformer" else 0)
    options = {"output": str(output), "max_steps": 8, "batch_size": 4, "seq_len": 8, "eval_every": 4,
               "log_every": 1, "progress": False, "lr": 3e-3, "warmup_steps": 2}
    options.update(train)
    return LMTrainConfig(LMDataConfig(train=str(TRAIN), valid=str(VALID), test=str(TEST), tokenizer=tokenizer),
                         model, LMTrainOptions(**options))


class Killed(Exception):
    """Stands for the process being killed: raised by `kill_after_evaluation`."""


def kill_after_evaluation(step: int):
    """A training callback that 'kills' the run once the evaluation (and checkpoint) of `step` is written."""
    def callback(event):
        if event["event"] == "evaluate" and event["step"] == step:
            raise Killed
    return callback

"""`--compile` (torch.compile) trains every task family like eager mode and resumes: slow (inductor compiles
C++ for each model, a minute or more on two busy cores), so `make test-slow` runs it."""

from __future__ import annotations

import json

import pytest
from test_classifier_cli import FIXTURES as CLASSIFY
from test_classifier_cli import SMALL as CLASSIFIER
from test_seq2seq_cli import SMALL as SEQ2SEQ
from test_seq2seq_cli import aligned
from test_tagger_cli import FIXTURES
from test_tagger_cli import SMALL as TAGGER

from conftest import TRAIN, VALID
from seqlab.cli.main import main

LM = ["--embedding-size", "16", "--layers", "1", "--dropout", "0", "--batch-size", "4", "--seq-len", "8",
      "--no-progress", "--lr", "3e-3", "--schedule", "constant", "--tokenizer", "word"]
TASKS = {
    "lm-lstm": ["lm", "--train", str(TRAIN), "--valid", str(VALID), "--arch", "lstm", "--hidden-size", "16", *LM],
    "lm-transformer": ["lm", "--train", str(TRAIN), "--valid", str(VALID), "--arch", "transformer", "--heads", "2",
                       "--context", "8", *LM],
    "tagger-crf": ["tagger", "--train", str(FIXTURES / "ner.conll"), "--dev", str(FIXTURES / "ner.conll"),
                   "--format", "conll", "--encoder", "lstm", "--crf", *TAGGER],
    "classifier": ["classifier", "--train", str(CLASSIFY / "sentiment.tsv"), "--dev", str(CLASSIFY / "sentiment.tsv"),
                   "--format", "tsv", *CLASSIFIER],
    "seq2seq-gru-attention": ["seq2seq", *aligned("train"), *aligned("dev"), "--arch", "gru", "--hidden-size", "16",
                              "--attention", "dot", *SEQ2SEQ],
}


def losses(run) -> list[float]:
    return [json.loads(line)["loss"] for line in (run / "train_log.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_compiled_training_equals_eager_and_resumes(tmp_path, task):
    options = [*TASKS[task], "--log-every", "1", "--eval-every", "3", "--epochs", "1000"]
    command = ["train", options[0], *options[1:]]
    assert main([*command, "--output", str(tmp_path / "eager"), "--max-steps", "6"]) == 0
    assert main([*command, "--output", str(tmp_path / "compiled"), "--max-steps", "3", "--compile"]) == 0
    assert main(["train", options[0], "--output", str(tmp_path / "compiled"), "--resume", "--max-steps", "6",
                 "--no-progress"]) == 0
    config = json.loads((tmp_path / "compiled" / "config.json").read_text())
    assert config["train"]["compile"] is True                 # the resumed session compiled too
    assert losses(tmp_path / "compiled") == pytest.approx(losses(tmp_path / "eager"), rel=1e-4, abs=1e-5)

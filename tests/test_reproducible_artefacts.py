"""Byte-reproducible artefacts and a resume that changes nothing: the same seed and data write the same
model.safetensors (and run files) in two processes, whatever their hash seeds; `--resume` of a finished
run leaves every file as it was and says how to train further."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load as st_load
from test_trainer import FakeModel, FakeTask

import seqlab
from conftest import TEST, TRAIN, VALID, run_seqlab, tiny_config
from seqlab.families.lm.pipeline import train_lm
from seqlab.fileio import safetensors_metadata
from seqlab.runs.records import final_figures, finished_run
from seqlab.training.checkpoint import load_tensors, safetensors_bytes, save_tensors
from seqlab.training.config import TrainConfig
from seqlab.training.trainer import Trainer

WALL_CLOCK = {"elapsed", "elapsed_s", "startup", "startup_s", "wall_time_s", "tokens_per_s", "gflop_per_s", "mfu",
              "written", "started"}                      # the fields of run files that hold times and speeds
TINY = ["--tokenizer", "word", "--embedding-size", "16", "--hidden-size", "16", "--layers", "1", "--batch-size", "4",
        "--seq-len", "8", "--max-steps", "4", "--eval-every", "2", "--log-every", "1", "--no-progress", "--seed", "7"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def without_times(value):
    """`value` (parsed JSON) without the fields that hold wall-clock times or speeds."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in WALL_CLOCK}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    if isinstance(value, str) and value.startswith("{"):
        try:
            return without_times(json.loads(value))          # a JSON value inside a safetensors header
        except json.JSONDecodeError:
            return value
    return value


def json_lines(path: Path) -> list:
    return [without_times(json.loads(line)) for line in path.read_text().splitlines()]


def snapshot(run: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `run` (the lock aside): its bytes and its modification time."""
    return {str(p.relative_to(run)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(run.rglob("*")) if p.is_file() and p.name != ".lock"}


# ---------------------------------------------------------------- the same bytes for the same tensors


def test_reproducible_artefacts_safetensors_bytes_depend_on_tensors_and_metadata_only(tmp_path):
    """safetensors writes its metadata from a Rust HashMap, in an order that changes from call to call (and
    process to process); seqlab's files sort it, so the same tensors and metadata give the same bytes."""
    tensors = {"b.weight": torch.arange(6.0).reshape(2, 3), "a.bias": torch.ones(3, dtype=torch.float64),
               "c.index": torch.tensor([1, 2], dtype=torch.int32)}
    metadata = {f"key{i:02d}": str(i) for i in range(12)}
    written = set()
    for i in range(5):
        items = list(metadata.items())
        random.Random(i).shuffle(items)
        shuffled = dict(items)
        save_tensors(tmp_path / f"{i}.safetensors", tensors, shuffled)
        written.add(sha256(tmp_path / f"{i}.safetensors"))
    assert len(written) == 1
    data = (tmp_path / "0.safetensors").read_bytes()
    size = int.from_bytes(data[:8], "little")
    assert size % 8 == 0                                         # the tensor data starts 8-byte aligned
    header = json.loads(data[8:8 + size])
    assert list(header["__metadata__"]) == sorted(header["__metadata__"])
    loaded, read = load_tensors(tmp_path / "0.safetensors")      # seqlab's reader, and the checksum, agree
    assert all(torch.equal(loaded[name], t) for name, t in tensors.items())
    assert {k: read[k] for k in metadata} == metadata
    plain = st_load(safetensors_bytes(tensors, {"format": "pt", "é": "ü"}))     # any safetensors reader reads it
    assert all(torch.equal(plain[name], t) for name, t in tensors.items())


@pytest.mark.slow
def test_reproducible_artefacts_two_processes_write_the_same_run(tmp_path):
    """The same tiny run trained in two processes (different Python hash seeds, caches of their own) writes
    the same model.safetensors, byte for byte, and the same run files but for wall-clock times. (The prepared
    data's manifest and shard headers hold a random id of their preparation: not compared.)"""
    command = [sys.executable, "-m", "seqlab", "train", "lm", "--train", str(TRAIN), "--valid", str(VALID),
               "--test", str(TEST), *TINY, "--output", "run"]
    processes = []
    for name, hash_seed in (("a", "1"), ("b", "2")):
        (tmp_path / name).mkdir()
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": hash_seed,
               "SEQLAB_CACHE_DIR": str(tmp_path / name / "cache")}
        processes.append(subprocess.Popen(command, cwd=tmp_path / name, env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert sha256(a / "model.safetensors") == sha256(b / "model.safetensors")
    for name in ("config.json", "vocab.json", "tokenizer.json", "curves.png"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    for name in ("metrics.jsonl", "train_log.jsonl"):
        assert json_lines(a / name) == json_lines(b / name), name
    for name in ("model_card.json", "environment.json"):
        assert without_times(json.loads((a / name).read_text())) == without_times(json.loads((b / name).read_text()))
    tensors = [st_load((run / "checkpoint.safetensors").read_bytes()) for run in (a, b)]
    assert tensors[0].keys() == tensors[1].keys()
    assert all(torch.equal(tensors[0][k], tensors[1][k]) for k in tensors[0])
    headers = [without_times(safetensors_metadata(run / "checkpoint.safetensors")) for run in (a, b)]
    assert headers[0] == headers[1] and headers[0]["trainer"]["step"] == 4


# ---------------------------------------------------------------- --resume of a finished run


def test_reproducible_artefacts_resume_of_a_finished_run_changes_nothing(tmp_path, capsys):
    run = tmp_path / "run"
    code, err = run_seqlab(["train", "lm", "--train", TRAIN, "--valid", VALID, *TINY, "--output", run], capsys)
    assert code == 0, err
    before = snapshot(run)
    code, err = run_seqlab(["train", "lm", "--output", run, "--resume"], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 0 and len(lines) == 1, err
    assert lines[0] == (f"{run}: training already finished at step 4 (--max-steps 4 reached); nothing to do, the run "
                        "is unchanged. To train it further, --resume with a higher --max-steps")
    assert snapshot(run) == before                              # no file written, not even with the same bytes
    finals = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r.get("final")]
    assert [(r["split"], r["trained_steps"]) for r in finals] == [("valid", 4)]


def test_reproducible_artefacts_resume_of_a_finished_run_in_python_returns_its_figures(tmp_path, capsys):
    """The library path (`train_lm(config, resume=True)`) also trains nothing and writes nothing: it
    returns the figures the run ended with."""
    config = tiny_config(tmp_path / "run", max_steps=4)
    results = seqlab.train_lm(config)                     # the public API: the pipeline, then the model card
    assert (tmp_path / "run" / "MODEL_CARD.md").exists()
    before = snapshot(tmp_path / "run")
    capsys.readouterr()
    assert seqlab.train_lm(config, resume=True) == results
    assert "training already finished at step 4" in capsys.readouterr().err
    assert snapshot(tmp_path / "run") == before            # the card and environment.json too
    assert train_lm(config, resume=True) == results       # the family's pipeline alone: the same
    assert snapshot(tmp_path / "run") == before


def test_reproducible_artefacts_an_early_stopped_run_is_finished_unless_patience_is_raised(tmp_path):
    config = TrainConfig(output=str(tmp_path), epochs=20, eval_every=1, patience=3, progress=False, log_every=1)
    results = Trainer(FakeTask([3.0, 2.0, 2.5, 2.6, 2.7]), FakeModel(), config, tmp_path, torch.device("cpu")).fit()
    assert finished_run(tmp_path, config) == (
        f"{tmp_path}: training already finished at step 5 (stopped early after 3 evaluations without improvement); "
        "nothing to do, the run is unchanged. To train it further, --resume with a higher --patience")
    task = FakeTask([1.0])
    assert Trainer(task, FakeModel(), config, tmp_path, torch.device("cpu")).fit(resume=True) == results
    assert task.evaluations == 0                                # nothing trained, nothing evaluated
    # killed after its last checkpoint, before the final records: the resume writes them, and trains no step
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(line + "\n" for line in metrics.read_text().splitlines() if '"final"' not in line))
    assert finished_run(tmp_path, config) is None and final_figures(tmp_path) == {}
    Trainer(FakeTask([2.7]), FakeModel(), config, tmp_path, torch.device("cpu")).fit(resume=True)
    steps = [json.loads(line)["step"] for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5]
    assert list(final_figures(tmp_path)) == ["valid"]
    raised = dataclasses.replace(config, patience=5)
    assert finished_run(tmp_path, raised) is None               # more patience: a resume trains on


@pytest.mark.parametrize("limit, position, expected", [
    ({"max_steps": 8}, {"step": 8}, "(--max-steps 8 reached); nothing to do, the run is unchanged. To train it "
                                    "further, --resume with a higher --max-steps"),
    ({"epochs": 2}, {"step": 10, "epoch": 2}, "(--epochs 2 done);"),
    ({"max_steps": 10, "epochs": 2}, {"step": 10, "epoch": 2}, "(--max-steps 10 reached; --epochs 2 done); nothing "
                                                               "to do, the run is unchanged. To train it further, "
                                                               "--resume with a higher --max-steps and --epochs"),
    ({"max_tokens": 5000}, {"step": 10, "tokens": 5120}, "(--max-tokens 5,000 spent);"),
    ({"max_time": 60}, {"step": 10, "elapsed": 61.5}, "(--max-time 60 s spent);"),
    ({"max_steps": 100}, {"step": 10, "time_schedule": {"total_steps": 10}},
     "at step 10, the length --time-schedule fixed, which a resumed run keeps"),
    ({"max_steps": 12}, {"step": 10}, None),                  # a raised limit: the resume trains on
    ({"max_time": 60}, {"step": 10, "elapsed": 59.0}, None),
])
def test_reproducible_artefacts_finished_run_names_the_limits_that_stopped_it(tmp_path, limit, position,
                                                                              expected):
    trainer = {"epoch": 0, "batch": 0, "tokens": 0, "bad_evals": 0, "elapsed": 1.0, **position}
    save_tensors(tmp_path / "checkpoint.safetensors", {"model.w": torch.zeros(1)}, {"trainer": trainer})
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": position["step"], "trained_steps": position["step"],
                                                        "split": "valid", "final": True, "loss": 2.0}) + "\n")
    message = finished_run(tmp_path, TrainConfig(**{"epochs": 10, **limit}))
    if expected is None:
        assert message is None
    else:
        assert message.startswith(f"{tmp_path}: training already finished at step {position['step']}")
        assert expected in message
    (tmp_path / "metrics.jsonl").write_text("")                 # no final records: the resume writes them
    assert finished_run(tmp_path, TrainConfig(**{"epochs": 10, **limit})) is None

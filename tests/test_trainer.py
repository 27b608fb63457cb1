"""The training loop: exact resume, DDP = one process, accumulation, early stopping, schedules."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import TEST, TRAIN, VALID, Killed, kill_after_evaluation, tiny_config
from seqlab.data.batching import Batch
from seqlab.errors import SeqlabError
from seqlab.families.lm.pipeline import train_lm
from seqlab.models.base import Model
from seqlab.training import devices
from seqlab.training import trainer as trainer_module
from seqlab.training.config import TrainConfig
from seqlab.training.devices import cpu_supports_bf16
from seqlab.training.optim import Schedule
from seqlab.training.trainer import Trainer


def losses(run_dir: Path) -> list[tuple[int, float]]:
    rows = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in rows]


@pytest.mark.parametrize("arch", ["lstm", "transformer", "ffn"])
def test_trainer_resume_equals_uninterrupted(tmp_path, arch):
    """Kill after the checkpoint at step 4 (mid-epoch, carried state, dropout on), resume: same losses."""
    full = tiny_config(tmp_path / "full", arch, max_steps=10)
    train_lm(full)
    broken = tiny_config(tmp_path / "broken", arch, max_steps=10)
    with pytest.raises(Killed):
        train_lm(broken, callback=kill_after_evaluation(4))
    assert [s for s, _ in losses(tmp_path / "broken")] == [1, 2, 3, 4]
    train_lm(broken, resume=True)
    assert losses(tmp_path / "broken") == losses(tmp_path / "full")
    metrics = [json.loads(line) for line in (tmp_path / "broken" / "metrics.jsonl").read_text().splitlines()]
    expected = [json.loads(line) for line in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    assert [m["loss"] for m in metrics] == [m["loss"] for m in expected]


def test_trainer_resume_drops_records_written_after_the_checkpoint(tmp_path):
    config = tiny_config(tmp_path / "run", max_steps=8)
    with pytest.raises(Killed):
        train_lm(config, callback=kill_after_evaluation(4))
    with open(tmp_path / "run" / "train_log.jsonl", "a") as handle:   # a record the checkpoint never saw
        handle.write(json.dumps({"step": 5, "loss": 99.0}) + "\n")
    train_lm(config, resume=True)
    assert 99.0 not in [loss for _, loss in losses(tmp_path / "run")]
    assert [s for s, _ in losses(tmp_path / "run")] == list(range(1, 9))


def test_trainer_resume_drops_a_half_written_log_line(tmp_path):
    """The training-loss log is flushed, not fsynced: a crash may cut its last line; resume drops it."""
    config = tiny_config(tmp_path / "run", max_steps=8)
    with pytest.raises(Killed):
        train_lm(config, callback=kill_after_evaluation(4))
    with open(tmp_path / "run" / "train_log.jsonl", "a") as handle:
        handle.write('{"step": 5, "loss": 9')
    train_lm(config, resume=True)
    assert [s for s, _ in losses(tmp_path / "run")] == list(range(1, 9))


def test_trainer_gradient_accumulation_equals_one_big_batch(tmp_path):
    """Windows of batch 8 in one step = the same windows as 2 micro-batches of 4."""
    big = tiny_config(tmp_path / "big", "transformer", max_steps=3, batch_size=8, eval_every=3)
    big.model.dropout = 0.0
    train_lm(big)
    small = tiny_config(tmp_path / "small", "transformer", max_steps=3, batch_size=4, accumulate=2, eval_every=3)
    small.model.dropout = 0.0
    train_lm(small)
    for (s1, l1), (s2, l2) in zip(losses(tmp_path / "big"), losses(tmp_path / "small"), strict=True):
        assert s1 == s2 and l1 == pytest.approx(l2, rel=1e-5)


def test_trainer_writes_run_directory(tmp_path):
    results = train_lm(tiny_config(tmp_path / "run"))
    names = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"config.json", "tokenizer.json", "vocab.json", "model.safetensors", "checkpoint.safetensors",
            "metrics.jsonl", "train_log.jsonl", "curves.png"} <= names
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["format_version"] == 1 and config["task"] == "lm"
    assert config["model"]["vocab_size"] > 5 and config["train"]["max_steps"] == 8
    assert set(results) == {"valid", "test"}
    assert results["test"]["perplexity"] == pytest.approx(math.exp(results["test"]["loss"]))
    assert (tmp_path / "run" / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_trainer_refuses_to_overwrite_a_run(tmp_path):
    train_lm(tiny_config(tmp_path / "run", max_steps=2, eval_every=2))
    before = (tmp_path / "run" / "model.safetensors").read_bytes()
    with pytest.raises(SeqlabError, match="already holds a run"):
        train_lm(tiny_config(tmp_path / "run", max_steps=2, eval_every=2))
    assert (tmp_path / "run" / "model.safetensors").read_bytes() == before


# ---------------------------------------------------------------- a fake task: the loop knows no models

class FakeModel(Model):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(3))


class FakeTask:
    """A task whose validation metric follows a script, to test early stopping."""

    name, metric, batch_unit, progress = "fake", "loss", "1 token", False

    def __init__(self, scripted_losses):
        self.scripted = list(scripted_losses)
        self.valid_data, self.test_data = "valid", None
        self.evaluations = 0

    def train_batches(self, epoch):
        return [Batch(torch.ones(2, 1, dtype=torch.long), torch.ones(2, 1, dtype=torch.long))] * 5

    def initial_state(self, model, rows, device):
        return None

    @staticmethod
    def count(batch):
        return 2

    def loss(self, model, batch, state):
        return (model.weight ** 2).sum() + 1.0, torch.tensor(2), state

    def evaluate(self, model, ids, device, rows):
        value = self.scripted[min(self.evaluations, len(self.scripted) - 1)]
        self.evaluations += 1
        return {"loss_sum": value, "tokens": 1}

    @staticmethod
    def summarize(stats):
        return {"loss": stats["loss_sum"] / stats["tokens"], "tokens": stats["tokens"]}

    @staticmethod
    def progress_fields(loss):
        return {"loss": loss}

    @staticmethod
    def describe(record):
        return str(record)


def test_trainer_early_stopping_after_patience(tmp_path):
    task = FakeTask([3.0, 2.0, 2.5, 2.6, 2.7, 1.0])
    config = TrainConfig(output=str(tmp_path), epochs=20, eval_every=1, patience=3, progress=False, log_every=1)
    Trainer(task, FakeModel(), config, tmp_path, torch.device("cpu")).fit()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    periodic = [r for r in rows if not r.get("final")]
    assert [r["loss"] for r in periodic] == [3.0, 2.0, 2.5, 2.6, 2.7]   # stopped: 3 without improvement
    assert [r["best"] for r in periodic] == [True, True, False, False, False]


def test_trainer_plateau_schedule_decays_on_no_improvement(tmp_path):
    task = FakeTask([3.0, 3.5, 2.0, 2.5])
    config = TrainConfig(output=str(tmp_path), optimizer="sgd", lr=1.0, schedule="plateau", lr_decay=0.25,
                         epochs=4, progress=False, log_every=1)
    Trainer(task, FakeModel(), config, tmp_path, torch.device("cpu")).fit()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()][:4]
    assert [r["lr"] for r in rows] == [1.0, 0.25, 0.25, 0.0625]


def test_optim_schedules():
    zaremba = Schedule("step", 1.0, 1000, lr_decay=0.5, decay_start=4)   # Zaremba et al. 2014, small
    assert [zaremba.lr(0, epoch) for epoch in range(7)] == [1, 1, 1, 1, 0.5, 0.25, 0.125]
    cosine = Schedule("cosine", 1e-3, 100, warmup_steps=10, min_lr=1e-4)
    assert cosine.lr(0, 0) == pytest.approx(1e-4)            # warm-up: (step + 1) / 10
    assert cosine.lr(9, 0) == pytest.approx(1e-3)
    assert cosine.lr(55, 0) == pytest.approx(5.5e-4)          # half-way down the cosine
    assert cosine.lr(100, 0) == pytest.approx(1e-4)
    assert Schedule("constant", 0.5, 10).lr(7, 3) == 0.5
    assert cosine.lr(20, 0, spent=0.5) == pytest.approx(5.5e-4)   # a budget half spent: half-way down already
    assert cosine.lr(20, 0, spent=1.0) == pytest.approx(1e-4)


def test_trainer_token_budget_stops_at_the_step_that_spends_it_and_decays_over_it(tmp_path):
    """--max-tokens: 4 x 8 = 32 tokens a step, so 100 tokens take 4 steps (the 4th passes the budget); the
    cosine reaches --min-lr there, not at --max-steps."""
    config = tiny_config(tmp_path / "run", max_steps=1000, max_tokens=100, eval_every=0, warmup_steps=0, min_lr=1e-4)
    train_lm(config)
    rows = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert rows[0]["lr"] == pytest.approx(3e-3) and rows[-1]["lr"] < rows[0]["lr"]
    final = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()][-1]
    assert final["final"] and final["step"] == 4


def test_trainer_time_budget_stops_training_soon_after_it_is_spent(tmp_path, monkeypatch):
    clock = iter(range(10 ** 6))
    monkeypatch.setattr(trainer_module.time, "time", lambda: float(next(clock)))     # one second a call
    config = tiny_config(tmp_path / "run", max_steps=1000, max_time=30.0, eval_every=0)
    train_lm(config)
    steps = [json.loads(line)["step"] for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert 1 < len(steps) < 30 and steps[-1] < 1000


def test_trainer_final_records_name_the_step_of_the_best_weights(tmp_path, capsys):
    """The summary at the end reports the best weights (step 10's), says so, and takes their validation figures
    from the evaluation that chose them instead of evaluating again."""
    task = FakeTask([3.0, 2.0, 2.5, 2.6])
    config = TrainConfig(output=str(tmp_path), epochs=4, progress=False, log_every=1)     # 5 steps an epoch
    Trainer(task, FakeModel(), config, tmp_path, torch.device("cpu")).fit()
    final = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()][-1]
    assert final["final"] and final["split"] == "valid"
    assert (final["step"], final["trained_steps"], final["loss"]) == (10, 20, 2.0)
    assert task.evaluations == 4
    assert "the best weights, of step 10 (of 20 trained):" in capsys.readouterr().out


class FakeClock:
    """Time that passes only when the task works: a training step takes 1 s, an evaluation 5 s."""

    def __init__(self, monkeypatch, task):
        self.now = 0.0
        monkeypatch.setattr(trainer_module.time, "time", lambda: self.now)
        loss, evaluate = task.loss, task.evaluate
        task.loss = lambda *a: (self.tick(1.0), loss(*a))[1]
        task.evaluate = lambda *a: (self.tick(5.0), evaluate(*a))[1]

    def tick(self, seconds):
        self.now += seconds


def learning_rates(run_dir: Path) -> list[float]:
    return [json.loads(line)["lr"] for line in (run_dir / "train_log.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_trainer_time_cap_stops_the_run_without_bending_the_schedule(tmp_path, monkeypatch):
    """With --max-time the rates are those of the same run without it, step for step (the schedule follows the
    steps, not the clock), and the run ends within one evaluation of the cap."""
    runs = {}
    for name, max_time in (("free", 0.0), ("capped", 60.0)):
        task = FakeTask([3.0])
        clock = FakeClock(monkeypatch, task)
        config = TrainConfig(output=str(tmp_path / name), epochs=20, max_time=max_time, progress=False, log_every=1)
        Trainer(task, FakeModel(), config, tmp_path / name, torch.device("cpu")).fit()
        runs[name] = learning_rates(tmp_path / name)
        if max_time:
            assert clock.now <= max_time + 5.0                  # the cap, and at most one evaluation past it
    assert len(runs["free"]) == 100 and len(runs["capped"]) == 30     # 6 epochs of 5 steps and an evaluation
    assert runs["capped"] == runs["free"][:len(runs["capped"])]


def test_trainer_a_cap_that_stops_training_says_so_whatever_the_progress_mode(tmp_path, monkeypatch, capsys):
    """--max-time (and --max-tokens) stopping a run before its steps are done is one line of the log under
    --no-progress too (a bar stopping short said it only on a terminal); a run that ends at its steps says none."""
    task = FakeTask([3.0])
    FakeClock(monkeypatch, task)
    config = TrainConfig(output=str(tmp_path / "capped"), epochs=20, max_time=60.0, progress=False, log_every=1)
    Trainer(task, FakeModel(), config, tmp_path / "capped", torch.device("cpu")).fit()
    out = capsys.readouterr().out
    assert "--max-time 60 s reached: training stopped at step 30 of 100 (epoch 6 of 20), the best weights so far " \
           "kept; --resume with a higher --max-time trains on" in out
    config = TrainConfig(output=str(tmp_path / "tokens"), epochs=20, max_tokens=7, progress=False, log_every=1)
    Trainer(FakeTask([3.0]), FakeModel(), config, tmp_path / "tokens", torch.device("cpu")).fit()
    assert "--max-tokens 7 reached: training stopped at step " in capsys.readouterr().out
    config = TrainConfig(output=str(tmp_path / "free"), epochs=2, max_time=1e6, progress=False, log_every=1)
    Trainer(FakeTask([3.0]), FakeModel(), config, tmp_path / "free", torch.device("cpu")).fit()
    assert "reached" not in capsys.readouterr().out


def test_trainer_a_resumed_run_says_from_which_step(tmp_path, capsys):
    config = tiny_config(tmp_path / "run", max_steps=8)
    with pytest.raises(Killed):
        train_lm(config, callback=kill_after_evaluation(4))
    assert "resuming" not in capsys.readouterr().out
    train_lm(config, resume=True)
    assert "resuming from step 4 (of 8), epoch 1 of 10" in capsys.readouterr().out


def test_trainer_time_schedule_without_a_time_cap_is_refused():
    with pytest.raises(SeqlabError, match="--time-schedule fixes the schedule's length from --max-time"):
        TrainConfig(time_schedule=True)


def test_trainer_time_schedule_fixes_the_step_count_from_measured_speed(tmp_path, monkeypatch, capsys):
    """--time-schedule measures 17 steps (1 s each, the evaluations among them not counted) and one evaluation
    (5 s) once, at step 20 (40 s spent: 20 steps, 3 evaluations and the measuring one), and fixes the steps that
    fit in the 20 s left: the evaluation due at step 20, 5 steps and the evaluation at step 25 (a 6th step would
    need one more evaluation, for the stop: 21 s). The cosine runs over those 25 steps, the run ends by its steps
    within the cap, and the checkpoint keeps the count."""
    from seqlab.fileio import safetensors_metadata
    task = FakeTask([3.0])
    clock = FakeClock(monkeypatch, task)
    config = TrainConfig(output=str(tmp_path), epochs=20, max_time=60.0, time_schedule=True, min_lr=1e-4,
                         progress=False, log_every=1)
    trainer = Trainer(task, FakeModel(), config, tmp_path, torch.device("cpu"))
    trainer.fit()
    rates = learning_rates(tmp_path)
    assert trainer.total_steps == len(rates) == 25 and clock.now <= 60.0
    assert trainer.time_schedule == {"total_steps": 25, "seconds_per_step": 1.0, "seconds_per_evaluation": 5.0,
                                     "max_time": 60.0, "at_step": 20}
    assert rates[-1] == pytest.approx(Schedule("cosine", 1e-3, 25, min_lr=1e-4).lr(24, 4))
    assert rates[-1] < rates[20] < rates[0]
    saved = json.loads(safetensors_metadata(tmp_path / "checkpoint.safetensors")["trainer"])
    assert saved["time_schedule"]["total_steps"] == 25
    assert "--time-schedule: the schedule fixed at 25 steps" in capsys.readouterr().out


def test_trainer_batch_must_split_over_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(SeqlabError, match="divisible"):
        Trainer(FakeTask([1.0]), FakeModel(), TrainConfig(output=str(tmp_path), batch_size=4), tmp_path,
                torch.device("cpu"))


# ---------------------------------------------------------------- DDP

def run_cli(args, env=None, nproc=None):
    command = [sys.executable, "-m", "seqlab", *args]
    if nproc:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
                   "--standalone", "-m", "seqlab", *args]   # --standalone: a free port
    environment = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300)


@pytest.mark.slow
def test_trainer_ddp_two_processes_equal_one(tmp_path):
    """torchrun with 2 CPU processes (gloo) gives the loss curve of 1 process with the same global batch. The
    two processes train through the fused output layer, whose weights take their gradients outside the
    model's forward (seqlab.training.output_loss), the one through the logits: DDP's all-reduce reaches the
    output layer's weights too, and both paths follow the same curve."""
    common = ["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--test", str(TEST),
              "--tokenizer", "word", "--arch", "lstm", "--embedding-size", "16", "--hidden-size", "16",
              "--dropout", "0", "--batch-size", "4", "--seq-len", "8", "--max-steps", "6", "--eval-every", "3",
              "--log-every", "1", "--no-progress", "--threads", "1"]
    single = run_cli([*common, "--fused-output", "off", "--output", str(tmp_path / "one")])
    assert single.returncode == 0, single.stderr
    assert "output layer: plain" in single.stderr
    double = run_cli([*common, "--fused-output", "on", "--output", str(tmp_path / "two")], nproc=2)
    assert double.returncode == 0, double.stderr
    assert "output layer: fused" in double.stderr
    one, two = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert [s for s, _ in one] == [s for s, _ in two] == list(range(1, 7))
    for (_, a), (_, b) in zip(one, two, strict=True):
        assert a == pytest.approx(b, rel=1e-4)
    valid_one = [json.loads(x)["loss"] for x in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    valid_two = [json.loads(x)["loss"] for x in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    assert valid_one == pytest.approx(valid_two, rel=1e-4)


@pytest.mark.slow
def test_trainer_ddp_classifier_two_processes_equal_one(tmp_path):
    """A classifier under torchrun: its loss looks behind DDP's wrapper for the output layer's kind (it used
    to fail with "DistributedDataParallel has no attribute 'config'"), and 2 processes follow 1's curve."""
    data = str(Path(__file__).parent / "fixtures" / "classify" / "sentiment.tsv")
    common = ["train", "classifier", "--train", data, "--dev", data, "--format", "tsv", "--arch", "lstm",
              "--embedding-size", "8", "--hidden-size", "8", "--dropout", "0", "--batch-size", "4",
              "--max-steps", "4", "--eval-every", "2", "--log-every", "1", "--no-progress", "--threads", "1"]
    single = run_cli([*common, "--output", str(tmp_path / "one")])
    assert single.returncode == 0, single.stderr
    double = run_cli([*common, "--output", str(tmp_path / "two")], nproc=2)
    assert double.returncode == 0, double.stderr
    one, two = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert [s for s, _ in one] == [s for s, _ in two] == list(range(1, 5))
    for (_, a), (_, b) in zip(one, two, strict=True):
        assert a == pytest.approx(b, rel=1e-4)


def test_trainer_bf16_autocast_on_cpu_trains_where_supported_and_is_refused_elsewhere(tmp_path):
    """On a CPU with bfloat16 kernels bf16 trains; on one without (an AMD EPYC without AVX-512, where
    oneDNN has no bf16 LSTM) it is refused with one clear line before any work. Either way on any CPU."""
    config = tiny_config(tmp_path / "run", "lstm", precision="bf16", max_steps=4)
    if cpu_supports_bf16():
        assert math.isfinite(train_lm(config)["valid"]["loss"])
    else:
        with pytest.raises(SeqlabError, match="this CPU has no bfloat16 kernels.*--precision fp32"):
            train_lm(config)
        assert not (tmp_path / "run" / "config.json").exists()


def test_trainer_bf16_is_refused_on_a_cpu_without_bf16_kernels(tmp_path, monkeypatch):
    monkeypatch.setattr(devices, "cpu_supports_bf16", lambda: False)
    with pytest.raises(SeqlabError, match="--precision bf16: this CPU has no bfloat16 kernels"):
        train_lm(tiny_config(tmp_path / "run", "lstm", precision="bf16", max_steps=4))
    assert not (tmp_path / "run" / "config.json").exists()
    fp32 = train_lm(tiny_config(tmp_path / "run", "lstm", precision="fp32", max_steps=2))
    assert math.isfinite(fp32["valid"]["loss"])


def compiler_missing() -> str | None:
    """Why torch.compile cannot run here (Inductor builds C++ on the CPU), or None."""
    import shutil

    if not hasattr(torch, "compile"):
        return "this PyTorch has no torch.compile"
    if torch.device("cuda" if torch.cuda.is_available() else "cpu").type == "cpu" and not (
            shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++") or shutil.which("clang++")):
        return "torch.compile on the CPU needs a C++ compiler, and there is none on PATH"
    return None


@pytest.mark.slow
@pytest.mark.skipif(compiler_missing() is not None, reason=compiler_missing() or "")
def test_trainer_torch_compile_trains_as_eager_does(tmp_path):
    """The same tiny transformer from the same seed, 4 steps eager and 4 compiled (dropout off: the compiled
    graph draws its masks differently): the same per-step losses, validation loss and weights, to float
    rounding."""
    from torch._dynamo.utils import counters

    runs = {}
    for compile_ in (False, True):
        config = tiny_config(tmp_path / str(compile_), "transformer", compile=compile_, max_steps=4, eval_every=4)
        config.model.dropout = 0.0
        counters.clear()
        runs[compile_] = train_lm(config)
        assert (counters["stats"]["unique_graphs"] > 0) == compile_          # the compiled run did run compiled
    eager, compiled = losses(tmp_path / "False"), losses(tmp_path / "True")
    assert [s for s, _ in compiled] == [s for s, _ in eager] == [1, 2, 3, 4]
    assert [loss for _, loss in compiled] == pytest.approx([loss for _, loss in eager], rel=1e-4)
    assert runs[True]["valid"]["loss"] == pytest.approx(runs[False]["valid"]["loss"], rel=1e-4)
    from seqlab.training.checkpoint import load_tensors

    expected, _ = load_tensors(tmp_path / "False" / "model.safetensors")
    actual, _ = load_tensors(tmp_path / "True" / "model.safetensors")
    assert sorted(actual) == sorted(expected)                      # no "_orig_mod." prefixes from the wrapper
    for name, tensor in expected.items():
        torch.testing.assert_close(actual[name], tensor, rtol=1e-4, atol=1e-5, msg=name)


# --------------------------------------------------------------------------------------- divergence


def weights_are_finite(path: Path) -> bool:
    from seqlab.training.checkpoint import load_tensors

    tensors, _ = load_tensors(path)
    return all(bool(torch.isfinite(t).all()) for t in tensors.values() if t.is_floating_point())


def test_trainer_stops_when_the_loss_becomes_nan_and_keeps_the_good_files(tmp_path, monkeypatch):
    """A nan loss at step 6 (after the checkpoint and best weights of step 4): one clear error, and the
    files on disk are the step-4 ones, all finite."""
    from seqlab.families.lm.task import LanguageModelingTask

    real_loss, calls = LanguageModelingTask.loss, []

    def loss(self, model, batch, state):
        loss_sum, count, state = real_loss(self, model, batch, state)
        calls.append(1)
        return (loss_sum * float("nan") if len(calls) == 6 else loss_sum), count, state

    monkeypatch.setattr(LanguageModelingTask, "loss", loss)
    monkeypatch.setattr(Trainer, "_measure_utilisation", lambda self: None)    # counts calls: no MFU probe
    run = tmp_path / "run"
    with pytest.raises(SeqlabError, match=r"training diverged at step 6: the loss or the gradient norm became nan"):
        train_lm(tiny_config(run, max_steps=12, precision="fp32"))               # nor --precision auto's
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [4]
    assert weights_are_finite(run / "model.safetensors") and weights_are_finite(run / "checkpoint.safetensors")
    assert max(s for s, _ in losses(run)) == 5                   # nothing of step 6 was recorded


def test_trainer_a_learning_rate_that_overflows_the_weights_is_an_error_not_a_saved_model(tmp_path):
    config = tiny_config(tmp_path / "run", max_steps=8, optimizer="sgd", lr=1e38, grad_clip=0.0, warmup_steps=0)
    with pytest.raises(SeqlabError, match="training diverged at step .*lower --lr"):
        train_lm(config)
    best = tmp_path / "run" / "model.safetensors"
    assert not best.exists() or weights_are_finite(best)


def test_trainer_final_report_reuses_the_last_evaluation_when_it_was_the_best(tmp_path, monkeypatch):
    """The end of training evaluates valid again only when the best weights are not the last ones."""
    from seqlab.families.lm.task import LanguageModelingTask

    real, calls = LanguageModelingTask.evaluate, []

    def evaluate(self, model, ids, device, rows=slice(None)):
        calls.append(len(ids))
        return real(self, model, ids, device, rows)

    monkeypatch.setattr(LanguageModelingTask, "evaluate", evaluate)
    results = train_lm(tiny_config(tmp_path / "run", max_steps=8, eval_every=8))     # one evaluation, the best
    assert len(calls) == 2                                 # valid at step 8, then test; valid not again
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["loss"] == records[1]["loss"] == results["valid"]["loss"] and records[1]["final"]


def test_trainer_skeleton_runs_the_family_hooks_in_order_with_the_two_seeds(tmp_path):
    """`seqlab.runs.skeleton.train`: the hooks in the pipeline's one order; the model built right after
    `torch.manual_seed(seed)`, the task made after `torch.manual_seed(seed + rank)`; run files before fit."""
    from dataclasses import dataclass
    from types import SimpleNamespace

    from seqlab.runs import skeleton

    @dataclass
    class Data:                             # a data group with no files to read
        pass

    calls = []

    class Hooks(skeleton.Hooks):
        def refuse(self, config):
            calls.append("refuse")
            return config

        def start(self, config, run):
            calls.append(("start", run.rank, run.reading))

        def read(self, config, run):
            calls.append("read")
            run.reading.done("2 fake batches")
            return config

        def build(self, config, run):
            calls.append(("build", torch.rand(1).item()))
            return FakeModel()

        def task(self, config, model, run):
            calls.append(("task", torch.rand(1).item()))
            return FakeTask([3.0, 2.0])

        def describe(self, config, model, task, run):
            calls.append("describe")
            return "a fake model"

        def write_run_files(self, config, run):
            calls.append(("files", (run.run_dir / "metrics.jsonl").exists()))

        def finish(self, results, run):
            calls.append(("finish", sorted(results)))
            return results

    config = SimpleNamespace(data=Data(), train=TrainConfig(output=str(tmp_path), epochs=1, max_steps=2,
                                                                       eval_every=1, seed=5, progress=False))
    skeleton.train(Hooks(), config, tmp_path, torch.device("cpu"), False, False, None)
    torch.manual_seed(5)
    first = torch.rand(1).item()
    torch.manual_seed(5)                    # rank 0: seed + rank
    second = torch.rand(1).item()
    assert calls == ["refuse", ("start", 0, None), "read", ("build", first), ("task", second), "describe",
                     ("files", False), ("finish", ["valid"])]

"""Run directories under real processes: one writer at a time (the lock), --resume on the same data
only (SHA-256 of absolute paths), stale temporary files removed, runs killed before their first
checkpoint restartable, and files with the user's umask."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest

from conftest import TRAIN, VALID
from seqlab.cli.main import main

TINY = ["--tokenizer", "char", "--arch", "lstm", "--embedding-size", "8", "--hidden-size", "16", "--layers", "1",
        "--batch-size", "4", "--seq-len", "8", "--log-every", "1", "--no-progress", "--threads", "1"]


def seqlab(*args, cwd=None, timeout=120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seqlab", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, **kwargs)


def train_args(output, train=TRAIN, valid=VALID, *extra) -> list:
    return ["train", "lm", "--train", train, "--valid", valid, "--output", output, *TINY, *extra]


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The command failed as a user error should: exit 2, one line on stderr, no traceback."""
    return user_error(result.returncode, result.stderr)


def user_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("seqlab: error:"), err
    return lines[0]


def in_process(argv: list, capsys) -> tuple[int, str]:
    """`seqlab argv` in this process: (exit status, stderr)."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def assert_modes(run, mode: int) -> None:
    """Every file of the run has `mode` (a teammate or a serving account can read a model)."""
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in run.iterdir() if p.is_file() and p.name != ".lock"}
    assert {"config.json", "model.safetensors", "checkpoint.safetensors", "vocab.json", "metrics.jsonl",
            "curves.png"} <= set(modes)
    assert set(modes.values()) == {mode}, modes


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


@pytest.mark.slow
def test_runs_a_live_run_refuses_a_second_writer_and_a_killed_one_resumes(tmp_path):
    run = tmp_path / "run"
    live = subprocess.Popen([sys.executable, "-m", "seqlab", *map(str, train_args(run, TRAIN, VALID, "--max-steps",
                                                                                 "100000", "--eval-every", "2"))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (run / "checkpoint.safetensors").exists() or live.poll() is not None)
        assert live.poll() is None
        for extra in (["--overwrite"], ["--resume"]):
            message = one_error_line(seqlab(*train_args(run, TRAIN, VALID, "--max-steps", "4", *extra)))
            assert f"is in use by seqlab process {live.pid}" in message and "one process writes" in message
        assert live.poll() is None                                       # the live run was not disturbed
    finally:
        live.send_signal(signal.SIGKILL)
        live.wait()
    step = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"]
    resumed = seqlab(*train_args(run, TRAIN, VALID, "--resume", "--max-steps", step + 2))
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["final"]


@pytest.mark.slow
def test_runs_resume_reads_the_recorded_absolute_paths_and_refuses_changed_data(tmp_path, capsys, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(TRAIN, data / "train.txt")
    shutil.copy(VALID, data / "valid.txt")
    first = seqlab(*train_args("run", "data/train.txt", "data/valid.txt", "--max-steps", "2", "--eval-every", "2"),
                   cwd=tmp_path, preexec_fn=lambda: os.umask(0o002))
    assert first.returncode == 0, first.stderr
    assert_modes(tmp_path / "run", 0o664)                               # the umask's, not the temporaries' 0600
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["data"]["train"] == str(data / "train.txt")                       # absolute, as recorded
    assert set(config["data_sha256"]) == {"train", "valid"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "run"
    resumed = seqlab("train", "lm", "--output", run, "--resume", "--max-steps", "4", "--no-progress",
                     cwd=elsewhere)                                    # from elsewhere: the recorded paths
    assert resumed.returncode == 0, resumed.stderr
    monkeypatch.chdir(tmp_path)
    assert in_process(train_args("run", "data/train.txt", "data/valid.txt", "--resume", "--max-steps", "5"),
                      capsys)[0] == 0                                  # the same options again, from the same place
    monkeypatch.chdir(elsewhere)
    with open(data / "train.txt", "a", encoding="utf-8") as handle:
        handle.write("one more line\n")
    resume = ["train", "lm", "--output", run, "--resume", "--max-steps", "6", "--no-progress"]
    message = user_error(*in_process(resume, capsys))
    assert f"--train {data / 'train.txt'} has changed since the run" in message and "--overwrite" in message
    (data / "valid.txt").unlink()
    (data / "train.txt").write_text(TRAIN.read_text(encoding="utf-8"), encoding="utf-8")
    message = user_error(*in_process(resume, capsys))
    assert f"--valid {data / 'valid.txt'}, which the run in" in message and "is gone" in message


KILL_DURING_WRITE = """
import os, signal, sys
from seqlab.fileio import atomic_write

def write_half_then_die(tmp):
    with open(tmp, "wb") as handle:
        handle.write(b"half a checkpoint")
        handle.flush()
    os.kill(os.getpid(), signal.SIGKILL)

atomic_write(sys.argv[1], write_half_then_die)
"""


@pytest.mark.slow
def test_runs_a_kill_during_an_atomic_write_leaves_a_temporary_that_the_next_run_removes(tmp_path):
    run = tmp_path / "run"
    done = seqlab(*train_args(run, TRAIN, VALID, "--max-steps", "2", "--eval-every", "2"),
                  preexec_fn=lambda: os.umask(0o022))
    assert done.returncode == 0, done.stderr
    assert_modes(run, 0o644)
    before = (run / "checkpoint.safetensors").read_bytes()
    killed = subprocess.run([sys.executable, "-c", KILL_DURING_WRITE, str(run / "checkpoint.safetensors")])
    assert killed.returncode == -signal.SIGKILL
    stale = [p.name for p in run.iterdir() if p.name.endswith(".tmp")]
    assert len(stale) == 1 and stale[0].startswith(".checkpoint.safetensors.")
    assert (run / "checkpoint.safetensors").read_bytes() == before                     # the old file is intact
    resumed = seqlab(*train_args(run, TRAIN, VALID, "--resume", "--max-steps", "4"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"removed {run / stale[0]}, left by an interrupted write" in resumed.stderr
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_runs_a_run_killed_before_its_first_checkpoint_says_how_to_restart(tmp_path, capsys):
    run = tmp_path / "run"
    live = subprocess.Popen([sys.executable, "-m", "seqlab", *map(str, train_args(run, TRAIN, VALID, "--max-steps",
                                                                                 "100000"))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)       # evaluates once per epoch
    try:
        wait_for(lambda: (run / "train_log.jsonl").exists() or live.poll() is not None)
    finally:
        live.send_signal(signal.SIGKILL)
        live.wait()
    assert (run / "config.json").exists() and not (run / "checkpoint.safetensors").exists()
    message = user_error(*in_process(train_args(run, TRAIN, VALID, "--max-steps", "2"), capsys))
    assert "stopped before its first checkpoint" in message and "--overwrite" in message
    message = user_error(*in_process(train_args(run, TRAIN, VALID, "--max-steps", "2", "--resume"), capsys))
    assert "nothing to resume" in message and "--overwrite" in message
    assert in_process(train_args(run, TRAIN, VALID, "--max-steps", "2", "--eval-every", "2", "--overwrite"),
                      capsys)[0] == 0

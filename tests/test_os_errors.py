"""Operating-system errors on output: a disk that fills (a small tmpfs where this machine lets the tests
mount one, and an injected ENOSPC everywhere), the file-size limit, a full standard output (/dev/full)
and a read-only folder. Each ends in one line naming the path, what failed and what to do, exit 2, and
nothing already written is lost."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import seqlab.training.checkpoint as checkpoint_module
from conftest import TRAIN, VALID
from seqlab.cli.main import main
from seqlab.fileio import atomic_write
from seqlab.training.checkpoint import load_tensors

TINY = ["--tokenizer", "char", "--arch", "lstm", "--embedding-size", "8", "--hidden-size", "64", "--layers", "1",
        "--batch-size", "4", "--seq-len", "8", "--no-progress", "--threads", "1", "--eval-every", "2"]


def train_args(output, *extra) -> list[str]:
    return [str(a) for a in ["train", "lm", "--train", TRAIN, "--valid", VALID, "--output", output, *TINY, *extra]]


def error_line(code: int, err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert lines and lines[-1].startswith("seqlab: error:") and "Traceback" not in err, err
    assert sum("error" in line.lower() for line in lines) == 1, err
    return lines[-1]


def intact(run: Path) -> None:
    """The files of the first evaluation are whole and load (their checksums match)."""
    for name in ("model.safetensors", "checkpoint.safetensors"):
        load_tensors(run / name)


def test_os_errors_disk_full_while_saving_a_checkpoint_keeps_the_previous_one(tmp_path, capsys, monkeypatch):
    """ENOSPC in the middle of the second checkpoint's write: one line, and the first checkpoint stays."""
    run = tmp_path / "run"
    real, calls = checkpoint_module.atomic_write_bytes, []

    def fill_the_disk(path, data):
        calls.append(Path(path).name)
        if calls.count("checkpoint.safetensors") < 2:
            return real(path, data)

        def write_half(tmp):
            tmp.write_bytes(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        atomic_write(path, write_half)

    monkeypatch.setattr(checkpoint_module, "atomic_write_bytes", fill_the_disk)
    code = main(train_args(run, "--max-steps", "4"))
    message = error_line(code, capsys.readouterr().err)
    assert f"cannot write {run / 'checkpoint.safetensors'}: No space left on device; the disk is full" in message
    assert "the previous file is intact" in message
    intact(run)
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]
    monkeypatch.undo()
    assert main(train_args(run, "--resume", "--max-steps", "4")) == 0          # space again: it resumes


def mount_tmpfs(folder: Path, size: str, options: str = "") -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}{options}", "tmpfs", str(folder)],
                          capture_output=True)
    return done.returncode == 0


def unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.mark.slow
def test_os_errors_a_real_small_disk_that_fills_during_training(tmp_path):
    """On a 160 KiB tmpfs (where the machine lets a test mount one): the first evaluation's files fit,
    a later one does not; the command ends with one line and the files written before are whole."""
    disk = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    if not mount_tmpfs(disk, "160k"):
        pytest.skip("this machine does not let the tests mount a tmpfs (not root, or no CAP_SYS_ADMIN)")
    try:
        done = subprocess.run([sys.executable, "-m", "seqlab", *train_args(disk / "run", "--max-steps", "200")],
                              capture_output=True, text=True, timeout=300)
        message = error_line(done.returncode, done.stderr)
        assert "No space left on device; the disk is full" in message and str(disk / "run") in message
        assert (disk / "run" / "config.json").exists()
        if (disk / "run" / "checkpoint.safetensors").exists():
            load_tensors(disk / "run" / "checkpoint.safetensors")
    finally:
        unmount(disk)


@pytest.mark.slow
def test_os_errors_the_file_size_limit_is_one_line(tmp_path):
    """ulimit -f below the checkpoint's size: EFBIG (Python ignores SIGXFSZ), one line that says so."""
    limit = 40_000

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "seqlab", *train_args(run, "--max-steps", "2")],
                          capture_output=True, text=True, timeout=300, preexec_fn=limit_file_size)
    message = error_line(done.returncode, done.stderr)
    assert "File too large; the file is over this process's size limit (ulimit -f)" in message
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_os_errors_a_full_standard_output_is_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(train_args(run, "--max-steps", "2")) == 0
    capsys.readouterr()
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "seqlab", "generate", str(run), "--max-tokens", "20000",
                               "--seed", "1"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    message = error_line(done.returncode, done.stderr)
    assert message.startswith("seqlab: error: cannot write the output: No space left on device")


def test_os_errors_a_read_only_folder_is_refused_before_any_work(tmp_path, capsys):
    """--output inside a folder this process may not write: refused when the run starts. As root, where
    permissions do not stop writes, a read-only tmpfs stands in (or the test is skipped)."""
    folder = tmp_path / f"read-only-{uuid.uuid4().hex[:6]}"
    mounted = False
    if os.geteuid() == 0:
        mounted = mount_tmpfs(folder, "64k", ",ro")
        if not mounted:
            pytest.skip("as root, a read-only folder needs a read-only mount, which this machine does not allow")
    else:
        folder.mkdir()
        folder.chmod(0o555)
    try:
        code = main(train_args(folder / "run", "--max-steps", "2"))
        message = error_line(code, capsys.readouterr().err)
        assert f"cannot use --output {folder / 'run'}" in message
        assert "Read-only file system" in message or "Permission denied" in message
    finally:
        if mounted:
            unmount(folder)
        else:
            folder.chmod(0o755)

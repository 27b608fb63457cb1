"""benchmarks/gpu_check.sh: its dry run (CPU, tiny models, small cuts of the data) writes a row of every figure, every
one finite, without touching benchmarks/results/gpu.json; it starts on a bare copy of the repository (no .venv, no
../shared, seqlab not installed, a package missing); the datasheet table, the MIG share and the attention probe."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402

FIELDS = {"task", "dataset", "arch", "config", "metric", "value", "unit", "device", "torch", "command", "date"}


def check_rows(rows: list[dict], shakespeare: str, words: str, bpe: str) -> None:
    """Every figure of every run, finite, and MFU as a share of the peak the rows name (on a CPU, the measured
    one: no datasheet)."""
    assert all(set(row) == FIELDS for row in rows)
    assert all(isinstance(row["value"], (int, float)) and math.isfinite(row["value"]) for row in rows)
    peak = [row for row in rows if row["metric"] == "peak_tflop_per_s"]
    assert len(peak) == 1 and peak[0]["value"] > 0 and peak[0]["config"].startswith("measured: ")
    assert not [row for row in rows if row["metric"] == "datasheet_peak_tflop_per_s"]     # a CPU has none
    runs: dict[str, dict[str, dict]] = {}
    for row in rows:
        if row["task"] == "lm":
            runs.setdefault(row["command"], {})[row["metric"]] = row
    assert len(runs) == 4
    assert sorted({(row["dataset"], row["arch"], row["config"].split(" (")[0].split(":")[0]) for run in runs.values()
                   for row in run.values()}) == sorted([(words, "lstm", "configs/wikitext2-lstm-tied.yaml"),
                                                        (bpe, "transformer", "GPT-2 small shape"),
                                                        (shakespeare, "transformer",
                                                         "configs/shakespeare-char-transformer.yaml")])
    for command, run in runs.items():
        assert {"tokens_per_s", "gflop_per_s", "mfu", "mfu_measured", "train_loss", "wall_s"} == set(run), command
        assert run["tokens_per_s"]["value"] > 0 and run["train_loss"]["value"] > 0
        assert "--fused-output on" in command and "--max-steps 3" in command
        processes = 2 if command.startswith("torchrun") else 1
        for metric in ("mfu", "mfu_measured"):
            assert run[metric]["value"] == pytest.approx(
                100 * run["gflop_per_s"]["value"] * 1e9 / (peak[0]["value"] * 1e12 * processes), rel=1e-6)
        assert "the measured 256^3 float32 matmul" in run["mfu"]["unit"]
        if run["mfu"]["arch"] == "transformer":          # the kernel the profiler saw for its shapes
            assert "attention kernel: flash (CPU) (these accept the shapes: flash, math)" in run["mfu"]["config"]
    gpt2 = {command: run for command, run in runs.items() if run["mfu"]["config"].startswith("GPT-2")}
    assert sorted(command.split()[0] for command in gpt2) == ["seqlab", "torchrun"]
    assert all("prepared shards (--data)" in run["mfu"]["config"] and " --data " in command
               for command, run in gpt2.items())


@pytest.mark.slow
def test_gpu_check_dry_run_writes_finite_rows_for_every_run(tmp_path):
    """The dry run in this repository (--gpus 2: the DDP row too, on two CPU processes) gives the matmul peak and,
    for the Shakespeare transformer, the word LSTM, the GPT-2-shaped transformer from a prepared folder and the
    same under torchrun, tokens/s, GFLOP/s, MFU and the training loss, all finite; with ../shared/data, the LSTM
    and the GPT-2 shape read wikitext-2."""
    if not (ROOT.parent / "shared" / "data" / "wikitext-2" / "train.txt").is_file():
        pytest.skip("no ../shared/data/wikitext-2 here (the bare copy's test reads the bundled data)")
    results = ROOT / "benchmarks" / "results" / "gpu.json"
    before = results.stat().st_mtime_ns if results.exists() else None
    output = tmp_path / "gpu.json"
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run", "--gpus", "2",
                           "--output", str(output)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1",
                               "GPU_CHECK_DEPS": str(tmp_path / "deps")})
    assert done.returncode == 0, done.stdout + done.stderr
    check_rows(json.loads(output.read_text(encoding="utf-8")), "tinyshakespeare", "wikitext-2", "wikitext-2")
    assert (results.stat().st_mtime_ns if results.exists() else None) == before
    assert not (tmp_path / "deps").exists()                       # nothing was missing: nothing installed


def wheel(folder: Path, name: str) -> Path:
    """A wheel of an empty package `name` (a zip of the package and its metadata), for pip to install offline."""
    path = folder / f"{name}-1.0-py3-none-any.whl"
    info = f"{name}-1.0.dist-info"
    files = {f"{name}/__init__.py": "", f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{file},,\n" for file in [*files, f"{info}/RECORD"])
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for file, text in files.items():
            archive.writestr(file, text)
    return path


@pytest.mark.slow
def test_gpu_check_starts_on_a_bare_copy_of_the_repository(tmp_path):
    """A copy of the repository's files alone (no .venv, no ../shared beside it, no PYTHONPATH, seqlab not
    installed; `python3` is an interpreter with torch, as on a GPU machine) runs the whole dry run: seqlab from
    the copy's src, Shakespeare from the bundled corpus, a synthetic corpus for the BPE, and a package it lacks
    installed by pip (offline, from a folder of wheels) beside the interpreter, never into it."""
    copy = tmp_path / "lent" / "repo"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    for name in listed:
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    assert not (copy / ".venv").exists() and not (copy.parent / "shared").exists()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    wheels = tmp_path / "wheels"
    wheel(wheels, "seqlab_gpu_check_probe")
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("PYTHONPATH", "PYTHON", "SEQLAB_CACHE_DIR")}
    environment.update(PATH=f"{bin_dir}:{environment['PATH']}", OMP_NUM_THREADS="1", PIP_NO_INDEX="1",
                       PIP_FIND_LINKS=str(wheels), PIP_DISABLE_PIP_VERSION_CHECK="1",
                       GPU_CHECK_DEPS=str(tmp_path / "deps"),
                       GPU_CHECK_EXTRA="seqlab_gpu_check_probe:seqlab_gpu_check_probe")
    output = tmp_path / "gpu.json"
    done = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--dry-run", "--gpus", "2", "--output", str(output)],
                          cwd=copy, capture_output=True, text=True, timeout=600, env=environment)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"seqlab from {copy / 'src' / 'seqlab'}" in done.stderr, done.stderr
    assert "lacks seqlab_gpu_check_probe: installing them" in done.stderr, done.stderr
    assert (tmp_path / "deps" / "site" / "seqlab_gpu_check_probe" / "__init__.py").is_file()   # beside, not into
    check_rows(json.loads(output.read_text(encoding="utf-8")), "tinyshakespeare", "tinyshakespeare", "synthetic")
    assert not (copy / "benchmarks" / "results" / "gpu.json").exists() or \
        (copy / "benchmarks" / "results" / "gpu.json").read_bytes() == \
        (ROOT / "benchmarks" / "results" / "gpu.json").read_bytes()


def test_gpu_check_refuses_a_python_without_torch_in_one_line(tmp_path):
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHON": "/bin/false"})
    assert done.returncode == 1
    assert done.stderr.strip() == "gpu_check: PYTHON=/bin/false cannot import torch"


@pytest.mark.parametrize(("name", "sms", "tflops", "card"), [
    ("NVIDIA H100 80GB HBM3", 132, 989.4, "NVIDIA H100 SXM"),
    ("NVIDIA H100 PCIe", 114, 756, "NVIDIA H100 PCIe"),
    ("NVIDIA H100 NVL", 132, 835, "NVIDIA H100 NVL"),
    ("NVIDIA H200", 132, 989.4, "NVIDIA H200 SXM"),
    ("NVIDIA A100-SXM4-80GB", 108, 312, "NVIDIA A100"),
    ("NVIDIA A100 80GB PCIe", 108, 312, "NVIDIA A100"),
    ("NVIDIA A10", 72, 125, "NVIDIA A10"),
    ("NVIDIA L4", 58, 121, "NVIDIA L4"),
    ("NVIDIA L40S", 142, 362, "NVIDIA L40S"),
    ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", 60, 989.4 * 60 / 132, "NVIDIA H100 SXM"),   # a slice: its SMs' share
])
def test_gpu_check_datasheet_peak_by_device_name(name, sms, tflops, card):
    peak, label = gpu_check.datasheet_peak(name, sms)
    assert peak == pytest.approx(tflops * 1e12) and label.startswith(f"{card} datasheet dense bf16")
    assert ("x 60/132 SMs" in label) == ("MIG" in name)


def test_gpu_check_datasheet_peak_of_an_unknown_card_is_none():
    assert gpu_check.datasheet_peak("NVIDIA A10G", 80) is None          # not in the table: the measured peak
    assert gpu_check.datasheet_peak("Tesla V100-SXM2-16GB", 80) is None  # no bf16 tensor cores


def test_gpu_check_attention_probe_names_the_kernel_the_profiler_saw():
    """On a CPU, fp32, causal: PyTorch runs its CPU flash kernel, and the math backend accepts the shapes too."""
    found = gpu_check.attention_kernel(torch.device("cpu"), torch.float32, 2, 2, 16, 16)
    assert found == "flash (CPU) (these accept the shapes: flash, math)"

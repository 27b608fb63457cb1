"""benchmarks/gpu_check.sh: its dry run (CPU, tiny models, a synthetic corpus) writes a row of every figure, every
one finite, without touching benchmarks/results/gpu.json."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIELDS = {"task", "dataset", "arch", "config", "metric", "value", "unit", "device", "torch", "command", "date"}


@pytest.mark.slow
def test_gpu_check_dry_run_writes_finite_rows_for_every_run(tmp_path):
    """The dry run (--gpus 2: the DDP row too, on two CPU processes) gives the matmul peak and, for the Shakespeare
    transformer, the wikitext LSTM, the GPT-2-shaped transformer from a prepared folder and the same under
    torchrun, tokens/s, GFLOP/s, MFU (against the peak it measured) and the training loss, all finite."""
    results = ROOT / "benchmarks" / "results" / "gpu.json"
    before = results.stat().st_mtime_ns if results.exists() else None
    output = tmp_path / "gpu.json"
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run", "--gpus", "2",
                           "--output", str(output)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(output.read_text(encoding="utf-8"))
    assert all(set(row) == FIELDS for row in rows)
    assert all(isinstance(row["value"], (int, float)) and math.isfinite(row["value"]) for row in rows)

    peak = [row for row in rows if row["metric"] == "peak_tflop_per_s"]
    assert len(peak) == 1 and peak[0]["value"] > 0
    runs: dict[str, dict[str, dict]] = {}
    for row in rows:
        if row["task"] == "lm":
            runs.setdefault(row["command"], {})[row["metric"]] = row
    assert len(runs) == 4
    assert sorted({(row["arch"], row["config"].split(" (")[0].split(":")[0]) for run in runs.values()
                   for row in run.values()}) == [("lstm", "configs/wikitext2-lstm-tied.yaml"),
                                                 ("transformer", "GPT-2 small shape"),
                                                 ("transformer", "configs/shakespeare-char-transformer.yaml")]
    for command, run in runs.items():
        assert {"tokens_per_s", "gflop_per_s", "mfu", "mfu_logged", "train_loss", "wall_s"} <= set(run), command
        assert run["tokens_per_s"]["value"] > 0 and run["train_loss"]["value"] > 0
        assert "--fused-output on" in command and "--max-steps 3" in command
        processes = 2 if command.startswith("torchrun") else 1
        assert run["mfu"]["value"] == pytest.approx(
            100 * run["gflop_per_s"]["value"] * 1e9 / (peak[0]["value"] * 1e12 * processes), rel=1e-6)
    gpt2 = {command: run for command, run in runs.items() if run["mfu"]["config"].startswith("GPT-2")}
    assert sorted(command.split()[0] for command in gpt2) == ["seqlab", "torchrun"]
    assert all("prepared shards (--data)" in run["mfu"]["config"] and " --data " in command
               for command, run in gpt2.items())
    assert (results.stat().st_mtime_ns if results.exists() else None) == before

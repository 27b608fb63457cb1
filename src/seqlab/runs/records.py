"""What a run's records say, read without PyTorch: where its checkpoint stands (`checkpoint_position`, from the
safetensors header alone), the figures of its final records (`final_figures`), whether a `--resume` has work to do
(`finished_run`), and the step of a metrics.jsonl / train_log.jsonl line (`record_step`); and the records as their
readers show them: the JSON lines of metrics.jsonl and train_log.jsonl (`read_records`), a figure (`number`) and a
wall time (`duration`) as text (`seqlab info`, the model card and `seqlab compare`'s report and pages)."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from seqlab.errors import SeqlabError
from seqlab.fileio import safetensors_metadata

if TYPE_CHECKING:
    from seqlab.training.config import TrainConfig


def finished_run(run_dir: str | Path, config: TrainConfig) -> str | None:
    """Why `--resume` of the run in `run_dir` with the options `config` has nothing to do: its last session
    ended with its final records (metrics.jsonl, at the checkpoint's step) and a limit that stopped it still
    holds. One line that names the limits and how to train further; None when a resume has work to do (more
    steps under a raised limit, or the final records of a run killed before it wrote them)."""
    trainer = checkpoint_position(run_dir)
    if trainer is None or not final_figures(run_dir):
        return None
    step, fixed = trainer["step"], trainer.get("time_schedule")
    if fixed and step >= fixed["total_steps"]:
        return (f"{run_dir}: training already finished at step {step:,}, the length --time-schedule fixed, which a "
                "resumed run keeps; nothing to do, the run is unchanged (train longer in a new run)")
    epoch, bad_evals, tokens, elapsed = (trainer.get(k, 0) for k in ("epoch", "bad_evals", "tokens", "elapsed"))
    reached = {}                                        # the limit to raise -> how it stopped the run
    if config.max_steps and step >= config.max_steps:
        reached["--max-steps"] = f"--max-steps {config.max_steps:,} reached"
    if epoch >= config.epochs:
        reached["--epochs"] = f"--epochs {config.epochs} done"
    if config.patience and bad_evals >= config.patience:
        reached["--patience"] = f"stopped early after {bad_evals} evaluations without improvement"
    if config.max_tokens and tokens >= config.max_tokens:
        reached["--max-tokens"] = f"--max-tokens {config.max_tokens:,} spent"
    if config.max_time and elapsed >= config.max_time:
        reached["--max-time"] = f"--max-time {config.max_time:g} s spent"
    if not reached:
        return None
    return (f"{run_dir}: training already finished at step {step:,} ({'; '.join(reached.values())}); nothing to "
            f"do, the run is unchanged. To train it further, --resume with a higher {' and '.join(reached)}")


def final_figures(run_dir: str | Path) -> dict:
    """The figures of the final records (metrics.jsonl) written when training ended at the checkpoint's step,
    {split: figures} as `Trainer.fit` returns them; {} when training has not ended there."""
    trainer = checkpoint_position(run_dir)
    try:
        lines = (Path(run_dir) / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    results = {}
    for line in lines if trainer is not None else []:
        with contextlib.suppress(json.JSONDecodeError):
            record = json.loads(line)
            if (isinstance(record, dict) and record.get("final") and record.get("split")
                    and record.get("trained_steps") == trainer["step"]):
                results[record["split"]] = {k: v for k, v in record.items()
                                            if k not in ("step", "trained_steps", "split", "final")}
    return results


def checkpoint_position(run_dir: str | Path) -> dict | None:
    """The trainer's position written in the run's checkpoint.safetensors (its header alone); None without one."""
    try:
        trainer = json.loads(safetensors_metadata(Path(run_dir) / "checkpoint.safetensors")["trainer"])
    except (KeyError, json.JSONDecodeError):
        return None
    return trainer if isinstance(trainer, dict) and isinstance(trainer.get("step"), int) else None


def record_step(line: str) -> float:
    """The step of a metrics/log line; infinity for a blank or half-written line (dropped on resume)."""
    try:
        return json.loads(line).get("step", 0)
    except (json.JSONDecodeError, AttributeError):
        return math.inf


def read_records(path: Path) -> list[dict]:
    """The JSON objects of a .jsonl file, one a line; a blank or half-written line (a killed run's last)
    is skipped, and a missing file has none."""
    if not path.exists():
        return []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as error:
        raise SeqlabError(f"cannot read {path}: {error.strerror or error}") from None
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def number(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.2f}" if abs(value) >= 10 else f"{value:.4f}"


def duration(seconds: float) -> str:
    """`0.53 s`, `12 min 5 s`, `3 h 20 min`."""
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    return f"{minutes // 60} h {minutes % 60} min"

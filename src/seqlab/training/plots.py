"""Training and validation curves as a PNG."""

from __future__ import annotations

import json
from pathlib import Path


def plot_curves(run_dir: str | Path, metric_label: str = "loss (nats per token)") -> Path | None:
    """Read train_log.jsonl and metrics.jsonl from a run directory and draw curves.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    train = _read(run_dir / "train_log.jsonl")
    evals = [r for r in _read(run_dir / "metrics.jsonl") if r.get("split") == "valid"]
    if not train and not evals:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    if train:
        ax.plot([r["step"] for r in train], [r["loss"] for r in train], label="training", lw=1, alpha=0.8)
    if evals:
        ax.plot([r["step"] for r in evals], [r["loss"] for r in evals], "o-", label="validation", lw=2)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(metric_label)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(run_dir.name)
    fig.tight_layout()
    path = run_dir / "curves.png"
    tmp = run_dir / ".curves.png.tmp"
    fig.savefig(tmp, format="png")
    plt.close(fig)
    tmp.replace(path)
    return path


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows

"""Training and validation curves as a PNG."""

from __future__ import annotations

import json
from pathlib import Path

from seqlab.fileio import atomic_write

# scores (percent) a task records at each evaluation beside its loss, drawn on a second axis: key -> label
SCORES = {"greedy_bleu": "BLEU (greedy, dev sample)", "greedy_rougeL": "ROUGE-L (greedy, dev sample)"}


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
    handles, labels = ax.get_legend_handles_labels()
    scored = [(key, label) for key, label in SCORES.items() if any(key in r for r in evals)]
    top = ax
    if scored:
        right = top = ax.twinx()                    # drawn over `ax`: the legend goes on it
        for (key, label), color in zip(scored, ("C2", "C3"), strict=False):
            points = [r for r in evals if key in r and not r.get("final")]
            right.plot([r["step"] for r in points], [r[key] for r in points], "s--", color=color, label=label, lw=1.5)
        right.set_ylabel("score (%)")
        more = right.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    top.legend(handles, labels)
    ax.set_title(run_dir.name)
    fig.tight_layout()
    return save_png(fig, run_dir / "curves.png")


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue                  # a half-written last line: a curve loses a point, nothing more
        if isinstance(row, dict):
            rows.append(row)
    return rows


def plot_confusion(matrix: list[list[int]], labels: list[str], path: str | Path, title: str = "") -> Path:
    """A confusion matrix as a heat map PNG: rows gold, columns predicted, each cell's count written
    in it and its colour the share of its row (so rare classes read as clearly as common ones)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    counts = np.array(matrix, dtype=float)                                       # (K, K)
    shares = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    K = len(labels)
    size = min(3 + 0.6 * K, 16)
    fig, ax = plt.subplots(figsize=(size + 1, size), dpi=120)
    image = ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(K), labels, rotation=45 if K > 4 else 0, ha="right" if K > 4 else "center")
    ax.set_yticks(range(K), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    if K <= 30:
        for i in range(K):
            for j in range(K):
                ax.text(j, i, f"{int(counts[i, j]):,}", ha="center", va="center", fontsize=8,
                        color="white" if shares[i, j] > 0.6 else "black")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="share of the gold class")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return save_png(fig, path)


def plot_attention(weights, source_tokens: list[str], target_tokens: list[str], path: str | Path,
                   title: str = "") -> Path:
    """Attention weights (T, S) as a heat map PNG: one row per output token, one column per source token
    (the alignment picture of Bahdanau et al. 2015, Fig. 3)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    weights = np.asarray(weights, dtype=float)                                   # (T, S)
    T, S = weights.shape
    fig, ax = plt.subplots(figsize=(min(2 + 0.35 * S, 24), min(1.5 + 0.35 * T, 24)), dpi=120)
    image = ax.imshow(weights, cmap="Greys", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(S), source_tokens[:S], rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(T), target_tokens[:T], fontsize=8)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return save_png(fig, path)


def save_png(fig, path: str | Path) -> Path:
    """Write a figure as a PNG atomically (seqlab.fileio.atomic_write) and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))
    finally:
        plt.close(fig)
    return path

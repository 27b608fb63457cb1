"""Overlay the validation curves of several runs in one PNG (e.g. every architecture on PTB).

    python benchmarks/plot_runs.py runs/bench/ptb-compare-{ffn,rnn,lstm,gru,transformer} \
        --output benchmarks/results/lm_architectures.png --title "PTB, every architecture"

Left: validation perplexity against epochs; right: the same against training wall time, so that a
slow architecture's lead (or lag) per epoch is seen at its cost. Reads each run's metrics.jsonl.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def curve(run: Path) -> tuple[list[float], list[float], list[float]]:
    """(epochs, elapsed seconds, validation perplexity) of the periodic evaluations of one run."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    periodic = [r for r in records if not r.get("final") and r.get("split") == "valid"]
    if not periodic:
        raise SystemExit(f"{run}/metrics.jsonl holds no validation records")
    steps_per_epoch = next((r["step"] / r["epoch"] for r in periodic if r.get("epoch")), 1.0)
    return ([r["step"] / steps_per_epoch for r in periodic], [r["elapsed_s"] / 60 for r in periodic],
            [r["perplexity"] for r in periodic])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    parser.add_argument("--output", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--title", default="validation perplexity")
    parser.add_argument("--labels", help="comma-separated legend names, one per run (default: each run's arch)")
    args = parser.parse_args()
    labels = args.labels.split(",") if args.labels else [None] * len(args.runs)
    if len(labels) != len(args.runs):
        parser.error(f"--labels names {len(labels)} runs for {len(args.runs)} run directories")
    figure, (by_epoch, by_time) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for run, name in zip(args.runs, labels, strict=True):
        epochs, minutes, perplexity = curve(run)
        name = name or json.loads((run / "config.json").read_text())["model"]["arch"]
        label = f"{name} ({perplexity[-1]:.1f})"
        by_epoch.plot(epochs, perplexity, marker="o", markersize=3, label=label)
        by_time.plot(minutes, perplexity, marker="o", markersize=3, label=label)
    by_epoch.set(xlabel="epoch", ylabel="validation perplexity (log scale)", yscale="log")
    by_time.set(xlabel="training time (minutes, incl. evaluation)")
    for axis in (by_epoch, by_time):
        axis.grid(alpha=0.3, which="both")
    plain = matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}")
    by_epoch.yaxis.set_major_formatter(plain)
    by_epoch.yaxis.set_minor_formatter(plain)
    by_epoch.legend(title=f"{'model' if args.labels else 'arch'} (last valid ppl)")
    figure.suptitle(args.title)
    figure.tight_layout()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

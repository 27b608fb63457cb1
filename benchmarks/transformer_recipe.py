"""A transformer recipe against nanoGPT's at the same tokens: Tiny Shakespeare, nanoGPT's CPU setting (4 layers,
4 heads, width 128, context 64, batch 12, 2000 steps: 2000 x 12 x 64 = 1.54M training tokens), the valid loss
over the whole split (nanoGPT's 90/10 split).

Every row is configs/shakespeare-char-transformer.yaml (nanoGPT's recipe: pre-LN, GELU, learned positions, tied
output, AdamW 1e-3 -> 1e-4) with options added: one option at a time (the ablation), learning-rate sweeps where
the option changes the best rate, and their combinations. The model size stays within a few percent (SwiGLU's
default width keeps the feedforward's parameters; untied adds the output matrix, 8k weights).

    python benchmarks/transformer_recipe.py --rows nanogpt rotary swiglu --seeds 1111 -- --threads 1
    python benchmarks/transformer_recipe.py --rows best --seeds 1111 1 2 -- --threads 1
    python benchmarks/transformer_recipe.py --plot            # the figure from the results file only

Results: benchmarks/results/transformer_recipe.{json,md} (a row per recipe: the mean over its seeds, each seed's
figure, the spread) and transformer_recipe.png (every recipe's loss, with its seeds as dots).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from lm_quality import shakespeare_split  # noqa: E402

import seqlab  # noqa: E402
from common import RESULTS, device_name, record, write_records  # noqa: E402
from seqlab.cli.main import main as seqlab_main  # noqa: E402

CONFIG = "configs/shakespeare-char-transformer.yaml"
BEST = "configs/shakespeare-char-transformer-modern.yaml"     # the recipe shipped: the best rows' options
TARGET = 1.85
ROTARY = ["--positions", "rotary"]
MODERN = [*ROTARY, "--norm", "rmsnorm", "--activation", "swiglu", "--qk-norm"]
ROWS = {   # name: options added to the config's
    "nanogpt": [],
    "lr2e-3": ["--lr", "2e-3", "--min-lr", "2e-4"],
    "rotary": ROTARY,
    "rmsnorm": ["--norm", "rmsnorm"],
    "swiglu": ["--activation", "swiglu"],
    "qk-norm": ["--qk-norm"],
    "untied": ["--no-tied"],
    "muon": ["--optimizer", "muon"],
    "muon-lr2e-3": ["--optimizer", "muon", "--lr", "2e-3", "--min-lr", "2e-4"],
    "rotary-lr2e-3": [*ROTARY, "--lr", "2e-3", "--min-lr", "2e-4"],
    "modern": MODERN,
    "modern-lr2e-3": [*MODERN, "--lr", "2e-3", "--min-lr", "2e-4"],
    "modern-lr3e-3": [*MODERN, "--lr", "3e-3", "--min-lr", "3e-4"],
    "modern-muon": [*MODERN, "--optimizer", "muon"],
    "modern-muon-lr2e-3": [*MODERN, "--optimizer", "muon", "--lr", "2e-3", "--min-lr", "2e-4"],
    "modern-muon-lr3e-3": [*MODERN, "--optimizer", "muon", "--lr", "3e-3", "--min-lr", "3e-4"],
}


def run_row(name: str, options: list[str], seeds: list[int], train: Path, valid: Path, extra: list[str],
            folder: Path, config: str = CONFIG, reuse: bool = False) -> dict:
    values, walls, speeds = [], [], []
    for seed in seeds:
        output = folder / f"{name}-seed{seed}"
        command = ["train", "lm", "--config", config, "--train", str(train), "--valid", str(valid), "--output",
                   str(output), "--overwrite", "--seed", str(seed), "--eval-every", "500", *options, *extra]
        if reuse and finished(output):
            records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
            walls.append(max(r.get("elapsed_s", 0.0) for r in records))
        else:
            start = time.time()
            if seqlab_main(command):
                raise SystemExit(f"{name}: training failed")
            walls.append(time.time() - start)
        metrics = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
        values.append(next(m["loss"] for m in metrics if m.get("final") and m["split"] == "valid"))
        log = [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines()]
        speeds.append(statistics.median(r["tokens_per_s"] for r in log))
        print(f"{name} seed {seed}: valid loss {values[-1]:.4f} ({walls[-1]:.0f} s)", flush=True)
    lm = seqlab.load(output)
    spread = {"stdev": statistics.stdev(values), "min": min(values), "max": max(values)} if len(values) > 1 else {}
    return record(task="lm", dataset="tinyshakespeare", split="valid", arch="transformer", config=name,
                  metric="loss", value=statistics.mean(values), seeds=seeds, values=values, **spread,
                  params=lm.model.num_parameters(), tokens_per_s=statistics.median(speeds),
                  wall_s=round(statistics.mean(walls), 1), target=TARGET,
                  device=device_name("cpu"),
                  note=" ".join(options) or (f"the shipped {config}" if config != CONFIG else "nanoGPT's recipe"))


def finished(output: Path) -> bool:
    """A run of this row and seed that went to its end (its final valid record written)."""
    path = output / "metrics.jsonl"
    return path.exists() and any(json.loads(line).get("final") for line in path.read_text().splitlines())


def plot() -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = json.loads((RESULTS / "transformer_recipe.json").read_text())
    rows.sort(key=lambda r: -r["value"])
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(rows) + 1.4))
    for i, r in enumerate(rows):
        ax.barh(i, r["value"], color="tab:orange" if r["config"] == "nanogpt" else "tab:blue", alpha=0.75)
        ax.plot(r.get("values", [r["value"]]), [i] * len(r.get("values", [r["value"]])), "k.", markersize=5)
        ax.text(r["value"] + 0.003, i, f"{r['value']:.3f} ({len(r.get('values', [1]))} seed"
                f"{'s' if len(r.get('values', [1])) > 1 else ''})", va="center", fontsize=8)
    ax.axvline(TARGET, color="grey", linestyle="--", label=f"target {TARGET}")
    ax.set_yticks(range(len(rows)), [r["config"] for r in rows], fontsize=8)
    low = min(min(r.get("values", [r["value"]])) for r in rows)
    ax.set_xlim(low - 0.03, max(r["value"] for r in rows) + 0.06)
    ax.set_xlabel("valid loss (nats/char, whole split) after 2000 x 12 x 64 tokens; lower is better")
    ax.set_title("Tiny Shakespeare, nanoGPT's CPU setting: recipes at the same tokens")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path = RESULTS / "transformer_recipe.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", default=[], help=f"recipes: {', '.join(ROWS)}, or best (the shipped "
                        "configs/shakespeare-char-transformer-modern.yaml)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1111])
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--plot", action="store_true", help="only redraw the figure from the results file")
    parser.add_argument("--reuse", action="store_true", help="read a row and seed's finished run under runs/recipe "
                        "instead of training it again (wall_s is then its training time)")
    parser.add_argument("seqlab_options", nargs=argparse.REMAINDER, help="further `seqlab train lm` options after --")
    args = parser.parse_args()
    if args.plot:
        print(plot())
        return 0
    unknown = [r for r in args.rows if r not in ROWS and r != "best"]
    if unknown:
        parser.error(f"unknown rows {unknown}: choose from {', '.join(ROWS)} or best")
    folder = Path(tempfile.mkdtemp(prefix="seqlab-recipe-"))
    train, valid = shakespeare_split(Path(args.data_dir), folder)
    extra = [a for a in args.seqlab_options if a != "--"]
    for name in args.rows:
        config = BEST if name == "best" else CONFIG
        row = run_row(name, ROWS.get(name, []), args.seeds, train, valid, extra, Path("runs/recipe"), config,
                      args.reuse)
        write_records("transformer_recipe", [row], "Transformer recipes at nanoGPT's tokens (Tiny Shakespeare)",
                      notes="Valid loss in nats per character over the whole validation split (nanoGPT's 90/10 "
                            "split), after 2000 steps of 12 x 64 characters; `value` is the mean over the row's "
                            "seeds (each in the JSON's `values`). Every row is "
                            "configs/shakespeare-char-transformer.yaml with the options in its `note`. `target`: "
                            "the issue's 1.85.")
        print(json.dumps(row), flush=True)
    print(plot())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

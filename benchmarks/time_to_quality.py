"""Time to quality, the way DAWNBench and the nanoGPT speedruns judge training speed: the wall-clock time on
this machine until the validation figure first reaches a fixed target.

- `wikitext2-lstm`: the tied 2 x 200 LSTM on wikitext-2 to valid perplexity 120
  (configs/wikitext2-lstm-tied-fast.yaml);
- `shakespeare-transformer`: the 0.8M-parameter character transformer of nanoGPT's CPU setting to valid loss
  1.90 (configs/shakespeare-char-transformer.yaml, nanoGPT's 90/10 split, evaluated on the whole split).

The model is fixed; the recipe (rate, batch, schedule, steps) is fair game: `--recipe NAME` picks one of
RECIPES (options added to the config's). The time is the run's own `elapsed_s` of the first evaluation at or
below the target (training and every evaluation so far; building the vocabulary is not counted), read from
its metrics.jsonl; evaluations come every `eval_every` steps, so the time is an upper bound by at most that.

    python benchmarks/time_to_quality.py --benchmark shakespeare-transformer --recipe nanogpt -- --threads 1
    python benchmarks/time_to_quality.py --benchmark wikitext2-lstm -- --threads 1
    python benchmarks/time_to_quality.py --benchmark wikitext2-lstm --run runs/ttq-wt2-lstm   # report a run

Results: benchmarks/results/time_to_quality.{json,md} and time_to_quality_<benchmark>_<recipe>.png (the
validation curve against wall-clock minutes, the target drawn).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from lm_quality import shakespeare_split  # noqa: E402

from common import RESULTS, device_name, record, write_records  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = {   # name: (config, metric, target, dataset)
    "wikitext2-lstm": ("configs/wikitext2-lstm-tied-fast.yaml", "perplexity", 120.0, "wikitext-2"),
    "shakespeare-transformer": ("configs/shakespeare-char-transformer.yaml", "loss", 1.90, "tinyshakespeare"),
}
RECIPES = {      # benchmark: {recipe: options added to the config's}
    "wikitext2-lstm": {"fast": []},
    "shakespeare-transformer": {
        "nanogpt": ["--eval-every", "100"],                        # nanoGPT's own: 2000 steps, AdamW 1e-3
        "lr2e-3-1500": ["--eval-every", "100", "--lr", "2e-3", "--min-lr", "2e-4", "--max-steps", "1500"],
        "lr3e-3-1200": ["--eval-every", "100", "--lr", "3e-3", "--min-lr", "3e-4", "--max-steps", "1200"],
        "lr4e-3-1000": ["--eval-every", "100", "--lr", "4e-3", "--min-lr", "4e-4", "--max-steps", "1000"],
        "lr3e-3-batch24-600": ["--eval-every", "50", "--lr", "3e-3", "--min-lr", "3e-4", "--max-steps", "600",
                               "--batch-size", "24", "--warmup-steps", "50"],
        # the recipe of configs/shakespeare-char-transformer-modern.yaml on the same model size (issue 20)
        "modern": ["--eval-every", "100", "--positions", "rotary", "--norm", "rmsnorm", "--activation", "swiglu",
                   "--qk-norm", "--optimizer", "muon", "--lr", "2e-3", "--min-lr", "2e-4"],
    },
}


def data_options(benchmark: str, data_dir: Path) -> list[str]:
    if benchmark == "wikitext2-lstm":
        folder = data_dir / "wikitext-2"
        return ["--train", str(folder / "train.txt"), "--valid", str(folder / "valid.txt"),
                "--test", str(folder / "test.txt")]
    train, valid = shakespeare_split(data_dir, Path(tempfile.mkdtemp(prefix="seqlab-shakespeare-")))
    return ["--train", str(train), "--valid", str(valid)]


def first_at_target(records: list[dict], metric: str, target: float) -> dict | None:
    valid = [r for r in records if r.get("split") == "valid" and not r.get("final")]
    return next((r for r in valid if r[metric] <= target), None)


def plot(run: Path, metric: str, target: float, benchmark: str, label: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    valid = [r for r in records if r.get("split") == "valid" and not r.get("final")]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot([r["elapsed_s"] / 60 for r in valid], [r[metric] for r in valid], marker="o", label=label)
    ax.axhline(target, color="grey", linestyle="--", label=f"target {target:g}")
    hit = first_at_target(records, metric, target)
    if hit:
        ax.axvline(hit["elapsed_s"] / 60, color="tab:green", linestyle=":",
                   label=f"reached at {hit['elapsed_s'] / 60:.1f} min")
    ax.set_xlabel("wall-clock minutes (training and evaluation)")
    ax.set_ylabel(f"validation {metric}")
    if metric == "perplexity":
        ax.set_yscale("log")
    ax.set_title(f"time to quality: {benchmark}")
    ax.grid(alpha=0.3)
    ax.legend()
    path = RESULTS / f"time_to_quality_{benchmark}_{label}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", required=True, choices=BENCHMARKS)
    parser.add_argument("--recipe", help="one of RECIPES[benchmark] (default: the first)")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--output", help="run directory (default runs/ttq-<benchmark>-<recipe>)")
    parser.add_argument("--run", help="report this finished run directory instead of training")
    parser.add_argument("train_args", nargs="*", help="after --: more options for seqlab train lm")
    args = parser.parse_args()
    config, metric, target, dataset = BENCHMARKS[args.benchmark]
    recipe = args.recipe or next(iter(RECIPES[args.benchmark]))
    if recipe not in RECIPES[args.benchmark]:
        raise SystemExit(f"--recipe {recipe}: choose from {', '.join(RECIPES[args.benchmark])}")
    extra = [*RECIPES[args.benchmark][recipe], *args.train_args]
    command = ["seqlab", "train", "lm", "--config", config, *extra]
    if args.run:
        run = Path(args.run)
    else:
        run = Path(args.output or f"runs/ttq-{args.benchmark}-{recipe}")
        full = [sys.executable, "-m", "seqlab", "train", "lm", "--config", str(ROOT / config),
                *data_options(args.benchmark, Path(args.data_dir)), "--output", str(run), "--overwrite", *extra]
        subprocess.run(full, check=True, env=os.environ | {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    run_config = json.loads((run / "config.json").read_text())
    threads = run_config["train"].get("threads") or "default"
    hit = first_at_target(records, metric, target)
    valid = [r for r in records if r.get("split") == "valid" and not r.get("final")]
    finals = {r["split"]: r for r in records if r.get("final")}
    tokens_per_s = statistics.median(r["tokens_per_s"] for r in log[1:] or log)
    mfu = statistics.median(r["mfu"] for r in log[1:] or log if "mfu" in r) if any("mfu" in r for r in log) \
        else None
    described = (f"{recipe}: {' '.join(command)} ({threads} thread(s)); target valid {metric} {target:g}; "
                 f"eval every {run_config['train']['eval_every']} steps")
    common = dict(task="lm", dataset=dataset, split="valid", arch=run_config["model"]["arch"],
                  config=described, device=device_name("cpu").split(",")[0] + f", {threads} thread(s)",
                  tokens_per_s=round(tokens_per_s, 1), target=target)
    out = [record(metric="minutes_to_target", value=round(hit["elapsed_s"] / 60, 2) if hit else None,
                  step=hit["step"] if hit else None, reached=bool(hit), **common),
           record(metric=f"best_valid_{metric}", value=min(r[metric] for r in valid),
                  wall_s=valid[-1]["elapsed_s"], **common)]
    if "test" in finals:
        out.append(record(**(common | {"split": "test"}), metric=f"test_{metric}", value=finals["test"][metric]))
    if mfu is not None:
        out.append(record(metric="mfu", value=mfu, **common))
    picture = plot(run, metric, target, args.benchmark, recipe)
    print(f"{args.benchmark} / {recipe}: " + (f"valid {metric} {hit[metric]:.3f} <= {target:g} at step {hit['step']}, "
                                              f"{hit['elapsed_s'] / 60:.1f} min" if hit else
                                              f"target {target:g} not reached (best {out[1]['value']:.3f})")
          + f"; {tokens_per_s:,.0f} tokens/s; curve {picture}")
    notes = ("Wall-clock minutes until the first evaluation at or below the target (the run's elapsed_s: training "
             "plus every evaluation so far), on this machine's CPU threads as listed; `minutes_to_target` is empty "
             "when the run never reached it. Evaluations come every `eval every` steps, so each time is an upper "
             "bound by at most that interval. The machine was shared with other jobs unless said otherwise.")
    write_records("time_to_quality", out, "Time to quality: minutes to a fixed validation figure", notes)


if __name__ == "__main__":
    main()

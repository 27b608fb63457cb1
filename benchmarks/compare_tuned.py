"""Tuned against untuned comparisons (issue 33): `seqlab compare` of every architecture of a family on a standard
dataset, once with the recipes as they are and once with `--tune-trials N` (each architecture's options searched
with the same number of Optuna trials, then its best options trained), both with `--seeds K` and one budget.

    python benchmarks/compare_tuned.py --dataset sst2 --trials 12 --seeds 3 --tune-budget-epochs 2 --budget-epochs 10
    python benchmarks/compare_tuned.py --dataset ud_english_ewt --trials 12 --seeds 3 --tune-budget-epochs 1 \
        --budget-epochs 5
    python benchmarks/compare_tuned.py --dataset ptb --trials 12 --seeds 3 --tune-budget-epochs 1 --budget-epochs 6

Both compares resume in --output if stopped (the finished runs and trials are kept). Records go to
benchmarks/results/compare_tuned_<dataset>.json and .md: one row per architecture, seed and split (config
`compare <dataset> tuned 12 trials, 10 epochs, seed 1111` or `... untuned ...`), the mean of the seeds (with
their standard deviation, `stdev`), the 95% bootstrap interval of the report (metric `<metric>_low` /
`<metric>_high`), and each tuning's wall time, pruned trials and the time pruning saved (an estimate: the median
complete trial's time less each pruned trial's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from common import device_name, record, write_records  # noqa: E402

DATASETS = {   # task, metric, files under --data-dir, data options
    "sst2": ("classifier", "accuracy", {"train": "sst2/sentence_level/stsa.binary.train",
                                         "dev": "sst2/sentence_level/stsa.binary.dev",
                                         "test": "sst2/sentence_level/stsa.binary.test"},
             ["--format", "labeled-lines", "--tokenizer", "whitespace"]),
    "ud_english_ewt": ("tagger", "accuracy", {"train": "ud_english_ewt/en_ewt-ud-train.conllu",
                                               "dev": "ud_english_ewt/en_ewt-ud-dev.conllu",
                                               "test": "ud_english_ewt/en_ewt-ud-test.conllu"}, []),
    "ptb": ("lm", "perplexity", {"train": "ptb/ptb.train.txt", "valid": "ptb/ptb.valid.txt",
                                 "test": "ptb/ptb.test.txt"}, ["--tokenizer", "word"]),
}
TASK_NAMES = {"classifier": "classification", "tagger": "tagging", "lm": "lm"}


def final_records(run: Path) -> dict:
    found = {}
    path = run / "metrics.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        rec = json.loads(line)
        if rec.get("final"):
            found[rec["split"]] = rec
    return found


def card(run: Path) -> dict:
    path = run / "model_card.json"
    if not path.exists():
        return {}
    details = json.loads(path.read_text()).get("model_details") or {}
    return details if isinstance(details, dict) else {}


def run_compare(args, task: str, files: dict, options: list[str], output: Path, tuned: bool) -> float:
    folder = Path(args.data_dir)
    argv = [sys.executable, "-m", "seqlab", "compare", task]
    for flag, path in files.items():
        argv += [f"--{flag}", str(folder / path)]
    argv += [*options, "--budget-epochs", str(args.budget_epochs), "--seeds", str(args.seeds), "--threads",
             str(args.threads), "--no-progress", "--output", str(output)]
    if args.archs:
        argv += ["--archs", *args.archs]
    if tuned:
        argv += ["--tune-trials", str(args.trials), "--tune-budget-epochs", str(args.tune_budget_epochs)]
    start = time.time()
    print(" ".join(argv[2:]), flush=True)
    subprocess.run(argv, check=True)
    return time.time() - start


def seed_intervals(output: Path) -> dict:
    """{arch: {"low", "high", "split"}}: the 95% intervals of the report's Seeds section (seqlab.compare.seeds, a
    two-level bootstrap over the test items and the seeds), worked out as the report does."""
    from seqlab.compare import seeds
    from seqlab.compare.report import run_row

    spec = json.loads((output / "compare.json").read_text())
    if not seeds.several(spec):
        return {}
    rows = {arch: [(seed, run_row(output, arch, path, spec["metric"])) for seed, path in runs]
            for arch, runs in seeds.seed_runs(spec).items()}
    found = seeds.seed_statistics(spec, rows, progress=False)
    return {a["arch"]: {"low": a["low"], "high": a["high"], "split": found["split"]}
            for a in found["archs"] if a["low"] is not None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=tuple(DATASETS), required=True)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--output", help="default: runs/bench/compare-tuned-<dataset>")
    parser.add_argument("--archs", nargs="+", help="default: every architecture the family compares")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tune-budget-epochs", type=int, default=1)
    parser.add_argument("--budget-epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", choices=("tuned", "untuned"), help="run one of the two compares (default: both)")
    parser.add_argument("--collect", action="store_true",
                        help="train nothing: record the seed runs of OUTPUT that have finished so far (a compare "
                             "still running, or stopped; the rows say how many seeds)")
    args = parser.parse_args()
    task, metric, files, options = DATASETS[args.dataset]
    output = Path(args.output or f"runs/bench/compare-tuned-{args.dataset}")
    torch.set_num_threads(args.threads)
    records = []
    for tuned in (False, True):
        kind = "tuned" if tuned else "untuned"
        if args.only and args.only != kind:
            continue
        out = output / kind
        wall = None if args.collect else run_compare(args, task, files, options, out, tuned)
        plan = json.loads((out / "compare.json").read_text())
        label = (f"compare {args.dataset} tuned {args.trials} trials, {args.budget_epochs} epochs" if tuned else
                 f"compare {args.dataset} untuned, {args.budget_epochs} epochs")
        intervals = seed_intervals(out)
        for arch, runs in plan["seed_runs"].items():
            values = {}
            for seed, path in runs.items():
                run = out / path
                found, details = final_records(run), card(run)
                for split, rec in found.items():
                    if metric not in rec:
                        continue
                    values.setdefault(split, []).append(rec[metric])
                    records.append(record(task=TASK_NAMES[task], dataset=args.dataset, split=split, arch=arch,
                                          config=f"{label}, seed {seed}", metric=metric, value=round(rec[metric], 2),
                                          params=details.get("parameters"), wall_s=details.get("wall_time_s"),
                                          tokens_per_s=details.get("tokens_per_s"), epochs=args.budget_epochs,
                                          device=device_name()))
            for split, found in values.items():
                if len(found) < 2 and args.collect:        # one seed so far: its own row says it all
                    continue
                extra = {"stdev": round(statistics.stdev(found), 2)} if len(found) > 1 else {}
                records.append(record(task=TASK_NAMES[task], dataset=args.dataset, split=split, arch=arch,
                                      config=f"{label}, mean of {len(found)} seeds", metric=metric,
                                      value=round(statistics.mean(found), 2), epochs=args.budget_epochs,
                                      device=device_name(), **extra,
                                      note=None if wall is None else f"compare wall time {wall:.0f} s"))
            interval = intervals.get(arch)
            if interval:
                for end in ("low", "high"):
                    records.append(record(task=TASK_NAMES[task], dataset=args.dataset, split=interval["split"],
                                          arch=arch, config=f"{label}, 95% bootstrap interval",
                                          metric=f"{metric}_{end}",
                                          value=round(interval[end], 2), epochs=args.budget_epochs,
                                          device=device_name()))
            if tuned:
                study = json.loads((out / "tune" / arch / "tune.json").read_text())
                for name, value in (("tuning_wall_s", study["wall_s"]), ("trials_pruned", study["pruned"]),
                                    ("trials_failed", study["failed"]), ("pruning_saved_s", study["pruning_saved_s"]),
                                    ("tuned_valid_at_tuning_budget", (study["best"] or {}).get("value"))):
                    records.append(record(task=TASK_NAMES[task], dataset=args.dataset, split="valid", arch=arch,
                                          config=f"{label}, tuning ({args.tune_budget_epochs} epoch trials)",
                                          metric=name, value=value, device=device_name(),
                                          note=json.dumps((study["best"] or {}).get("params"))))
        title = f"Tuned against untuned: seqlab compare on {args.dataset}"
        notes = (f"Each architecture below, trained by `seqlab compare {task}` on {args.dataset}, {args.seeds} seeds "
                 f"each, {args.budget_epochs} epochs; `tuned`: each architecture first tuned with {args.trials} "
                 f"trials of `seqlab tune` ({args.tune_budget_epochs}-epoch trials, TPE, median pruning, the recipe as "
                 "trial 0), then its best options trained. `stdev`: over the seeds. The intervals are the report's (a "
                 "two-level bootstrap over the test items and the seeds; for a language model over the seeds "
                 "alone, its perplexity not being a sum over lines). Wall times were measured with other jobs "
                 "on the same 2 cores.")
        write_records(f"compare_tuned_{args.dataset}", records, title, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The LM recipes through prepared data against the in-memory path of an earlier commit, same seed, side by side.

    python benchmarks/prepared_identity.py --before dd00fc9                    # 300 steps of each recipe
    python benchmarks/prepared_identity.py --before dd00fc9 --steps 0          # the whole recipes (hours)

For each recipe (configs/ptb-lstm-zaremba.yaml on PTB, configs/wikitext2-lstm-tied-short.yaml on wikitext-2):
  before   that commit's code (git archive of its src/), `seqlab train lm --train F --valid F --test F
           --config C`: the corpus read into Python lists at the start
  ours     `seqlab prepare lm` of the same files, then `seqlab train lm --data DIR --config C`
with --max-steps (and --eval-every at half of them) unless --steps 0, --threads 1. Records the validation and
test perplexities of both and whether every training-loss record and evaluation is identical, into
results/scale.json (dataset ptb / wikitext-2, metric valid_perplexity / test_perplexity / identical_records).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from memory_streaming import extract  # noqa: E402

from common import device_name, record, write_records  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RECIPES = {"ptb": ("configs/ptb-lstm-zaremba.yaml", "ptb/ptb.train.txt", "ptb/ptb.valid.txt", "ptb/ptb.test.txt"),
           "wikitext-2": ("configs/wikitext2-lstm-tied-short.yaml", "wikitext-2/train.txt", "wikitext-2/valid.txt",
                          "wikitext-2/test.txt")}
VOLATILE = {"elapsed_s", "tokens_per_s", "gflop_per_s", "mfu"}


def records(run: Path, name: str) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in VOLATILE}
            for line in (run / name).read_text().splitlines()]


def final(run: Path, split: str) -> float:
    return next(r["perplexity"] for r in reversed(records(run, "metrics.jsonl")) if r.get("final")
                and r["split"] == split)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, metavar="COMMIT")
    parser.add_argument("--data-dir", default="../shared/data", type=Path)
    parser.add_argument("--work-dir", default="runs/bench/prepared-identity", type=Path)
    parser.add_argument("--datasets", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--steps", type=int, default=300, help="training steps (0: the whole recipe)")
    args = parser.parse_args()
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        old_src = extract(args.before, Path(scratch))
        for dataset in args.datasets:
            config, *files = RECIPES[dataset]
            train, valid, test = (str((args.data_dir / f).resolve()) for f in files)
            limit = ["--max-steps", str(args.steps), "--eval-every", str(max(1, args.steps // 2))] if args.steps else []
            common = ["--config", str(ROOT / config), "--threads", "1", "--no-progress", *limit]
            before, ours, folder = work / f"{dataset}-before", work / f"{dataset}-ours", work / f"{dataset}-prepared"
            runs = [
                ([sys.executable, "-m", "seqlab", "train", "lm", "--train", train, "--valid", valid, "--test", test,
                  *common, "--output", str(before), "--overwrite"], {"PYTHONPATH": str(old_src)}),
                ([sys.executable, "-m", "seqlab", "prepare", "lm", "--train", train, "--valid", valid, "--test", test,
                  "--tokenizer", "word", "--output", str(folder), "--overwrite", "--no-progress"], {}),
                ([sys.executable, "-m", "seqlab", "train", "lm", "--data", str(folder), *common, "--output", str(ours),
                  "--overwrite"], {})]
            for argv, env in runs:
                print(" ".join(argv), flush=True)
                subprocess.run(argv, check=True, env={**os.environ, **env})
            same = all(records(before, name) == records(ours, name) for name in ("train_log.jsonl", "metrics.jsonl"))
            steps = f"{args.steps} steps" if args.steps else "the whole recipe"
            for split in ("valid", "test"):
                for label, run in ((f"in memory ({args.before})", before), ("prepared shards", ours)):
                    rows.append(record(task="lm", dataset=dataset, split=split, arch="lstm",
                                       config=f"{Path(config).stem}, {steps}, {label}", metric=f"{split}_perplexity",
                                       value=final(run, split), device=device_name()))
            rows.append(record(task="lm", dataset=dataset, split="train", arch="lstm",
                               config=f"{Path(config).stem}, {steps}", metric="identical_records", value=int(same),
                               device=device_name(),
                               note="1: every train_log.jsonl and metrics.jsonl record of the two runs is equal "
                                    "(times and speeds aside)"))
            print(f"{dataset}: valid {final(before, 'valid'):.4f} (before) vs {final(ours, 'valid'):.4f} (ours); "
                  f"identical records: {same}", flush=True)
    write_records("scale", rows, "Data bigger than memory: prepare and train at 10M, 100M and 1B word tokens",
                  notes="benchmarks/scale.py and benchmarks/prepared_identity.py")


if __name__ == "__main__":
    main()

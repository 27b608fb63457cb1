"""Peak memory and time of the model card's training-data step on text files (issue 43, item 5): a language model's
card computed from a ~20M-token training text, streamed by this code and read whole by the code of a commit before.

    python benchmarks/card_memory.py                              # this code, ~20M word tokens
    python benchmarks/card_memory.py --before acbd37f             # and that commit's code, for comparison
    python benchmarks/card_memory.py --before acbd37f --whole-run # and a whole short `seqlab train lm` run each

Corpus: wikitext-2's training text repeated to --tokens word tokens (its lines in a fresh seeded order each time
round, so the lines repeat but the text does not: the content does not matter here), written once into --work-dir,
and wikitext-2's validation text as the validation file: a word-level LM (`--tokenizer word`).

Figures (metric names), each from one process started from a helper that holds only the standard library:
  peak_rss_mb   the process's peak resident memory (ru_maxrss of os.wait4), MB (2^20 B)
  card step     `seqlab.cards.data.training_data(family, config)` of the run's config: the datasheet of every file
                (identity, size, characters, duplicates), each split's units and duplicates, and the validation
                split's contamination by train (GPT-3's 13-gram test) and out-of-vocabulary rate; the process first
                imports what the step needs, whose memory is the floor (`imports` rows)
  whole run     with --whole-run, `seqlab train lm` of a small LSTM for 1 step (--max-steps 1): preparing the
                data, training, evaluating, and the card at the end
`wall_s` is each process's wall time. Writes results/card_memory.json and .md (dataset corpus-20M, split train).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from memory_streaming import cpu_model, extract  # noqa: E402

from common import record, write_records  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# Run in a small helper process: Linux counts the memory of the process a command was forked from in the command's
# ru_maxrss, so the command is started from a process that holds only the standard library (its one child's peak is
# the helper's RUSAGE_CHILDREN maximum).
MEASURE = r"""
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(json.loads(sys.argv[1]), capture_output=True, text=True)
print(json.dumps({"status": done.returncode, "stdout": done.stdout[-4000:], "stderr": done.stderr[-2000:],
                  "wall_s": time.perf_counter() - start,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""

CARD_STEP = r"""
import json, sys, time
from seqlab.cards.data import training_data
from seqlab.registry import FAMILIES
family = FAMILIES["lm"]
config = family.pipeline.resolve(None, {"train": sys.argv[1], "valid": sys.argv[2], "tokenizer": "word",
                                        "output": sys.argv[3]})
if sys.argv[4] == "imports":
    family.part("cards")
    print(json.dumps({}))
    raise SystemExit
start = time.perf_counter()
data = training_data(family, config)
print(json.dumps({"card_s": time.perf_counter() - start, "lines": data["files"]["train"]["lines"],
                  "tokens": data["files"]["train"]["tokens"], "duplicates": data["files"]["train"]["duplicates"],
                  "contamination": data["contamination"].get("valid")}))
"""
WHOLE_RUN = ["--tokenizer", "word", "--arch", "lstm", "--embedding-size", "32", "--hidden-size", "32", "--layers",
             "1", "--max-steps", "1", "--eval-every", "1", "--batch-size", "4", "--seq-len", "16", "--threads", "1",
             "--no-progress", "--overwrite"]


def corpus(data: Path, work: Path, tokens: int) -> tuple[Path, Path, int]:
    """wikitext-2's training lines in a fresh seeded order each time round, to `tokens` word tokens."""
    path = work / f"train-{tokens // 1_000_000}M.txt"
    lines = (data / "wikitext-2" / "train.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    count = sum(len(line.split()) for line in lines)
    rounds = max(1, round(tokens / count))
    if not path.exists():
        rng = random.Random(0)
        with open(path.with_suffix(".tmp"), "w", encoding="utf-8") as out:
            for _ in range(rounds):
                order = lines[:]
                rng.shuffle(order)
                out.writelines(order)
        path.with_suffix(".tmp").replace(path)
    return path, data / "wikitext-2" / "valid.txt", rounds * count


def measure(argv: list[str], src: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(argv)], env=env, capture_output=True,
                          text=True, check=True)
    figures = json.loads(done.stdout)
    if figures["status"] != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({figures['status']}): {figures['stderr']}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data", type=Path)
    parser.add_argument("--work-dir", default="runs/bench/card", type=Path, help="the corpus and runs go here")
    parser.add_argument("--tokens", type=int, default=20_000_000, help="word tokens of the training text")
    parser.add_argument("--before", metavar="COMMIT", help="also measure this commit's code")
    parser.add_argument("--whole-run", action="store_true", help="also a whole `seqlab train lm` run of 1 step")
    args = parser.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    train, valid, tokens = corpus(args.data_dir, args.work_dir, args.tokens)
    size = f"corpus-{args.tokens // 1_000_000}M"            # as asked: the repeats round it (20.5M for 20M)
    codes = {"this code (streamed)": ROOT / "src"}
    with tempfile.TemporaryDirectory() as scratch:
        if args.before:
            codes[f"{args.before} (read whole)"] = extract(args.before, Path(scratch))
        device = f"{cpu_model()}, 1 thread, {os.cpu_count()} cores"
        records = []
        for label, src in codes.items():
            base = [sys.executable, "-c", CARD_STEP, str(train), str(valid), str(args.work_dir / "card-run")]
            floor = measure([*base, "imports"], src)
            step = measure([*base, "step"], src)
            shown = json.loads(step["stdout"].strip().splitlines()[-1])
            print(f"{label}: card step peak {step['peak_rss_mb']:,.0f} MB in {step['wall_s']:.0f} s "
                  f"(training_data {shown['card_s']:.0f} s; imports alone {floor['peak_rss_mb']:,.0f} MB); "
                  f"{shown['lines']:,} lines, {shown['tokens']:,} tokens, duplicates {shown['duplicates']}, "
                  f"valid contamination {shown['contamination']}", flush=True)
            common = {"task": "lm", "dataset": size, "split": "train", "arch": "card step", "device": device,
                      "tokens_per_s": shown["tokens"] / shown["card_s"]}
            records += [record(**common, config=f"{label}: training_data of the text files, word tokens",
                               metric="peak_rss_mb", value=step["peak_rss_mb"], wall_s=step["wall_s"]),
                        record(**{**common, "tokens_per_s": None}, config=f"{label}: imports alone (the floor)",
                               metric="peak_rss_mb", value=floor["peak_rss_mb"], wall_s=floor["wall_s"])]
            if args.whole_run:
                run = measure([sys.executable, "-m", "seqlab", "train", "lm", "--train", str(train), "--valid",
                               str(valid), "--output", str(args.work_dir / "whole-run"), *WHOLE_RUN], src)
                print(f"{label}: whole `seqlab train lm` run (1 step) peak {run['peak_rss_mb']:,.0f} MB in "
                      f"{run['wall_s']:.0f} s", flush=True)
                records.append(record(**{**common, "arch": "lstm 32, 1 step", "tokens_per_s": None},
                                      config=f"{label}: seqlab train lm --max-steps 1 (prepare, train, card)",
                                      metric="peak_rss_mb", value=run["peak_rss_mb"], wall_s=run["wall_s"]))
    write_records("card_memory", records, "The model card's training data from text files: peak memory",
                  notes="The card step of a word-level LM on wikitext-2's training text repeated to ~20M tokens: "
                        "streamed (this code) against read whole (the commit before), one process each, one "
                        "thread. `wall_s` is the process's (Python and imports included).")


if __name__ == "__main__":
    main()

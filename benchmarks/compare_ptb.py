"""The PTB architecture table re-made with `seqlab compare`: every LM architecture of the chapters on Penn
Treebank under one token budget, with the recipes of configs/ptb-compare-*.yaml, recorded beside the table's
own runs (benchmarks/results/lm_architectures.json, made one `lm_quality.py` run at a time).

    python benchmarks/compare_ptb.py --data-dir ../shared/data --output runs/compare-ptb --budget-tokens 5577534 \
        --threads 1                                  # six epochs, as the table's runs trained
    python benchmarks/compare_ptb.py ... --budget-tokens 929589 --baseline runs/ptb-{arch}-1epoch   # one epoch

The default budget is one epoch of PTB's training tokens; the compare resumes in --output if it was stopped.
Each figure is recorded beside the same architecture's in the table made one run at a time
(results/lm_architectures.json, six epochs) or, with --baseline, beside runs of your own trained alone.
Records go to benchmarks/results/lm_compare_ptb.json and .md (metric perplexity, split valid / test).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from common import RESULTS, command_line, device_name, record, write_records  # noqa: E402

ARCHS = ("ffn", "rnn", "lstm", "gru", "transformer")


def final(run: Path) -> dict:
    found = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("final"):
            found[rec["split"]] = rec
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--output", default="runs/compare-ptb")
    parser.add_argument("--budget-tokens", type=int, default=929_589, help="per architecture (default: one epoch)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--baseline", help="run directories trained alone with the same recipe and budget, "
                        "'{arch}' standing for the architecture (e.g. runs/ptb-{arch}-1epoch)")
    args = parser.parse_args()
    ptb = Path(args.data_dir) / "ptb"
    argv = [sys.executable, "-m", "seqlab", "compare", "lm", "--train", str(ptb / "ptb.train.txt"),
            "--valid", str(ptb / "ptb.valid.txt"), "--test", str(ptb / "ptb.test.txt"), "--tokenizer", "word",
            "--budget-tokens", str(args.budget_tokens), "--threads", str(args.threads), "--no-progress",
            "--output", args.output]
    torch.set_num_threads(args.threads)          # so that the records' device names the runs' threads
    start = time.time()
    subprocess.run(argv, check=True)
    print(f"compare: {time.time() - start:.0f} s (finished runs in {args.output} are kept, not retrained)")
    records, rows = [], []
    table = {}             # the table made one lm_quality.py run at a time: {arch: {split: {"perplexity": ...}}}
    for r in json.loads((RESULTS / "lm_architectures.json").read_text()):
        if r["metric"] == "perplexity":
            table.setdefault(r["arch"], {})[r["split"]] = {"perplexity": r["value"]}
    for arch in ARCHS:
        run = Path(args.output) / "runs" / arch
        card = json.loads((run / "model_card.json").read_text())["model_details"]
        figures = final(run)
        baseline = final(Path(args.baseline.format(arch=arch))) if args.baseline else table.get(arch, {})
        for split in ("valid", "test"):
            value = figures[split]["perplexity"]
            records.append(record(task="lm", dataset="ptb", split=split, arch=arch, config="seqlab compare, "
                                  f"{args.budget_tokens:,} tokens", metric="perplexity", value=round(value, 2),
                                  params=card["parameters"], tokens_per_s=round(card["tokens_per_s"]),
                                  wall_s=round(card["wall_time_s"]), device=device_name(),
                                  command=command_line(), alone=round(baseline[split]["perplexity"], 2)
                                  if split in baseline else None))
        rows.append(f"| {arch} | {card['parameters']:,} | {card['tokens_per_s']:,.0f} | {card['wall_time_s']:,.0f} | "
                    f"{figures['valid']['perplexity']:.1f} | {figures['test']['perplexity']:.1f} | "
                    + (f"{baseline['valid']['perplexity']:.1f} | {baseline['test']['perplexity']:.1f} |"
                       if baseline else "- | - |"))
    alone = (f"runs trained alone ({args.baseline})" if args.baseline else "the table of lm_architectures.json "
             "(each configs/ptb-compare-*.yaml trained alone by lm_quality.py for 6 epochs, on another day and CPU)")
    notes = ("Every architecture under one budget of training tokens, each with its configs/ptb-compare-*.yaml "
             f"recipe; `alone`: {alone}. A token budget decays the cosine over the budget (the epochs' tokens "
             "plus the last step's remainder: the same steps), but counts the warm-up's tokens toward the decay, "
             "where a count of epochs starts its cosine after the warm-up: under the budget the rate is a little "
             "lower at every step (the progress of the cosine is ahead by at most 200 / 7,968 = 2.5% for the "
             "recurrent models and 200 / 2,179 = 9.2% for the transformer, whose 128-token windows make fewer "
             "steps). tokens/s and wall time were measured with other jobs on the same 2 cores.\n\n"
             "| arch | parameters | tokens/s | wall s | valid ppl | test ppl | valid alone | test alone |\n"
             "|---|---:|---:|---:|---:|---:|---:|---:|\n" + "\n".join(rows))
    print(notes)
    write_records("lm_compare_ptb", records, "The PTB architecture table, made by seqlab compare", notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CrowS-Pairs (Nangia et al. 2020) of trained seqlab language models: the percentage of the 1,508 pairs where
each model scores the more stereotyping sentence higher (50 = no preference), by both scorings of
`seqlab.harms.bias`, overall and by bias type, with bootstrap 95% intervals.

    python benchmarks/crows_pairs.py --run /work/main/runs/wt2-lstm-1epoch --data-dir ../shared/data

Records go to benchmarks/results/crows_pairs.json and .md (metric `crows_pairs_pct`; split: the group;
config: the run's name and the scoring; low / high: the interval).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.harms.bias import PUBLISHED, SCORINGS, crows_pairs, table_rows  # noqa: E402

PAIRS = "crows_pairs/crows_pairs_anonymized.csv"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, help="a language model's run directory (repeat)")
    parser.add_argument("--data-dir", default="../shared/data", help="the folder holding crows_pairs/")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default: 0)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default: 1000)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    pairs = Path(args.data_dir) / PAIRS
    records, tables = [], []
    for run in map(Path, args.run):
        lm = seqlab.load(run, args.device)
        config = json.loads((run / "config.json").read_text())
        start = time.perf_counter()
        result = crows_pairs(lm, pairs, args.seed, args.resamples)
        wall = time.perf_counter() - start
        params = sum(p.numel() for p in lm.model.parameters())
        arch = f"{config['model']['arch']} ({config['data']['tokenizer']})"
        groups = {"overall": result["overall"], **result["by_bias_type"],
                  **{f"direction {k}": v for k, v in result["by_direction"].items()}}
        for group, summary in groups.items():
            for scoring in SCORINGS:
                s = summary[scoring]
                records.append(record(task="lm-bias", dataset="crows-pairs", split=group, arch=arch,
                                      config=f"{run.name} / {scoring}", metric="crows_pairs_pct",
                                      value=round(s["percent"], 2), low=round(s["interval"][0], 2),
                                      high=round(s["interval"][1], 2), pairs=summary["pairs"],
                                      preferred=s["preferred"], ties=s["ties"], params=params,
                                      wall_s=round(wall, 1), device=device_name(args.device),
                                      seed=args.seed, resamples=args.resamples))
        rows = [f"| {' | '.join(row)} |" for row in table_rows(result)]
        tables.append("\n".join([f"{run.name} ({arch}, {params:,} parameters; {wall:.0f} s):", "",
                                 "| group | pairs | sentence log-prob: % [95% CI] (preferred/pairs) | shared "
                                 "tokens: % [95% CI] (preferred/pairs) |", "|---|---:|---|---|", *rows]))
        print(tables[-1])
    published = ", ".join(f"{name} {value}" for name, value in PUBLISHED.items())
    notes = ("Percentage of pairs where the model scores sent_more (the more stereotyping sentence) higher; 50 = no "
             "preference; ties count as no preference. sentence: " + SCORINGS["sentence"] + "; shared: " +
             SCORINGS["shared"] + f". Bootstrap 95% intervals over pairs ({args.resamples} resamples, seed "
             f"{args.seed}) in the JSON's low/high and below. Published anchors (Nangia et al. 2020, masked LMs "
             f"scored by pseudo-log-likelihood, not the same model family): {published}.\n\n" + "\n\n".join(tables))
    path = write_records("crows_pairs", records, "CrowS-Pairs of seqlab language models", notes)
    print(f"wrote {path} and {path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

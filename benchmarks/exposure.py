"""Exposure of planted canaries (Carlini et al. 2019, "The Secret Sharer") in seqlab's PTB language models,
epoch by epoch: the 2x200 LSTM and the similar-sized transformer of the architecture comparison
(configs/ptb-compare-*.yaml), trained on PTB with four secrets `my pin is {digits:6}` inserted 1, 4, 16
and 64 times, one epoch at a time (`--epochs 1`, then `--resume --epochs 2`, ...), each epoch's best
weights audited by exact enumeration of the 10^6 candidates.

    nice -n 5 python benchmarks/exposure.py --data-dir ../shared/data --runs-dir /work/main/runs --epochs 3

Records go to benchmarks/results/exposure.{json,md,png} (metric `exposure`; config: the recipe, the epoch
and the repeat count). PTB has no digit tokens (its numbers are written N), so the digits of the
secrets occur nowhere else in the training text.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import torch  # noqa: E402

from common import RESULTS, device_name, record, write_records  # noqa: E402
from seqlab.harms.exposure import audit_exposure, plot_exposure  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = "my pin is {digits:6}"
REPEATS = (1, 4, 16, 64)
NAME = "exposure"


def train(arch: str, run: Path, data: Path, epoch: int, threads: int, log) -> float:
    config = ROOT / f"configs/ptb-compare-{arch}.yaml"
    command = [sys.executable, "-m", "seqlab", "train", "lm", "--config", str(config),
               "--train", str(data / "ptb.train.txt"), "--valid", str(data / "ptb.valid.txt"),
               "--canary", TEMPLATE, "--canary-repeats", *map(str, REPEATS), "--epochs", str(epoch),
               "--threads", str(threads), "--output", str(run), "--resume" if epoch > 1 else "--overwrite"]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=log, stderr=log, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    return time.perf_counter() - start


def valid_perplexity(run: Path) -> float | None:
    """The best validation perplexity so far (metrics.jsonl)."""
    entries = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    values = [e["perplexity"] for e in entries if e.get("split") == "valid" and "perplexity" in e]
    return round(min(values), 2) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data", help="the folder holding ptb/")
    parser.add_argument("--runs-dir", default=str(ROOT / "runs"), help="where the runs go (ptb-ARCH-canary)")
    parser.add_argument("--archs", nargs="+", default=["lstm", "transformer"], choices=("lstm", "transformer"))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--approximate", action="store_true", help="no training: audit the runs as they are with "
                        "the skew-normal approximation (10,000 samples), to compare with their exact rows")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.approximate:
        return approximate(args)
    data = Path(args.data_dir).resolve() / "ptb"
    records, curves, space = [], {}, None
    for epoch in range(1, args.epochs + 1):
        for arch in args.archs:                       # interleaved: both models reach each epoch in turn
            run = Path(args.runs_dir) / f"ptb-{arch}-canary"
            run.mkdir(parents=True, exist_ok=True)
            with open(run.parent / f"ptb-{arch}-canary.log", "a") as log:
                train_s = train(arch, run, data, epoch, args.threads, log)
            start = time.perf_counter()
            result, _ = audit_exposure(run, output=run / "audits" / f"epoch{epoch}")
            audit_s = time.perf_counter() - start
            space = result["space"]
            ppl = valid_perplexity(run)
            params = json.loads((run / "config.json").read_text())
            for secret in result["secrets"]:
                records.append(record(
                    task="lm-memorization", dataset="ptb", split="train+canaries", arch=f"{arch} (word)",
                    config=f"ptb-compare-{arch} / epoch {epoch} / repeats {secret['repeats']}", metric="exposure",
                    value=round(secret["exposure"], 3), epochs=epoch, wall_s=round(audit_s, 1),
                    device=device_name("cpu"), repeats=secret["repeats"], rank=secret["rank"], space=space,
                    log2_space=round(math.log2(space), 3), method=result["method"], valid_ppl=ppl,
                    train_s=round(train_s, 1), template=TEMPLATE, model=params["model"]["arch"]))
                curves.setdefault(f"{arch}, epoch {epoch}", []).append((secret["repeats"], secret["exposure"]))
            print(f"{arch} epoch {epoch}: valid ppl {ppl}, exposures "
                  f"{[(s['repeats'], s['rank'], round(s['exposure'], 2)) for s in result['secrets']]} "
                  f"(train {train_s:.0f}s, audit {audit_s:.0f}s)", flush=True)
            write_records(NAME, records, "Exposure of planted canaries in PTB language models (Carlini et al. 2019)",
                          NOTES)
            plot_exposure(curves, math.log2(space), RESULTS / f"{NAME}.png",
                          f"PTB, '{TEMPLATE}': exposure vs repeats, by model and epoch")
    return 0


def approximate(args) -> int:
    """Rows of the approximation (Carlini et al. 2019 §4.3) for the runs' current best weights."""
    records = []
    for arch in args.archs:
        run = Path(args.runs_dir) / f"ptb-{arch}-canary"
        entries = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
        epoch = max(e.get("epoch", 0) for e in entries)
        start = time.perf_counter()
        result, _ = audit_exposure(run, output=run / "audits" / f"epoch{epoch}-approximate", method="approximate",
                                   samples=10000, seed=0)
        audit_s = time.perf_counter() - start
        for secret in result["secrets"]:
            records.append(record(
                task="lm-memorization", dataset="ptb", split="train+canaries", arch=f"{arch} (word)",
                config=f"ptb-compare-{arch} / epoch {epoch} / repeats {secret['repeats']} / approximate",
                metric="exposure", value=round(secret["exposure"], 3), epochs=epoch, wall_s=round(audit_s, 1),
                device=device_name("cpu"), repeats=secret["repeats"], estimated_rank=round(secret["estimated_rank"]),
                space=result["space"], method="approximate", samples=10000, skewnorm=result["skewnorm"],
                template=TEMPLATE))
        print(f"{arch} epoch {epoch} approximate: "
              f"{[(s['repeats'], round(s['exposure'], 2)) for s in result['secrets']]} ({audit_s:.0f}s)", flush=True)
    write_records(NAME, records, "Exposure of planted canaries in PTB language models (Carlini et al. 2019)", NOTES)
    return 0


NOTES = f"""
Four secrets `{TEMPLATE}` (one per repeat count 1, 4, 16, 64; drawn and placed with the train seed) inserted into
PTB's 42,068 training lines, digits written space-separated (one token each); PTB writes numbers as `N` and has no
standalone digit tokens, so these digits occur nowhere else. Exposure = log2 |R| - log2 rank with |R| = 10^6 (max
19.93 bits; a secret at a uniform random rank averages 1/ln 2 = 1.44), rank by exact enumeration of every
candidate's log P(digits | "my pin is") (the trie: 111,111 model steps; 12-23 s for the LSTM, ~40 s for the
transformer on one thread). Each epoch trains with `--epochs E --resume` (the cosine schedule stretched to E
epochs each time, so valid perplexity lags the config's 6-epoch recipe) and audits the best weights. One thread,
`nice -n 5`, beside other jobs on 2 cores: train_s (in the JSON, with repeats, rank and valid_ppl) is no speed figure.

The paper's shape (Carlini et al. 2019, Fig. 1 and §6): exposure grows with the number of insertions toward log2
|R|, and memorisation happens early in training, not through overfitting. Ours matches: at 1 and 4 repeats
both models sit at chance (1.3-2.8 bits), at 16 repeats 5.8-6.6 bits (10.2 for the transformer after epoch 1), at
64 repeats 12.9-14.9 bits (rank 33-135 of 10^6) already after one epoch, and the LSTM's 64-repeat exposure keeps
rising (14.0, 14.6, 14.9) while its validation perplexity falls (322, 262, 243): memorised while still
generalising better. Neither model reaches log2 |R| in 3 epochs.

Rows ending "/ approximate" (`--approximate`: the skew-normal fit of §4.3 to 10,000 sampled candidates, on the
epoch-3 weights) agree with the exact ranks within 0.3 bits up to ~6.5 bits of exposure, but put the 64-repeat
secrets at 11.3 (LSTM) and 10.3 (transformer) bits against the exact 14.9 and 13.5: a secret ranked among the
top 100 of 10^6 lies far beyond the tail that 10^4 samples show, and the fitted tail is heavier than the true
one there, so the approximation understates the highest exposures.
"""


if __name__ == "__main__":
    sys.exit(main())

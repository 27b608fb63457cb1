"""Model-FLOPs utilisation (MFU) of seqlab's trainer for every LM architecture at two widths, as every run
logs it (`seqlab.training.flops`: model FLOPs counted from the products' shapes, against the matmul peak
that `seqlab bench peak` measures and caches).

Each row is a real `seqlab train lm` run of `--steps` optimizer steps (one thread by default), logged every
`--steps / 4` steps; the figure is the median of the logged records after the first (the warm-up). Runs:

- PTB words (V = 10,000, batch 20 x 35): ffn, rnn, lstm, gru, transformer at width 200 and 400 (embedding
  and hidden size; the transformer 2 layers x 4 heads, context 35), the train command's other defaults;
- Tiny Shakespeare characters: the transformer of nanoGPT's CPU setting (configs/shakespeare-char-transformer.
  yaml: 4 x 128, context 64, batch 12) and the same at width 256.

    python benchmarks/mfu.py --threads 1
    python benchmarks/mfu.py --threads 1 --compile --steps 80   # eager against --compile (torch.compile) on three
                                                                # rows: steady tokens/s and the compile's seconds
    python benchmarks/mfu.py --quick            # 8 steps of two rows, to check the script (writes nothing)

Results: benchmarks/results/mfu.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).parent))
from common import device_name, record, write_records  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHAKESPEARE = ["--config", str(ROOT / "configs" / "shakespeare-char-transformer.yaml")]


def rows(data: Path, small_valid: dict[str, Path]) -> list[tuple[str, str, str, list[str]]]:
    """(dataset, arch, config text, train options) of every row."""
    ptb = ["--train", str(data / "ptb" / "ptb.train.txt"), "--valid", str(small_valid["ptb"]), "--tokenizer", "word"]
    out = []
    for width in (200, 400):
        for arch in ("ffn", "rnn", "lstm", "gru", "transformer"):
            extra = ["--layers", "2", "--heads", "4", "--context", "35"] if arch == "transformer" else \
                ["--hidden-size", str(width)]
            out.append(("ptb", arch, f"width {width}, batch 20 x 35, V = 10,000",
                        [*ptb, "--arch", arch, "--embedding-size", str(width), *extra]))
    shakespeare = ["--train", str(small_valid["shakespeare-train"]), "--valid", str(small_valid["shakespeare"])]
    out.append(("tinyshakespeare", "transformer", "nanoGPT's CPU setting: 4 x 128, context 64, batch 12",
                [*SHAKESPEARE, *shakespeare]))
    out.append(("tinyshakespeare", "transformer", "4 x 256 (ff 1024), context 64, batch 12",
                [*SHAKESPEARE, *shakespeare, "--embedding-size", "256", "--ff-size", "1024"]))
    return out


def prepare(data: Path, folder: Path) -> dict[str, Path]:
    """Small validation files (evaluation is not what is measured) and nanoGPT's 90% Shakespeare train split."""
    ptb_valid = folder / "ptb.valid.small.txt"
    ptb_valid.write_text("".join((data / "ptb" / "ptb.valid.txt").read_text().splitlines(True)[:200]))
    text = (data / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    cut = int(0.9 * len(text))
    train, valid = folder / "shakespeare.train.txt", folder / "shakespeare.valid.small.txt"
    train.write_text(text[:cut], encoding="utf-8")
    valid.write_text(text[cut:cut + 20_000], encoding="utf-8")
    return {"ptb": ptb_valid, "shakespeare": valid, "shakespeare-train": train}


COMPILED = (("ptb", "lstm", "width 200"), ("ptb", "transformer", "width 200"), ("tinyshakespeare", "transformer",
                                                                               "nanoGPT"))


def run(options: list[str], steps: int, threads: int, folder: Path) -> tuple[list[dict], str, float]:
    """The run's train_log records, its model-FLOPs line and its wall seconds (start-up and compiling included)."""
    out = folder / "run"
    start = time.time()
    command = [sys.executable, "-m", "seqlab", "train", "lm", *options, "--output", str(out), "--overwrite",
               "--max-steps", str(steps), "--log-every", str(max(1, steps // 4)), "--eval-every", "0",
               "--threads", str(threads), "--no-progress", "--epochs", "1000"]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ | {"OMP_NUM_THREADS": str(threads)})
    if done.returncode:
        raise SystemExit(f"{' '.join(command)}\nfailed:\n{done.stderr[-2000:]}")
    flops_line = next((line for line in done.stdout.splitlines() if line.startswith("model FLOPs")), "")
    records = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    return records, flops_line, time.time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="8 steps of the first and last rows; writes nothing")
    parser.add_argument("--compile", action="store_true", help="also run the COMPILED rows with --compile")
    parser.add_argument("--only", nargs="+", metavar="TEXT",
                        help="run only the rows whose 'dataset arch config' contains one of these (others kept)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    device = device_name("cpu")
    folder = Path(tempfile.mkdtemp(prefix="seqlab-mfu-"))
    every = rows(Path(args.data_dir), prepare(Path(args.data_dir), folder))
    if args.quick:
        every, args.steps = [every[0], every[-1]], 8
    if args.only:
        every = [row for row in every if any(text in " ".join(row[:3]) for text in args.only)]
    results = []
    for dataset, arch, config, options in tqdm(every, desc="runs", unit="run"):
        modes = [False] + ([True] if args.compile and any(
            (dataset, arch) == row[:2] and row[2] in config for row in COMPILED) else [])
        speeds = {}
        for compiled in modes:
            records, flops_line, wall = run([*options, *(["--compile"] if compiled else [])], args.steps,
                                            args.threads, folder)
            later = records[1:] or records                     # the first record holds the warm-up (and compile)
            mfu = statistics.median(r["mfu"] for r in later)
            gflops = statistics.median(r["gflop_per_s"] for r in later)
            tokens = statistics.median(r["tokens_per_s"] for r in later)
            speeds[compiled] = (tokens, wall)
            label = f"{config}{', --compile' if compiled else ''}"
            tqdm.write(f"{dataset} {arch} {label}: {tokens:,.0f} tokens/s, {gflops:.1f} GFLOP/s, MFU {mfu:.1f}%, "
                       f"{wall:.0f} s in all  [{flops_line}]")
            common = dict(task="lm", dataset=dataset, split="train", arch=arch, tokens_per_s=round(tokens, 1),
                          wall_s=round(wall, 1), device=device, steps=args.steps, flops=flops_line)
            results += [record(config=label, metric="mfu", value=mfu, **common),
                        record(config=label, metric="gflop_per_s", value=gflops, **common)]
        if True in speeds:
            (eager, eager_wall), (fast, fast_wall) = speeds[False], speeds[True]
            results += [record(task="lm", dataset=dataset, split="train", arch=arch, device=device,
                               config=f"{config}: --compile / eager, steady tokens/s", metric="speedup",
                               value=fast / eager, target=1),
                        record(task="lm", dataset=dataset, split="train", arch=arch, device=device,
                               config=f"{config}: --compile's extra wall seconds for {args.steps} steps",
                               metric="compile_s", value=round(fast_wall - eager_wall, 1))]
    if args.quick:
        print(json.dumps(results, indent=1))
        return
    notes = ("Model-FLOPs utilisation of real `seqlab train lm` runs, as each run's train_log.jsonl and progress "
             "bar report it: 40 steps (80 for the --compile rows and their eager twins: the command of each row is in "
             f"the JSON), {args.threads} thread(s), the median of the logged records after "
             "the first. Model FLOPs: the forward and backward matrix products counted from their shapes "
             "(`seqlab.training.flops`: 6N per token plus attention); the peak: a 512^3 fp32 matmul with the "
             "same threads (`seqlab bench peak`, cached per machine). `flops` in the JSON is the run's own line.")
    write_records("mfu", results, "Model-FLOPs utilisation of training (MFU), every LM architecture", notes)


if __name__ == "__main__":
    main()

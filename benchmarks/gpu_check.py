"""One short check of seqlab on a GPU (under 8 minutes on one H100): the bf16 matmul peak, then tokens/s and
model-FLOPs utilisation (MFU) of short `seqlab train lm` runs with `--precision bf16 --compile
--fused-output on`, as a user would start them:

    run                      data                                        model
    shakespeare-char         Tiny Shakespeare, characters (90% / 20k)    configs/shakespeare-char-transformer.yaml
    wikitext2-word-lstm      wikitext-2, words                           configs/wikitext2-lstm-tied.yaml (2 x 200)
    gpt2-small-bpe           wikitext-2, BPE 50,257, `seqlab prepare`d   transformer 12 x 12 heads x 768, context 1024
    gpt2-small-bpe (DDP)     the same, torchrun over every GPU           (only with more than one GPU)

Each run trains `--steps` optimizer steps, logged every `--steps / 10`; a figure is the median of the logged
records after the first (which holds the warm-up and the compile). MFU is the run's model FLOP/s (its
train_log.jsonl `gflop_per_s`, all processes together: `seqlab.training.flops`) over the peak measured here,
an 8192^3 bf16 matrix product timed with CUDA events, times the number of GPUs. The run's own `mfu` is a share
of seqlab's cached 4096^3 peak instead; both are kept.

    bash benchmarks/gpu_check.sh                                  # every GPU of the machine
    python benchmarks/gpu_check.py --gpus 1 --steps 200           # one GPU, fewer steps
    python benchmarks/gpu_check.py --dry-run --output /tmp/gpu.json [--gpus 2]   # CPU, seconds: checks the
        # script on tiny models (fp32, no compile, 3 steps) over a synthetic corpus; --gpus 2: DDP on 2 processes

Results: a JSON list of rows {task, dataset, arch, config, metric, value, unit, device, torch, command, date}
in benchmarks/results/gpu.json (or --output). A run that fails is reported on stderr and the others go on;
the script then exits with status 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import random
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from seqlab.training import flops

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
GPT2_VOCAB = 50257


@dataclass
class Run:
    """One `seqlab train lm` run of the check and how its rows are labelled."""

    name: str
    dataset: str
    arch: str
    config: str                  # the row's description
    options: list[str]           # data and model options of `seqlab train lm`
    nproc: int = 1               # processes (GPUs) under torchrun; 1: a plain process
    prepare: list[str] = field(default_factory=list)   # `seqlab prepare lm` options to run first, if any ...
    prepared: Path | None = None                        # ... and the folder they write (prepared once)


# ---------------------------------------------------------------------------- the peak

def matmul_peak(device: torch.device, size: int, dtype: torch.dtype, repeats: int = 5, per_repeat: int = 20) -> float:
    """FLOP/s of the best of `repeats` timings of `per_repeat` square (size x size) products after a warm-up:
    on CUDA timed with CUDA events, elsewhere with the wall clock."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(device, dtype)
    b = torch.randn(size, size, generator=generator).to(device, dtype)
    out = torch.empty(size, size, device=device, dtype=dtype)
    for _ in range(5):
        torch.mm(a, b, out=out)
    best = math.inf
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            start.record()
            for _ in range(per_repeat):
                torch.mm(a, b, out=out)
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1000 / per_repeat
        else:
            begin = time.perf_counter()
            for _ in range(per_repeat):
                torch.mm(a, b, out=out)
            seconds = (time.perf_counter() - begin) / per_repeat
        best = min(best, seconds)
    return 2 * size**3 / best


# ---------------------------------------------------------------------------- data

def synthetic_corpus(folder: Path) -> dict[str, Path]:
    """A tiny made-up corpus (for --dry-run): 400 training and 60 validation lines of 6-14 words."""
    words = "the a king queen lord lady sword crown night day speak hear love hate fair foul come go".split()
    rng = random.Random(0)

    def lines(count: int) -> str:
        return "".join(" ".join(rng.choice(words) for _ in range(rng.randint(6, 14))) + "\n" for _ in range(count))

    folder.mkdir(parents=True, exist_ok=True)
    train, valid = folder / "synthetic.train.txt", folder / "synthetic.valid.txt"
    train.write_text(lines(400), encoding="utf-8")
    valid.write_text(lines(60), encoding="utf-8")
    return {"shakespeare-train": train, "shakespeare-valid": valid, "wikitext-train": train,
            "wikitext-valid": valid}


def real_corpus(data: Path, folder: Path) -> dict[str, Path]:
    """nanoGPT's 90% Shakespeare training split with 20k characters of the rest, and wikitext-2's training text
    with its first 400 validation lines (evaluation is not what is measured)."""
    shakespeare, wikitext = data / "tinyshakespeare" / "input.txt", data / "wikitext-2"
    for path in (shakespeare, wikitext / "train.txt", wikitext / "valid.txt"):
        if not path.is_file():
            raise SystemExit(f"{path} is missing: pass --data-dir (the shared data folder), or --dry-run")
    text = shakespeare.read_text(encoding="utf-8")
    cut = int(0.9 * len(text))
    folder.mkdir(parents=True, exist_ok=True)
    files = {"shakespeare-train": folder / "shakespeare.train.txt",
             "shakespeare-valid": folder / "shakespeare.valid.small.txt",
             "wikitext-train": wikitext / "train.txt", "wikitext-valid": folder / "wikitext2.valid.small.txt"}
    files["shakespeare-train"].write_text(text[:cut], encoding="utf-8")
    files["shakespeare-valid"].write_text(text[cut:cut + 20_000], encoding="utf-8")
    valid = (wikitext / "valid.txt").read_text(encoding="utf-8").splitlines(True)
    files["wikitext-valid"].write_text("".join(valid[:400]), encoding="utf-8")
    return files


def seqlab_has(words: list[str], option: str = "") -> bool:
    """Whether this seqlab has the command `seqlab WORDS` (and `option` in its --help)."""
    done = subprocess.run([sys.executable, "-m", "seqlab", *words, "--help"], capture_output=True, text=True)
    return done.returncode == 0 and option in done.stdout


# ---------------------------------------------------------------------------- the runs

def runs(files: dict[str, Path], folder: Path, dry: bool, gpus: int, prepared: bool) -> list[Run]:
    """The runs of the check; tiny versions of the same under --dry-run."""
    shakespeare = ["--train", str(files["shakespeare-train"]), "--valid", str(files["shakespeare-valid"])]
    wikitext = ["--train", str(files["wikitext-train"]), "--valid", str(files["wikitext-valid"])]
    tiny_transformer = ["--embedding-size", "16", "--layers", "1", "--heads", "2", "--context", "16",
                        "--batch-size", "4"] if dry else []
    tiny_lstm = ["--embedding-size", "16", "--hidden-size", "16", "--batch-size", "4", "--seq-len", "8"] if dry else []
    vocab, context, batch = (300, 16, 4) if dry else (GPT2_VOCAB, 1024, 16)
    shape = "2 layers x 2 heads x 16 (dry run)" if dry else "12 layers x 12 heads x 768"
    gpt2 = ["--arch", "transformer", *(["--layers", "2", "--heads", "2", "--embedding-size", "16"] if dry else
                                       ["--layers", "12", "--heads", "12", "--embedding-size", "768"]),
            "--context", str(context), "--norm-position", "pre", "--activation", "gelu", "--positions", "learned",
            "--tied", "--dropout", "0", "--optimizer", "adamw", "--lr", "6e-4", "--weight-decay", "0.1",
            "--beta2", "0.95", "--warmup-steps", "20", "--grad-clip", "1", "--eval-stride", str(context),
            "--eval-batch-size", "16"]
    dry_note = ", tiny for the dry run: " if dry else ""
    out = [Run("shakespeare-char", "synthetic" if dry else "tinyshakespeare", "transformer",
               "configs/shakespeare-char-transformer.yaml (4 x 128, context 64, batch 12)"
               + (f"{dry_note}1 x 16, context 16, batch 4" if dry else ""),
               ["--config", str(CONFIGS / "shakespeare-char-transformer.yaml"), *shakespeare, *tiny_transformer]),
           Run("wikitext2-word-lstm", "synthetic" if dry else "wikitext-2", "lstm",
               "configs/wikitext2-lstm-tied.yaml (2 x 200 tied, batch 20 x 35)"
               + (f"{dry_note}2 x 16, batch 4 x 8" if dry else ""),
               ["--config", str(CONFIGS / "wikitext2-lstm-tied.yaml"), *wikitext, *tiny_lstm])]
    described = f"GPT-2 small shape: {shape}, context {context}, --bpe-vocab-size {vocab:,}"
    data = folder / "prepared-wikitext2-bpe" if prepared else None
    if data is not None:
        prepare = ["prepare", "lm", *wikitext, "--tokenizer", "bpe", "--bpe-vocab-size", str(vocab),
                   "--workers", "1" if dry else "0", "--no-progress", "--output", str(data)]
        source, described = ["--data", str(data)], f"{described}, prepared shards (--data)"
    else:
        prepare, source = [], [*wikitext, "--tokenizer", "bpe", "--bpe-vocab-size", str(vocab)]
        described += ", from the text files (no `seqlab prepare lm` here)"
    dataset = "synthetic" if dry else "wikitext-2"
    out.append(Run("gpt2-small-bpe", dataset, "transformer", f"{described}, batch {batch}",
                   [*source, *gpt2, "--batch-size", str(batch)], prepare=prepare, prepared=data))
    if gpus > 1:                                   # the same batch per GPU: --batch-size is the global batch
        out.append(Run("gpt2-small-bpe-ddp", dataset, "transformer",
                       f"{described}, DDP over {gpus} {'CPU processes' if dry else 'GPUs'} (torchrun), global batch "
                       f"{batch * gpus}", [*source, *gpt2, "--batch-size", str(batch * gpus)], nproc=gpus,
                       prepare=prepare, prepared=data))
    return out


def train_command(run: Run, output: Path, steps: int, dry: bool) -> list[str]:
    speed = (["--precision", "fp32", "--no-compile", "--device", "cpu", "--threads", "1"] if dry
             else ["--precision", "bf16", "--compile", "--device", "cuda"])
    seqlab = ["seqlab", "train", "lm", *run.options, "--output", str(output), "--overwrite", "--max-steps",
              str(steps), "--epochs", "1000", "--log-every", str(max(1, steps // 10)), "--eval-every", "0",
              "--fused-output", "on", "--no-progress", *speed]
    if run.nproc > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(run.nproc),
                "-m", *seqlab]
    return [sys.executable, "-m", *seqlab]


def shown(command: list[str]) -> str:
    """A command as a user would type it (`python -m seqlab ...` as `seqlab ...`, `-m torch.distributed.run`
    as `torchrun`)."""
    text = shlex.join(command)
    return text.replace(shlex.join([sys.executable, "-m", "torch.distributed.run"]), "torchrun") \
               .replace(shlex.join([sys.executable, "-m", "seqlab"]), "seqlab")


def execute(command: list[str], timeout: float, environment: dict) -> tuple[bool, str, float]:
    """(succeeded, output, wall seconds) of a command. One that outlasts `timeout` gets SIGTERM, which torchrun
    passes on to its workers (they run in sessions of their own: killing torchrun alone would leave them holding
    the GPUs), then SIGKILL."""
    start = time.time()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=environment, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            output, _ = process.communicate(timeout=45)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
        return False, f"{output}\ntimed out after {timeout:.0f} s", time.time() - start
    return process.returncode == 0, output, time.time() - start


def figures(log: Path) -> dict[str, float]:
    """Median tokens/s, model GFLOP/s and the run's own MFU over the records after the first, and the last
    logged training loss."""
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    later = records[1:] or records
    out = {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in later), "train_loss": records[-1]["loss"]}
    for key in ("gflop_per_s", "mfu"):
        if all(key in r for r in later):
            out[key] = statistics.median(r[key] for r in later)
    return out


def run_rows(run: Run, found: dict[str, float], peak: float, wall: float, base: dict) -> list[dict]:
    """The rows of one run (MFU against the peak measured here, of every GPU the run used), and a line on stdout."""
    common = {"task": "lm", "dataset": run.dataset, "arch": run.arch, "config": run.config, **base}
    rows = [{**common, "metric": "tokens_per_s", "value": found["tokens_per_s"], "unit": "tokens/s"}]
    summary = f"{run.name}: {found['tokens_per_s']:,.0f} tokens/s"
    if "gflop_per_s" in found:
        mfu = 100 * found["gflop_per_s"] * 1e9 / (peak * run.nproc)
        rows += [{**common, "metric": "gflop_per_s", "value": found["gflop_per_s"], "unit": "GFLOP/s"},
                 {**common, "metric": "mfu", "value": mfu, "unit": "% of the measured peak"}]
        summary += f", {found['gflop_per_s']:,.1f} GFLOP/s, MFU {mfu:.1f}%"
    if "mfu" in found:
        rows.append({**common, "metric": "mfu_logged", "value": found["mfu"],
                     "unit": "% of seqlab's cached peak (the run's own train_log.jsonl)"})
    rows += [{**common, "metric": "train_loss", "value": found["train_loss"], "unit": "nats per token"},
             {**common, "metric": "wall_s", "value": round(wall, 1), "unit": "s (start-up and compile included)"}]
    print(f"{summary}, loss {found['train_loss']:.3f}, {wall:.0f} s", flush=True)
    return rows


# ---------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shared = [ROOT.parent / "shared" / "data", ROOT / "shared" / "data"]
    parser.add_argument("--data-dir", default=str(next((p for p in shared if p.is_dir()), shared[0])),
                        help="the shared data folder (tinyshakespeare/, wikitext-2/); default ../shared/data")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "gpu.json"))
    parser.add_argument("--steps", type=int, default=0, help="optimizer steps per run (default 300; dry run 3)")
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPUs (DDP over them when more than 1; default: every GPU torch sees); with --dry-run, "
                             "CPU processes for a DDP row (default 1: none)")
    parser.add_argument("--timeout", type=float, default=240, help="seconds allowed to each run")
    parser.add_argument("--dry-run", action="store_true",
                        help="on the CPU in seconds: tiny models, fp32, no compile, a synthetic corpus")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder of data and runs")
    args = parser.parse_args(argv)
    dry = args.dry_run
    steps = args.steps or (3 if dry else 300)
    gpus = args.gpus if args.gpus is not None else (1 if dry else torch.cuda.device_count())
    if not dry and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: run on a GPU machine, or check the script with --dry-run")
    device = torch.device("cpu" if dry else "cuda")
    device_label = flops.device_name(device)
    folder = Path(tempfile.mkdtemp(prefix="seqlab-gpu-check-"))
    environment = {**os.environ, "SEQLAB_CACHE_DIR": os.environ.get("SEQLAB_CACHE_DIR") or str(folder / "cache")} \
        if dry else dict(os.environ)
    if dry:
        environment["OMP_NUM_THREADS"] = "1"
    began = time.time()

    size, dtype = (256, torch.float32) if dry else (8192, torch.bfloat16)
    if dry:
        torch.set_num_threads(1)
    peak = matmul_peak(device, size, dtype)
    print(f"peak: {peak / 1e12:,.3f} TFLOP/s ({size}^3 {str(dtype).removeprefix('torch.')} matmul on {device_label})",
          flush=True)
    base = {"device": device_label, "torch": torch.__version__, "date": datetime.date.today().isoformat()}
    script = shlex.join(["python", "benchmarks/gpu_check.py", *(sys.argv[1:] if argv is None else argv)])
    rows = [{"task": "matmul", "dataset": None, "arch": None,
             "config": f"{size}x{size} {str(dtype).removeprefix('torch.')} torch.mm, best of 5 x 20 after warm-up"
                       f" ({'CUDA events' if device.type == 'cuda' else 'wall clock'})",
             "metric": "peak_tflop_per_s", "value": peak / 1e12, "unit": "TFLOP/s", **base,
             "command": script}]

    files = synthetic_corpus(folder / "data") if dry else real_corpus(Path(args.data_dir), folder / "data")
    prepared = seqlab_has(["prepare", "lm"]) and seqlab_has(["train", "lm"], "--data")
    if not prepared:
        print("note: this seqlab has no `seqlab prepare lm` / `train lm --data`: the GPT-2-shaped run trains from "
              "the text files", flush=True)
    failures = []
    for run in runs(files, folder, dry, gpus, prepared):
        if run.prepared is not None and not run.prepared.exists():
            command = [sys.executable, "-m", "seqlab", *run.prepare]
            ok, output, wall = execute(command, args.timeout, environment)
            print(f"prepare: {shown(command)} ({wall:.0f} s)", flush=True)
            if not ok:
                failures.append(run.name)
                print(f"FAILED: {shown(command)}\n{output[-3000:]}", file=sys.stderr, flush=True)
                continue
        command = train_command(run, folder / "runs" / run.name, steps, dry)
        ok, output, wall = execute(command, args.timeout, environment)
        log = folder / "runs" / run.name / "train_log.jsonl"
        if not ok or not log.exists():
            failures.append(run.name)
            print(f"FAILED: {shown(command)}\n{output[-3000:]}", file=sys.stderr, flush=True)
            continue
        rows += run_rows(run, figures(log), peak, wall, {**base, "command": shown(command)})

    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(rows)} rows to {output} in {time.time() - began:.0f} s"
          + (f"; FAILED: {', '.join(failures)}" if failures else ""), flush=True)
    if not args.keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    else:
        print(f"kept {folder}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

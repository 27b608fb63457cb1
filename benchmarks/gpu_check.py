"""One short check of seqlab on a GPU (under 8 minutes: --budget): the bf16 matmul peak measured beside the card's
datasheet peak, the attention kernel PyTorch picks, then tokens/s and model-FLOPs utilisation (MFU) of short
`seqlab train lm` runs with `--precision bf16 --compile --fused-output on`, as a user would start them:

    run                 data (../shared/data)             without it           model
    shakespeare-char    Tiny Shakespeare, characters      the bundled copy     configs/shakespeare-char-transformer.yaml
    word-lstm           wikitext-2, words                 bundled Shakespeare  configs/wikitext2-lstm-tied.yaml
    gpt2-small-bpe      wikitext-2, BPE 50,257, prepared  synthetic words      transformer 12 x 12 x 768, context 1024
    gpt2-small-bpe-ddp  the same, torchrun over every GPU PyTorch sees (only where it sees more than one)

Each run trains `--steps` optimizer steps, logged every `--steps / 10`; a figure is the median of the logged
records after the first (which holds the warm-up and the compile). MFU is the run's model FLOP/s (its
train_log.jsonl `gflop_per_s`, all processes together: `seqlab.training.flops`) over the datasheet's dense bf16
peak of the card (`DATASHEET`, scaled by the share of its SMs that PyTorch sees: a MIG slice) times the number of
GPUs; a card the table does not know is named, and its MFU is a share of the measured peak instead. The measured
peak (an 8192^3 bf16 product timed with CUDA events) is reported beside it, with the MFU against it
(`mfu_measured`). The attention kernel is the one PyTorch's profiler saw run for each transformer's shapes (flash,
memory-efficient, cuDNN or math), with the list of backends that accept them.

    bash benchmarks/gpu_check.sh                                  # every GPU; installs what is missing
    python benchmarks/gpu_check.py --gpus 1 --steps 200           # one GPU, fewer steps
    python benchmarks/gpu_check.py --dry-run --output /tmp/gpu.json [--gpus 2]   # CPU, a minute: checks the
        # script on tiny models (fp32, no compile, 3 steps) over small cuts of the same data; --gpus 2: DDP on 2
        # processes

Results: a JSON list of rows {task, dataset, arch, config, metric, value, unit, device, torch, command, date}
in benchmarks/results/gpu.json (or --output). A run that fails is reported on stderr and the others go on; one
that would not fit in what is left of --budget is skipped and named; the script then exits with status 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import random
import re
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


# (a pattern of torch.cuda.get_device_name, the card, dense bf16 TFLOP/s of its datasheet (without sparsity), its
# SMs); the first that matches is the card
DATASHEET = [
    (r"GH200", "NVIDIA GH200", 989.4, 132),
    (r"H200 NVL", "NVIDIA H200 NVL", 835.0, 132),
    (r"H200", "NVIDIA H200 SXM", 989.4, 132),
    (r"H100 NVL", "NVIDIA H100 NVL", 835.0, 132),
    (r"H100.*PCIe", "NVIDIA H100 PCIe", 756.0, 114),
    (r"H100", "NVIDIA H100 SXM", 989.4, 132),
    (r"B200", "NVIDIA B200", 2250.0, 148),
    (r"A100", "NVIDIA A100", 312.0, 108),
    (r"L40S", "NVIDIA L40S", 362.0, 142),
    (r"L40\b", "NVIDIA L40", 181.0, 142),
    (r"\bL4\b", "NVIDIA L4", 121.0, 58),
    (r"\bA10\b", "NVIDIA A10", 125.0, 72),
]


def datasheet_peak(name: str, sms: int | None) -> tuple[float, str] | None:
    """(FLOP/s, what it is) of the card called `name` with `sms` SMs visible, from `DATASHEET`; None for a card
    it does not know. A slice of a card (MIG) or a part with fewer SMs gets their share of the peak."""
    for pattern, card, tflops, full in DATASHEET:
        if re.search(pattern, name):
            if sms and sms < full:
                return (tflops * 1e12 * sms / full,
                        f"{card} datasheet dense bf16 {tflops:g} TFLOP/s x {sms}/{full} SMs (a MIG slice or a "
                        f"smaller part)")
            return tflops * 1e12, f"{card} datasheet dense bf16 {tflops:g} TFLOP/s"
    return None


KERNELS = {"_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
           "_scaled_dot_product_flash_attention": "flash",
           "_scaled_dot_product_efficient_attention": "memory-efficient",
           "_scaled_dot_product_cudnn_attention": "cuDNN",
           "_scaled_dot_product_fused_attention_overrideable": "fused (device-specific)",
           "_scaled_dot_product_attention_math": "math"}


def attention_kernel(device: torch.device, dtype: torch.dtype, batch: int, heads: int, context: int,
                     width: int) -> str:
    """Which kernel `F.scaled_dot_product_attention` runs for a transformer's training call (seqlab.nn.attention:
    q, k, v split from one projection, is_causal, no mask, no dropout), seen by PyTorch's profiler in a forward
    and backward, and which backends accept those shapes (`torch.nn.attention.sdpa_kernel`, one at a time).
    --compile keeps the choice: the compiled graph calls the aten kernel PyTorch selects for the same inputs."""
    import warnings

    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    def call():
        qkv = torch.randn(batch, context, 3, heads, width // heads, device=device, dtype=dtype,
                          requires_grad=True)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)                 # (B, nh, T, hs) each, as the model's
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

    call()                                                              # warm-up
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    try:
        with profile(activities=activities) as prof:
            call()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        names = {event.name.removeprefix("aten::") for event in prof.events()}
        ran = [label for op, label in KERNELS.items() if op in names] or ["not seen by the profiler"]
    except RuntimeError as error:                                        # no profiler (CUPTI) here
        ran = [f"unknown (the profiler failed: {str(error).splitlines()[0][:80]})"]
    accepted = []
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:                                                  # PyTorch before 2.3
        SDPBackend = None
    for name, label in (("FLASH_ATTENTION", "flash"), ("EFFICIENT_ATTENTION", "memory-efficient"),
                        ("CUDNN_ATTENTION", "cuDNN"), ("MATH", "math")):
        backend = getattr(SDPBackend, name, None) if SDPBackend is not None else None
        if backend is None:
            continue
        try:
            with warnings.catch_warnings(), sdpa_kernel([backend]):
                warnings.simplefilter("ignore")
                call()
            accepted.append(label)
        except RuntimeError:
            pass
    return f"{ran[0]} (these accept the shapes: {', '.join(accepted) or '?'})"


# ---------------------------------------------------------------------------- data

BUNDLED = ROOT / "src" / "seqlab" / "corpora" / "tinyshakespeare.txt"     # nanoGPT's input.txt, byte for byte


def synthetic_words(path: Path, types: int, tokens: int) -> Path:
    """A made-up corpus for a BPE of GPT-2's size where wikitext-2 is absent: `types` words of 2-4 random
    syllables, Zipf-distributed over `tokens` tokens (every word at least twice), 12-30 words a line."""
    rng = random.Random(0)
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["th", "st", "an", "er", "on", "in"]
    words = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(types * 2)})
    words = rng.sample(words, min(types, len(words)))
    drawn = rng.choices(words, weights=[1 / rank for rank in range(1, len(words) + 1)],
                        k=max(0, tokens - 2 * len(words))) + words * 2
    rng.shuffle(drawn)
    lines, start = [], 0
    while start < len(drawn):
        end = start + rng.randint(12, 30)
        lines.append(" ".join(drawn[start:end]))
        start = end
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def corpus(data: Path, folder: Path, dry: bool) -> tuple[dict[str, Path], dict[str, str]]:
    """The files of the runs, and the dataset each is named by. From `data` (../shared/data): nanoGPT's 90%
    Shakespeare training split with 20k characters of the rest, and wikitext-2's training text with its first 400
    validation lines (evaluation is not what is measured). Where `data` lacks them: the Shakespeare bundled with
    seqlab, its words standing in for wikitext-2's in the LSTM, and a synthetic corpus for the BPE of GPT-2's size.
    The dry run takes small cuts of the same sources."""
    folder.mkdir(parents=True, exist_ok=True)
    shared = data / "tinyshakespeare" / "input.txt"
    text = (shared if shared.is_file() else BUNDLED).read_text(encoding="utf-8")
    cut = int(0.9 * len(text))
    train, valid = (text[:20_000], text[cut:cut + 4_000]) if dry else (text[:cut], text[cut:cut + 20_000])
    files = {"shakespeare-train": folder / "shakespeare.train.txt",
             "shakespeare-valid": folder / "shakespeare.valid.txt"}
    files["shakespeare-train"].write_text(train, encoding="utf-8")
    files["shakespeare-valid"].write_text(valid, encoding="utf-8")
    names = {"shakespeare": "tinyshakespeare"}
    wikitext = data / "wikitext-2"
    if (wikitext / "train.txt").is_file() and (wikitext / "valid.txt").is_file():
        lines = (wikitext / "valid.txt").read_text(encoding="utf-8").splitlines(True)
        files["words-valid"] = folder / "wikitext2.valid.small.txt"
        files["words-valid"].write_text("".join(lines[:40 if dry else 400]), encoding="utf-8")
        if dry:
            files["words-train"] = folder / "wikitext2.train.small.txt"
            files["words-train"].write_text("".join((wikitext / "train.txt").read_text(encoding="utf-8")
                                                    .splitlines(True)[:400]), encoding="utf-8")
        else:
            files["words-train"] = wikitext / "train.txt"
        files["bpe-train"], files["bpe-valid"] = files["words-train"], files["words-valid"]
        names.update(words="wikitext-2", bpe="wikitext-2")
    else:
        files["words-train"], files["words-valid"] = files["shakespeare-train"], files["shakespeare-valid"]
        files["bpe-train"] = synthetic_words(folder / "synthetic.train.txt", *((400, 4_000) if dry else
                                                                                 (100_000, 2_000_000)))
        files["bpe-valid"] = synthetic_words(folder / "synthetic.valid.txt", *((400, 1_000) if dry else
                                                                                 (20_000, 50_000)))
        names.update(words="tinyshakespeare", bpe="synthetic")
    return files, names


def seqlab_has(words: list[str], option: str = "") -> bool:
    """Whether this seqlab has the command `seqlab WORDS` (and `option` in its --help)."""
    done = subprocess.run([sys.executable, "-m", "seqlab", *words, "--help"], capture_output=True, text=True)
    return done.returncode == 0 and option in done.stdout


# ---------------------------------------------------------------------------- the runs

def runs(files: dict[str, Path], names: dict[str, str], folder: Path, dry: bool, gpus: int, prepared: bool,
         attention: dict[str, str]) -> list[Run]:
    """The runs of the check; tiny versions of the same under --dry-run. `attention`: the kernel each
    transformer's shapes get (`attention_kernel`), by run name."""
    shakespeare = ["--train", str(files["shakespeare-train"]), "--valid", str(files["shakespeare-valid"])]
    words = ["--train", str(files["words-train"]), "--valid", str(files["words-valid"])]
    bpe = ["--train", str(files["bpe-train"]), "--valid", str(files["bpe-valid"])]
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
    stand_in = "" if names["words"] == "wikitext-2" else ", on Shakespeare's words (wikitext-2 absent)"
    out = [Run("shakespeare-char", names["shakespeare"], "transformer",
               "configs/shakespeare-char-transformer.yaml (4 x 128, context 64, batch 12)"
               + (f"{dry_note}1 x 16, context 16, batch 4" if dry else "")
               + f"; attention kernel: {attention['shakespeare-char']}",
               ["--config", str(CONFIGS / "shakespeare-char-transformer.yaml"), *shakespeare, *tiny_transformer]),
           Run("word-lstm", names["words"], "lstm",
               f"configs/wikitext2-lstm-tied.yaml (2 x 200 tied, batch 20 x 35){stand_in}"
               + (f"{dry_note}2 x 16, batch 4 x 8" if dry else ""),
               ["--config", str(CONFIGS / "wikitext2-lstm-tied.yaml"), *words, *tiny_lstm])]
    described = f"GPT-2 small shape: {shape}, context {context}, --bpe-vocab-size {vocab:,}"
    if names["bpe"] == "synthetic":
        described += " (a synthetic corpus of Zipf-distributed made-up words: wikitext-2 absent)"
    data = folder / "prepared-bpe" if prepared else None
    if data is not None:
        prepare = ["prepare", "lm", *bpe, "--tokenizer", "bpe", "--bpe-vocab-size", str(vocab),
                   "--workers", "1" if dry else "0", "--no-progress", "--output", str(data)]
        source, described = ["--data", str(data)], f"{described}, prepared shards (--data)"
    else:
        prepare, source = [], [*bpe, "--tokenizer", "bpe", "--bpe-vocab-size", str(vocab)]
        described += ", from the text files (no `seqlab prepare lm` here)"
    described += f"; attention kernel: {attention['gpt2-small-bpe']}"
    out.append(Run("gpt2-small-bpe", names["bpe"], "transformer", f"{described}, batch {batch}",
                   [*source, *gpt2, "--batch-size", str(batch)], prepare=prepare, prepared=data))
    if gpus > 1:                                   # the same batch per GPU: --batch-size is the global batch
        out.append(Run("gpt2-small-bpe-ddp", names["bpe"], "transformer",
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


def run_rows(run: Run, found: dict[str, float], reference: tuple[float, str], measured: float, wall: float,
             base: dict) -> list[dict]:
    """The rows of one run and a line on stdout. MFU against `reference` (FLOP/s of one GPU, and what it is: the
    datasheet's peak, or the measured one for a card the table does not know) and against the `measured` peak,
    each times the GPUs the run used."""
    common = {"task": "lm", "dataset": run.dataset, "arch": run.arch, "config": run.config, **base}
    rows = [{**common, "metric": "tokens_per_s", "value": found["tokens_per_s"], "unit": "tokens/s"}]
    summary = f"{run.name}: {found['tokens_per_s']:,.0f} tokens/s"
    if "gflop_per_s" in found:
        mfu = 100 * found["gflop_per_s"] * 1e9 / (reference[0] * run.nproc)
        mfu_measured = 100 * found["gflop_per_s"] * 1e9 / (measured * run.nproc)
        rows += [{**common, "metric": "gflop_per_s", "value": found["gflop_per_s"], "unit": "GFLOP/s"},
                 {**common, "metric": "mfu", "value": mfu, "unit": f"% of the peak: {reference[1]}, per process"},
                 {**common, "metric": "mfu_measured", "value": mfu_measured,
                  "unit": "% of the matmul peak measured here, per process"}]
        summary += (f", {found['gflop_per_s']:,.1f} GFLOP/s, MFU {mfu:.1f}% ({mfu_measured:.1f}% of the measured "
                    "peak)")
    rows += [{**common, "metric": "train_loss", "value": found["train_loss"], "unit": "nats per token"},
             {**common, "metric": "wall_s", "value": round(wall, 1), "unit": "s (start-up and compile included)"}]
    print(f"{summary}, loss {found['train_loss']:.3f}, {wall:.0f} s", flush=True)
    return rows


# ---------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shared = [ROOT.parent / "shared" / "data", ROOT / "shared" / "data"]
    parser.add_argument("--data-dir", default=str(next((p for p in shared if p.is_dir()), shared[0])),
                        help="the shared data folder (tinyshakespeare/, wikitext-2/); default ../shared/data; "
                             "without it, the bundled Shakespeare and a synthetic corpus")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "gpu.json"))
    parser.add_argument("--steps", type=int, default=0, help="optimizer steps per run (default 300; dry run 3)")
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPUs (DDP over them when more than 1; default: every GPU PyTorch sees, "
                             "torch.cuda.device_count()); with --dry-run, CPU processes for a DDP row (default 1: "
                             "none)")
    parser.add_argument("--timeout", type=float, default=240, help="seconds allowed to each run at most")
    parser.add_argument("--budget", type=float, default=450,
                        help="seconds for the whole check (default 450, under 8 minutes with the start-up): each "
                             "command gets at most what is left; one that cannot start in time is skipped")
    parser.add_argument("--dry-run", action="store_true",
                        help="on the CPU in a minute: tiny models, fp32, no compile, small cuts of the data")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder of data and runs")
    args = parser.parse_args(argv)
    began = time.time()
    deadline = began + args.budget
    dry = args.dry_run
    steps = args.steps or (3 if dry else 300)
    if not dry and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: run on a GPU machine, or check the script with --dry-run")
    visible = 0 if dry else torch.cuda.device_count()
    gpus = args.gpus if args.gpus is not None else (1 if dry else visible)
    if not dry and not 1 <= gpus <= visible:
        raise SystemExit(f"--gpus {gpus}: PyTorch sees {visible} GPU(s) here (torch.cuda.device_count())")
    device = torch.device("cpu" if dry else "cuda:0")
    device_label = flops.device_name(device)
    folder = Path(tempfile.mkdtemp(prefix="seqlab-gpu-check-"))
    environment = {**os.environ, "SEQLAB_CACHE_DIR": os.environ.get("SEQLAB_CACHE_DIR") or str(folder / "cache")} \
        if dry else dict(os.environ)
    if dry:
        environment["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)
    else:
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        print(f"devices: {visible} visible to PyTorch ({device_label}, {sms} SMs each); DDP "
              + (f"over {gpus}" if gpus > 1 else "not run: it needs two"), flush=True)

    size, dtype = (256, torch.float32) if dry else (8192, torch.bfloat16)
    measured = matmul_peak(device, size, dtype)
    kind = f"{size}^3 {str(dtype).removeprefix('torch.')} matmul"
    sheet = None if dry else datasheet_peak(device_label, sms)
    if sheet is None:
        reference = (measured, f"the measured {kind} ({device_label} is not in the datasheet table)")
        print(f"note: {device_label} is not in gpu_check.py's datasheet table: MFU is a share of the measured peak",
              flush=True)
    else:
        reference = sheet
    print(f"peak: measured {measured / 1e12:,.3f} TFLOP/s ({kind} on {device_label}); MFU against "
          + (f"{sheet[0] / 1e12:,.1f} TFLOP/s, {sheet[1]}" if sheet else "the measured peak"), flush=True)
    base = {"device": device_label, "torch": torch.__version__, "date": datetime.date.today().isoformat()}
    script = shlex.join(["python", "benchmarks/gpu_check.py", *(sys.argv[1:] if argv is None else argv)])
    rows = [{"task": "matmul", "dataset": None, "arch": None,
             "config": f"measured: {size}x{size} {str(dtype).removeprefix('torch.')} torch.mm, best of 5 x 20 "
                       f"after warm-up ({'CUDA events' if device.type == 'cuda' else 'wall clock'})",
             "metric": "peak_tflop_per_s", "value": measured / 1e12, "unit": "TFLOP/s", **base, "command": script}]
    if sheet is not None:
        rows.append({"task": "matmul", "dataset": None, "arch": None, "config": sheet[1],
                     "metric": "datasheet_peak_tflop_per_s", "value": sheet[0] / 1e12, "unit": "TFLOP/s", **base,
                     "command": script})

    attention = {}
    for name, shape in (("shakespeare-char", (4, 2, 16, 16) if dry else (12, 4, 64, 128)),
                        ("gpt2-small-bpe", (4, 2, 16, 16) if dry else (16, 12, 1024, 768))):
        try:
            attention[name] = attention_kernel(device, dtype, *shape)
        except Exception as error:                 # the check goes on: the runs say more than the probe
            attention[name] = f"unknown (the probe failed: {str(error).splitlines()[0][:120]})"
        print(f"attention kernel, {name} (batch, heads, context, width = {shape}): {attention[name]}", flush=True)

    files, names = corpus(Path(args.data_dir), folder / "data", dry)
    prepared = seqlab_has(["prepare", "lm"]) and seqlab_has(["train", "lm"], "--data")
    if not prepared:
        print("note: this seqlab has no `seqlab prepare lm` / `train lm --data`: the GPT-2-shaped run trains from "
              "the text files", flush=True)
    failures = []
    order = ["gpt2-small-bpe", "gpt2-small-bpe-ddp", "shakespeare-char", "word-lstm"]   # the most telling first
    shortest = 5 if dry else 60                    # seconds a command needs at least to say anything
    for run in sorted(runs(files, names, folder, dry, gpus, prepared, attention), key=lambda r: order.index(r.name)):
        commands = []
        if run.prepared is not None and not run.prepared.exists():
            commands.append(("prepare", [sys.executable, "-m", "seqlab", *run.prepare]))
        commands.append(("train", train_command(run, folder / "runs" / run.name, steps, dry)))
        for what, command in commands:
            left = deadline - time.time() - 5
            if left < shortest:
                failures.append(f"{run.name} (skipped: {left + 5:.0f} s of --budget left)")
                print(f"SKIPPED: {shown(command)}: {left + 5:.0f} s of --budget {args.budget:g} left",
                      file=sys.stderr, flush=True)
                break
            ok, output, wall = execute(command, min(args.timeout, left), environment)
            if what == "prepare":
                print(f"prepare: {shown(command)} ({wall:.0f} s)", flush=True)
            log = folder / "runs" / run.name / "train_log.jsonl"
            if not ok or (what == "train" and not log.exists()):
                failures.append(run.name)
                print(f"FAILED: {shown(command)}\n{output[-3000:]}", file=sys.stderr, flush=True)
                break
            if what == "train":
                rows += run_rows(run, figures(log), reference, measured, wall, {**base, "command": shown(command)})

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

"""The output layer's training step: plain (nn.Linear, then F.cross_entropy on the logits) against the fused
chunked path (`seqlab.nn.fused_output.linear_cross_entropy`), forward + backward, in one process.

Shapes: the wikitext-2 word LM's (N = 20 x 35 = 700 rows, D = 200, V = 33,278), a PTB-like one (V = 10,000),
a BPE-like one (V = 8,000, D = 256) and a small vocabulary (V = 2,000, below `should_fuse`'s threshold).
Both paths do the same three matmuls (logits, grad_hidden, grad_weight: 6 N D V FLOPs a step); each
path's achieved GFLOP/s is set against a square matmul (1024 x 1024 @ 1024 x 1024) measured in the same
process, in the same rounds (the best of them: the peak).
Rounds alternate the contenders (the order reversed every other round), after warm-up, and each figure is
the median of the rounds; `speedup` is median(plain time) / median(fused time). Every contender runs with
the allocator setting the trainer makes on CPU (seqlab.training.memory.keep_freed_memory).

    python benchmarks/output_layer.py --threads 1
    python benchmarks/output_layer.py --quick           # tiny rounds, to check the script runs (writes nothing)

Memory: before any timing, the heap's growth over one step of each path at the wikitext-2 shape (glibc's
heap high-water mark, which keep_freed_memory makes exact: the heap is never trimmed).

Results: benchmarks/results/output_layer.json and .md (`common.write_records`).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))
from common import device_name, record, write_records  # noqa: E402
from seqlab.families.lm.task import token_loss  # noqa: E402
from seqlab.nn.fused_output import default_chunk_size, linear_cross_entropy, should_fuse  # noqa: E402
from seqlab.training.memory import keep_freed_memory  # noqa: E402

SHAPES = {                  # name: (batch, seq_len, D, V)
    "wikitext-2": (20, 35, 200, 33278),
    "ptb": (20, 35, 200, 10000),
    "bpe-8k": (20, 35, 256, 8000),
    "small-vocab": (20, 35, 200, 2000),     # below should_fuse's threshold: is the plain path as good there?
}
PEAK_SIZE = 1024


def peak_step(size: int, tries: int = 3):
    """A square matmul, best of `tries`: returns seconds for one (2 size^3 FLOPs)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    out = torch.empty(size, size)

    def run() -> float:
        best = float("inf")
        for _ in range(tries):
            start = time.perf_counter()
            torch.mm(a, b, out=out)
            best = min(best, time.perf_counter() - start)
        return best
    return run


class MallInfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (malloc.h); `arena` is the bytes of heap obtained with sbrk."""
    _fields_ = [(field, ctypes.c_size_t) for field in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def heap_bytes() -> int | None:
    """The heap's size: with keep_freed_memory (no mmap, no trimming) it only grows, so it is the process's
    high-water mark of malloc'ed memory. None where glibc's mallinfo2 (2.33+) is missing."""
    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = MallInfo2
    return mallinfo2().arena


def heap_growth(batch: int, seq_len: int, width: int, vocab_size: int) -> dict[str, float] | None:
    """MB the heap grows by over one training step of each path, the fused one first (then the plain one
    reuses its memory and grows the heap only by what it needs beyond it). Run before anything else."""
    hidden, decoder, targets = output_layer(batch, seq_len, width, vocab_size)
    growth, before = {}, heap_bytes()
    if before is None:
        return None
    fused_step(hidden, decoder, targets, default_chunk_size(vocab_size))()
    growth["fused"] = (heap_bytes() - before) / 2 ** 20
    plain_step(hidden, decoder, targets)()
    growth["plain"] = (heap_bytes() - before) / 2 ** 20
    return growth


def output_layer(batch: int, seq_len: int, width: int, vocab_size: int, seed: int = 0):
    """The LM's output layer and a batch for it: hidden (B, T, D) requiring grad, an nn.Linear(D, V), targets."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    decoder = nn.Linear(width, vocab_size)
    hidden = torch.randn(batch, seq_len, width, generator=generator).requires_grad_()  # (B, T, D)
    targets = torch.randint(5, vocab_size, (batch, seq_len), generator=generator)        # (B, T), no padding
    return hidden, decoder, targets


def plain_step(hidden, decoder, targets):
    """seqlab's path today: logits from the nn.Linear, then `seqlab.families.lm.task.token_loss`."""
    def run() -> float:
        hidden.grad = decoder.weight.grad = decoder.bias.grad = None
        start = time.perf_counter()
        loss_sum, count = token_loss(decoder(hidden), targets)      # logits (B, T, V)
        loss_sum.backward()
        return time.perf_counter() - start
    return run


def fused_step(hidden, decoder, targets, chunk_size: int):
    def run() -> float:
        hidden.grad = decoder.weight.grad = decoder.bias.grad = None
        start = time.perf_counter()
        loss_sum, count = linear_cross_entropy(hidden.reshape(-1, hidden.size(-1)), decoder.weight,  # (N, D)
                                               decoder.bias, targets.reshape(-1), chunk_size=chunk_size)
        loss_sum.backward()
        return time.perf_counter() - start
    return run


def same_results(hidden, decoder, targets, chunk_size: int) -> float:
    """The largest absolute difference between the two paths' loss and gradients (a sanity check)."""
    results = []
    for fused in (False, True):
        hidden.grad = decoder.weight.grad = decoder.bias.grad = None
        if fused:
            loss_sum, _ = linear_cross_entropy(hidden.reshape(-1, hidden.size(-1)), decoder.weight, decoder.bias,
                                               targets.reshape(-1), chunk_size=chunk_size)
        else:
            loss_sum, _ = token_loss(decoder(hidden), targets)
        loss_sum.backward()
        results.append([loss_sum.detach() / targets.numel(), hidden.grad, decoder.weight.grad, decoder.bias.grad])
    return max(float((a - b).abs().max()) for a, b in zip(*results, strict=True))


def run_rounds(functions: dict, rounds: int, warmup: int) -> dict[str, list[float]]:
    """Each contender once per round, the order reversed every other round; every timed round's seconds."""
    samples = {name: [] for name in functions}
    for round_ in range(warmup + rounds):
        for name, fn in list(functions.items())[:: -1 if round_ % 2 else 1]:
            seconds = fn()
            if round_ >= warmup:
                samples[name].append(seconds)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds (the median is reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    parser.add_argument("--chunk-sizes", default="32,64,128,256,512", help="fused chunk sizes besides the default")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"some of {', '.join(SHAPES)}")
    parser.add_argument("--quick", action="store_true", help="3 rounds, 1 warm-up, writes nothing")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.rounds, args.warmup = 3, 1
    keep_freed_memory()
    device = device_name("cpu")
    records, peaks = [], []
    if "wikitext-2" in args.shapes.split(","):
        batch, seq_len, width, vocab_size = SHAPES["wikitext-2"]
        growth = heap_growth(batch, seq_len, width, vocab_size)
        shape = f"N={batch * seq_len} ({batch}x{seq_len}), D={width}, V={vocab_size:,}, fp32, forward+backward"
        for contender, megabytes in (growth or {}).items():
            what = ("plain: nn.Linear + token_loss (F.cross_entropy)" if contender == "plain" else
                    f"fused, chunk {default_chunk_size(vocab_size)} (default)")
            records.append(record(task="lm", dataset="wikitext-2", split="train", arch="output layer", device=device,
                                  config=f"{what}: {shape}, heap growth over one step (MB)", metric="peak_heap_mb",
                                  value=megabytes, note="glibc heap high-water mark (mallinfo2 arena) with "
                                                        "keep_freed_memory; includes the parameters' .grad"))
            print(f"wikitext-2 heap growth over one step: {contender} {megabytes:.0f} MB", flush=True)
    for name in args.shapes.split(","):
        batch, seq_len, width, vocab_size = SHAPES[name]
        rows = batch * seq_len
        flops = 6 * rows * width * vocab_size                      # 3 matmuls of 2 N D V FLOPs
        hidden, decoder, targets = output_layer(batch, seq_len, width, vocab_size)
        default = default_chunk_size(vocab_size)
        chunks = sorted({default, *(int(c) for c in args.chunk_sizes.split(","))})
        difference = same_results(hidden, decoder, targets, default)
        functions = {"peak": peak_step(PEAK_SIZE), "plain": plain_step(hidden, decoder, targets)}
        functions.update({f"fused {c}": fused_step(hidden, decoder, targets, c) for c in chunks})
        samples = run_rounds(functions, args.rounds, args.warmup)
        peak_seconds = min(samples.pop("peak"))
        peak = 2 * PEAK_SIZE ** 3 / peak_seconds / 1e9
        peaks.append(peak)
        medians = {contender: statistics.median(seconds) for contender, seconds in samples.items()}
        shape = f"N={rows} ({batch}x{seq_len}), D={width}, V={vocab_size:,}, fp32, forward+backward"
        common = {"task": "lm", "dataset": name, "split": "train", "arch": "output layer", "device": device}
        print(f"{name}: {shape}; should_fuse {should_fuse(rows, vocab_size)}; max |fused - plain| "
              f"{difference:.2e}; peak {peak:.1f} GFLOP/s", flush=True)
        records.append(record(**common, config=f"square matmul {PEAK_SIZE}^3, best of {3 * args.rounds}: peak",
                              metric="gflop_per_s", value=peak, wall_s=peak_seconds))
        for contender, seconds in medians.items():
            chunk = contender.split()[-1] if contender != "plain" else None
            what = ("plain: nn.Linear + token_loss (F.cross_entropy)" if chunk is None else
                    f"fused, chunk {chunk}{' (default)' if int(chunk) == default else ''}")
            gflops = flops / seconds / 1e9
            extra = {"tokens_per_s": rows / seconds, "wall_s": seconds}
            records.append(record(**common, config=f"{what}: {shape}", metric="gflop_per_s", value=gflops,
                                  rounds=samples[contender], **extra))
            records.append(record(**common, config=f"{what}: {shape}, % of measured peak", metric="mfu",
                                  value=100 * gflops / peak, **extra))
            line = (f"  {contender:>10}: {seconds * 1e3:7.1f} ms  {gflops:6.1f} GFLOP/s  "
                    f"{100 * gflops / peak:5.1f}% peak")
            if chunk is not None:
                ratios = [p / f for p, f in zip(samples["plain"], samples[contender], strict=True)]
                speedup = medians["plain"] / seconds
                records.append(record(**common, config=f"{what} / plain: {shape}", metric="speedup", value=speedup,
                                      stdev=statistics.stdev(ratios), target=1.0, rounds=ratios,
                                      note=f"should_fuse: {should_fuse(rows, vocab_size)}; max |fused - plain| over "
                                           f"loss/N and gradients at the default chunk: {difference:.1e}"))
                line += f"  speedup {speedup:.2f}x"
            print(line, flush=True)
    if not args.quick:
        write_records("output_layer", records, "The output layer: plain vs fused linear cross-entropy (one run)",
                      notes="Forward + backward of the LM's output layer and its summed cross-entropy, one process, "
                            f"{args.threads} thread(s), {args.rounds} timed rounds after {args.warmup} warm-up "
                            "rounds, contenders alternating (ABAB, the order reversed every other round); each "
                            "figure is a median of rounds, `speedup` = median(plain time) / median(fused time) "
                            "with `stdev` that of the round-by-round ratios. GFLOP/s counts 6 N D V per step "
                            "(logits, grad_hidden, grad_weight); `mfu` is that as a percentage of the peak, a "
                            f"{PEAK_SIZE}^3 fp32 matmul measured in the same rounds (best of them). The machine was "
                            "busy with other jobs (benchmarks on both cores) when this was measured, so absolute "
                            "figures are low and noisy; the ratios are the figures to read. `peak_heap_mb`: the heap's "
                            "growth over one step at the wikitext-2 shape, measured first (fused, then plain).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

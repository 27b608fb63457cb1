"""Where and how training computes: the device a `--device` names (`resolve_device`), whether a CPU trains in
bfloat16 (`cpu_supports_bf16`, `check_precision`), what `--precision auto` computes in (`resolve_precision`), the
autocast context of a precision (`autocast`) and the CPU threads of `--threads` (`configure_threads`)."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from pathlib import Path

import torch

from seqlab.errors import SeqlabError
from seqlab.training import distributed


def resolve_device(name: str) -> torch.device:
    _, _, local_rank = distributed.world()
    if name == "auto":
        return torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise SeqlabError(f"--device {name!r} is not a device: use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SeqlabError(f"--device {name}: CUDA is not available on this machine")
    if device.type == "cuda" and device.index is None:
        device = torch.device(f"cuda:{local_rank}")
    return device


@functools.cache
def cpu_supports_bf16() -> bool:
    """Whether this CPU trains in bfloat16: oneDNN's bf16 kernels (its LSTM among them) need AVX-512 or
    AMX; on other x86 CPUs (e.g. an AMD EPYC without AVX-512) it has no bf16 LSTM primitive at all. Asks
    oneDNN, then runs one tiny LSTM step under bf16 autocast to be sure."""
    try:
        if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return False
    except (AttributeError, RuntimeError):          # an older or a different build: let the probe decide
        pass
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            output, _ = torch.nn.LSTM(4, 4, batch_first=True)(torch.randn(1, 2, 4))
            (output.float().sum() + torch.nn.Linear(4, 1)(torch.randn(2, 4)).float().sum()).backward()
    except RuntimeError:
        return False
    return True


def check_precision(device: torch.device, precision: str) -> None:
    """Refuse --precision bf16 on a CPU without bfloat16 kernels (one line, before any work)."""
    if precision == "bf16" and device.type == "cpu" and not cpu_supports_bf16():
        raise SeqlabError("--precision bf16: this CPU has no bfloat16 kernels (oneDNN needs AVX-512 or AMX); "
                          "use --precision fp32 (the default on CPUs)")


# --precision auto on a CPU with bf16 kernels. Measured on a 2-core Xeon with AMX-BF16 and AVX512-BF16, one thread,
# forward and backward under bf16 autocast against fp32 (benchmarks/bf16.py re-measures the recipes):
# - one product of M rows by a K x N matrix (nn.Linear) runs faster in bf16 only when it is large enough to pay for
#   the casts of its operands: 64x32x32 0.36x fp32's speed, 128x128x128 0.68x, 768x128x65 0.94x, 512x128x128
#   1.06x, 768x128x128 1.21x, 512x64x512 1.35x, 768x128x512 1.96x, 700x200x33278 (the wikitext-2 output layer)
#   1.96x, 2048x512x2048 3.45x; oneDNN's fused LSTM likewise (2 x 200, batch 20 x 35: 1.67x; 32 wide, batch 4 x 16:
#   0.79x), while the GRU and the Elman RNN, a small product a time step, run slower (GRU 128, batch 16 x 35:
#   0.75x). A product pays when M*K*N >= BF16_MIN_PRODUCT with K and N >= BF16_MIN_SIDE (an RNN layer's M: all its
#   positions; the fused attention never: it runs in fp32, seqlab.nn.attention.fp32_under_cpu_autocast).
# - a model pays when such products hold BF16_MIN_SHARE of its forward product FLOPs: the nanoGPT CPU transformer
#   (84%) 1.77x fp32's tokens/s, the tied 2 x 200 wikitext-2 LSTM (100%) 2.58x (with the fused output layer's bf16
#   path), the Multi30k GRU translator (92%, its output layer) 1.21x, a 2 x 256 character LSTM 2.25x a step
#   (benchmarks/results/bf16.md).
# - and auto switches only a step of at least BF16_MIN_STEP multiply-adds (forward, this process's rows): bf16 also
#   changes the figures a model learns (within 0.5% of fp32's loss on the recipes, but not to the digit), so small
#   runs, where the seconds saved do not matter (the tutorials' largest step is ~1.2e8, the recipes' smallest
#   6.6e8), stay in fp32 and give the same figures on every CPU, with bf16 kernels or without.
BF16_MIN_PRODUCT = 2**24
BF16_MIN_SIDE = 64
BF16_MIN_SHARE = 0.75
BF16_MIN_STEP = 2**28


def cpu_bf16_flags() -> list[str]:
    """The CPU's bfloat16 instruction sets as /proc/cpuinfo names them (amx_bf16, avx512_bf16); [] elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].split()
                return [flag for flag in ("amx_bf16", "avx512_bf16") if flag in flags]
    except OSError:
        pass
    return []


def pays_in_bf16(rows: int, inner: int, columns: int) -> bool:
    """Whether a product of `rows` x `inner` by `inner` x `columns` runs faster in bf16 than in fp32 on a CPU
    with bf16 kernels (the measurements above)."""
    return rows * inner * columns >= BF16_MIN_PRODUCT and min(inner, columns) >= BF16_MIN_SIDE


def resolve_precision(device: torch.device, precision: str,
                      products: Callable[[], list[tuple[int, int, int]]]) -> tuple[str, str]:
    """What a run computes in, decided once when it starts: ("fp32" or "bf16", why, for the log and the card).

    fp32 and bf16 are as asked. auto: bf16 autocast on CUDA; on a CPU, bf16 autocast when it has bfloat16
    kernels (`cpu_supports_bf16`: AMX or AVX512-BF16) and the model's products are large enough to run faster
    in bf16 (`pays_in_bf16`, at least BF16_MIN_SHARE of the FLOPs of `products()`: the (M, K, N) of one
    forward pass, `seqlab.training.flops.product_shapes`) and a step is large enough to matter (BF16_MIN_STEP),
    fp32 otherwise; fp32 on other devices. Small models (the tests' and the tutorials') stay in fp32 on every
    CPU, so their figures do not depend on the machine (the measurements behind the rule: above)."""
    if precision != "auto":
        return precision, "as asked"
    if device.type == "cuda":
        return "bf16", "auto: CUDA"
    if device.type != "cpu":
        return "fp32", f"auto: fp32 on {device.type}"
    shapes = products()
    total = sum(m * k * n for m, k, n in shapes)
    if total < BF16_MIN_STEP:       # first, so that a small model's line reads the same on every CPU
        return "fp32", (f"auto: a step of this model is small ({total:.2g} multiply-adds forward; bf16 from "
                        f"{BF16_MIN_STEP:.2g} on a CPU with bfloat16 kernels), where fp32 keeps the figures the "
                        "same on every CPU")
    if not cpu_supports_bf16():
        return "fp32", "auto: this CPU has no bfloat16 kernels"
    flags = ", ".join(flag.upper().replace("_", "-") for flag in cpu_bf16_flags()) or "bfloat16 kernels"
    share = sum(m * k * n for m, k, n in shapes if pays_in_bf16(m, k, n)) / total
    if share >= BF16_MIN_SHARE:
        return "bf16", (f"auto: this CPU has {flags}, and {share:.0%} of the model's product FLOPs are in products "
                        "large enough to run faster in bf16")
    return "fp32", (f"auto: this CPU has {flags}, but only {share:.0%} of the model's product FLOPs are in products "
                    f"large enough to run faster in bf16 (it takes {BF16_MIN_SHARE:.0%})")


def kept_precision(device: torch.device, precision: str, header: dict, run_dir) -> tuple[str, str] | None:
    """--resume under --precision auto: (precision, why) the run computed in when it started, from its checkpoint's
    trainer `header`, on any machine (a checkpoint of an earlier seqlab: what auto meant then, bf16 on CUDA and
    fp32 elsewhere); None for an explicit --precision, which is as asked. A bf16 run on a CPU without bfloat16
    kernels is refused in one line."""
    if precision != "auto":
        return None
    if "precision" in header:
        kept = (header["precision"], header.get("precision_why", "auto"))
    else:
        kept = ("bf16" if device.type == "cuda" else "fp32", "auto, as seqlab chose before it recorded the choice")
    if kept[0] == "bf16" and device.type == "cpu" and not cpu_supports_bf16():
        raise SeqlabError(f"--resume: the run in {run_dir} trains in bf16 autocast (--precision auto chose "
                          "it when the run started, on a CPU with bfloat16 kernels) and this CPU has none "
                          "(oneDNN needs AVX-512 or AMX); resume it on such a CPU, or pass --precision fp32 "
                          "(the continuation then differs from an uninterrupted run)")
    return kept


def describe_precision(precision: str, why: str) -> str:
    """The log's and the card's line: `bf16 autocast (auto: ...)`."""
    return f"{'bf16 autocast' if precision == 'bf16' else 'fp32'} ({why})"


def autocast(device: torch.device, precision: str):
    """The autocast context of a resolved precision (bf16: bfloat16 autocast; fp32: none)."""
    use_bf16 = precision == "bf16" or (precision == "auto" and device.type == "cuda")
    if not use_bf16:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)




def configure_threads(threads: int, device: torch.device) -> None:
    """--threads: PyTorch's CPU threads (0: its default, split between the processes of one machine)."""
    if threads > 0:
        torch.set_num_threads(threads)
    elif device.type == "cpu" and int(os.environ.get("LOCAL_WORLD_SIZE", 1)) > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["LOCAL_WORLD_SIZE"])))

"""Model FLOPs and model-FLOPs utilisation (MFU, Chowdhery et al. 2022, PaLM, appendix B).

MFU is the share of the machine's peak that the model's own arithmetic uses:

    MFU = (model FLOPs per token x tokens per second) / peak FLOP/s

*Model* FLOPs are those the model needs, not what a kernel happens to do: the matrix products of the
forward and backward passes, counted from their shapes. For a dense network that is the familiar 6N per
token (2N forward, 4N backward: Kaplan et al. 2020, eq. 2.1; N the weights that multiply every token:
the recurrent matrices W and U, a transformer's projections, the output layer; not the embedding, which
is a lookup), plus for a transformer the attention scores and their mix (PaLM's 12 L H Q T term, counted
here from the shapes, the whole T x T square as PaLM counts it, even under a causal mask). Elementwise
work (activations, LayerNorm, softmax) is not counted: the convention, and a small part.

`count_flops` runs one training forward and backward under PyTorch's `FlopCounterMode`, which knows
every matrix product (mm, addmm, bmm, ...) from its shapes; this module teaches it the fused kernels it
does not know, so that every architecture is counted the same way: the CPU's fused attention
(`_scaled_dot_product_flash_attention_for_cpu`, its backward counted without the scores it recomputes),
oneDNN's fused LSTM layer (`mkldnn_rnn_layer`, 2 FLOPs
per weight of W and U per token forward, twice that backward) and cuDNN's fused RNNs (`_cudnn_rnn`).

The peak is measured, not looked up: `measure_peak` times a square fp32 (or bf16) matrix product with the
process's threads, the best of a second of tries, as `seqlab bench peak` does; `peak` caches the figure per
machine, device, precision, threads and PyTorch version in `~/.cache/seqlab/peak.json` ($SEQLAB_CACHE_DIR
moves it), so the first run on a machine measures it and the others read it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from seqlab.fileio import atomic_write_text

aten = torch.ops.aten


def _tokens(input_shape) -> int:
    """Rows an RNN layer multiplies: every position of the (T, B, I) or (B, T, I) input (I excluded)."""
    return math.prod(input_shape[:-1])


def _mkldnn_rnn_layer(input, weight0, weight1, *args, out_shape=None, **kwargs) -> int:
    """oneDNN's fused LSTM layer (one layer, one direction): x W^T and h U^T at every position (SLP 8.5)."""
    return 2 * _tokens(input) * (math.prod(weight0) + math.prod(weight1))


def _mkldnn_rnn_layer_backward(input, weight1, weight2, *args, out_shape=None, **kwargs) -> int:
    """Its backward: the gradients of the inputs and of the weights, twice the forward."""
    return 4 * _tokens(input) * (math.prod(weight1) + math.prod(weight2))


def _cudnn_rnn(input, weights, *args, out_shape=None, **kwargs) -> int:
    """cuDNN's fused RNN (every layer and direction): each matrix multiplies one vector a position."""
    return 2 * _tokens(input) * sum(math.prod(w) for w in weights if len(w) == 2)


def _cudnn_rnn_backward(input, weights, *args, out_shape=None, **kwargs) -> int:
    return 2 * _cudnn_rnn(input, weights)


def _sdpa_cpu(query, key, value, *args, out_shape=None, **kwargs) -> int:
    """The CPU's fused attention (SLP eq. 9.x: Q K^T, then the weights times V): PyTorch's own formula."""
    return sdpa_flop_count(query, key, value)


def _sdpa_cpu_backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    """Its backward: the gradients of the scores, Q, K and V, twice the forward (model FLOPs: PyTorch's own
    formula also counts the flash kernel's recomputation of the scores, work the model does not need)."""
    return 2 * sdpa_flop_count(query, key, value)


def _addmm_(self, a, b, *args, out_shape=None, **kwargs) -> int:
    """In place, self += a @ b (the fused output layer adds each chunk's weight gradient so), or its batched
    form baddbmm_: PyTorch's counter knows addmm and baddbmm but not their in-place forms."""
    return 2 * math.prod(a) * b[-1]


def _known(name: str) -> list:
    packet = getattr(aten, name, None)
    return [packet] if packet is not None else []


FORMULAS: dict[Callable, Callable] = {
    op: formula
    for name, formula in (("addmm_", _addmm_), ("baddbmm_", _addmm_),
                          ("mkldnn_rnn_layer", _mkldnn_rnn_layer),
                          ("mkldnn_rnn_layer_backward", _mkldnn_rnn_layer_backward),
                          ("_cudnn_rnn", _cudnn_rnn), ("_cudnn_rnn_backward", _cudnn_rnn_backward),
                          ("_scaled_dot_product_flash_attention_for_cpu", _sdpa_cpu),
                          ("_scaled_dot_product_flash_attention_for_cpu_backward", _sdpa_cpu_backward))
    for op in _known(name)
}


def count_flops(work: Callable[[], object]) -> int:
    """The matrix-product FLOPs of running `work()` (a forward and backward, say), counted from shapes."""
    with FlopCounterMode(display=False, custom_mapping=FORMULAS) as counter:
        work()
    return int(counter.get_total_flops())


def _product_shapes(func, args) -> list[tuple[int, int, int]]:
    """The (M, K, N) of the matrix products one forward op runs: M rows times a K x N matrix (a batched
    product's batch counts in M; an RNN layer's rows are all its positions, times W and U; fused attention's
    scores are (rows, head size, keys))."""
    shape = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args]
    if func in (aten.mm.default, aten.addmm.default, aten.addmm_.default):
        a, b = (shape[0], shape[1]) if func == aten.mm.default else (shape[1], shape[2])
        return [(a[0], a[1], b[1])]
    if func in (aten.bmm.default, aten.baddbmm.default, aten.baddbmm_.default):
        a, b = (shape[0], shape[1]) if func == aten.bmm.default else (shape[1], shape[2])
        return [(a[0] * a[1], a[2], b[2])]
    if getattr(aten, "mkldnn_rnn_layer", None) is not None and func == aten.mkldnn_rnn_layer.default:
        rows = _tokens(shape[0])
        return [(rows, w[1], w[0]) for w in (shape[1], shape[2])]
    if getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None) is not None \
            and func == aten._scaled_dot_product_flash_attention_for_cpu.default:
        q, k = shape[0], shape[1]
        rows = math.prod(q[:-1])
        return [(rows, q[-1], k[-2]), (rows, k[-2], q[-1])]      # the scores Q K^T, then their mix of V
    return []


class recording_products(TorchDispatchMode):  # noqa: N801  (used as a context manager, as FlopCounterMode)
    """Within it, the (M, K, N) of every matrix product run is appended to `shapes`."""

    def __init__(self, shapes: list[tuple[int, int, int]]):
        super().__init__()
        self.shapes = shapes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.shapes.extend(_product_shapes(func, args))
        return func(*args, **(kwargs or {}))


def product_shapes(work: Callable[[], object]) -> list[tuple[int, int, int]]:
    """The (M, K, N) of every matrix product `work()` runs (a forward pass, say): what decides whether a
    model's products run faster in bfloat16 (`seqlab.training.devices.resolve_precision`)."""
    shapes: list[tuple[int, int, int]] = []
    with recording_products(shapes):
        work()
    return shapes


# ---------------------------------------------------------------------------- the peak

def device_name(device: torch.device) -> str:
    """The accelerator's or the CPU's model name, for the cache key and the logs."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measure_peak(device: torch.device, dtype: torch.dtype = torch.float32, seconds: float = 1.0,
                 size: int = 0) -> float:
    """FLOP/s of the best square matrix product (n^3 multiply-adds, 2 n^3 FLOPs) among those that fit in
    `seconds` after a warm-up, with the process's threads: the figure MFU is a share of.

    On a CPU, n = 512 (3 MB of operands, a few milliseconds a product): the best of several hundred tries then
    finds the core's own speed even on a machine busy with other jobs, where a 1024^3 product (13 ms, 12 MB)
    always shares the core or the memory bus (measured on a 2-core Xeon under load: 512^3 best 150-158 GFLOP/s,
    1024^3 55-61; 1024^3 on the quiet machine: 161)."""
    n = size or (4096 if device.type == "cuda" else 512)
    generator = torch.Generator().manual_seed(0)                   # not the global one: training's stays as it was
    a = torch.randn(n, n, generator=generator).to(device, dtype)
    b = torch.randn(n, n, generator=generator).to(device, dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)

    def timed() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        torch.mm(a, b, out=out)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    for _ in range(2):
        timed()
    best, deadline = math.inf, time.perf_counter() + seconds
    while True:
        best = min(best, timed())
        if time.perf_counter() > deadline:
            return 2 * n**3 / best


def cache_dir() -> Path:
    return Path(os.environ.get("SEQLAB_CACHE_DIR") or Path.home() / ".cache" / "seqlab")


def peak_key(device: torch.device, dtype: torch.dtype) -> str:
    threads = torch.get_num_threads() if device.type == "cpu" else 0
    kind = f"{device.type}: {device_name(device)}"
    return f"{kind} | {str(dtype).removeprefix('torch.')} | {threads} threads | torch {torch.__version__}"


def read_peaks() -> dict:
    try:
        peaks = json.loads((cache_dir() / "peak.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return peaks if isinstance(peaks, dict) else {}


def peak(device: torch.device, dtype: torch.dtype = torch.float32, refresh: bool = False) -> tuple[float, bool]:
    """(peak FLOP/s, whether it was measured now) for this machine, device, dtype and thread count: read from
    the cache, or measured (about a second) and cached. A cache that cannot be written is no error: the
    figure is measured again next time."""
    key = peak_key(device, dtype)
    peaks = read_peaks()
    entry = peaks.get(key)
    if not refresh and isinstance(entry, dict) and isinstance(entry.get("flop_per_s"), (int, float)) \
            and entry["flop_per_s"] > 0:
        return float(entry["flop_per_s"]), False
    value = measure_peak(device, dtype)
    peaks[key] = {"flop_per_s": value, "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        atomic_write_text(cache_dir() / "peak.json", json.dumps(peaks, indent=1) + "\n")
    except OSError:
        pass
    return value, True


def precision_dtype(device: torch.device, precision: str) -> torch.dtype:
    """The dtype the products run in under a run's resolved precision (fp32 or bf16: the trainer's
    `precision`). Unresolved `auto`, which has no model to decide by (`seqlab bench peak --precision auto`):
    bf16 on CUDA and on a CPU with bfloat16 kernels (the peak a model that auto trains in bf16 is measured
    against), fp32 elsewhere."""
    if precision == "auto":
        from seqlab.training.devices import cpu_supports_bf16

        bf16 = device.type == "cuda" or (device.type == "cpu" and cpu_supports_bf16())
    else:
        bf16 = precision == "bf16"
    return torch.bfloat16 if bf16 else torch.float32


def probe(model, task, next_batch: Callable, rows: int, device: torch.device, precision: str) -> tuple[int, int, list]:
    """(model FLOPs, training units, the (M, K, N) of the forward pass's products) of one forward and backward of
    `next_batch()` (on `device`) through `task.loss`, counted from the products' shapes (`count_flops`,
    `recording_products`), on the bare model (not DDP's or torch.compile's wrapper), leaving no trace: the
    gradients are dropped and the random state (dropout) restored, so training is unchanged."""
    from seqlab.training.devices import autocast

    rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    shapes: list[tuple[int, int, int]] = []

    def step():
        state = task.initial_state(model, rows, device)
        with autocast(device, precision), recording_products(shapes):
            loss_sum, _, _ = task.loss(model, batch, state)
        loss_sum.backward()

    try:
        batch = next_batch()
        units = task.count(batch)
        counted = count_flops(step)
    finally:
        model.zero_grad(set_to_none=True)
        torch.set_rng_state(rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state(cuda_rng, device)
    return counted, units, shapes

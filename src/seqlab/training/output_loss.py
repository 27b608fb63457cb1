"""The output layer's loss for the tasks whose models end in a vocabulary (language modelling, sequence to
sequence): through the plain logits, or fused with the layer itself (`seqlab.nn.fused_output`).

    plain   logits = model(...)                          (B, T, V), then F.cross_entropy over them
    fused   hidden = model(..., output="hidden")          (B, T, D), the states entering the output layer,
            linear_cross_entropy(hidden, W, b, targets)   the layer, log-softmax and loss chunk by chunk,
                                                          never holding the (B, T, V) logits

Both give the same (sum, count) and the same gradients (to float rounding). A run picks one once
(`choose_fused_output`, from the `--fused-output` train option): auto asks `should_fuse` about the rows
of a training batch and the vocabulary size. Evaluation stays on the plain path (no gradients there,
and the same figures).
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor, nn

from seqlab.data.vocab import PAD
from seqlab.models.base import OutputLayer
from seqlab.nn.adaptive_softmax import AdaptiveOutputLayer
from seqlab.nn.fused_output import linear_cross_entropy, should_fuse

FUSED_OUTPUT = ("auto", "on", "off")


def choose_fused_output(setting: str, rows: int, vocab_size: int) -> tuple[bool, str]:
    """Whether to train through the fused output layer (--fused-output on, off, or auto: `should_fuse` for
    `rows` rows a batch over a `vocab_size`-word vocabulary), and the log line that says which and why."""
    fused = should_fuse(rows, vocab_size) if setting == "auto" else setting == "on"
    why = (f"auto: {rows:,} rows a batch, {vocab_size:,} words" if setting == "auto"
           else f"--fused-output {setting}")
    path = "fused (linear_cross_entropy, no logits held)" if fused else "plain (logits + cross-entropy)"
    return fused, f"output layer: {path} ({why})"


def unwrapped(model: nn.Module) -> nn.Module:
    """The model behind the wrappers the trainer may put around it: DistributedDataParallel (`.module`) and
    torch.compile (`._orig_mod`)."""
    while True:
        if isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        elif isinstance(getattr(model, "_orig_mod", None), nn.Module):
            model = model._orig_mod
        else:
            return model


def output_layer(model: nn.Module) -> OutputLayer | AdaptiveOutputLayer:
    """The model's output layer (an `OutputLayer`, or an `AdaptiveOutputLayer` with --output-layer adaptive),
    behind the trainer's wrappers (`unwrapped`)."""
    return unwrapped(model).output


def fused_token_loss(layer: OutputLayer, hidden: Tensor, targets: Tensor,
                     label_smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
    """(summed cross-entropy, count) of `targets` (B, T) (PAD ignored) under softmax(hidden W^T + b), from the
    states entering the output layer `layer`, hidden (B, T, D): what the plain path gives from the logits.

    Under autocast (--precision bf16) the output layer's nn.Linear would run in the autocast dtype: so does
    this, with the states, W and b cast to it (their gradients flow back through the casts to fp32, as
    autocast's do), and autocast off inside, where the log-softmax and the sums are fp32 anyway."""
    weight, bias = layer.weight_and_bias()                                  # (V, D), (V,) or None
    hidden = hidden.reshape(-1, hidden.size(-1))                            # (B*T, D)
    device = hidden.device.type
    autocasting = torch.is_autocast_enabled(device)
    if autocasting:
        dtype = torch.get_autocast_dtype(device)
        hidden, weight = hidden.to(dtype), weight.to(dtype)
        bias = None if bias is None else bias.to(dtype)
    with torch.autocast(device, enabled=False) if autocasting else contextlib.nullcontext():
        return linear_cross_entropy(hidden, weight, bias, targets.reshape(-1), PAD, label_smoothing)

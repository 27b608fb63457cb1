"""Transformer blocks and positional embeddings (SLP 9.4).

A block is self-attention then a position-wise feedforward network, each wrapped in a residual
connection and a layer norm. The book normalises after each sublayer (post-LN, "LayerNorm after
each sublayer"):
    T1 = LayerNorm(X + MultiHeadAttention(X));  H = LayerNorm(T1 + FFN(T1))
pre-LN (GPT-2, nanoGPT) normalises the input of each sublayer and keeps the residual stream clean:
    T1 = X + MultiHeadAttention(LayerNorm(X));  H = T1 + FFN(LayerNorm(T1))
which trains more stably in deep stacks and needs a final LayerNorm before the output layer.

Options of current small-model practice, each off by default (the textbook block stays the default):
- `norm="rmsnorm"`: RMSNorm (Zhang & Sennrich 2019, eq. 4) in place of LayerNorm: x / RMS(x) * g, no mean
  subtracted and no bias;
- `activation="swiglu"`: the gated feedforward of Shazeer 2020 (eq. 6), FFN(x) = (Swish(x W) * x V) W2;
- `qk_norm=True`: each head's queries and keys RMS-normalised before their dot product (Dehghani et al. 2023);
- `rotary=True`: rotary position embeddings (Su et al. 2021) rotate each head's queries and keys by their
  positions (`seqlab.nn.attention.Rotary`), in place of position vectors added to the input.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.errors import SeqlabError
from seqlab.nn.attention import KVCache, MultiHeadAttention, affine, affine_arguments

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "swiglu": None}     # swiglu: `SwiGLU`, a gate on 2 x ff_size
NORMS = ("layernorm", "rmsnorm")


class RMSNorm(nn.Module):
    """Zhang & Sennrich 2019, eq. 4: a_i / RMS(a) * g_i, RMS(a) = sqrt(mean_i a_i^2 + eps); LayerNorm without
    the mean subtracted and without a bias. Written out rather than `nn.RMSNorm`, so that the ONNX export
    needs no rms_norm operator."""

    def __init__(self, size: int, eps: float = 1e-5):
        super().__init__()
        self.normalized_shape, self.eps = (size,), eps
        self.weight = nn.Parameter(torch.ones(size))

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.normalized_shape, self.weight, self.eps)


def rms_norm(x: Tensor, normalized_shape: tuple, weight: Tensor | None, eps: float) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension (`RMSNorm`; `normalized_shape`, for the
    same arguments as torch.layer_norm's, is unused)."""
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x if weight is None else x * weight


def make_norm(kind: str, size: int, bias: bool = True) -> nn.Module:
    if kind not in NORMS:
        raise SeqlabError(f"unknown norm {kind!r}: choose layernorm or rmsnorm")
    return nn.LayerNorm(size, bias=bias) if kind == "layernorm" else RMSNorm(size)


class SwiGLU(nn.Module):
    """Shazeer 2020, eq. 6, between the feedforward's two linear layers: the first one computes [x W ; x V]
    (2 x ff_size wide) and this returns Swish(x W) * x V (ff_size wide), Swish = SiLU."""

    def forward(self, x: Tensor) -> Tensor:
        return swiglu(x)


def swiglu(x: Tensor) -> Tensor:
    gate, value = x.chunk(2, dim=-1)
    return F.silu(gate) * value


class TransformerBlock(nn.Module):
    """x (B, T, D) -> (B, T, D)."""

    def __init__(self, d_model: int, num_heads: int, ff_size: int, dropout: float = 0.0,
                 norm_position: str = "post", causal: bool = True, attention_impl: str = "sdpa",
                 activation: str = "relu", bias: bool = True, norm: str = "layernorm", qk_norm: bool = False,
                 rotary: bool = False, max_positions: int = 0):
        """`rotary` needs `max_positions`, the longest sequence."""
        super().__init__()
        if norm_position not in ("post", "pre"):
            raise SeqlabError(f"unknown norm position {norm_position!r}: choose post or pre")
        if activation not in ACTIVATIONS:
            raise SeqlabError(f"unknown activation {activation!r}: choose one of {', '.join(ACTIVATIONS)}")
        self.pre_norm = norm_position == "pre"
        # ACTIVATIONS' modules, as functions
        self.activation = {"relu": torch.relu, "gelu": F.gelu, "swiglu": swiglu}[activation]
        self.attention = MultiHeadAttention(d_model, num_heads, dropout, causal, attention_impl, bias, qk_norm,
                                            max_positions if rotary else 0)
        self.norm1 = make_norm(norm, d_model, bias)
        gated = activation == "swiglu"                    # FFN(x) = ReLU(x W1 + b1) W2 + b2
        self.feedforward = nn.Sequential(                 # swiglu: (Swish(x W) * x V) W2, W and V stacked as W1
            nn.Linear(d_model, 2 * ff_size if gated else ff_size, bias=bias),
            SwiGLU() if gated else ACTIVATIONS[activation](),
            nn.Linear(ff_size, d_model, bias=bias))
        self.norm2 = make_norm(norm, d_model, bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, cache: KVCache | None = None, layer: int = 0,
                key_padding_mask: Tensor | None = None, positions: Tensor | None = None) -> Tensor:
        """`positions` (T,) or (B, T): where x's rows are, for rotary embeddings (default 0 .. T-1 after the
        cache)."""
        drop = self.dropout if self.training else identity     # no call at all in eval (decoding, per token)
        if self.pre_norm:
            x = x + drop(self.attention(self.norm1(x), cache, layer, key_padding_mask, positions))
            return x + drop(self.feedforward(self.norm2(x)))
        x = self.norm1(x + drop(self.attention(x, cache, layer, key_padding_mask, positions)))
        return self.norm2(x + drop(self.feedforward(x)))                  # (B, T, D)

    def step_weights(self) -> StepWeights:
        """The tensors `step` reads, gathered once per generation rather than looked up through their
        modules at every token and layer; each linear layer as `affine_arguments`."""
        first, _, second = self.feedforward
        return StepWeights(norm_arguments(self.norm1), affine_arguments(self.attention.qkv),
                           affine_arguments(self.attention.out), norm_arguments(self.norm2),
                           affine_arguments(first), affine_arguments(second))

    def step(self, x: Tensor, cache: KVCache, layer: int, weights: StepWeights | None = None,
             rotation: tuple[Tensor, Tensor] | None = None, mask: Tensor | None = None) -> Tensor:
        """One new position per row, x (B, D) -> (B, D): `forward` of a one-token input in eval, the same
        operations on the same values, called as functions with `weights` (`step_weights()`) rather than
        through the block's sub-modules (a dozen calls): at this model size they cost more than the arithmetic.
        `MultiHeadAttention.step` writes the cache; `rotation` is `Rotary.at` of the position, with rotary
        embeddings; `mask` (B, 1, 1, S) the cached keys each row may attend (`MultiHeadAttention.step`)."""
        w = weights or self.step_weights()
        norm1, norm2 = w.norm1[0], w.norm2[0]
        if self.pre_norm:
            x = x + self.attention.step(norm1(x, *w.norm1[1:]), cache, layer, w.qkv, w.out, rotation, mask)
            return x + affine(self.activation(affine(norm2(x, *w.norm2[1:]), *w.ff1)), *w.ff2)
        x = norm1(x + self.attention.step(x, cache, layer, w.qkv, w.out, rotation, mask), *w.norm1[1:])
        return norm2(x + affine(self.activation(affine(x, *w.ff1)), *w.ff2), *w.norm2[1:])   # (B, D)


class StepWeights(NamedTuple):
    """What one block's `step` reads: each norm's (function, its arguments after x), each linear's
    `affine_arguments`: W^Q W^K W^V stacked, W^O, the feedforward's W1 and W2."""

    norm1: tuple
    qkv: tuple
    out: tuple
    norm2: tuple
    ff1: tuple
    ff2: tuple


def norm_arguments(norm: nn.Module) -> tuple:
    """(function, arguments): `norm(x)` as function(x, *arguments), for a LayerNorm what F.layer_norm passes
    torch.layer_norm (without its per-call checks)."""
    if isinstance(norm, RMSNorm):
        return rms_norm, norm.normalized_shape, norm.weight, norm.eps
    return torch.layer_norm, norm.normalized_shape, norm.weight, norm.bias, norm.eps, torch.backends.cudnn.enabled


def identity(x: Tensor) -> Tensor:
    """Dropout in eval: x itself, without a call into torch."""
    return x


def gpt2_init(module: nn.Module, num_layers: int) -> None:
    """GPT-2's initialisation: matrices N(0, 0.02), the residual projections (W^O and the feedforward's
    second layer) scaled by 1/sqrt(2L), biases zero."""
    for name, p in module.named_parameters():
        if p.dim() >= 2:
            std = 0.02 / math.sqrt(2 * num_layers) if name.endswith(("attention.out.weight",
                                                                      "feedforward.2.weight")) else 0.02
            nn.init.normal_(p, 0.0, std)
        elif name.endswith("bias"):
            nn.init.zeros_(p)


class PositionalEmbedding(nn.Module):
    """Absolute positions -> (T, D) vectors: learned (a table) or sinusoidal (Vaswani et al. 2017)."""

    def __init__(self, max_positions: int, d_model: int, kind: str = "learned"):
        super().__init__()
        if kind not in ("learned", "sinusoidal"):
            raise SeqlabError(f"unknown positional embedding {kind!r}: choose learned or sinusoidal")
        self.kind = kind
        if kind == "learned":
            self.table = nn.Embedding(max_positions, d_model)
        else:
            position = torch.arange(max_positions).unsqueeze(1)                         # (C, 1)
            frequency = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            table = torch.zeros(max_positions, d_model)
            table[:, 0::2] = torch.sin(position * frequency)
            table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
            self.register_buffer("table_values", table, persistent=False)

    def at(self, position: int) -> Tensor:
        """The vector (D,) of one position."""
        return self.table.weight[position] if self.kind == "learned" else self.table_values[position]

    def forward(self, positions: Tensor) -> Tensor:
        if self.kind == "learned":
            return self.table(positions)                                             # (T, D)
        return self.table_values[positions]                                         # (T, D)

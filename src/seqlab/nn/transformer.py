"""Transformer blocks and positional embeddings (SLP 9.4).

A block is self-attention then a position-wise feedforward network, each wrapped in a residual
connection and a layer norm. The book normalises after each sublayer (post-LN, "LayerNorm after
each sublayer"):
    T1 = LayerNorm(X + MultiHeadAttention(X));  H = LayerNorm(T1 + FFN(T1))
pre-LN (GPT-2, nanoGPT) normalises the input of each sublayer and keeps the residual stream clean:
    T1 = X + MultiHeadAttention(LayerNorm(X));  H = T1 + FFN(LayerNorm(T1))
which trains more stably in deep stacks and needs a final LayerNorm before the output layer.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.errors import SeqlabError
from seqlab.nn.attention import KVCache, MultiHeadAttention

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


class TransformerBlock(nn.Module):
    """x (B, T, D) -> (B, T, D)."""

    def __init__(self, d_model: int, num_heads: int, ff_size: int, dropout: float = 0.0,
                 norm_position: str = "post", causal: bool = True, attention_impl: str = "sdpa",
                 activation: str = "relu", bias: bool = True):
        super().__init__()
        if norm_position not in ("post", "pre"):
            raise SeqlabError(f"unknown norm position {norm_position!r}: choose post or pre")
        if activation not in ACTIVATIONS:
            raise SeqlabError(f"unknown activation {activation!r}: choose one of {', '.join(ACTIVATIONS)}")
        self.pre_norm = norm_position == "pre"
        self.activation = {"relu": torch.relu, "gelu": F.gelu}[activation]  # ACTIVATIONS' modules, as functions
        self.attention = MultiHeadAttention(d_model, num_heads, dropout, causal, attention_impl, bias)
        self.norm1 = nn.LayerNorm(d_model, bias=bias)
        self.feedforward = nn.Sequential(                 # FFN(x) = ReLU(x W1 + b1) W2 + b2
            nn.Linear(d_model, ff_size, bias=bias), ACTIVATIONS[activation](),
            nn.Linear(ff_size, d_model, bias=bias))
        self.norm2 = nn.LayerNorm(d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, cache: KVCache | None = None, layer: int = 0,
                key_padding_mask: Tensor | None = None) -> Tensor:
        drop = self.dropout if self.training else identity     # no call at all in eval (decoding, per token)
        if self.pre_norm:
            x = x + drop(self.attention(self.norm1(x), cache, layer, key_padding_mask))
            return x + drop(self.feedforward(self.norm2(x)))
        x = self.norm1(x + drop(self.attention(x, cache, layer, key_padding_mask)))
        return self.norm2(x + drop(self.feedforward(x)))                  # (B, T, D)

    def step_weights(self) -> StepWeights:
        """The tensors `step` reads, gathered once per generation rather than looked up through their
        modules at every token and layer."""
        first, _, second = self.feedforward
        return StepWeights(norm_arguments(self.norm1), (self.attention.qkv.weight, self.attention.qkv.bias),
                           (self.attention.out.weight, self.attention.out.bias), norm_arguments(self.norm2),
                           (first.weight, first.bias), (second.weight, second.bias))

    def step(self, x: Tensor, cache: KVCache, layer: int, weights: StepWeights | None = None) -> Tensor:
        """One new position per row, x (B, D) -> (B, D): `forward` of a one-token input in eval, the same
        operations on the same values, called as functions with `weights` (`step_weights()`) rather than
        through the block's sub-modules (a dozen calls): at this model size they cost more than the arithmetic.
        `MultiHeadAttention.step` writes the cache."""
        w = weights or self.step_weights()
        if self.pre_norm:
            x = x + self.attention.step(torch.layer_norm(x, *w.norm1), cache, layer, w.qkv, w.out)
            return x + F.linear(self.activation(F.linear(torch.layer_norm(x, *w.norm2), *w.ff1)), *w.ff2)
        x = torch.layer_norm(x + self.attention.step(x, cache, layer, w.qkv, w.out), *w.norm1)
        return torch.layer_norm(x + F.linear(self.activation(F.linear(x, *w.ff1)), *w.ff2), *w.norm2)   # (B, D)


class StepWeights(NamedTuple):
    """What one block's `step` reads: each layer norm's (shape, weight, bias, eps, cudnn), each linear's (weight,
    bias): W^Q W^K W^V stacked, W^O, the feedforward's W1 and W2."""

    norm1: tuple
    qkv: tuple
    out: tuple
    norm2: tuple
    ff1: tuple
    ff2: tuple


def norm_arguments(norm: nn.LayerNorm) -> tuple:
    """`torch.layer_norm`'s arguments for `norm(x)`, what F.layer_norm passes it (without its per-call checks)."""
    return norm.normalized_shape, norm.weight, norm.bias, norm.eps, torch.backends.cudnn.enabled


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

"""Scaled dot-product attention, multi-head attention with W^O, the causal mask, and a KV cache.

SLP 9.4: each head projects the input to queries, keys and values (W^Q, W^K, W^V), scores every
query against every key by a dot product scaled by sqrt(d_k), masks the future (the causal mask)
and takes the softmax-weighted sum of the values (eqs. 9.20-9.21); the heads are concatenated and
projected by W^O. Two implementations compute the same thing: the textbook one below (readable,
returns the attention weights) and PyTorch's fused `F.scaled_dot_product_attention` (the default).

Two options act on each head's queries and keys before their dot product: QK-norm (RMS-normalised, with a
learned gain per dimension; Dehghani et al. 2023) and rotary position embeddings (`Rotary`, Su et al. 2021).
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.errors import SeqlabError

ATTENTION_IMPLS = ("sdpa", "textbook")


class Rotary(nn.Module):
    """Rotary position embeddings (RoFormer, Su et al. 2021, eq. 34): the pair (x_i, x_{i + d/2}) of a query or
    key at position m is rotated by the angle m * theta_i, theta_i = 10000^(-2i/d), i = 0 .. d/2 - 1:

        x'_i       = x_i cos(m theta_i) - x_{i+d/2} sin(m theta_i)
        x'_{i+d/2} = x_i sin(m theta_i) + x_{i+d/2} cos(m theta_i)

    so that q'_m . k'_n depends on the positions only through m - n (eq. 16). The pairs are the two halves of
    the head (GPT-NeoX's layout; the paper pairs neighbours, the same up to a permutation of W^Q and W^K)."""

    def __init__(self, head_size: int, max_positions: int, base: float = 10000.0):
        super().__init__()
        if head_size % 2:
            raise SeqlabError(f"rotary embeddings need an even head size, not {head_size}")
        theta = base ** (-torch.arange(0, head_size, 2, dtype=torch.float) / head_size)  # theta_i, (d/2,)
        angles = torch.arange(max_positions, dtype=torch.float)[:, None] * theta[None, :]   # m theta_i, (C, d/2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.max_positions = max_positions

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        """x (B, nh, T, hs) at positions (T,) or (B, T) -> x rotated, (B, nh, T, hs)."""
        if positions.dim() == 2:
            return rotate(x, self.cos[positions][:, None], self.sin[positions][:, None])   # (B, 1, T, hs/2)
        return rotate(x, self.cos[positions], self.sin[positions])                        # (T, hs/2)

    def at(self, position: int) -> tuple[Tensor, Tensor]:
        """(cos, sin) (hs/2,) of one position, for `rotate` (decoding one token at a time)."""
        return self.cos[position], self.sin[position]

    def rows(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """(cos, sin) (B, 1, 1, hs/2) of one position per row (B,), for `rotate` of (B, nh, 1, hs) (decoding rows
        that stand at different positions: prompts of different lengths in one batch)."""
        return self.cos[positions][:, None, None], self.sin[positions][:, None, None]


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """eq. 34 on the halves (x1, x2) of x's last dimension: [x1 cos - x2 sin ; x1 sin + x2 cos]."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def qk_normalise(x: Tensor, weight: Tensor, eps: float = 1e-5) -> Tensor:
    """QK-norm: each head's query or key x (..., hs) divided by its RMS, times a learned gain (hs,)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


@contextlib.contextmanager
def fp32_under_cpu_autocast(x: Tensor):
    """Under bf16 autocast on a CPU, the fused attention in fp32 (yields a cast to float32; elsewhere, none):
    its bf16 backward is slow there (the nanoGPT CPU transformer, 4 x 128, batch 12 x 64, one thread on a Xeon
    with AMX-BF16: a training step 0.86x fp32's speed with bf16 attention, 1.57x with the attention in fp32 and
    the projections in bf16)."""
    if x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        with torch.autocast("cpu", enabled=False):
            yield lambda t: t.float()
    else:
        yield lambda t: t


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                                 dropout: float = 0.0) -> tuple[Tensor, Tensor]:
    """SLP eqs. 9.20-9.21: softmax(Q K^T / sqrt(d_k)) V.

    q (B, nh, T, hs), k and v (B, nh, S, hs); mask broadcastable to (B, nh, T, S), True = may attend.
    Returns the outputs (B, nh, T, hs) and the attention weights (B, nh, T, S).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))        # (B, nh, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                         # (B, nh, T, S)
    if dropout > 0:
        weights = F.dropout(weights, dropout, training=True)
    return weights @ v, weights                                     # (B, nh, T, hs)


def affine_arguments(linear: nn.Linear) -> tuple[Tensor, Tensor | None]:
    """(W^T, b) of a linear layer, for `affine`: W^T a view of W, not a copy."""
    return linear.weight.t(), linear.bias


def affine(x: Tensor, weight_t: Tensor, bias: Tensor | None) -> Tensor:
    """x W^T + b for x (B, in) and `affine_arguments` (W^T (in, out), b): what `F.linear` computes, to the last
    bit (the same matrix product on the same transposed view), without its dispatch through aten::linear and
    aten::t, a third of the cost of a one-row product at this size."""
    return x.mm(weight_t) if bias is None else torch.addmm(bias, x, weight_t)                # (B, out)


def causal_mask(queries: int, keys: int, device=None) -> Tensor:
    """(T, S) True where query i may attend key j: j <= i + (S - T), the queries being the last T."""
    offset = keys - queries
    return torch.ones(queries, keys, dtype=torch.bool, device=device).tril(diagonal=offset)


def own_positions(queries: int, keys: int, device=None) -> Tensor:
    """(T, S) True where key j is query i itself (j = i + S - T, the queries being the last T)."""
    own = torch.zeros(queries, keys, dtype=torch.bool, device=device)
    rows = torch.arange(queries, device=device)
    own[rows, rows + keys - queries] = True
    return own


class KVCache:
    """Keys and values of every layer for the tokens seen so far: a transformer's decoding state.

    Preallocated to `capacity` positions, so each new token writes one slot and costs one step.
    """

    def __init__(self, num_layers: int, batch_size: int, num_heads: int, head_size: int,
                 capacity: int, device=None, dtype=None):
        shape = (num_layers, batch_size, num_heads, capacity, head_size)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)      # (L, B, nh, C, hs)
        self.values = torch.zeros(shape, device=device, dtype=dtype)    # (L, B, nh, C, hs)
        self.length = 0
        self.capacity = capacity
        self._split_layers()

    def _split_layers(self) -> None:
        """Each layer's keys and values (B, nh, C, hs), as views made once, not per token and layer."""
        self.layers = [(self.keys[layer], self.values[layer]) for layer in range(self.keys.size(0))]

    def append(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store k, v (B, nh, T, hs) after the cached ones; return all keys and values so far."""
        start, T = self.length, k.size(2)
        if start + T > self.capacity:
            raise SeqlabError(f"the KV cache holds {self.capacity} positions; {start + T} were asked for")
        keys, values = self.layers[layer]                                     # (B, nh, C, hs)
        keys.narrow(2, start, T).copy_(k)           # narrow + copy_: a fraction of the cost of an indexed
        values.narrow(2, start, T).copy_(v)         # write, which a small model pays at every token and layer
        return keys.narrow(2, 0, start + T), values.narrow(2, 0, start + T)  # (B, nh, S, hs)

    def advance(self, steps: int) -> None:
        self.length += steps

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (beam search). Only the filled positions are copied: copying the
        whole preallocated capacity at every step made batched beam search slower than one sentence
        at a time."""
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_empty(old.size(0), len(index), *old.shape[2:])
            new[:, :, :, :self.length] = old[:, :, :, :self.length].index_select(1, index)
            setattr(self, name, new)
        self._split_layers()


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention: x (B, T, D) -> (B, T, D)."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, causal: bool = True,
                 impl: str = "sdpa", bias: bool = True, qk_norm: bool = False, rotary_positions: int = 0):
        """`qk_norm`: RMS-normalise each head's queries and keys; `rotary_positions` > 0: rotary embeddings over
        that many positions."""
        super().__init__()
        if d_model % num_heads:
            raise SeqlabError(f"the model width {d_model} must be a multiple of the number of heads "
                              f"{num_heads}")
        if impl not in ATTENTION_IMPLS:
            raise SeqlabError(f"unknown attention implementation {impl!r}: choose sdpa or textbook")
        self.num_heads, self.head_size = num_heads, d_model // num_heads
        self.causal, self.dropout, self.impl = causal, dropout, impl
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)   # W^Q, W^K, W^V of every head, stacked
        self.out = nn.Linear(d_model, d_model, bias=bias)       # W^O
        self.q_norm = nn.Parameter(torch.ones(self.head_size)) if qk_norm else None    # QK-norm's gains
        self.k_norm = nn.Parameter(torch.ones(self.head_size)) if qk_norm else None
        self.rotary = Rotary(self.head_size, rotary_positions) if rotary_positions else None
        self.last_weights: Tensor | None = None        # (B, nh, T, S) of the last textbook call

    def forward(self, x: Tensor, cache: KVCache | None = None, layer: int = 0,
                key_padding_mask: Tensor | None = None, positions: Tensor | None = None) -> Tensor:
        """`positions` (T,) or (B, T): the rows' positions for rotary embeddings (default: after the cache)."""
        B, T, D = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.num_heads, self.head_size)  # (B, T, 3, nh, hs)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)                   # (B, nh, T, hs) each
        if self.q_norm is not None:
            q, k = qk_normalise(q, self.q_norm), qk_normalise(k, self.k_norm)
        if self.rotary is not None:
            if positions is None:
                start = cache.length if cache is not None else 0
                positions = torch.arange(start, start + T, device=x.device)
            q, k = self.rotary(q, positions), self.rotary(k, positions)  # rotated by their positions
        if cache is not None:
            k, v = cache.append(layer, k, v)                             # (B, nh, S, hs)
        S = k.size(2)
        mask = None
        if self.causal and T > 1:
            mask = causal_mask(T, S, x.device)                           # (T, S)
        if key_padding_mask is not None:                                 # (B, S) True = padding
            keep = ~key_padding_mask[:, None, None, :]                   # (B, 1, 1, S)
            mask = keep if mask is None else mask & keep                 # (B, 1, T, S)
            # a query may always attend to itself: a padding query (left padding) would otherwise see
            # no key at all and turn to NaN; a real query's own key is real, so nothing changes for it
            mask = mask | own_positions(T, S, x.device)
        p = self.dropout if self.training else 0.0
        if self.impl == "sdpa":
            is_causal = mask is not None and key_padding_mask is None and S == T
            with fp32_under_cpu_autocast(x) as cast:
                y = F.scaled_dot_product_attention(cast(q), cast(k), cast(v), attn_mask=None if is_causal else mask,
                                                   dropout_p=p, is_causal=is_causal)   # (B, nh, T, hs)
        else:
            y, self.last_weights = scaled_dot_product_attention(q, k, v, mask, p)
        y = y.transpose(1, 2).reshape(B, T, D)                           # (B, T, D): heads concatenated
        return self.out(y)                                               # (B, T, D)

    def step(self, x: Tensor, cache: KVCache, layer: int, qkv: tuple | None = None,
             out: tuple | None = None, rotation: tuple[Tensor, Tensor] | None = None,
             mask: Tensor | None = None) -> Tensor:
        """One new position per row after what `cache` holds, x (B, D) -> (B, D): `forward` of a one-token
        input in eval (no mask: the one query may see every cached key; no dropout), the same operations on
        the same values, called as functions; `qkv` and `out` are the (W^T, bias) of W^Q W^K W^V and W^O
        (`affine_arguments`), when the caller has them at hand; `rotation` the (cos, sin) of the position
        (`Rotary.at`), with rotary embeddings (default: the cache's length); `mask` (B, 1, 1, S), True where a
        row may attend a cached key (rows whose first slots are padding). The cache is written, not advanced."""
        B, D = x.shape
        qkv = affine(x, *qkv) if qkv else F.linear(x, self.qkv.weight, self.qkv.bias)     # (B, 3D)
        q, k, v = qkv.view(B, 3, self.num_heads, 1, self.head_size).unbind(1)            # (B, nh, 1, hs) each
        if self.q_norm is not None:
            q, k = qk_normalise(q, self.q_norm), qk_normalise(k, self.k_norm)
        if self.rotary is not None:
            cos, sin = rotation or self.rotary.at(cache.length)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k, v = cache.append(layer, k, v)                                                 # (B, nh, S, hs)
        if self.impl == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)                  # (B, nh, 1, hs)
        else:
            y, self.last_weights = scaled_dot_product_attention(q, k, v, mask)
        y = y.reshape(B, D)                                                              # heads concatenated
        return affine(y, *out) if out else F.linear(y, self.out.weight, self.out.bias)   # (B, D): W^O

"""Attention of a decoder over the encoder's states (SLP 13.8; the transformer's cross-attention, 9.4 / 13.8).

RNN encoder-decoders recompute the context at every decoder step i from the previous decoder state
h_{i-1}^d and all encoder states h_j^e (eqs. 13.34-13.37):

    score(h_{i-1}^d, h_j^e) = h_{i-1}^d · h_j^e                 dot product             (13.35)
                            = h_{i-1}^d W_s h_j^e               bilinear                (13.38)
                            = v^T tanh(W_q h_{i-1}^d + W_k h_j^e) additive (Bahdanau et al. 2015)
    α_ij = softmax_j(score(h_{i-1}^d, h_j^e))                                           (13.36)
    c_i  = Σ_j α_ij h_j^e                                                               (13.37)

The softmax runs over the real source positions only: padding scores -inf and gets weight exactly 0.
The parts of a score that depend only on the encoder states (h_j^e W_s^T, W_k h_j^e) are computed
once per sentence by `prepare`, not once per decoder step.

With coverage (See et al. 2017, eqs. 10-11) the sum of the attention of the previous steps,
c_j^i = Σ_{i' < i} α_i'j, enters each score: inside the additive score's tanh, v^T tanh(W_q h_{i-1}^d +
W_k h_j^e + w_c c_j^i) (eq. 11), and as an additive term w_c c_j^i of the dot and bilinear scores.
w_c starts at zero, so a coverage model starts as the plain one.

The transformer decoder's cross-attention is multi-head attention whose queries come from the decoder
and whose keys and values come from the encoder's output (projected once per sentence by
`CrossAttention.keys_values`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.errors import SeqlabError

SCORES = ("dot", "bilinear", "additive")


class Attention(nn.Module):
    """One query per sentence against its encoder states: query (B, Q), keys (B, S, K) -> context (B, K)
    and weights (B, S)."""

    def __init__(self, kind: str, query_size: int, key_size: int, additive_size: int | None = None,
                 coverage: bool = False):
        super().__init__()
        if kind not in SCORES:
            raise SeqlabError(f"unknown attention score {kind!r}: choose one of {', '.join(SCORES)}")
        if kind == "dot" and query_size != key_size:
            raise SeqlabError(f"dot-product attention needs decoder states as wide as the encoder states "
                              f"({query_size} vs {key_size}); use bilinear or additive attention")
        self.kind = kind
        if kind == "bilinear":
            self.W_s = nn.Linear(key_size, query_size, bias=False)                # h^d W_s h^e = h^d · (W_s h^e)
        elif kind == "additive":
            size = additive_size or query_size
            self.W_q = nn.Linear(query_size, size, bias=False)
            self.W_k = nn.Linear(key_size, size, bias=True)
            self.v = nn.Linear(size, 1, bias=False)
        self.w_c = None
        if coverage:                                   # See et al. eq. 11: w_c, a vector inside the tanh, a scalar else
            self.w_c = nn.Parameter(torch.zeros(size if kind == "additive" else 1))

    def prepare(self, keys: Tensor) -> Tensor:
        """What the score needs of the encoder states (B, S, K), computed once per sentence."""
        if self.kind == "bilinear":
            return self.W_s(keys)                                                 # (B, S, Q)
        if self.kind == "additive":
            return self.W_k(keys)                                                 # (B, S, A)
        return keys                                                               # (B, S, K)

    def scores(self, query: Tensor, prepared: Tensor, coverage: Tensor | None = None) -> Tensor:
        if self.kind == "additive":
            hidden = self.W_q(query)[:, None, :] + prepared                                 # (B, S, A)
            if coverage is not None:
                hidden = hidden + coverage[:, :, None] * self.w_c                           # See et al. eq. 11
            return self.v(torch.tanh(hidden)).squeeze(-1)                                   # (B, S)
        scores = (prepared @ query.unsqueeze(-1)).squeeze(-1)                               # (B, S)
        return scores if coverage is None else scores + self.w_c * coverage                # + w_c c_j^i

    def forward(self, query: Tensor, keys: Tensor, mask: Tensor, prepared: Tensor | None = None,
                coverage: Tensor | None = None):
        """query (B, Q), keys (B, S, K), mask (B, S) True at real positions, and for a coverage attention
        the coverage (B, S) -> c (B, K), α (B, S)."""
        prepared = self.prepare(keys) if prepared is None else prepared
        if (coverage is None) != (self.w_c is None):
            raise SeqlabError("a coverage attention takes the coverage vector, and only it does")
        scores = self.scores(query, prepared, coverage).masked_fill(~mask, float("-inf"))  # 13.35 / 13.38
        weights = torch.softmax(scores.float(), dim=-1).to(keys.dtype)            # eq. 13.36, (B, S)
        context = (weights.unsqueeze(1) @ keys).squeeze(1)                        # eq. 13.37, (B, K)
        return context, weights


class CrossAttention(nn.Module):
    """Multi-head attention from decoder positions x (B, T, D) to encoder outputs (B, S, D)."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % num_heads:
            raise SeqlabError(f"the model width {d_model} must be a multiple of the number of heads {num_heads}")
        self.num_heads, self.head_size, self.dropout = num_heads, d_model // num_heads, dropout
        self.query = nn.Linear(d_model, d_model, bias=bias)           # W^Q
        self.key_value = nn.Linear(d_model, 2 * d_model, bias=bias)   # W^K, W^V, stacked
        self.out = nn.Linear(d_model, d_model, bias=bias)             # W^O
        self.keep_weights = False           # `seqlab.nn.inside.attention_kept`: keep each head's weights
        self.last_weights: Tensor | None = None        # (B, nh, T, S) of the last call that kept them

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """The encoder outputs (B, S, D) as keys and values (B, nh, S, hs), once per sentence."""
        B, S, D = memory.shape
        k, v = self.key_value(memory).split(D, dim=-1)
        return (k.view(B, S, self.num_heads, self.head_size).transpose(1, 2),
                v.view(B, S, self.num_heads, self.head_size).transpose(1, 2))

    def forward(self, x: Tensor, k: Tensor, v: Tensor, source_mask: Tensor,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x (B, T, D); k, v (B, nh, S, hs); source_mask (B, S) True at real positions. Returns (B, T, D)
        and, with need_weights, the weights averaged over heads (B, T, S)."""
        B, T, D = x.shape
        q = self.query(x).view(B, T, self.num_heads, self.head_size).transpose(1, 2)   # (B, nh, T, hs)
        keep = source_mask[:, None, None, :]                                            # (B, 1, 1, S)
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights or self.keep_weights:
            scores = (q @ k.transpose(-2, -1) / math.sqrt(self.head_size)).masked_fill(~keep, float("-inf"))
            attn = torch.softmax(scores, dim=-1)                                        # (B, nh, T, S)
            y = attn @ v
            weights = attn.mean(dim=1) if need_weights else None                        # (B, T, S)
            if self.keep_weights:
                self.last_weights = attn
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)   # (B, nh, T, hs)
        return self.out(y.transpose(1, 2).reshape(B, T, D)), weights

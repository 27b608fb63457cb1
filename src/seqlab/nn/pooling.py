"""A sequence of vectors -> one vector, over right-padded batches (padding never counts).

    mean   (1/n) sum_t h_t                       SLP eq. 6.21 (embeddings), 13.15 (RNN states)
    max    elementwise max_t h_t                 SLP eq. 6.22
    last   h_n, the state after the last real token (13.3.2)
    final  a bidirectional encoder's forward state at n and backward state at 1 (the ends each
           direction finishes at), combined by concatenation, sum, product or mean (SLP Fig. 9.12)
"""

from __future__ import annotations

import torch
from torch import Tensor

COMBINE = ("concat", "sum", "product", "mean")


def padding_mask(lengths: Tensor, T: int) -> Tensor:
    """(B,) lengths -> (B, T) True at real positions."""
    return torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]


def mean_pool(h: Tensor, lengths: Tensor) -> Tensor:
    """h (B, T, D) -> (B, D): the mean over each row's real positions (eq. 6.21 / 13.15)."""
    mask = padding_mask(lengths.to(h.device), h.size(1))[:, :, None].to(h.dtype)   # (B, T, 1)
    return (h * mask).sum(1) / lengths.to(h.device).clamp(min=1)[:, None].to(h.dtype)


def max_pool(h: Tensor, lengths: Tensor) -> Tensor:
    """h (B, T, D) -> (B, D): the elementwise max over each row's real positions (eq. 6.22)."""
    mask = padding_mask(lengths.to(h.device), h.size(1))[:, :, None]               # (B, T, 1)
    pooled = h.masked_fill(~mask, float("-inf")).amax(1)                            # (B, D)
    return torch.where(torch.isfinite(pooled), pooled, torch.zeros_like(pooled))   # an empty row -> 0


def last_state(h: Tensor, lengths: Tensor) -> Tensor:
    """h (B, T, D) -> (B, D): each row's state at its last real position."""
    index = (lengths.to(h.device) - 1).clamp(min=0)                                 # (B,)
    return h[torch.arange(h.size(0), device=h.device), index]                       # (B, D)


def combine(forward: Tensor, backward: Tensor, how: str) -> Tensor:
    """Two (..., H) states -> (..., 2H) for concat, (..., H) otherwise (SLP Fig. 9.12)."""
    if how == "concat":
        return torch.cat([forward, backward], dim=-1)
    if how == "sum":
        return forward + backward
    if how == "product":
        return forward * backward
    return (forward + backward) / 2


def final_states(h: Tensor, lengths: Tensor, how: str) -> Tensor:
    """A bidirectional layer's outputs h (B, T, 2H) -> (B, 2H or H): the forward direction's state at
    the last real token and the backward direction's at the first (where it finishes reading; not at
    the padded end), combined."""
    forward, backward = h.chunk(2, dim=-1)                                          # (B, T, H) each
    return combine(last_state(forward, lengths), backward[:, 0], how)

"""The Elman, LSTM and GRU cells written as the book's equations.

The weights are those of PyTorch's fused layers (`nn.RNN`, `nn.LSTM`, `nn.GRU`), viewed under the
book's names, so the textbook path and the fused path are one model run two ways. PyTorch stacks
the gates of one layer in one matrix: `weight_ih` holds the input weights W of every gate,
`weight_hh` the recurrent weights U, in the order (i, f, g, o) for the LSTM and (r, z, n) for the
GRU, each with a bias on both sides (b_W, b_U); the book folds biases away, we keep both.

Each cell maps one time step: x_t (B, I) and the previous state to the new state. The products
W x_t do not depend on the previous state, so `run_cell` computes them for every t at once before
the loop (wx, (B, T, gates*H)); the cells receive W x_t + b_W precomputed and apply U themselves.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class Weights(NamedTuple):
    """One layer and direction of a PyTorch recurrent module, under the book's names."""

    W: Tensor      # (gates*H, I) input weights, all gates stacked
    U: Tensor      # (gates*H, H) recurrent weights
    b_W: Tensor    # (gates*H,)
    b_U: Tensor    # (gates*H,)


def elman_cell(wx: Tensor, h_prev: Tensor, w: Weights, nonlinearity: str = "tanh") -> Tensor:
    """SLP eq. 13.1 (9.2): h_t = g(U h_{t-1} + W x_t), g = tanh or ReLU."""
    g = torch.tanh if nonlinearity == "tanh" else torch.relu
    return g(wx + h_prev @ w.U.T + w.b_U)                       # (B, H)


def lstm_cell(wx: Tensor, state: tuple[Tensor, Tensor], w: Weights,
              record: list | None = None) -> tuple[Tensor, Tensor]:
    """SLP eqs. 13.20-13.27: forget, add and output gates around the context c.

    With a `record` list, each call appends its gates and context {"i", "f", "o", "c"} (B, H) each, for
    the pictures of `seqlab.compare.inside`; without one nothing is kept."""
    h_prev, c_prev = state
    U_i, U_f, U_g, U_o = w.U.chunk(4)                           # (H, H) each
    b_i, b_f, b_g, b_o = w.b_U.chunk(4)
    wx_i, wx_f, wx_g, wx_o = wx.chunk(4, dim=-1)                # W_* x_t + b, (B, H) each
    f = torch.sigmoid(h_prev @ U_f.T + b_f + wx_f)              # 13.20 forget gate
    k = c_prev * f                                              # 13.21 what the context keeps
    g = torch.tanh(h_prev @ U_g.T + b_g + wx_g)                 # 13.22 candidate information
    i = torch.sigmoid(h_prev @ U_i.T + b_i + wx_i)              # 13.23 add gate
    j = g * i                                                   # 13.24 what is added
    c = j + k                                                   # 13.25 new context
    o = torch.sigmoid(h_prev @ U_o.T + b_o + wx_o)              # 13.26 output gate
    h = o * torch.tanh(c)                                       # 13.27 new hidden state
    if record is not None:
        record.append({"i": i, "f": f, "o": o, "c": c})
    return h, c                                                 # (B, H), (B, H)


def gru_cell(wx: Tensor, h_prev: Tensor, w: Weights, reset: str = "after", record: list | None = None) -> Tensor:
    """SLP eqs. 9.10-9.13: reset gate r, update gate z, candidate h~.

    reset="before" is the book's candidate (9.12): h~ = tanh(U (r * h_{t-1}) + W x_t).
    reset="after" is what cuDNN and PyTorch's fused kernel compute: h~ = tanh(r * (U h_{t-1} + b_U)
    + W x_t + b_W), which lets U h_{t-1} be computed for all gates in one product. The two differ
    whenever r is not all ones, so only "after" can run on the fused kernel.

    The book's z (9.11, 9.13) is the share of the new candidate: h_t = (1 - z) h_{t-1} + z h~.
    PyTorch's z is the share kept from h_{t-1}; its weights are the ones stored, so here
    z_book = 1 - sigmoid(U_z h + W_z x): the same function with PyTorch's parameters.

    With a `record` list, each call appends its gates {"r", "z"} (B, H) each (z in the book's sense).
    """
    U_r, U_z, U_h = w.U.chunk(3)                                # (H, H) each
    b_r, b_z, b_h = w.b_U.chunk(3)
    wx_r, wx_z, wx_h = wx.chunk(3, dim=-1)                      # W_* x_t + b, (B, H) each
    r = torch.sigmoid(h_prev @ U_r.T + b_r + wx_r)              # 9.10 reset gate
    z = 1 - torch.sigmoid(h_prev @ U_z.T + b_z + wx_z)          # 9.11 update gate (book's sense)
    if reset == "before":
        h_tilde = torch.tanh((r * h_prev) @ U_h.T + b_h + wx_h)  # 9.12 as printed
    else:
        h_tilde = torch.tanh(r * (h_prev @ U_h.T + b_h) + wx_h)  # 9.12, cuDNN's variant
    if record is not None:
        record.append({"r": r, "z": z})
    return (1 - z) * h_prev + z * h_tilde                       # 9.13, (B, H)


def run_cell(cell: str, x: Tensor, state, w: Weights, reverse: bool = False, mask: Tensor | None = None,
             **options):
    """Unroll one layer over time: x (B, T, I) -> outputs (B, T, H) and the final state.

    With a mask (B, T), True on each sequence's real (left-aligned) tokens, padding neither changes
    the state nor gets an output (zeros there): run in reverse, each sequence starts at its own last
    token, as a packed sequence does in the fused kernels. `options` go to the cell (nonlinearity, reset,
    record)."""
    wx = x @ w.W.T + w.b_W                                      # (B, T, gates*H): W x_t for every t
    steps = range(x.size(1) - 1, -1, -1) if reverse else range(x.size(1))
    outputs = [None] * x.size(1)
    for t in steps:
        if cell == "lstm":
            new = lstm_cell(wx[:, t], state, w, **options)
        elif cell == "gru":
            new = gru_cell(wx[:, t], state, w, **options)
        else:
            new = elman_cell(wx[:, t], state, w, **options)
        if mask is not None:
            keep = mask[:, t, None]                             # (B, 1)
            new = tuple(torch.where(keep, n, s) for n, s in zip(new, state, strict=True)) \
                if cell == "lstm" else torch.where(keep, new, state)
        state = new
        h = state[0] if cell == "lstm" else state
        outputs[t] = h if mask is None else h * mask[:, t, None]
    return torch.stack(outputs, dim=1), state                   # (B, T, H)

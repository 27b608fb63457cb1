"""The two sentence encoders the tagger, the classifier and the encoder-decoders share: a sequence of
input vectors x (B, T, I) -> one contextual state per position (B, T, F).

RecurrentEncoder   a stacked, uni- or bidirectional RNN / LSTM / GRU run over
                   right-padded rows with their lengths. A bidirectional layer reads the sentence both
                   ways and its two states at t are combined (SLP 9.2.6, Fig. 9.12):
                       h_t = [h_t^f ; h_t^b]   (concat, the book's)   h_t^f + h_t^b   (sum)
                             h_t^f * h_t^b     (product)              (h_t^f + h_t^b) / 2   (mean)
TransformerEncoder a stack of transformer blocks without the causal mask (SLP 9.4: every position
                   attends to every real position of its sentence; padding is masked out of the keys):
                       H^0 = X W_in + P    (a projection to the width D when I != D; positions)
                       H^l = TransformerBlock(H^{l-1})   l = 1 .. L   (`seqlab.nn.transformer`)
                   and a final LayerNorm when the blocks normalise before each sublayer (pre-LN).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.errors import SeqlabError
from seqlab.nn.pooling import COMBINE, combine, padding_mask
from seqlab.nn.recurrent import RecurrentStack
from seqlab.nn.transformer import PositionalEmbedding, TransformerBlock


class RecurrentEncoder(nn.Module):
    """x (B, T, I), lengths (B,) -> states (B, T, F), final state.

    F (`output_size`) is 2H for a bidirectional encoder whose directions are concatenated, H otherwise.
    The final state is the stack's, h (L*dirs, B, H) or (h, c) for the LSTM: each row's own (the
    forward direction's after its last real token, the backward direction's after its first);
    `final_vector` combines the top layer's into one (B, F) vector per sentence (Fig. 9.12)."""

    def __init__(self, cell: str, input_size: int, hidden_size: int, num_layers: int = 1, dropout: float = 0.0,
                 bidirectional: bool = False, combine: str = "concat", impl: str = "fused"):
        super().__init__()
        if combine not in COMBINE:
            raise SeqlabError(f"unknown combination {combine!r}: choose one of {', '.join(COMBINE)}")
        self.rnn = RecurrentStack(cell, input_size, hidden_size, num_layers, dropout,
                                  bidirectional=bidirectional, impl=impl)
        self.bidirectional, self.combine = bidirectional, combine
        self.output_size = hidden_size * (2 if bidirectional and combine == "concat" else 1)

    def forward(self, x: Tensor, lengths: Tensor | None = None):
        """x (B, T, I); `lengths` (B,) for right-padded rows (None: every row is T long)."""
        h, final = self.rnn(x, lengths=lengths)                        # (B, T, dirs*H)
        if self.bidirectional and self.combine != "concat":            # SLP 9.2.6
            h = combine(*h.chunk(2, dim=-1), self.combine)             # (B, T, H)
        return h, final                                                # (B, T, F)

    def final_vector(self, final) -> Tensor:
        """The final state -> (B, F): the top layer's last state, both directions' combined (Fig. 9.12)."""
        h = final[0] if isinstance(final, tuple) else final            # (L*dirs, B, H)
        if self.bidirectional:
            return combine(h[-2], h[-1], self.combine)                 # (B, 2H or H)
        return h[-1]                                                   # (B, H)


class TransformerEncoder(nn.Module):
    """x (B, T, I), lengths (B,) or mask (B, T) -> states (B, T, D).

    `input_size` None (or D): x is already D wide and is not projected. `positions` "learned" or
    "sinusoidal" adds the position embeddings of 0 .. T-1 (at most `max_positions`); None adds none,
    for a model that embeds its tokens and positions itself (the encoder-decoder scales its embeddings
    by sqrt(D) and shares the recipe with its decoder)."""

    def __init__(self, d_model: int, num_layers: int, num_heads: int, ff_size: int, dropout: float = 0.0,
                 norm_position: str = "pre", activation: str = "gelu", input_size: int | None = None,
                 positions: str | None = "learned", max_positions: int = 512):
        super().__init__()
        self.max_positions = max_positions
        self.project = nn.Linear(input_size, d_model) \
            if input_size is not None and input_size != d_model else nn.Identity()
        self.positions = None if positions is None else PositionalEmbedding(max_positions, d_model, positions)
        self.blocks = nn.ModuleList(
            TransformerBlock(d_model, num_heads, ff_size, dropout, norm_position, causal=False, activation=activation)
            for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model) if norm_position == "pre" else nn.Identity()

    def forward(self, x: Tensor, lengths: Tensor | None = None, mask: Tensor | None = None) -> Tensor:
        """`mask` (B, T) True at real positions, or `lengths` (B,) of right-padded rows; neither: no padding."""
        T = x.size(1)
        h = self.project(x)                                            # (B, T, D)
        if self.positions is not None:
            if T > self.max_positions:
                raise SeqlabError(f"{T} positions are more than this transformer encoder's {self.max_positions} "
                                  "(--max-positions at training): shorten the input")
            h = h + self.positions(torch.arange(T, device=x.device))  # (B, T, D)
        if mask is None and lengths is not None:
            mask = padding_mask(lengths.to(x.device), T)               # (B, T)
        for block in self.blocks:                                      # SLP 9.4, no causal mask
            h = block(h, key_padding_mask=None if mask is None else ~mask)   # (B, T, D)
        return self.final_norm(h)                                      # (B, T, D)

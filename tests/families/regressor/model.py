"""MeanRegressor: a text's token vectors pooled into one (their mean or max, SLP 6.5), then one linear unit:
the predicted number. It returns the numbers, never a loss (the task computes the squared error)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.models.base import Model


class MeanRegressor(Model):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=0)
        self.output = nn.Linear(config.embedding_size, 1)

    def forward(self, words: Tensor, lengths: Tensor) -> Tensor:
        e = self.embedding(words)                                           # (B, T, E)
        mask = (words != 0).unsqueeze(-1)                                   # (B, T, 1)
        if self.config.arch == "max":
            pooled = e.masked_fill(~mask, -1e4).max(dim=1).values           # (B, E)
        else:
            pooled = (e * mask).sum(dim=1) / lengths.clamp(min=1).unsqueeze(-1).to(e.dtype)   # (B, E)
        return self.output(pooled).squeeze(-1)                              # (B,)


def batch_tensors(rows: list[list[int]]) -> tuple[Tensor, Tensor]:
    """Right-padded ids (B, T) and lengths (B,)."""
    words = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)  # (B, T)
    for b, row in enumerate(rows):
        words[b, :len(row)] = torch.tensor(row)
    return words, torch.tensor([len(row) for row in rows])

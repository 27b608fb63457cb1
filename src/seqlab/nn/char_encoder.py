"""Character features of a word: its characters -> one vector, so a word never seen in training still
has a representation from its spelling.

    lstm  the final states of a BiLSTM over the characters, both directions concatenated (Lample et al. 2016)
    cnn   a convolution over the character embeddings, max-pooled over the real characters (Ma & Hovy 2016)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.data.vocab import PAD
from seqlab.decoding import core
from seqlab.nn.recurrent import RecurrentStack


class CharEncoder(nn.Module):
    """Each word's characters -> one vector: chars (N, C) -> (N, F)."""

    def __init__(self, kind: str, vocab_size: int, embedding_size: int, hidden_size: int, kernel: int):
        super().__init__()
        self.kind = kind
        self.embedding = nn.Embedding(vocab_size, embedding_size, padding_idx=PAD)
        if kind == "lstm":                       # Lample et al. 2016: final states of a char BiLSTM
            self.rnn = RecurrentStack("lstm", embedding_size, hidden_size, bidirectional=True)
        else:                                    # Ma & Hovy 2016: convolution, max over positions
            self.conv = nn.Conv1d(embedding_size, hidden_size, kernel, padding=kernel // 2)
        self.output_size = 2 * hidden_size if kind == "lstm" else hidden_size

    def forward(self, chars: Tensor) -> Tensor:
        """On a server's inference thread, many words (a long sentence's) are read a few at a time
        (`core.slices`, a checkpoint between two): each word's vector is its own."""
        N, C = chars.shape
        budget = core.slice_budget((id(self), "words"))
        if budget is None or N * C <= budget:
            return self.encode(chars)
        return torch.cat([self.encode(chars[part.start:part.stop])
                          for part in core.slices([C] * N, (id(self), "words"), core.least_items(C))])

    def encode(self, chars: Tensor) -> Tensor:
        lengths = (chars != PAD).sum(1).clamp(min=1)                   # (N,)
        x = self.embedding(chars)                                      # (N, C, e)
        if self.kind == "lstm":
            _, (h, _) = self.rnn(x, lengths=lengths)                   # h (2, N, h)
            return torch.cat([h[0], h[1]], dim=-1)                     # (N, 2h)
        y = self.conv(x.transpose(1, 2))                               # (N, F, C)
        real = (chars != PAD)[:, None, :]                              # (N, 1, C)
        y = y.masked_fill(~real, float("-inf")).amax(dim=2)            # (N, F): max over real chars
        return torch.where(torch.isfinite(y), y, torch.zeros_like(y))  # a word of no characters -> 0

"""What every language model shares: the (optionally tied) output layer and the decoding contract.

A language model maps tokens (B, T) and a state to logits (B, T, V) and the new state. Its
`context_length` is None when it reads a stream of any length by carrying a state (RNNs, and the
window LM, whose state is its last N-1 tokens), or the longest sequence it can attend over
(the transformer, trained on independent windows; its decoding state is a KV cache).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.nn.recurrent import detach_state


class OutputLayer(nn.Module):
    """h (..., H) -> logits (..., V).

    Tied (SLP 13.2.3, Press & Wolf 2017): the output matrix is the transposed embedding matrix E,
    so the same vectors read and write words. When H differs from the embedding width E, h is first
    projected to E by a learned (E, H) matrix.
    """

    def __init__(self, input_size: int, embedding: nn.Embedding, tie: bool, bias: bool = True):
        super().__init__()
        vocab_size, embedding_size = embedding.weight.shape
        self.projection = (nn.Linear(input_size, embedding_size, bias=False)
                           if tie and input_size != embedding_size else None)
        self.decoder = nn.Linear(embedding_size if tie else input_size, vocab_size, bias=bias)
        if tie:
            self.decoder.weight = embedding.weight                    # (V, E), shared

    def forward(self, h: Tensor) -> Tensor:
        if self.projection is not None:
            h = self.projection(h)                                    # (..., E)
        return self.decoder(h)                                        # (..., V)


class LanguageModel(nn.Module):
    """Base of the language models: `forward(tokens, state) -> (logits, state)`."""

    context_length: int | None = None
    state_batch_dim = 0        # the batch dimension of the state's tensors

    def init_state(self, batch_size: int, device=None):
        return None

    def detach_state(self, state):
        return detach_state(state)

    @torch.no_grad()
    def step(self, tokens: Tensor, state):
        """Decoding: feed tokens (B, T) after what `state` has seen; logits (B, T, V) and new state."""
        return self(tokens, state)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

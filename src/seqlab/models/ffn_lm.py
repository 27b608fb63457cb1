"""The feedforward window language model (SLP 6.5, eq. 6.24; Bengio et al. 2003).

The N previous tokens are embedded, the embeddings concatenated, passed through one hidden layer,
and a softmax over the vocabulary predicts the next token:

    e = [E x_{t-N+1}; ...; E x_{t-1}; E x_t]     (N*E,)
    h = g(W e + b)                               (H,)    g = tanh (Bengio), sigmoid or ReLU
    z = U h,  y = softmax(z)                     (V,)

Over a sequence every position is one window, computed all at once with `unfold`. The decoding
state is the last N-1 tokens, so the model reads a stream of any length like an RNN does, and a
new token costs one window.

The network reads these fields of its config: vocab_size, embedding_size, hidden_size, context, activation,
dropout, and the output layer's (`seqlab.models.base.build_output_layer`). A family's model config holds them; to
build the network alone, `FeedforwardLMConfig` holds them and no more.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.data.vocab import EOS
from seqlab.models.base import LanguageModel, build_output_layer

ACTIVATIONS = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu}


@dataclass
class FeedforwardLMConfig:
    """The window LM's own arguments (what `FeedforwardLM` reads), to build one outside a family's config."""

    vocab_size: int
    """|V|: the embedding's rows and the softmax's outputs."""
    embedding_size: int = 200
    """d, the width of each token's embedding."""
    hidden_size: int = 200
    """H, the hidden layer's units."""
    context: int = 5
    """N, the tokens in the window."""
    activation: str = "tanh"
    """g: tanh, sigmoid or relu."""
    dropout: float = 0.2
    """Dropout on the concatenated embeddings and the hidden layer."""
    tie_weights: bool = False
    """U is the embedding matrix (with a projection from H to d when they differ)."""
    output_layer: str = "softmax"
    """The full softmax (the adaptive softmax needs a family config's cutoffs)."""


class FeedforwardLM(LanguageModel):
    def __init__(self, config):
        super().__init__()
        self.window = config.context
        self.activation = config.activation
        self.dropout = config.dropout
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_size)
        self.hidden = nn.Linear(self.window * config.embedding_size, config.hidden_size)   # W, b
        self.output = build_output_layer(config, config.hidden_size, self.embedding)   # U

    def init_state(self, batch_size: int, device=None) -> Tensor:
        """Before any text the history is line ends, as at the start of a line."""
        return torch.full((batch_size, self.window - 1), EOS, dtype=torch.long, device=device)

    def forward(self, tokens: Tensor, state: Tensor | None = None, output: str = "logits"):
        """tokens (B, T) -> logits (B, T, V) (output="hidden": the output layer's input (B, T, D)), and the
        last N-1 tokens."""
        B, T = tokens.shape
        if state is None:
            state = self.init_state(B, tokens.device)
        history = torch.cat([state, tokens], dim=1)                     # (B, N-1+T)
        e = self.embedding(history)                                     # (B, N-1+T, E)
        e = e.unfold(1, self.window, 1)                                 # (B, T, E, N)
        e = e.transpose(2, 3).reshape(B, T, -1)                         # (B, T, N*E) 6.24: [E x_{t-N+1};...;E x_t]
        e = F.dropout(e, self.dropout, self.training)
        h = ACTIVATIONS[self.activation](self.hidden(e))                # (B, T, H)   h = g(W e + b)
        h = F.dropout(h, self.dropout, self.training)
        logits = self.output(h, output)                                 # (B, T, V)   z = U h (or (B, T, D))
        return logits, history[:, history.size(1) - (self.window - 1):]  # (B, N-1)

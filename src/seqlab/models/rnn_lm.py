"""Recurrent language models: Elman RNN, LSTM and GRU (SLP 9.2 / 13.1-13.2, 13.5, 9.3.2).

    x_t = E w_t                      embedding of the current token
    h_t = RNN(h_{t-1}, x_t)          one step of the (stacked) recurrent layers, SLP 13.1
    y_t = softmax(V h_t)             distribution over the next token, SLP 13.2

Trained with teacher forcing on stream segments, the state carried from one segment to the next
(truncated backpropagation through time). Dropout applies to the embeddings, between layers and
to the top layer's output, optionally with one mask per sequence (variational dropout).

The network reads these fields of its config: arch (rnn, lstm or gru), vocab_size, embedding_size, hidden_size,
num_layers, dropout, variational_dropout, rnn_impl, activation, gru_reset, and the output layer's
(`seqlab.models.base.build_output_layer`). A family's model config holds them; to build the network alone,
`RecurrentLMConfig` holds them and no more.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seqlab.models.base import LanguageModel, build_output_layer
from seqlab.nn.recurrent import RecurrentStack, dropout


@dataclass
class RecurrentLMConfig:
    """The recurrent LM's own arguments (what `RecurrentLM` reads), to build one outside a family's config."""

    arch: str
    """The recurrent layers: rnn (Elman), lstm or gru."""
    vocab_size: int
    """|V|: the embedding's rows and the softmax's outputs."""
    embedding_size: int = 200
    """The width of each token's embedding."""
    hidden_size: int = 200
    """H, the recurrent state of each layer."""
    num_layers: int = 2
    """Stacked recurrent layers."""
    dropout: float = 0.2
    """Dropout on the embeddings, between layers and on the top layer's output."""
    variational_dropout: bool = False
    """One dropout mask for every time step."""
    rnn_impl: str = "fused"
    """PyTorch's fused kernels or the textbook cells."""
    activation: str = "tanh"
    """The Elman RNN's g: tanh or relu."""
    gru_reset: str = "after"
    """The GRU's reset gate after U (fused) or before it (the book's, textbook cells only)."""
    tie_weights: bool = False
    """The output matrix is the embedding matrix (SLP 13.2.3)."""
    output_layer: str = "softmax"
    """The full softmax (the adaptive softmax needs a family config's cutoffs)."""


class RecurrentLM(LanguageModel):
    state_batch_dim = 1        # h and c are (L, B, H)

    def __init__(self, config):
        super().__init__()
        self.dropout, self.variational = config.dropout, config.variational_dropout
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_size)
        self.rnn = RecurrentStack(config.arch, config.embedding_size, config.hidden_size,
                                  config.num_layers, config.dropout, config.variational_dropout,
                                  impl=config.rnn_impl, nonlinearity=config.activation,
                                  gru_reset=config.gru_reset)
        self.output = build_output_layer(config, config.hidden_size, self.embedding)

    def init_state(self, batch_size: int, device=None):
        return self.rnn.init_state(batch_size, device, self.embedding.weight.dtype)

    def forward(self, tokens: Tensor, state=None, output: str = "logits"):
        """tokens (B, T) -> logits (B, T, V) (output="hidden": the output layer's input (B, T, D)), state."""
        x = self.embedding(tokens)                                      # (B, T, E)
        x = dropout(x, self.dropout, self.training, self.variational)
        h, state = self.rnn(x, state)                                   # (B, T, H)
        h = dropout(h, self.dropout, self.training, self.variational)
        return self.output(h, output), state                            # (B, T, V) or (B, T, D)

    def start_rows(self, prompts: list[Tensor], room: int = 0):
        """B prompts (T_b,) read in one pass: all but each one's last token, right-padded and run as packed
        sequences (`RecurrentStack` with lengths), so that each row's state is its own sequence's final state, as
        `start` gives it alone. A prompt of one token has read nothing: its row keeps the initial state."""
        if self.training or self.rnn.impl != "fused" or len(prompts) == 1:
            return super().start_rows(prompts, room)
        device = prompts[0].device
        state = self.init_state(len(prompts), device)
        rows = [b for b, prompt in enumerate(prompts) if len(prompt) > 1]
        if not rows:
            return state
        lengths = torch.tensor([len(prompts[b]) - 1 for b in rows])                       # (R,)
        padded = torch.zeros(len(rows), int(lengths.max()), dtype=torch.long, device=device)   # (R, T)
        for r, b in enumerate(rows):
            padded[r, :lengths[r]] = prompts[b][:-1]
        _, read = self.rnn(self.embedding(padded), None, lengths)                          # (L, R, H) each
        index = torch.tensor(rows, device=device)
        if isinstance(state, tuple):
            return tuple(s.index_copy(1, index, r) for s, r in zip(state, read, strict=True))
        return state.index_copy(1, index, read)

    def step(self, tokens: Tensor, state, need_weights: bool = False):
        """tokens (B,) -> logits (B, V) of the next token, the new state, None: one step of the stack on
        the single-step cells (`RecurrentStack.step`), the same as `forward` of one position."""
        if self.training:
            return super().step(tokens, state, need_weights)
        x = self.embedding.weight.index_select(0, tokens)              # E[w] (B, E): the embedding's rows
        h, state = self.rnn.step(x, state)                              # (B, E) -> (B, H)
        return self.output(h), state, None                              # (B, V)

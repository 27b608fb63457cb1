"""Recurrent language models: Elman RNN, LSTM and GRU (SLP 9.2 / 13.1-13.2, 13.5, 9.3.2).

    x_t = E w_t                      embedding of the current token
    h_t = RNN(h_{t-1}, x_t)          one step of the (stacked) recurrent layers, SLP 13.1
    y_t = softmax(V h_t)             distribution over the next token, SLP 13.2

Trained with teacher forcing on stream segments, the state carried from one segment to the next
(truncated backpropagation through time). Dropout applies to the embeddings, between layers and
to the top layer's output, optionally with one mask per sequence (variational dropout).
"""

from __future__ import annotations

from torch import Tensor, nn

from seqlab.models.base import LanguageModel, build_output_layer
from seqlab.nn.recurrent import RecurrentStack, dropout


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

    def step(self, tokens: Tensor, state, need_weights: bool = False):
        """tokens (B,) -> logits (B, V) of the next token, the new state, None: one step of the stack on
        the single-step cells (`RecurrentStack.step`), the same as `forward` of one position."""
        if self.training:
            return super().step(tokens, state, need_weights)
        h, state = self.rnn.step(self.embedding(tokens), state)        # (B, E) -> (B, H)
        return self.output(h), state, None                              # (B, V)

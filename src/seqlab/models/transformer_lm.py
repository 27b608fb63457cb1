"""The decoder-only transformer language model (SLP 9.4).

    X = E[w] + P[positions]                          token plus positional embeddings   (B, T, D)
    H = Block_L(... Block_1(X))                      causal self-attention + FFN blocks  (B, T, D)
    y = softmax(H U)                                 U = E^T when tied                   (B, T, V)

Trained in parallel on independent windows of `context` tokens: the causal mask lets position t
see only positions <= t, so one pass scores every position (SLP 9.4). Decoding keeps the keys and
values of every layer in a KV cache, so each new token is one step.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.errors import SeqlabError
from seqlab.models.base import LanguageModel, OutputLayer
from seqlab.nn.attention import KVCache
from seqlab.nn.transformer import PositionalEmbedding, TransformerBlock, gpt2_init


class TransformerLM(LanguageModel):
    def __init__(self, config):
        super().__init__()
        self.context_length = config.context
        self.num_heads = config.num_heads
        d = config.embedding_size
        self.embedding = nn.Embedding(config.vocab_size, d)
        self.positions = PositionalEmbedding(config.context, d, config.positions)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(d, config.num_heads, config.ff_size, config.dropout, config.norm_position,
                             causal=True, attention_impl=config.attention_impl,
                             activation=config.activation, bias=config.bias)
            for _ in range(config.num_layers))
        self.final_norm = nn.LayerNorm(d, bias=config.bias) if config.norm_position == "pre" else nn.Identity()
        self.output = OutputLayer(d, self.embedding, config.tie_weights, config.bias)
        gpt2_init(self, config.num_layers)

    def init_state(self, batch_size: int, device=None) -> KVCache:
        d = self.embedding.weight.size(1)
        return KVCache(len(self.blocks), batch_size, self.num_heads, d // self.num_heads,
                       self.context_length, device, self.embedding.weight.dtype)

    def forward(self, tokens: Tensor, state: KVCache | None = None):
        B, T = tokens.shape
        start = state.length if state is not None else 0
        if start + T > self.context_length:
            raise SeqlabError(f"the transformer attends over at most {self.context_length} tokens; "
                              f"{start + T} were given")
        positions = torch.arange(start, start + T, device=tokens.device)
        x = self.dropout(self.embedding(tokens) + self.positions(positions))     # (B, T, D)
        for layer, block in enumerate(self.blocks):
            x = block(x, state, layer)                                           # (B, T, D)
        if state is not None:
            state.advance(T)
        return self.output(self.final_norm(x)), state                            # (B, T, V)

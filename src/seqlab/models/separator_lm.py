"""The decoder-only transformer language model over source ⊕ <sep> ⊕ target (SLP 9.4.1), as a
sequence-to-sequence model: decoding reads the source, then writes the target after the separator.
The decoding contract is `seqlab.models.base.Seq2SeqModel`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from seqlab.data.vocab import PAD, SEP
from seqlab.errors import SeqlabError
from seqlab.models.base import OutputLayer, Seq2SeqModel
from seqlab.nn.attention import KVCache
from seqlab.nn.transformer import PositionalEmbedding, TransformerBlock, gpt2_init

if TYPE_CHECKING:
    from seqlab.models.seq2seq import Seq2SeqConfig


@dataclass
class LMState:
    """The language model's decoding state: the KV cache, which cache slots are padding, and each row's
    next position (sources of different lengths are left-padded, so positions differ by row)."""

    cache: KVCache
    padding: Tensor        # (B, capacity) True at padding slots
    positions: Tensor      # (B,)

    def reorder(self, index: Tensor) -> LMState:
        self.cache.reorder(index)
        return LMState(self.cache, self.padding.index_select(0, index), self.positions.index_select(0, index))


class SeparatorLM(Seq2SeqModel):
    """A causal transformer LM over x = source ⊕ <sep> ⊕ target ⊕ </s> (SLP 9.4.1): trained on whole
    sequences (right-padded; the causal mask keeps padding out of every real position), it decodes by
    reading the source into its KV cache and continuing after <sep>. Sources are left-padded for
    batched decoding, with each row's positions counted from its own first token."""

    start_token = SEP

    def __init__(self, config: Seq2SeqConfig):
        super().__init__(config)
        d, L, P = config.embedding_size, config.num_layers, config.max_positions
        if config.source_vocab_size != config.target_vocab_size:
            raise SeqlabError("--arch lm reads source and target as one sequence: it needs --shared-vocab")
        self.num_heads = config.num_heads
        self.embedding = nn.Embedding(config.target_vocab_size, d)
        self.positions = PositionalEmbedding(P, d, config.positions)
        self.blocks = nn.ModuleList(
            TransformerBlock(d, config.num_heads, config.ff_size, config.dropout, config.norm_position,
                             causal=True, activation=config.activation) for _ in range(L))
        self.final_norm = nn.LayerNorm(d) if config.norm_position == "pre" else nn.Identity()
        self.output = OutputLayer(d, self.embedding, config.tie_embeddings)
        self.drop = nn.Dropout(config.dropout)
        gpt2_init(self, L)                                     # as the TransformerLM

    def _run(self, tokens: Tensor, positions: Tensor, cache: KVCache | None = None,
             padding: Tensor | None = None) -> Tensor:
        x = self.drop(self.embedding(tokens) + self.positions(positions))     # (B, T, d)
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer, key_padding_mask=padding)
        return self.final_norm(x)                                              # (B, T, d)

    def forward(self, source: Tensor | None, lengths: Tensor | None, target_in: Tensor) -> Tensor:
        """target_in (B, T): the whole sequence source <sep> target, right-padded -> logits (B, T, V)."""
        if target_in.size(1) > self.config.max_positions:
            raise SeqlabError(f"the language model attends over at most {self.config.max_positions} tokens; "
                              f"{target_in.size(1)} were given")
        positions = torch.arange(target_in.size(1), device=target_in.device)
        return self.output(self._run(target_in, positions))

    def encode(self, source: Tensor, lengths: Tensor) -> dict:
        """The right-padded sources (B, S), left-aligned: padding first, each source ending at column S."""
        B, S = source.shape
        if S + 1 > self.config.max_positions:
            raise SeqlabError(f"the language model attends over at most {self.config.max_positions} tokens; "
                              f"a source of {S} leaves no room for <sep> and the target")
        shift = S - lengths                                                    # (B,) padding per row
        column = torch.arange(S, device=source.device)[None, :] - shift[:, None]   # (B, S)
        real = column >= 0
        left = source.gather(1, column.clamp(min=0)).masked_fill(~real, PAD)
        return {"source": left, "mask": real, "lengths": lengths}

    def target_room(self, lengths: Tensor) -> Tensor:
        return self.config.max_positions - lengths        # positions: the source, <sep> and n - 1 tokens

    def init_state(self, memory: dict) -> LMState:
        left, real = memory["source"], memory["mask"]
        B, S = left.shape
        d, P = self.config.embedding_size, self.config.max_positions
        capacity = S + P - int(memory["lengths"].min())       # every row may use its own P positions
        cache = KVCache(len(self.blocks), B, self.num_heads, d // self.num_heads, capacity, left.device,
                        self.embedding.weight.dtype)
        padding = torch.zeros(B, capacity, dtype=torch.bool, device=left.device)
        padding[:, :S] = ~real
        positions = (torch.arange(S, device=left.device)[None, :] - (S - memory["lengths"])[:, None]).clamp(min=0)
        self._run(left, positions, cache, padding[:, :S])
        cache.advance(S)
        return LMState(cache, padding, memory["lengths"].clone())

    def reorder_state(self, state: LMState, index: Tensor) -> LMState:
        return state.reorder(index)

    def step(self, tokens: Tensor, state: LMState, memory: dict, need_weights: bool = False):
        cache = state.cache
        # a row past its room (search.max_lengths) is finished and only carried along with the batch
        positions = state.positions.clamp(max=self.config.max_positions - 1)
        h = self._run(tokens[:, None], positions[:, None], cache, state.padding[:, :cache.length + 1])
        cache.advance(1)
        return self.output(h[:, 0]), LMState(cache, state.padding, state.positions + 1), None

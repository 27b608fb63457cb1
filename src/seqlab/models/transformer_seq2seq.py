"""The transformer encoder-decoder (Vaswani et al. 2017; SLP 13.8 / 9.4): a bidirectional transformer
encoder and a causal decoder whose blocks add cross-attention over the encoder's output. The decoding
contract is `seqlab.models.base.Seq2SeqModel`'s."""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import Tensor, nn

from seqlab.data.vocab import PAD
from seqlab.errors import SeqlabError
from seqlab.models.base import EncoderDecoderState, OutputLayer, Seq2SeqModel
from seqlab.nn.attention import KVCache, MultiHeadAttention
from seqlab.nn.cross_attention import CrossAttention
from seqlab.nn.encoders import TransformerEncoder
from seqlab.nn.pooling import padding_mask
from seqlab.nn.transformer import ACTIVATIONS, PositionalEmbedding, identity


class TransformerPairOptions(Protocol):
    """What a transformer over a source and a target reads of a model config (a family's config holds these
    fields): this encoder-decoder, and the separator LM (`seqlab.models.separator_lm`)."""

    source_vocab_size: int
    target_vocab_size: int
    embedding_size: int
    num_layers: int
    num_heads: int
    ff_size: int
    max_positions: int
    dropout: float
    tie_embeddings: bool
    norm_position: str
    positions: str
    activation: str


class TransformerSeq2SeqOptions(TransformerPairOptions, Protocol):
    """What the transformer encoder-decoder reads: the pair's options, and whether source and target share one
    embedding."""

    share_embeddings: bool


class DecoderBlock(nn.Module):
    """Causal self-attention, cross-attention over the encoder output, feedforward; each sublayer in a
    residual connection with a layer norm (before it: pre; after it: post, the book's). x (B, T, D)."""

    def __init__(self, d: int, num_heads: int, ff_size: int, dropout: float, norm_position: str, activation: str):
        super().__init__()
        self.pre_norm = norm_position == "pre"
        self.self_attention = MultiHeadAttention(d, num_heads, dropout, causal=True)
        self.cross_attention = CrossAttention(d, num_heads, dropout)
        self.feedforward = nn.Sequential(nn.Linear(d, ff_size), ACTIVATIONS[activation](), nn.Linear(ff_size, d))
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor, cache: KVCache | None = None,
                layer: int = 0, need_weights: bool = False):
        drop = self.dropout if self.training else identity     # no call at all in eval (decoding, per token)
        if self.pre_norm:
            x = x + drop(self.self_attention(self.norm1(x), cache, layer))
            y, weights = self.cross_attention(self.norm2(x), k, v, mask, need_weights)
            x = x + drop(y)
            return x + drop(self.feedforward(self.norm3(x))), weights
        x = self.norm1(x + drop(self.self_attention(x, cache, layer)))
        y, weights = self.cross_attention(x, k, v, mask, need_weights)
        x = self.norm2(x + drop(y))
        return self.norm3(x + drop(self.feedforward(x))), weights


class TransformerEncoderDecoder(Seq2SeqModel):
    """Embeddings scaled by sqrt(d) plus positions; a non-causal encoder (padding masked out of every
    key); a causal decoder with cross-attention; the output layer over the decoder's last states."""

    # the encoder is a `TransformerEncoder` (its blocks and final norm)
    renamed_parameters = {"encoder.": "encoder.blocks.", "encoder_norm.": "encoder.final_norm."}

    def __init__(self, config: TransformerSeq2SeqOptions):
        super().__init__(config)
        d, L, P = config.embedding_size, config.num_layers, config.max_positions
        if config.share_embeddings and config.source_vocab_size != config.target_vocab_size:
            raise SeqlabError("--share-embeddings needs one vocabulary for both sides (--shared-vocab)")
        self.num_heads, self.scale, self.attends = config.num_heads, math.sqrt(d), True
        self.source_embedding = nn.Embedding(config.source_vocab_size, d, padding_idx=PAD)
        self.target_embedding = self.source_embedding if config.share_embeddings else \
            nn.Embedding(config.target_vocab_size, d, padding_idx=PAD)
        self.source_positions = PositionalEmbedding(P, d, config.positions)
        self.target_positions = PositionalEmbedding(P, d, config.positions)
        self.encoder = TransformerEncoder(d, L, config.num_heads, config.ff_size, config.dropout,  # embeds: _embed
                                          config.norm_position, config.activation, positions=None)
        self.decoder = nn.ModuleList(
            DecoderBlock(d, config.num_heads, config.ff_size, config.dropout, config.norm_position,
                         config.activation) for _ in range(L))
        self.decoder_norm = nn.LayerNorm(d) if config.norm_position == "pre" else nn.Identity()
        self.output = OutputLayer(d, self.target_embedding, config.tie_embeddings)
        self.drop = nn.Dropout(config.dropout)
        for name, p in self.named_parameters():                # Xavier for matrices; N(0, d^-1/2) embeddings
            if p.dim() >= 2 and "embedding" not in name and "positions" not in name:
                nn.init.xavier_uniform_(p)
        # each shared matrix once, in this order (a set's order follows memory addresses: the same seed
        # would give different weights from one run to the next)
        for embedding in {id(e): e for e in (self.source_embedding, self.target_embedding)}.values():
            nn.init.normal_(embedding.weight, 0.0, d ** -0.5)
            nn.init.zeros_(embedding.weight[PAD])

    def _embed(self, embedding: nn.Embedding, positions: PositionalEmbedding, tokens: Tensor, start: int = 0):
        where = torch.arange(start, start + tokens.size(1), device=tokens.device)
        return self.drop(embedding(tokens) * self.scale + positions(where))    # (B, T, d)

    def encode(self, source: Tensor, lengths: Tensor) -> dict:
        if source.size(1) > self.config.max_positions:
            raise SeqlabError(f"the transformer reads at most {self.config.max_positions} source tokens; "
                              f"{source.size(1)} were given")
        mask = padding_mask(lengths, source.size(1))                           # (B, S)
        x = self.encoder(self._embed(self.source_embedding, self.source_positions, source), mask=mask)  # (B, S, d)
        memory = {"mask": mask}
        for layer, block in enumerate(self.decoder):                          # keys and values, once
            memory[f"k{layer}"], memory[f"v{layer}"] = block.cross_attention.keys_values(x)
        return memory

    def target_room(self, lengths: Tensor) -> Tensor:
        return torch.full_like(lengths, self.config.max_positions)

    def init_state(self, memory: dict) -> KVCache:
        d = self.config.embedding_size
        any_key = memory["k0"]
        return KVCache(len(self.decoder), any_key.size(0), self.num_heads, d // self.num_heads,
                       self.config.max_positions, any_key.device, any_key.dtype)

    def reorder_decoder(self, cache: KVCache, index: Tensor) -> KVCache:
        cache.reorder(index)
        return cache

    def _decode(self, x: Tensor, memory: dict, cache: KVCache | None, need_weights: bool, output: str = "logits"):
        weights = None
        for layer, block in enumerate(self.decoder):
            x, weights = block(x, memory[f"k{layer}"], memory[f"v{layer}"], memory["mask"], cache, layer,
                               need_weights and layer == len(self.decoder) - 1)
        return self.output(self.decoder_norm(x), output), weights             # (B, T, V); the last layer's weights

    def step(self, tokens: Tensor, state: EncoderDecoderState, need_weights: bool = False):
        cache = state.decoder
        if cache.length >= self.config.max_positions:
            raise SeqlabError(f"the transformer decoder holds at most {self.config.max_positions} target tokens")
        x = self._embed(self.target_embedding, self.target_positions, tokens[:, None], cache.length)   # (B, 1, d)
        logits, weights = self._decode(x, state.memory, cache, need_weights)
        cache.advance(1)
        return logits[:, 0], state, None if weights is None else weights[:, 0]

    def forward(self, source: Tensor, lengths: Tensor, target_in: Tensor, output: str = "logits") -> Tensor:
        """Teacher forcing: target_in (B, T) -> logits (B, T, V), or with output="hidden" the output layer's
        input (B, T, D)."""
        if target_in.size(1) > self.config.max_positions:
            raise SeqlabError(f"the transformer decoder holds at most {self.config.max_positions} target "
                              f"tokens; {target_in.size(1)} were given")
        memory = self.encode(source, lengths)
        x = self._embed(self.target_embedding, self.target_positions, target_in)
        return self._decode(x, memory, None, False, output)[0]                # (B, T, V) or (B, T, D)



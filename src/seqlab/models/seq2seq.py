"""Sequence-to-sequence models (SLP 13.7-13.8, 9.4): an encoder reads the source, a decoder writes the target.

Architectures (`arch`):
    rnn/lstm/gru  the RNN encoder-decoder (13.7): a stacked, uni- or bidirectional encoder; its final
                  state c = h_n^e initialises the decoder (h_0^d = c) and, without attention, is fed
                  to every decoder step: h_t^d = g(ŷ_{t-1}, h_{t-1}^d, c) (eqs. 13.32-13.33). With
                  attention (13.8) the context c_i is recomputed at every step from h_{i-1}^d and all
                  encoder states (eqs. 13.34-13.37; `seqlab.nn.cross_attention`).
    transformer   a bidirectional transformer encoder and a causal decoder whose blocks add
                  cross-attention over the encoder's output (Vaswani et al. 2017; SLP 13.8 / 9.4).
    lm            a decoder-only transformer language model over source ⊕ <sep> ⊕ target (SLP 9.4.1):
                  decoding reads the source, then writes the target after the separator.

Every model is trained with teacher forcing (13.7.1): `forward(source, lengths, target_in)` gives the
logits of every target position at once. Decoding (seqlab.search) drives the same model one token at a
time through a small contract:

    memory = model.encode(source, lengths)        what the decoder reads (a dict of batch-first tensors)
    state  = model.init_state(memory)             the decoder's state before the first token
    logits, state, weights = model.step(tokens, state, memory, need_weights)
    model.reorder_state(state, index) / model.reorder_memory(memory, index)   (beam search)

The first token fed is `model.start_token`: <s> for encoder-decoders, <sep> for the language model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seqlab.config import check_fields, option
from seqlab.data.vocab import BOS, PAD, SEP
from seqlab.errors import SeqlabError
from seqlab.models.base import OutputLayer
from seqlab.nn.attention import KVCache, MultiHeadAttention
from seqlab.nn.cross_attention import Attention, CrossAttention
from seqlab.nn.pooling import padding_mask
from seqlab.nn.recurrent import RecurrentStack
from seqlab.nn.transformer import ACTIVATIONS, PositionalEmbedding, TransformerBlock, gpt2_init

ARCHS = ("rnn", "lstm", "gru", "transformer", "lm")
RECURRENT = ("rnn", "lstm", "gru")
ATTENTIONS = ("none", "dot", "bilinear", "additive")


@dataclass
class Seq2SeqConfig:
    """The model (saved in config.json under "model")."""

    arch: str = option("lstm", "encoder-decoder: rnn, lstm, gru or transformer; lm: a decoder-only transformer "
                               "over source <sep> target", choices=ARCHS)
    attention: str = option("none", "rnn / lstm / gru: none (the final encoder state is the context of every "
                                    "step), or recompute the context at each step scored by dot product, "
                                    "bilinear W_s or additive (Bahdanau) attention", choices=ATTENTIONS)
    embedding_size: int = option(256, "word embedding width (the transformer's model width)", at_least=1)
    hidden_size: int = option(256, "rnn / lstm / gru: hidden units of the encoder per direction (the decoder "
                                   "has this times the directions, so h_0^d = h_n^e)", at_least=1)
    num_layers: int = option(1, "layers of the encoder and of the decoder (the lm: of the one stack)", at_least=1)
    bidirectional: bool = option(False, "rnn / lstm / gru: a bidirectional encoder")
    dropout: float = option(0.2, "dropout on embeddings, between layers and before the output layer",
                            at_least=0, below=1)
    readout: str = option("full", "rnn / lstm / gru: the output layer reads h_t (hidden: eq. 13.33) or "
                                  "[h_t; c_t; embedding of y_{t-1}] (full)", choices=("full", "hidden"))
    tie_embeddings: bool = option(False, "the decoder's output layer reuses its input embedding matrix")
    share_embeddings: bool = option(False, "encoder and decoder share one embedding matrix (needs "
                                           "--shared-vocab)")
    num_heads: int = option(4, "transformer / lm: attention heads", at_least=1)
    ff_size: int = option(1024, "transformer / lm: feedforward hidden units", at_least=1)
    norm_position: str = option("pre", "transformer / lm: layer norm before (pre) or after (post, the book's) "
                                       "each sublayer", choices=("pre", "post"))
    activation: str = option("relu", "transformer / lm: feedforward activation", choices=tuple(ACTIVATIONS))
    max_positions: int = option(256, "transformer: the longest source and target; lm: the longest source + "
                                     "<sep> + target", at_least=4)
    positions: str = option("learned", "transformer / lm: positional embeddings", choices=("learned", "sinusoidal"))
    init_range: float = option(0.0, "rnn / lstm / gru: embeddings and output layer ~ U(-r, r), as the LMs' "
                                    "--init-range; 0 keeps PyTorch's defaults (N(0, 1) embeddings, whose tied "
                                    "output layer starts with logits of std ~4 and a loss twice ln V)", at_least=0)
    rnn_impl: str = option("fused", "rnn / lstm / gru: PyTorch's kernels or the textbook cells",
                           choices=("fused", "textbook"))
    label_smoothing: float = option(0.0, "training loss: label smoothing (0: plain cross-entropy)", at_least=0, below=1)
    lm_loss: str = option("target", "lm: the loss on the target tokens only, or on every token (source too)",
                          choices=("target", "all"))
    source_vocab_size: int = option(0, "set from the data", at_least=0)
    target_vocab_size: int = option(0, "set from the data", at_least=0)

    def __post_init__(self):
        check_fields(self)
        if self.attention != "none" and self.arch not in RECURRENT:
            raise SeqlabError(f"--attention {self.attention} is for rnn / lstm / gru encoder-decoders; the "
                              f"{self.arch} attends by its own design")


class Seq2SeqModel(nn.Module):
    """What every sequence-to-sequence model shares (see the module docstring for the contract)."""

    start_token = BOS
    attends = False            # whether `step` can return attention weights over the source

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        self.config = config

    def target_room(self, lengths: Tensor) -> Tensor | None:
        """The most output tokens (</s> included) the decoder can produce after each source (B,), or
        None for no limit. The transformer decoder reads <s> and n - 1 tokens to produce n."""
        return None

    def reorder_memory(self, memory: dict, index: Tensor) -> dict:
        return {name: value.index_select(0, index) for name, value in memory.items()}

    def detach_state(self, state):
        return state

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def build_model(config: Seq2SeqConfig) -> Seq2SeqModel:
    if config.arch in RECURRENT:
        return RNNEncoderDecoder(config)
    if config.arch == "transformer":
        return TransformerEncoderDecoder(config)
    return SeparatorLM(config)


# ---------------------------------------------------------------------------- RNN encoder-decoder

class RNNEncoderDecoder(Seq2SeqModel):
    """SLP 13.7-13.8. The decoder has as many layers as the encoder, each as wide as an encoder layer's
    states in both directions, so the encoder's final state (forward and backward concatenated, per
    layer) is the decoder's initial state unchanged: h_0^d = h_n^e."""

    def __init__(self, config: Seq2SeqConfig):
        super().__init__(config)
        E, H, L = config.embedding_size, config.hidden_size, config.num_layers
        directions = 2 if config.bidirectional else 1
        C = D = directions * H                                  # context width = decoder width
        if config.share_embeddings and config.source_vocab_size != config.target_vocab_size:
            raise SeqlabError("--share-embeddings needs one vocabulary for both sides (--shared-vocab)")
        self.source_embedding = nn.Embedding(config.source_vocab_size, E, padding_idx=PAD)
        self.target_embedding = self.source_embedding if config.share_embeddings else \
            nn.Embedding(config.target_vocab_size, E, padding_idx=PAD)
        self.encoder = RecurrentStack(config.arch, E, H, L, config.dropout, bidirectional=config.bidirectional,
                                      impl=config.rnn_impl)
        self.decoder = RecurrentStack(config.arch, E + C, D, L, config.dropout, impl=config.rnn_impl)
        self.attention = None if config.attention == "none" else Attention(config.attention, D, C)
        self.attends = self.attention is not None
        self.full_readout = config.readout == "full"
        self.output = OutputLayer(D + C + E if self.full_readout else D, self.target_embedding,
                                  config.tie_embeddings)
        self.drop = nn.Dropout(config.dropout)
        self.directions, self.lstm = directions, config.arch == "lstm"
        if config.init_range > 0:
            r = config.init_range
            weights = (self.source_embedding.weight, self.target_embedding.weight, self.output.decoder.weight)
            for weight in {id(w): w for w in weights}.values():   # each shared matrix once, in this order
                nn.init.uniform_(weight, -r, r)
            for embedding in (self.source_embedding, self.target_embedding):
                nn.init.zeros_(embedding.weight[PAD])
            nn.init.zeros_(self.output.decoder.bias)

    def encode(self, source: Tensor, lengths: Tensor) -> dict:
        outputs, final = self.encoder(self.drop(self.source_embedding(source)), lengths=lengths)  # (B, S, C)
        memory = {"outputs": outputs, "mask": padding_mask(lengths, source.size(1))}
        h = self._bridge(final[0] if self.lstm else final)                       # (B, L, D)
        memory["h0"] = h
        if self.lstm:
            memory["c0"] = self._bridge(final[1])
        memory["context"] = h[:, -1]                                             # c = h_n^e (13.32), (B, C)
        if self.attention is not None:
            memory["prepared"] = self.attention.prepare(outputs)
        return memory

    def _bridge(self, h: Tensor) -> Tensor:
        """(L*dirs, B, H) -> (B, L, dirs*H): each layer's forward and backward final states side by side."""
        L = self.config.num_layers
        h = h.view(L, self.directions, h.size(1), h.size(2))                    # (L, dirs, B, H)
        return h.permute(2, 0, 1, 3).reshape(h.size(2), L, -1)                 # (B, L, dirs*H)

    def init_state(self, memory: dict):
        h = memory["h0"].transpose(0, 1).contiguous()                           # h_0^d = c, (L, B, D)
        return (h, memory["c0"].transpose(0, 1).contiguous()) if self.lstm else h

    def reorder_state(self, state, index: Tensor):
        if self.lstm:
            return state[0].index_select(1, index), state[1].index_select(1, index)
        return state.index_select(1, index)

    def _top(self, state) -> Tensor:
        return (state[0] if self.lstm else state)[-1]                           # h_{i-1}^d of the top layer

    def _logits(self, h: Tensor, c: Tensor, e: Tensor) -> Tensor:
        return self.output(self.drop(torch.cat([h, c, e], dim=-1) if self.full_readout else h))

    def step(self, tokens: Tensor, state, memory: dict, need_weights: bool = False):
        e = self.drop(self.target_embedding(tokens))                            # ŷ_{i-1}, (B, E)
        weights = None
        if self.attention is None:
            c = memory["context"]                                               # (B, C)
        else:                                                                   # eqs. 13.34-13.37
            c, weights = self.attention(self._top(state), memory["outputs"], memory["mask"], memory["prepared"])
        out, state = self.decoder(torch.cat([e, c], dim=-1)[:, None], state)    # h_i^d = g(ŷ_{i-1}, h_{i-1}^d, c_i)
        return self._logits(out[:, 0], c, e), state, weights                    # (B, V)

    def forward(self, source: Tensor, lengths: Tensor, target_in: Tensor) -> Tensor:
        """Teacher forcing: target_in (B, T) = <s> y_1 .. y_{T-1} -> logits (B, T, V)."""
        memory = self.encode(source, lengths)
        state = self.init_state(memory)
        e = self.drop(self.target_embedding(target_in))                         # (B, T, E)
        if self.attention is None:                                              # c is fixed: one fused pass
            c = memory["context"][:, None].expand(-1, e.size(1), -1)            # (B, T, C)
            out, _ = self.decoder(torch.cat([e, c], dim=-1), state)             # (B, T, D)
            return self._logits(out, c, e)
        hs, cs = [], []
        for t in range(e.size(1)):
            c, _ = self.attention(self._top(state), memory["outputs"], memory["mask"], memory["prepared"])
            out, state = self.decoder(torch.cat([e[:, t], c], dim=-1)[:, None], state)
            hs.append(out[:, 0])
            cs.append(c)
        return self._logits(torch.stack(hs, 1), torch.stack(cs, 1), e)         # (B, T, V)


# ---------------------------------------------------------------------------- transformer encoder-decoder

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
        if self.pre_norm:
            x = x + self.dropout(self.self_attention(self.norm1(x), cache, layer))
            y, weights = self.cross_attention(self.norm2(x), k, v, mask, need_weights)
            x = x + self.dropout(y)
            return x + self.dropout(self.feedforward(self.norm3(x))), weights
        x = self.norm1(x + self.dropout(self.self_attention(x, cache, layer)))
        y, weights = self.cross_attention(x, k, v, mask, need_weights)
        x = self.norm2(x + self.dropout(y))
        return self.norm3(x + self.dropout(self.feedforward(x))), weights


class TransformerEncoderDecoder(Seq2SeqModel):
    """Embeddings scaled by sqrt(d) plus positions; a non-causal encoder (padding masked out of every
    key); a causal decoder with cross-attention; the output layer over the decoder's last states."""

    def __init__(self, config: Seq2SeqConfig):
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
        self.encoder = nn.ModuleList(
            TransformerBlock(d, config.num_heads, config.ff_size, config.dropout, config.norm_position,
                             causal=False, activation=config.activation) for _ in range(L))
        self.decoder = nn.ModuleList(
            DecoderBlock(d, config.num_heads, config.ff_size, config.dropout, config.norm_position,
                         config.activation) for _ in range(L))
        pre = config.norm_position == "pre"
        self.encoder_norm = nn.LayerNorm(d) if pre else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d) if pre else nn.Identity()
        self.output = OutputLayer(d, self.target_embedding, config.tie_embeddings)
        self.drop = nn.Dropout(config.dropout)
        for name, p in self.named_parameters():                # Xavier for matrices; N(0, d^-1/2) embeddings
            if p.dim() >= 2 and "embedding" not in name and "positions" not in name:
                nn.init.xavier_uniform_(p)
        for embedding in {self.source_embedding, self.target_embedding}:
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
        x = self._embed(self.source_embedding, self.source_positions, source)
        for block in self.encoder:
            x = block(x, key_padding_mask=~mask)
        x = self.encoder_norm(x)                                               # (B, S, d)
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

    def reorder_state(self, state: KVCache, index: Tensor) -> KVCache:
        state.reorder(index)
        return state

    def _decode(self, x: Tensor, memory: dict, cache: KVCache | None, need_weights: bool):
        weights = None
        for layer, block in enumerate(self.decoder):
            x, weights = block(x, memory[f"k{layer}"], memory[f"v{layer}"], memory["mask"], cache, layer,
                               need_weights and layer == len(self.decoder) - 1)
        return self.output(self.decoder_norm(x)), weights                     # (B, T, V); the last layer's weights

    def step(self, tokens: Tensor, state: KVCache, memory: dict, need_weights: bool = False):
        if state.length >= self.config.max_positions:
            raise SeqlabError(f"the transformer decoder holds at most {self.config.max_positions} target tokens")
        x = self._embed(self.target_embedding, self.target_positions, tokens[:, None], state.length)
        logits, weights = self._decode(x, memory, state, need_weights)
        state.advance(1)
        return logits[:, 0], state, None if weights is None else weights[:, 0]

    def forward(self, source: Tensor, lengths: Tensor, target_in: Tensor) -> Tensor:
        if target_in.size(1) > self.config.max_positions:
            raise SeqlabError(f"the transformer decoder holds at most {self.config.max_positions} target "
                              f"tokens; {target_in.size(1)} were given")
        memory = self.encode(source, lengths)
        x = self._embed(self.target_embedding, self.target_positions, target_in)
        return self._decode(x, memory, None, False)[0]


# ---------------------------------------------------------------------------- decoder-only LM with a separator

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

"""The decoder-only transformer language model (SLP 9.4).

    X = E[w] + P[positions]                          token plus positional embeddings   (B, T, D)
    H = Block_L(... Block_1(X))                      causal self-attention + FFN blocks  (B, T, D)
    y = softmax(H U)                                 U = E^T when tied                   (B, T, V)

Trained in parallel on independent windows of `context` tokens: the causal mask lets position t
see only positions <= t, so one pass scores every position (SLP 9.4). Decoding keeps the keys and
values of every layer in a KV cache, so each new token is one step (in eval, through the blocks' `step`:
forward's operations on the one token, called as functions). The model never attends past its
context: when the cache is full, `step` re-encodes the most recent context//2 tokens into a fresh cache
and goes on (one pass per context/2 tokens, not one per token), so the decoding state also keeps the
tokens the cache holds.

The network reads these fields of its config: vocab_size, embedding_size, num_layers, num_heads, ff_size,
context, dropout, activation, norm_position, positions, norm, qk_norm, attention_impl, bias, and the output
layer's (`seqlab.models.base.build_output_layer`). A family's model config holds them; to build the network
alone (as `seqlab.models.separator_lm` does), `TransformerLMConfig` holds them and no more.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seqlab.errors import SeqlabError
from seqlab.models.base import LanguageModel, build_output_layer
from seqlab.nn.attention import KVCache
from seqlab.nn.transformer import PositionalEmbedding, TransformerBlock, gpt2_init, make_norm


@dataclass
class TransformerLMConfig:
    """The transformer LM's own arguments (what `TransformerLM` reads), to build one outside a family's config."""

    vocab_size: int
    """|V|: the embedding's rows and the softmax's outputs."""
    embedding_size: int
    """d, the model width."""
    num_layers: int
    """Transformer blocks."""
    num_heads: int
    """Attention heads (d must be a multiple of them)."""
    ff_size: int
    """The feedforward sublayer's hidden units."""
    context: int
    """The longest context, in tokens (the positions)."""
    dropout: float = 0.0
    """Dropout on the input and in every block."""
    activation: str = "relu"
    """The feedforward activation: relu, gelu or swiglu."""
    norm_position: str = "post"
    """Normalisation after each sublayer (post, the book's) or before it (pre)."""
    positions: str = "learned"
    """learned or sinusoidal vectors added to the input, or rotary."""
    norm: str = "layernorm"
    """layernorm or rmsnorm."""
    qk_norm: bool = False
    """RMS-normalise each head's queries and keys."""
    attention_impl: str = "sdpa"
    """PyTorch's fused attention or the textbook code."""
    bias: bool = True
    """Additive biases in the linear layers, norms and output layer."""
    tie_weights: bool = False
    """The output matrix is the embedding matrix."""
    output_layer: str = "softmax"
    """The full softmax (the adaptive softmax needs a family config's cutoffs)."""

    def __post_init__(self):
        if self.embedding_size % self.num_heads:
            raise SeqlabError(f"--embedding-size {self.embedding_size} must be a multiple of --heads "
                              f"{self.num_heads}")


@dataclass
class SlidingState:
    """The decoding state: the KV cache and the tokens it holds, `tokens` (B, n), n = cache.length <= the
    context C: the first n columns of `history` (B, C), a buffer written in place, one token per step (not a
    new tensor of the n + 1 tokens at every step)."""

    cache: KVCache
    history: Tensor                      # (B, C): the cached tokens, then room
    step_weights: list | None = None     # each block's `step_weights()`, gathered once per generation

    @classmethod
    def holding(cls, cache: KVCache, tokens: Tensor, step_weights: list | None = None) -> SlidingState:
        """The state of a cache that holds `tokens` (B, n)."""
        history = tokens.new_zeros(tokens.size(0), cache.capacity)                        # (B, C)
        history[:, :tokens.size(1)] = tokens
        return cls(cache, history, step_weights)

    @property
    def tokens(self) -> Tensor:
        return self.history[:, :self.cache.length]                                         # (B, n)

    def reorder(self, index: Tensor) -> SlidingState:
        self.cache.reorder(index)
        return SlidingState(self.cache, self.history.index_select(0, index), self.step_weights)


@dataclass
class RaggedState:
    """The decoding state of rows whose prompts differ in length (`merge_states`): one KV cache in which row b's
    keys and values sit right-aligned, after `pad[b]` empty slots its queries never attend; row b's next token
    stands at position cache.length - pad[b]. Rows never slide (the batch is made of rows that fit in the
    context, `fits`)."""

    cache: KVCache
    pad: Tensor                          # (B,) empty slots before each row's first cached token
    step_weights: list | None = None

    def reorder(self, index: Tensor) -> RaggedState:
        self.cache.reorder(index)
        return RaggedState(self.cache, self.pad.index_select(0, index), self.step_weights)


class TransformerLM(LanguageModel):
    def __init__(self, config):
        super().__init__()
        self.context_length = config.context
        self.num_heads = config.num_heads
        d = config.embedding_size
        norm = getattr(config, "norm", "layernorm")           # configs from before these options have none
        self.rotary = getattr(config, "positions", "learned") == "rotary"
        self.embedding = nn.Embedding(config.vocab_size, d)
        # rotary embeddings rotate queries and keys inside attention: no position vectors are added to X
        self.positions = None if self.rotary else PositionalEmbedding(config.context, d, config.positions)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(d, config.num_heads, config.ff_size, config.dropout, config.norm_position,
                             causal=True, attention_impl=config.attention_impl,
                             activation=config.activation, bias=config.bias, norm=norm,
                             qk_norm=getattr(config, "qk_norm", False), rotary=self.rotary,
                             max_positions=config.context)
            for _ in range(config.num_layers))
        self.final_norm = make_norm(norm, d, config.bias) if config.norm_position == "pre" else nn.Identity()
        self.output = build_output_layer(config, d, self.embedding, config.bias)
        gpt2_init(self, config.num_layers)

    def init_state(self, batch_size: int, device=None) -> KVCache:
        d = self.embedding.weight.size(1)
        return KVCache(len(self.blocks), batch_size, self.num_heads, d // self.num_heads,
                       self.context_length, device, self.embedding.weight.dtype)

    def hidden(self, tokens: Tensor, positions: Tensor, cache: KVCache | None = None,
               key_padding_mask: Tensor | None = None) -> Tensor:
        """The last block's states, normalised, of tokens (B, T) at positions (T,) or (B, T), after what
        `cache` holds (it is written, not advanced); `key_padding_mask` (B, cached + T) is True at padding."""
        x = self.embedding(tokens)                                               # E[w], (B, T, D)
        if not self.rotary:
            x = x + self.positions(positions)                                    # X = E[w] + P
        if self.training:
            x = self.dropout(x)
        rotated = positions if self.rotary else None                             # the positions rotate q and k
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer, key_padding_mask=key_padding_mask, positions=rotated)   # (B, T, D)
        return self.final_norm(x)                                                # (B, T, D)

    def forward(self, tokens: Tensor, state: KVCache | None = None, output: str = "logits"):
        """tokens (B, T) after what the cache `state` holds -> logits (B, T, V) (output="hidden": the output
        layer's input (B, T, D)), and the cache, advanced."""
        B, T = tokens.shape
        start = state.length if state is not None else 0
        if start + T > self.context_length:
            raise SeqlabError(f"the transformer attends over at most {self.context_length} tokens; "
                              f"{start + T} were given")
        positions = torch.arange(start, start + T, device=tokens.device)
        h = self.hidden(tokens, positions, state)                                # (B, T, D)
        if state is not None:
            state.advance(T)
        return self.output(h, output), state                                     # (B, T, V) or (B, T, D)

    def start(self, prompt: Tensor) -> SlidingState:
        cache = self.init_state(prompt.size(0), prompt.device)
        if prompt.size(1) > 1:
            self(prompt[:, :-1], cache)
        return SlidingState.holding(cache, prompt[:, :-1], [block.step_weights() for block in self.blocks])

    def step(self, tokens: Tensor, state: SlidingState | RaggedState, need_weights: bool = False):
        """tokens (B,) -> logits (B, V), the state (its cache and history written in place), None."""
        if isinstance(state, RaggedState):
            return self.ragged_step(tokens, state), state, None
        cache = state.cache
        n = cache.length
        if n < self.context_length and not self.training:
            # forward of one token, through the blocks' `step` (the same operations, as function calls)
            state.history[:, n] = tokens                                         # the token joins the history
            weights = state.step_weights or [block.step_weights() for block in self.blocks]
            state.step_weights = weights
            x = self.embedding.weight.index_select(0, tokens)                    # E[w] (B, D)
            rotation = None
            if self.rotary:
                rotation = self.blocks[0].attention.rotary.at(n)                 # (cos, sin) of the position
            else:
                x = x + self.positions.at(n)                                     # E[w] + P
            for layer, block in enumerate(self.blocks):
                x = block.step(x, cache, layer, weights[layer], rotation)        # (B, D)
            cache.advance(1)
            return self.output(self.final_norm(x)), state, None                  # (B, V)
        if n < self.context_length:
            state.history[:, n] = tokens
            logits, cache = self(tokens[:, None], cache)                         # (B, 1, V)
            return logits[:, 0], state, None
        history = torch.cat([state.tokens, tokens[:, None]], dim=1)             # (B, C + 1)
        keep = history[:, -max(1, self.context_length // 2):]                   # the cache is full: the recent half
        logits, cache = self(keep, self.init_state(keep.size(0), keep.device))   # (B, context//2, V)
        return logits[:, -1], SlidingState.holding(cache, keep, state.step_weights), None

    def reorder_state(self, state: SlidingState | RaggedState, index: Tensor) -> SlidingState | RaggedState:
        return state.reorder(index)

    def compiled_decoder(self):
        """This model's decoding step compiled ahead of time for one row on the CPU (opt-in, tens of seconds to
        build; `seqlab.models.compiled_decoding`): `generate_ids(model.compiled_decoder(), ...)` runs on it."""
        from seqlab.models.compiled_decoding import CompiledTransformerDecoder
        return CompiledTransformerDecoder(self)

    def fits(self, prompt_length: int, steps: int) -> bool:
        """Whether a prompt of `prompt_length` tokens and `steps` more stay within the context, so that its row
        can join a ragged batch (`merge_states`): a row that would slide is decoded alone."""
        return prompt_length + steps <= self.context_length + 1

    def merge_states(self, states: list[SlidingState], room: int = 0) -> RaggedState:
        """B started states of one row each (prompts of any lengths) -> one `RaggedState`: each row's cached keys
        and values copied right-aligned into a cache of the longest prompt's length + `room` positions; the keys
        already carry their own positions (added before the projections, or rotated), so every row reads what it
        read alone, and a key padding mask hides the empty slots."""
        lengths = [state.cache.length for state in states]
        P = max(lengths)
        first = states[0].cache
        L, _, nh, _, hs = first.keys.shape
        cache = KVCache(L, len(states), nh, hs, P + room, first.keys.device, first.keys.dtype)
        for b, (state, n) in enumerate(zip(states, lengths, strict=True)):
            cache.keys[:, b, :, P - n:P] = state.cache.keys[:, 0, :, :n]           # (L, nh, n, hs)
            cache.values[:, b, :, P - n:P] = state.cache.values[:, 0, :, :n]
        cache.advance(P)
        pad = torch.tensor([P - n for n in lengths], device=first.keys.device)      # (B,)
        return RaggedState(cache, pad, states[0].step_weights)

    def ragged_step(self, tokens: Tensor, state: RaggedState) -> Tensor:
        """`step` of rows at their own positions: tokens (B,) -> logits (B, V); the cache is written and advanced."""
        cache, pad = state.cache, state.pad
        positions = cache.length - pad                                              # (B,)
        if int(positions.max()) >= self.context_length:
            raise SeqlabError(f"the transformer attends over at most {self.context_length} tokens; a row of this "
                              "batch would slide past its context (decode it alone)")
        weights = state.step_weights or [block.step_weights() for block in self.blocks]
        x = self.embedding.weight.index_select(0, tokens)                           # E[w] (B, D)
        rotation = None
        if self.rotary:
            rotation = self.blocks[0].attention.rotary.rows(positions)              # (B, 1, 1, hs/2) each
        else:
            x = x + self.positions(positions)                                       # E[w] + P, (B, D)
        slots = torch.arange(cache.length + 1, device=tokens.device)                # (S,)
        mask = (slots[None, :] >= pad[:, None])[:, None, None, :]                   # (B, 1, 1, S)
        for layer, block in enumerate(self.blocks):
            x = block.step(x, cache, layer, weights[layer], rotation, mask)         # (B, D)
        cache.advance(1)
        return self.output(self.final_norm(x))                                      # (B, V)

"""The decoder-only transformer language model over source ⊕ <sep> ⊕ target (SLP 9.4.1), as a
sequence-to-sequence model: decoding reads the source, then writes the target after the separator.
The network is the language models' `TransformerLM` (its embeddings, blocks, final norm and output
layer); the decoding contract is `seqlab.models.base.Seq2SeqModel`'s."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from seqlab.data.vocab import PAD, SEP
from seqlab.errors import SeqlabError
from seqlab.models.base import EncoderDecoderState, Seq2SeqModel
from seqlab.models.transformer_lm import TransformerLM, TransformerLMConfig
from seqlab.models.transformer_seq2seq import TransformerPairOptions as SeparatorLMOptions  # what it reads
from seqlab.nn.attention import KVCache


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


def lm_config(config: SeparatorLMOptions) -> TransformerLMConfig:
    """The language model's configuration from the sequence-to-sequence one: one transformer stack over
    max_positions tokens."""
    return TransformerLMConfig(vocab_size=config.target_vocab_size, embedding_size=config.embedding_size,
                               num_layers=config.num_layers, num_heads=config.num_heads, ff_size=config.ff_size,
                               context=config.max_positions, dropout=config.dropout,
                               activation=config.activation, norm_position=config.norm_position,
                               positions=config.positions, tie_weights=config.tie_embeddings)


class SeparatorLM(Seq2SeqModel):
    """A causal transformer LM over x = source ⊕ <sep> ⊕ target ⊕ </s> (SLP 9.4.1): trained on whole
    sequences (right-padded; the causal mask keeps padding out of every real position), it decodes by
    reading the source into its KV cache and continuing after <sep>. Sources are left-padded for
    batched decoding, with each row's positions counted from its own first token."""

    start_token = SEP
    # the network was SeparatorLM's own until it became a TransformerLM held as `lm`
    renamed_parameters = {"embedding.": "lm.embedding.", "positions.": "lm.positions.", "blocks.": "lm.blocks.",
                          "final_norm.": "lm.final_norm.", "output.": "lm.output."}

    def __init__(self, config: SeparatorLMOptions):
        super().__init__(config)
        if config.source_vocab_size != config.target_vocab_size:
            raise SeqlabError("--arch lm reads source and target as one sequence: it needs --shared-vocab")
        self.lm = TransformerLM(lm_config(config))        # gpt2_init, as every TransformerLM
        self.num_heads = config.num_heads

    @property
    def output(self):
        """The output layer (the language model's)."""
        return self.lm.output

    def forward(self, source: Tensor | None, lengths: Tensor | None, target_in: Tensor,
                output: str = "logits") -> Tensor:
        """target_in (B, T): the whole sequence source <sep> target, right-padded -> logits (B, T, V), or with
        output="hidden" the output layer's input (B, T, D)."""
        if target_in.size(1) > self.config.max_positions:
            raise SeqlabError(f"the language model attends over at most {self.config.max_positions} tokens; "
                              f"{target_in.size(1)} were given")
        positions = torch.arange(target_in.size(1), device=target_in.device)
        return self.lm.output(self.lm.hidden(target_in, positions), output)     # (B, T, V) or (B, T, D)

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
        cache = KVCache(len(self.lm.blocks), B, self.num_heads, d // self.num_heads, capacity, left.device,
                        self.lm.embedding.weight.dtype)
        padding = torch.zeros(B, capacity, dtype=torch.bool, device=left.device)
        padding[:, :S] = ~real
        positions = (torch.arange(S, device=left.device)[None, :] - (S - memory["lengths"])[:, None]).clamp(min=0)
        self.lm.hidden(left, positions, cache, padding[:, :S])
        cache.advance(S)
        return LMState(cache, padding, memory["lengths"].clone())

    def reorder_decoder(self, state: LMState, index: Tensor) -> LMState:
        return state.reorder(index)

    def step(self, tokens: Tensor, state: EncoderDecoderState, need_weights: bool = False):
        decoder = state.decoder
        cache = decoder.cache
        # a row past its room (search.max_lengths) is finished and only carried along with the batch
        positions = decoder.positions.clamp(max=self.config.max_positions - 1)
        h = self.lm.hidden(tokens[:, None], positions[:, None], cache, decoder.padding[:, :cache.length + 1])
        cache.advance(1)
        decoder = LMState(cache, decoder.padding, decoder.positions + 1)
        return self.lm.output(h[:, 0]), EncoderDecoderState(state.memory, decoder), None

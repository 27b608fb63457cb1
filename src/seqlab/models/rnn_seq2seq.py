"""The RNN encoder-decoder, with or without attention (SLP 13.7-13.8).

A stacked, uni- or bidirectional encoder; its final state c = h_n^e initialises the decoder (h_0^d = c)
and, without attention, is fed to every decoder step: h_t^d = g(ŷ_{t-1}, h_{t-1}^d, c) (eqs.
13.32-13.33). With attention (13.8) the context c_i is recomputed at every step from h_{i-1}^d and all
encoder states (eqs. 13.34-13.37; `seqlab.nn.cross_attention`). The decoding contract is
`seqlab.models.base.Seq2SeqModel`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from seqlab.data.vocab import PAD
from seqlab.errors import SeqlabError
from seqlab.models.base import EncoderDecoderState, OutputLayer, Seq2SeqModel
from seqlab.nn.cross_attention import Attention
from seqlab.nn.encoders import RecurrentEncoder
from seqlab.nn.pooling import padding_mask
from seqlab.nn.recurrent import RecurrentStack

if TYPE_CHECKING:
    from seqlab.models.seq2seq import Seq2SeqConfig


class RNNEncoderDecoder(Seq2SeqModel):
    """SLP 13.7-13.8. The decoder has as many layers as the encoder, each as wide as an encoder layer's
    states in both directions, so the encoder's final state (forward and backward concatenated, per
    layer) is the decoder's initial state unchanged: h_0^d = h_n^e."""

    renamed_parameters = {"encoder.layers.": "encoder.rnn.layers."}    # the encoder is a `RecurrentEncoder`

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
        self.encoder = RecurrentEncoder(config.arch, E, H, L, config.dropout, config.bidirectional,  # [h^f ; h^b]
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

    def reorder_decoder(self, state, index: Tensor):
        """Rows `index` of h (L, B, D), and of c for the LSTM."""
        if self.lstm:
            return state[0].index_select(1, index), state[1].index_select(1, index)
        return state.index_select(1, index)

    def _top(self, state) -> Tensor:
        return (state[0] if self.lstm else state)[-1]                           # h_{i-1}^d of the top layer

    def _logits(self, h: Tensor, c: Tensor, e: Tensor, output: str = "logits") -> Tensor:
        """The output layer over h_i^d (readout "hidden") or [h_i^d; c_i; ŷ_{i-1}] (full): logits (..., V),
        or with output="hidden" its input (..., D)."""
        return self.output(self.drop(torch.cat([h, c, e], dim=-1) if self.full_readout else h), output)

    def step(self, tokens: Tensor, state: EncoderDecoderState, need_weights: bool = False):
        memory, h = state.memory, state.decoder
        e = self.drop(self.target_embedding(tokens))                            # ŷ_{i-1}, (B, E)
        weights = None
        if self.attention is None:
            c = memory["context"]                                               # (B, C)
        else:                                                                   # eqs. 13.34-13.37
            c, weights = self.attention(self._top(h), memory["outputs"], memory["mask"], memory["prepared"])
        out, h = self.decoder.step(torch.cat([e, c], dim=-1), h)               # h_i^d = g(ŷ_{i-1}, h_{i-1}^d, c_i)
        return self._logits(out, c, e), EncoderDecoderState(memory, h), weights   # (B, V)

    def forward(self, source: Tensor, lengths: Tensor, target_in: Tensor, output: str = "logits") -> Tensor:
        """Teacher forcing: target_in (B, T) = <s> y_1 .. y_{T-1} -> logits (B, T, V), or with output="hidden"
        the output layer's input (B, T, D)."""
        memory = self.encode(source, lengths)
        state = self.init_state(memory)
        e = self.drop(self.target_embedding(target_in))                         # (B, T, E)
        if self.attention is None:                                              # c is fixed: one fused pass
            c = memory["context"][:, None].expand(-1, e.size(1), -1)            # (B, T, C)
            out, _ = self.decoder(torch.cat([e, c], dim=-1), state)             # (B, T, D)
            return self._logits(out, c, e, output)
        hs, cs = [], []
        for t in range(e.size(1)):
            c, _ = self.attention(self._top(state), memory["outputs"], memory["mask"], memory["prepared"])
            out, state = self.decoder(torch.cat([e[:, t], c], dim=-1)[:, None], state)
            hs.append(out[:, 0])
            cs.append(c)
        return self._logits(torch.stack(hs, 1), torch.stack(cs, 1), e, output)  # (B, T, V) or (B, T, D)



"""The RNN encoder-decoder, with or without attention (SLP 13.7-13.8).

A stacked, uni- or bidirectional encoder; its final state c = h_n^e initialises the decoder (h_0^d = c)
and, without attention, is fed to every decoder step: h_t^d = g(ŷ_{t-1}, h_{t-1}^d, c) (eqs.
13.32-13.33). With attention (13.8) the context c_i is recomputed at every step from h_{i-1}^d and all
encoder states (eqs. 13.34-13.37; `seqlab.nn.cross_attention`). The decoding contract is
`seqlab.models.base.Seq2SeqModel`'s.

Copy attention (`--copy`; See et al. 2017, "Get To The Point", the pointer-generator): a generation
probability p_gen = σ(w_c·c_t + w_s·s_t + w_x·x_t + b) from the context, the decoder state and the decoder
input (eq. 8) mixes the vocabulary distribution with the attention over the source:

    P(w) = p_gen P_vocab(w) + (1 - p_gen) Σ_{i: x_i = w} a_i                                 (eq. 9)

over the extended vocabulary: the V target words and the source's own out-of-vocabulary words (ids V,
V + 1, ..., per sentence: `seqlab.families.seq2seq.vocab.PairVocabulary.extend`), which only copying can write.
The model then returns log P(w) (B, [T,] V + n) in place of logits: log_softmax leaves log-probabilities
as they are, so the searches and the loss take them unchanged (as the adaptive softmax LM's). An extended
id fed back to the decoder reads as <unk>. Coverage (`--coverage`, eqs. 10-13): c^t = Σ_{t' < t} a^{t'}
feeds the attention scores (`seqlab.nn.cross_attention`) and is carried in the decoding state, with h.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor, nn

from seqlab.data.vocab import PAD, UNK
from seqlab.errors import SeqlabError
from seqlab.models.base import EncoderDecoderState, OutputLayer, Seq2SeqModel
from seqlab.nn.cross_attention import Attention
from seqlab.nn.encoders import RecurrentEncoder
from seqlab.nn.pooling import padding_mask
from seqlab.nn.recurrent import RecurrentStack


class RNNSeq2SeqOptions(Protocol):
    """What the RNN encoder-decoder reads of a model config (a family's config holds these fields)."""

    arch: str
    source_vocab_size: int
    target_vocab_size: int
    embedding_size: int
    hidden_size: int
    num_layers: int
    bidirectional: bool
    dropout: float
    attention: str
    readout: str
    share_embeddings: bool
    tie_embeddings: bool
    init_range: float
    rnn_impl: str
    copy: bool
    coverage: bool


class RNNEncoderDecoder(Seq2SeqModel):
    """SLP 13.7-13.8. The decoder has as many layers as the encoder, each as wide as an encoder layer's
    states in both directions, so the encoder's final state (forward and backward concatenated, per
    layer) is the decoder's initial state unchanged: h_0^d = h_n^e."""

    renamed_parameters = {"encoder.layers.": "encoder.rnn.layers."}    # the encoder is a `RecurrentEncoder`

    def __init__(self, config: RNNSeq2SeqOptions):
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
        self.attention = None if config.attention == "none" else Attention(config.attention, D, C,
                                                                           coverage=config.coverage)
        self.attends = self.attention is not None
        self.copy, self.coverage = config.copy, config.coverage
        # decoding never writes <unk> with copy: a word out of the vocabulary is copied from the source, and a
        # target word that is in neither comes out as the next most likely word (ROUGE / BLEU score <unk> as 0)
        self.never_generated = (UNK,) if self.copy else ()
        if (self.copy or self.coverage) and self.attention is None:
            raise SeqlabError("--copy and --coverage need attention over the source: add --attention dot, "
                              "bilinear or additive")
        # See et al. eq. 8: p_gen = σ(w_c·c_t + w_s·s_t + w_x·x_t + b_ptr), one linear map of [c_t; s_t; x_t]
        self.generation_gate = nn.Linear(C + D + E, 1) if self.copy else None
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

    def start(self, source: Tensor, lengths: Tensor, source_copy: Tensor | None = None) -> EncoderDecoderState:
        """The state before <s>; a copy model also takes the sources' extended ids (B, S)."""
        memory = self.encode(source, lengths, source_copy)
        return EncoderDecoderState(memory, self.init_state(memory))

    def encode(self, source: Tensor, lengths: Tensor, source_copy: Tensor | None = None) -> dict:
        outputs, final = self.encoder(self.drop(self.source_embedding(source)), lengths=lengths)  # (B, S, C)
        memory = {"outputs": outputs, "mask": padding_mask(lengths, source.size(1))}
        if self.copy:
            if source_copy is None:
                raise SeqlabError("a --copy model reads each source's extended ids too (source_copy): "
                                  "collate the batch with a PairVocabulary(copy=True)")
            memory["source_copy"] = source_copy                                  # (B, S)
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
        """h_0^d (L, B, D) (and the LSTM's cell); with coverage, the pair (that, c^0 = 0 (B, S))."""
        h = memory["h0"].transpose(0, 1).contiguous()                           # h_0^d = c, (L, B, D)
        state = (h, memory["c0"].transpose(0, 1).contiguous()) if self.lstm else h
        if self.coverage:
            return state, memory["mask"].new_zeros(memory["mask"].shape, dtype=memory["outputs"].dtype)
        return state

    def reorder_decoder(self, state, index: Tensor):
        """Rows `index` of h (L, B, D), and of c for the LSTM; of the coverage (B, S) too."""
        if self.coverage:
            return self._reorder_rnn(state[0], index), state[1].index_select(0, index)
        return self._reorder_rnn(state, index)

    def _reorder_rnn(self, state, index: Tensor):
        if self.lstm:
            return state[0].index_select(1, index), state[1].index_select(1, index)
        return state.index_select(1, index)

    def _top(self, state) -> Tensor:
        return (state[0] if self.lstm else state)[-1]                           # h_{i-1}^d of the top layer

    def _final_distribution(self, logits: Tensor, a: Tensor, s: Tensor, c: Tensor, x: Tensor,
                            source_copy: Tensor) -> Tensor:
        """See et al. eqs. 8-9: logits (..., V), attention a (..., S), decoder state s_t, context c_t and
        decoder input x_t -> log P(w) over the extended vocabulary (..., V + n), n the batch's most
        source words out of the vocabulary. source_copy (B, S): the source's extended ids."""
        p_gen = torch.sigmoid(self.generation_gate(torch.cat([c, s, x], dim=-1))).float()  # eq. 8, (..., 1)
        V = logits.size(-1)
        size = max(V, int(source_copy.max()) + 1)                               # V + n
        P = torch.zeros(*logits.shape[:-1], size, device=logits.device)         # (..., V + n)
        P[..., :V] = p_gen * torch.softmax(logits.float(), dim=-1)              # p_gen P_vocab(w)
        index = source_copy if a.dim() == 2 else source_copy[:, None].expand(-1, a.size(1), -1)   # (..., S)
        P = P.scatter_add(-1, index, (1 - p_gen) * a.float())                   # + (1 - p_gen) Σ_{i: x_i = w} a_i
        return P.clamp_min(torch.finfo(P.dtype).tiny).log()                     # eq. 9, log P(w), (..., V + n)

    def _embed(self, tokens: Tensor) -> Tensor:
        """The target embeddings; an extended id (a copied source word) reads as <unk> (See et al.)."""
        if self.copy:
            tokens = tokens.masked_fill(tokens >= self.config.target_vocab_size, UNK)
        return self.drop(self.target_embedding(tokens))

    def _logits(self, h: Tensor, c: Tensor, e: Tensor, output: str = "logits") -> Tensor:
        """The output layer over h_i^d (readout "hidden") or [h_i^d; c_i; ŷ_{i-1}] (full): logits (..., V),
        or with output="hidden" its input (..., D)."""
        return self.output(self.drop(torch.cat([h, c, e], dim=-1) if self.full_readout else h), output)

    def step(self, tokens: Tensor, state: EncoderDecoderState, need_weights: bool = False):
        """tokens (B,) -> logits (B, V), or for a copy model log P(w) (B, V + n) (eq. 9); the new state; the
        attention (B, S) (None without attention)."""
        memory, h = state.memory, state.decoder
        coverage = None
        if self.coverage:
            h, coverage = h                                                     # c^t, (B, S) (eq. 10)
        e = self._embed(tokens)                                                 # ŷ_{i-1}, (B, E)
        weights = None
        if self.attention is None:
            c = memory["context"]                                               # (B, C)
        else:                                                                   # eqs. 13.34-13.37
            c, weights = self.attention(self._top(h), memory["outputs"], memory["mask"], memory["prepared"],
                                        coverage)
        out, h = self.decoder.step(torch.cat([e, c], dim=-1), h)               # h_i^d = g(ŷ_{i-1}, h_{i-1}^d, c_i)
        scores = self._logits(out, c, e)                                        # (B, V)
        if self.copy:
            scores = self._final_distribution(scores, weights, out, c, e, memory["source_copy"])  # (B, V + n)
        if self.coverage:
            h = (h, coverage + weights)                                         # c^{t+1} = c^t + a^t (eq. 10)
        return scores, EncoderDecoderState(memory, h), weights

    def forward(self, source: Tensor, lengths: Tensor, target_in: Tensor, output: str = "logits",
                source_copy: Tensor | None = None, attention: bool = False):
        """Teacher forcing: target_in (B, T) = <s> y_1 .. y_{T-1} -> logits (B, T, V), or with output="hidden"
        the output layer's input (B, T, D). A copy model (source_copy: the sources' extended ids (B, S)) gives
        log P(w) (B, T, V + n) (See et al. eq. 9). With `attention`, also the attention a (B, T, S) and the
        coverage c (B, T, S) of each step (zeros without --coverage), for the coverage loss (eq. 12)."""
        memory = self.encode(source, lengths, source_copy)
        state = self.init_state(memory)
        e = self._embed(target_in)                                              # (B, T, E)
        if self.attention is None:                                              # c is fixed: one fused pass
            c = memory["context"][:, None].expand(-1, e.size(1), -1)            # (B, T, C)
            out, _ = self.decoder(torch.cat([e, c], dim=-1), state)             # (B, T, D)
            return self._logits(out, c, e, output)
        if self.copy and output != "logits":
            raise SeqlabError("a --copy model's forward gives log-probabilities over the extended vocabulary; "
                              "it has no output='hidden' (no fused output layer)")
        coverage = None
        if self.coverage:
            state, coverage = state                                             # c^0 = 0, (B, S)
        hs, cs, weights, coverages = [], [], [], []
        for t in range(e.size(1)):
            c, a = self.attention(self._top(state), memory["outputs"], memory["mask"], memory["prepared"],
                                  coverage)
            out, state = self.decoder(torch.cat([e[:, t], c], dim=-1)[:, None], state)
            hs.append(out[:, 0])
            cs.append(c)
            weights.append(a)
            coverages.append(coverage if coverage is not None else torch.zeros_like(a))
            if coverage is not None:
                coverage = coverage + a                                         # eq. 10
        h, c = torch.stack(hs, 1), torch.stack(cs, 1)                           # (B, T, D), (B, T, C)
        scores = self._logits(h, c, e, output)                                  # (B, T, V) or (B, T, D)
        if self.copy:
            scores = self._final_distribution(scores, torch.stack(weights, 1), h, c, e, source_copy)  # (B, T, V+n)
        if attention:
            return scores, torch.stack(weights, 1), torch.stack(coverages, 1)   # ..., (B, T, S), (B, T, S)
        return scores



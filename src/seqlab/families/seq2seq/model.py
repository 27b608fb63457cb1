"""Sequence-to-sequence configuration and construction: `--arch` -> one of the model classes (SLP 13.7-13.8, 9.4).

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

Each architecture is one file of `seqlab.models`: `rnn_seq2seq.py`, `transformer_seq2seq.py`, `separator_lm.py`; their
training and decoding contract is `seqlab.models.base.Seq2SeqModel`.
"""

from __future__ import annotations

from dataclasses import dataclass

from seqlab.config import check_fields, option
from seqlab.errors import SeqlabError
from seqlab.models.base import Seq2SeqModel
from seqlab.models.rnn_seq2seq import RNNEncoderDecoder
from seqlab.models.separator_lm import SeparatorLM
from seqlab.models.transformer_seq2seq import TransformerEncoderDecoder
from seqlab.nn.transformer import ACTIVATIONS

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
                                   "has this times the directions, so h_0^d = h_n^e)", at_least=1,
                              when={"arch": ("rnn", "lstm", "gru")})
    num_layers: int = option(1, "layers of the encoder and of the decoder (the lm: of the one stack)", at_least=1)
    bidirectional: bool = option(False, "rnn / lstm / gru: a bidirectional encoder",
                                 when={"arch": ("rnn", "lstm", "gru")})
    dropout: float = option(0.2, "dropout on embeddings, between layers and before the output layer",
                            at_least=0, below=1)
    readout: str = option("full", "rnn / lstm / gru: the output layer reads h_t (hidden: eq. 13.33) or "
                                  "[h_t; c_t; embedding of y_{t-1}] (full)", choices=("full", "hidden"),
                          when={"arch": ("rnn", "lstm", "gru")})
    tie_embeddings: bool = option(False, "the decoder's output layer reuses its input embedding matrix")
    share_embeddings: bool = option(False, "encoder and decoder share one embedding matrix (needs "
                                           "--shared-vocab)", when={"arch": ("rnn", "lstm", "gru", "transformer")})
    num_heads: int = option(4, "transformer / lm: attention heads", at_least=1, when={"arch": ("transformer", "lm")})
    ff_size: int = option(1024, "transformer / lm: feedforward hidden units", at_least=1,
                          when={"arch": ("transformer", "lm")})
    norm_position: str = option("pre", "transformer / lm: layer norm before (pre) or after (post, the book's) "
                                       "each sublayer", choices=("pre", "post"), when={"arch": ("transformer", "lm")})
    activation: str = option("relu", "transformer / lm: feedforward activation", choices=tuple(ACTIVATIONS),
                             when={"arch": ("transformer", "lm")})
    max_positions: int = option(256, "transformer: the longest source and target; lm: the longest source + "
                                     "<sep> + target", at_least=4)
    positions: str = option("learned", "transformer / lm: positional embeddings", choices=("learned", "sinusoidal"),
                            when={"arch": ("transformer", "lm")})
    init_range: float = option(0.0, "rnn / lstm / gru: embeddings and output layer ~ U(-r, r), as the LMs' "
                                    "--init-range; 0 keeps PyTorch's defaults (N(0, 1) embeddings, whose tied "
                                    "output layer starts with logits of std ~4 and a loss twice ln V)", at_least=0,
                               when={"arch": ("rnn", "lstm", "gru")})
    rnn_impl: str = option("fused", "rnn / lstm / gru: PyTorch's kernels or the textbook cells",
                           choices=("fused", "textbook"), when={"arch": ("rnn", "lstm", "gru")})
    copy: bool = option(False, "rnn / lstm / gru with --attention: the pointer-generator of See et al. 2017: "
                               "mix the vocabulary softmax with the attention over the source, so source words, "
                               "out-of-vocabulary ones too, can be copied", when={"arch": RECURRENT})
    coverage: bool = option(False, "rnn / lstm / gru with --attention: the coverage of See et al. 2017 (the sum "
                                   "of past attention feeds the attention scores) and its loss",
                            when={"arch": RECURRENT})
    coverage_weight: float = option(1.0, "with --coverage: λ, the weight of the coverage loss "
                                         "Σ_i min(a_i^t, c_i^t) (See et al. eq. 13)", at_least=0,
                                    when={"arch": RECURRENT})
    init_from: str = option("", "start from the best weights (and the vocabulary) of this trained run, the "
                                "options it lacks (--coverage's w_c) at their initial values: See et al. "
                                "add coverage to a trained pointer-generator so", when={"arch": RECURRENT})
    label_smoothing: float = option(0.0, "training loss: label smoothing (0: plain cross-entropy)", at_least=0, below=1)
    lm_loss: str = option("target", "lm: the loss on the target tokens only, or on every token (source too)",
                          choices=("target", "all"), when={"arch": ("lm",)})
    source_vocab_size: int = option(0, "set from the data", at_least=0)
    target_vocab_size: int = option(0, "set from the data", at_least=0)

    def __post_init__(self):
        check_fields(self)
        if self.attention != "none" and self.arch not in RECURRENT:
            raise SeqlabError(f"--attention {self.attention} is for rnn / lstm / gru encoder-decoders; the "
                              f"{self.arch} attends by its own design")
        for name in ("copy", "coverage"):
            if getattr(self, name) and self.arch not in RECURRENT:
                raise SeqlabError(f"--{name} is for rnn / lstm / gru encoder-decoders with attention, not the "
                                  f"{self.arch}")
            if getattr(self, name) and self.attention == "none":
                raise SeqlabError(f"--{name} needs attention over the source: add --attention dot, bilinear or "
                                  "additive")


def build_model(config: Seq2SeqConfig) -> Seq2SeqModel:
    """The model `config.arch` names."""
    if config.arch in RECURRENT:
        return RNNEncoderDecoder(config)
    if config.arch == "transformer":
        return TransformerEncoderDecoder(config)
    return SeparatorLM(config)

"""Language-model configuration and construction: `--arch` -> one of the model classes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import nn

from seqlab.config import check_fields, option
from seqlab.errors import SeqlabError
from seqlab.models.base import LanguageModel
from seqlab.models.ffn_lm import FeedforwardLM
from seqlab.models.rnn_lm import RecurrentLM
from seqlab.models.transformer_lm import TransformerLM
from seqlab.nn.adaptive_softmax import default_cutoffs, parse_cutoffs

ARCHS = {"ffn": FeedforwardLM, "rnn": RecurrentLM, "lstm": RecurrentLM, "gru": RecurrentLM,
         "transformer": TransformerLM}
DEFAULT_ACTIVATION = {"ffn": "tanh", "rnn": "tanh", "lstm": "tanh", "gru": "tanh", "transformer": "relu"}
ALLOWED_ACTIVATIONS = {"ffn": ("tanh", "sigmoid", "relu"), "rnn": ("tanh", "relu"),
                       "lstm": ("tanh",), "gru": ("tanh",), "transformer": ("relu", "gelu", "swiglu")}
DEFAULT_CONTEXT = {"ffn": 5, "transformer": 128}


@dataclass
class LMConfig:
    """Everything needed to rebuild a language model (saved in config.json under "model")."""

    arch: str = option("lstm", "architecture", choices=tuple(ARCHS))
    vocab_size: int = option(0, "vocabulary size (set from the training data)", at_least=0)
    embedding_size: int = option(200, "width of the token embeddings; the model width d of the transformer", at_least=1)
    hidden_size: int = option(200, "recurrent state size (rnn, lstm, gru) or hidden layer size (ffn)", at_least=1,
                              when={"arch": ("ffn", "rnn", "lstm", "gru")})
    num_layers: int = option(2, "recurrent layers or transformer blocks", flag="layers", at_least=1,
                             when={"arch": ("rnn", "lstm", "gru", "transformer")})
    dropout: float = option(0.2, "dropout probability on embeddings, between layers and on outputs",
                            at_least=0, below=1)
    variational_dropout: bool = option(False, "recurrent nets: one dropout mask for every time step",
                                       when={"arch": ("rnn", "lstm", "gru")})
    tie_weights: bool = option(False, "share the embedding matrix with the output layer (SLP 13.2.3)",
                               flag="tied")
    rnn_impl: str = option("fused", "recurrent layers on PyTorch's fused kernels or the textbook cells",
                           choices=("fused", "textbook"), when={"arch": ("rnn", "lstm", "gru")})
    gru_reset: str = option("after", "GRU reset gate after U (cuDNN, fused) or before U (the book, "
                            "textbook path only)", choices=("after", "before"), when={"arch": ("gru",)})
    activation: str = option("", "rnn: tanh|relu; ffn: tanh|sigmoid|relu; transformer FFN: relu|gelu|swiglu "
                             "(Shazeer 2020's gated FFN) (default: tanh, tanh, relu)")
    context: int = option(0, "ffn: N tokens in the window; transformer: longest context "
                          "(default 5 and 128)", at_least=0, when={"arch": ("ffn", "transformer")})
    num_heads: int = option(4, "transformer attention heads", flag="heads", at_least=1, when={"arch": ("transformer",)})
    ff_size: int = option(0, "transformer feedforward width (default 4 * embedding_size; with swiglu 8/3 of it, "
                          "rounded up to a multiple of 8: the same parameters in its three matrices)", at_least=0,
                          when={"arch": ("transformer",)})
    norm_position: str = option("post", "transformer LayerNorm after each sublayer (the book) or "
                                "before (pre-LN)", choices=("post", "pre"), when={"arch": ("transformer",)})
    positions: str = option("learned", "transformer positional embeddings: learned or sinusoidal vectors added to "
                            "the input, or rotary (Su et al. 2021: queries and keys rotated by their positions)",
                            choices=("learned", "sinusoidal", "rotary"), when={"arch": ("transformer",)})
    norm: str = option("layernorm", "transformer normalisation: LayerNorm (the book) or RMSNorm (Zhang & "
                       "Sennrich 2019)", choices=("layernorm", "rmsnorm"), when={"arch": ("transformer",)})
    qk_norm: bool = option(False, "transformer: RMS-normalise each head's queries and keys before their dot "
                           "product (QK-norm)", when={"arch": ("transformer",)})
    attention_impl: str = option("sdpa", "attention by PyTorch's fused kernel or the textbook code",
                                 choices=("sdpa", "textbook"), when={"arch": ("transformer",)})
    bias: bool = option(True, "transformer: additive biases in its linear layers, LayerNorms and output "
                        "layer (--no-bias as GPT-style models such as nanoGPT)", when={"arch": ("transformer",)})
    init_range: float = option(0.1, "rnn/lstm/gru/ffn: embeddings and output layer ~ U(-r, r); "
                               "0 keeps PyTorch's defaults (the transformer uses GPT-2's N(0, 0.02))", at_least=0,
                               when={"arch": ("ffn", "rnn", "lstm", "gru")})
    init_all: bool = option(False, "rnn/lstm/gru/ffn: every weight ~ U(-r, r), as Zaremba et al. 2014",
                            when={"arch": ("ffn", "rnn", "lstm", "gru")})
    output_layer: str = option("softmax", "the full softmax over the vocabulary, or the adaptive softmax (Grave "
                               "et al. 2017: a head over the most frequent words, smaller tail clusters)",
                               choices=("softmax", "adaptive"))
    cutoffs: str = option("", "adaptive softmax: where the clusters of the frequency-sorted vocabulary start, "
                          "e.g. 2000,10000 (default: 7.5% and 22.4% of the vocabulary, fairseq's wikitext-103 "
                          "20000,60000 of 267,735 words scaled)", when={"output_layer": ("adaptive",)})
    div_value: float = option(4.0, "adaptive softmax: cluster j's width is the hidden width / div_value^j",
                              at_least=1, when={"output_layer": ("adaptive",)})

    def __post_init__(self):
        check_fields(self)
        if not self.activation:
            self.activation = DEFAULT_ACTIVATION[self.arch]
        if self.activation not in ALLOWED_ACTIVATIONS[self.arch]:
            raise SeqlabError(f"--activation {self.activation!r} does not apply to --arch {self.arch}: "
                              f"choose {' or '.join(ALLOWED_ACTIVATIONS[self.arch])}")
        if not self.context:
            self.context = DEFAULT_CONTEXT.get(self.arch, 0)
        if self.arch == "transformer" and not self.ff_size:
            self.ff_size = 4 * self.embedding_size
            if self.activation == "swiglu":        # 3 matrices of d x f hold as many weights as 2 of d x 4d
                self.ff_size = 8 * math.ceil(8 * self.embedding_size / 3 / 8)
        if self.arch == "transformer" and self.embedding_size % self.num_heads:
            raise SeqlabError(f"--embedding-size {self.embedding_size} must be a multiple of --heads "
                              f"{self.num_heads}")
        if self.positions == "rotary" and (self.embedding_size // self.num_heads) % 2:
            raise SeqlabError(f"--positions rotary rotates pairs of dimensions: the head size (--embedding-size "
                              f"{self.embedding_size} / --heads {self.num_heads}) must be even")
        if not self.bias and self.arch != "transformer":
            raise SeqlabError(f"--no-bias applies to --arch transformer only, not {self.arch}")
        if self.output_layer == "adaptive":
            self._check_adaptive()
        if self.arch == "gru" and self.gru_reset == "before" and self.rnn_impl == "fused":
            raise SeqlabError("--gru-reset before is the book's GRU, which the fused kernel does not "
                              "compute: add --rnn-impl textbook (or use --gru-reset after)")

    def _check_adaptive(self):
        """--output-layer adaptive: not with --tied; --cutoffs well formed, and below the vocabulary size once
        it is known (the default cutoffs are filled in then, so the run's config.json records them)."""
        if self.tie_weights:
            raise SeqlabError("--tied does not apply to --output-layer adaptive (its head and clusters have "
                              "their own, narrower matrices): leave out --tied or use --output-layer softmax")
        if self.cutoffs:
            parse_cutoffs(self.cutoffs, self.vocab_size)
        elif self.vocab_size:
            self.cutoffs = ",".join(map(str, default_cutoffs(self.vocab_size)))

    @property
    def cutoff_list(self) -> list[int]:
        """--cutoffs as integers (the defaults once the vocabulary size is known)."""
        return parse_cutoffs(self.cutoffs, self.vocab_size) if self.cutoffs else default_cutoffs(self.vocab_size)


def build_lm(config: LMConfig) -> LanguageModel:
    if config.vocab_size < 1:
        raise SeqlabError("the model needs a vocabulary size (build the vocabulary first)")
    model = ARCHS[config.arch](config)
    if config.arch != "transformer" and config.init_range > 0:
        r = config.init_range
        output_weights = [p for p in model.output.parameters() if p.dim() == 2]    # W, or W_h, P_j and W_j
        targets = model.parameters() if config.init_all else [model.embedding.weight, *output_weights]
        for p in targets:
            nn.init.uniform_(p, -r, r)
        if not config.init_all:
            for p in model.output.parameters():
                if p.dim() == 1:
                    nn.init.zeros_(p)                                               # the bias
    return model

"""Language-model configuration and construction: `--arch` -> one of the model classes."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from seqlab.config import check_fields, option
from seqlab.errors import SeqlabError
from seqlab.models.base import LanguageModel
from seqlab.models.ffn_lm import FeedforwardLM
from seqlab.models.rnn_lm import RecurrentLM
from seqlab.models.transformer_lm import TransformerLM

ARCHS = {"ffn": FeedforwardLM, "rnn": RecurrentLM, "lstm": RecurrentLM, "gru": RecurrentLM,
         "transformer": TransformerLM}
DEFAULT_ACTIVATION = {"ffn": "tanh", "rnn": "tanh", "lstm": "tanh", "gru": "tanh", "transformer": "relu"}
ALLOWED_ACTIVATIONS = {"ffn": ("tanh", "sigmoid", "relu"), "rnn": ("tanh", "relu"),
                       "lstm": ("tanh",), "gru": ("tanh",), "transformer": ("relu", "gelu")}
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
    activation: str = option("", "rnn: tanh|relu; ffn: tanh|sigmoid|relu; transformer FFN: relu|gelu "
                             "(default: tanh, tanh, relu)")
    context: int = option(0, "ffn: N tokens in the window; transformer: longest context "
                          "(default 5 and 128)", at_least=0, when={"arch": ("ffn", "transformer")})
    num_heads: int = option(4, "transformer attention heads", flag="heads", at_least=1, when={"arch": ("transformer",)})
    ff_size: int = option(0, "transformer feedforward width (default 4 * embedding_size)", at_least=0,
                          when={"arch": ("transformer",)})
    norm_position: str = option("post", "transformer LayerNorm after each sublayer (the book) or "
                                "before (pre-LN)", choices=("post", "pre"), when={"arch": ("transformer",)})
    positions: str = option("learned", "transformer positional embeddings", choices=("learned", "sinusoidal"),
                            when={"arch": ("transformer",)})
    attention_impl: str = option("sdpa", "attention by PyTorch's fused kernel or the textbook code",
                                 choices=("sdpa", "textbook"), when={"arch": ("transformer",)})
    bias: bool = option(True, "transformer: additive biases in its linear layers, LayerNorms and output "
                        "layer (--no-bias as GPT-style models such as nanoGPT)", when={"arch": ("transformer",)})
    init_range: float = option(0.1, "rnn/lstm/gru/ffn: embeddings and output layer ~ U(-r, r); "
                               "0 keeps PyTorch's defaults (the transformer uses GPT-2's N(0, 0.02))", at_least=0,
                               when={"arch": ("ffn", "rnn", "lstm", "gru")})
    init_all: bool = option(False, "rnn/lstm/gru/ffn: every weight ~ U(-r, r), as Zaremba et al. 2014",
                            when={"arch": ("ffn", "rnn", "lstm", "gru")})

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
        if self.arch == "transformer" and self.embedding_size % self.num_heads:
            raise SeqlabError(f"--embedding-size {self.embedding_size} must be a multiple of --heads "
                              f"{self.num_heads}")
        if not self.bias and self.arch != "transformer":
            raise SeqlabError(f"--no-bias applies to --arch transformer only, not {self.arch}")
        if self.arch == "gru" and self.gru_reset == "before" and self.rnn_impl == "fused":
            raise SeqlabError("--gru-reset before is the book's GRU, which the fused kernel does not "
                              "compute: add --rnn-impl textbook (or use --gru-reset after)")


def build_lm(config: LMConfig) -> LanguageModel:
    if config.vocab_size < 1:
        raise SeqlabError("the model needs a vocabulary size (build the vocabulary first)")
    model = ARCHS[config.arch](config)
    if config.arch != "transformer" and config.init_range > 0:
        r = config.init_range
        targets = model.parameters() if config.init_all else (
            [model.embedding.weight, model.output.decoder.weight])
        for p in targets:
            nn.init.uniform_(p, -r, r)
        if not config.init_all:
            nn.init.zeros_(model.output.decoder.bias)
    return model

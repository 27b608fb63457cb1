"""The sequence classifier: a document -> one vector -> class scores (SLP 6.4-6.5, 9.2.5-9.2.6, 13.3.2).

    features (B, F) ------------------------------------------+
                                                              |-> feedforward head -> (B, K) scores
    words (B, T) -> embeddings (B, T, E) -> encoder -> pool --+   (softmax, eq. 6.27; or one sigmoid
                                                                   unit for two classes, eq. 6.25)

Architectures (`arch`):
    features     a feedforward network over hand-built feature vectors (SLP 6.4.1)
    pooled       a feedforward network over the mean or max of the word (and n-gram) embeddings
                 (SLP 6.5, eq. 6.21-6.22)
    rnn/lstm/gru a stacked, uni- or bidirectional recurrent encoder; the document is its last state
                 (13.3.2), the mean or max of all its states (eq. 13.15), or for a bidirectional one
                 the final forward and backward states combined (Fig. 9.12)
    transformer  a bidirectional (non-causal) encoder (SLP 9.4 without the mask), mean-pooled or read
                 at a classification token prepended to the document

With `--lm-features` (recurrent and transformer encoders), each token's contextual string embeddings
(`seqlab.nn.lm_features`, Akbik et al. 2018: states of frozen forward/backward character LMs run over
the document) join its word embedding before the encoder; `forward` takes them as `lm` (B, T, Fl),
computed once per document by `model.lm_features.embed` and cached by the task.

Documents are right-padded; `lengths` (B,) says where each ends, and padding never changes a score.
The model returns scores (logits); the task turns them into a loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seqlab.config import check_fields, option
from seqlab.data.vocab import BOS, PAD
from seqlab.errors import SeqlabError
from seqlab.models.base import Model
from seqlab.nn.encoders import RecurrentEncoder, TransformerEncoder
from seqlab.nn.feedforward import feedforward
from seqlab.nn.lm_features import ContextualStringEmbeddings, check_width
from seqlab.nn.pooling import COMBINE, max_pool, mean_pool

ARCHS = ("features", "pooled", "rnn", "lstm", "gru", "transformer")
# the pooled classifier's initial embeddings, N(0, 0.01^2): from PyTorch's N(0, 1) the max of the embeddings never
# left one class and the mean trained 3 points lower (benchmarks/results/classification_init.md)
POOLED_EMBEDDING_STD = 0.01
POOLINGS = ("auto", "last", "mean", "max", "cls")
RECURRENT = ("rnn", "lstm", "gru")


@dataclass
class ClassifierConfig:
    """What the classifier is (saved in config.json under "model")."""

    arch: str = option("lstm", "the architecture", choices=ARCHS)
    vocab_size: int = option(0, "vocabulary size (set from the data)", at_least=0)
    num_labels: int = option(0, "number of classes (set from the data)", at_least=0)
    num_features: int = option(0, "features arch: input features (set from the data)", at_least=0)
    embedding_size: int = option(128, "word embedding width (with --vectors: the vectors' width)", at_least=1,
                                 when={"arch": ("pooled", "rnn", "lstm", "gru", "transformer")})
    freeze_embeddings: bool = option(False, "keep the word embeddings as initialised (with --vectors)",
                                     when={"arch": ("pooled", "rnn", "lstm", "gru", "transformer")})
    embedding_std: float = option(0.0, "standard deviation of the random initial embeddings; 0: the arch's "
                                       "default, 0.01 for pooled (max pooling of embeddings learns only from "
                                       "small ones, mean pooling gains 3 points) and 1 (PyTorch's N(0, 1)) for the "
                                       "others", at_least=0,
                                  when={"arch": ("pooled", "rnn", "lstm", "gru", "transformer")})
    hidden_size: int = option(128, "recurrent state per direction; the transformer's width; the hidden "
                                   "layers of the features and pooled networks", at_least=1)
    num_layers: int = option(1, "stacked encoder layers (features / pooled: hidden layers)", flag="layers", at_least=1)
    bidirectional: bool = option(False, "recurrent encoders: read the document both ways",
                                 when={"arch": ("rnn", "lstm", "gru")})
    pooling: str = option("auto", "the document vector: last (recurrent: the final state; bidirectional: "
                                  "both directions' final states, combined), mean, max (of all states or "
                                  "embeddings), cls (transformer: a classification token); auto: last for "
                                  "recurrent encoders, mean otherwise", choices=POOLINGS)
    combine: str = option("concat", "bidirectional: how the two directions' states are combined "
                                    "(SLP Fig. 9.12)", choices=COMBINE, when={"arch": ("rnn", "lstm", "gru")})
    head_size: int = option(0, "recurrent / transformer: a hidden layer of this width in the head "
                               "(0: a linear layer on the document vector)", at_least=0,
                            when={"arch": ("rnn", "lstm", "gru", "transformer")})
    dropout: float = option(0.5, "dropout on the embeddings, between layers and before the output", at_least=0, below=1)
    output_layer: str = option("softmax", "softmax over the classes (eq. 6.27), or for two classes one "
                                          "sigmoid unit with binary cross-entropy (eq. 6.25)",
                               choices=("softmax", "sigmoid"))
    num_heads: int = option(4, "transformer: attention heads", flag="heads", at_least=1,
                            when={"arch": ("transformer",)})
    ff_size: int = option(0, "transformer: feedforward width (0: 4 x hidden)", at_least=0,
                          when={"arch": ("transformer",)})
    max_positions: int = option(512, "transformer: the longest document, in tokens (learned positions)", at_least=2,
                                when={"arch": ("transformer",)})
    positions: str = option("learned", "transformer positional embeddings", choices=("learned", "sinusoidal"),
                            when={"arch": ("transformer",)})
    norm_position: str = option("pre", "transformer LayerNorm after (post, as in the text) or before each "
                                       "sublayer (pre)", choices=("post", "pre"), when={"arch": ("transformer",)})
    rnn_impl: str = option("fused", "recurrent encoders: fused kernels or the textbook cells",
                           choices=("fused", "textbook"), when={"arch": ("rnn", "lstm", "gru")})
    lm_feature_size: int = option(0, "width of the contextual string embeddings of the --lm-features LMs (set "
                                     "from them; 0: none)", at_least=0)

    def __post_init__(self):
        check_fields(self)
        if self.lm_feature_size and self.arch not in (*RECURRENT, "transformer"):
            raise SeqlabError(f"--lm-features gives each token a vector for an encoder to read: use --arch lstm, "
                              f"gru, rnn or transformer, not {self.arch}")
        if self.embedding_std == 0:                  # the arch's default, saved as the value it stands for
            self.embedding_std = POOLED_EMBEDDING_STD if self.arch == "pooled" else 1.0
        pooling = self.document_pooling
        allowed = {"features": ("mean",), "pooled": ("mean", "max"), "transformer": ("mean", "max", "cls")}
        if pooling not in allowed.get(self.arch, ("last", "mean", "max")):
            raise SeqlabError(f"--pooling {pooling}: the {self.arch} classifier takes "
                              f"{', '.join(allowed.get(self.arch, ('last', 'mean', 'max')))}")
        if self.arch == "transformer" and self.hidden_size % self.num_heads:
            raise SeqlabError(f"--hidden-size {self.hidden_size} must be a multiple of --heads {self.num_heads}")

    @property
    def document_pooling(self) -> str:
        if self.pooling != "auto":
            return self.pooling
        return "last" if self.arch in RECURRENT else "mean"

    @property
    def outputs(self) -> int:
        return 1 if self.output_layer == "sigmoid" else self.num_labels


class Classifier(Model):
    # the encoders' parameters moved into `seqlab.nn.encoders` (self.encoder)
    renamed_parameters = {"rnn.": "encoder.rnn.", "project.": "encoder.project.", "positions.": "encoder.positions.",
                          "blocks.": "encoder.blocks.", "final_norm.": "encoder.final_norm."}

    def __init__(self, config: ClassifierConfig, lm_features: ContextualStringEmbeddings | None = None):
        """`lm_features`: the frozen character LMs whose states join each token's embedding
        (`config.lm_feature_size` wide)."""
        super().__init__()
        c = self.config = config
        check_width(lm_features, c.lm_feature_size, "classifier")
        self.lm_features = lm_features
        if c.num_labels < 2:
            raise SeqlabError("a classifier needs at least two classes")
        if c.output_layer == "sigmoid" and c.num_labels != 2:
            raise SeqlabError(f"--output-layer sigmoid is for two classes; this data has {c.num_labels}: "
                              "use softmax")
        self.drop = nn.Dropout(c.dropout)
        if c.arch == "features":
            if c.num_features < 1:
                raise SeqlabError("the features classifier needs at least one feature")
            self.head = feedforward(c.num_features, c.hidden_size, c.num_layers, c.outputs, c.dropout)
            return
        if c.vocab_size < 1:
            raise SeqlabError("a classifier over words needs its vocabulary size")
        self.embedding = nn.Embedding(c.vocab_size, c.embedding_size, padding_idx=PAD)
        if c.embedding_std != 1.0:
            with torch.no_grad():
                self.embedding.weight.normal_(0.0, c.embedding_std)
                self.embedding.weight[PAD] = 0.0
        self.embedding.weight.requires_grad_(not c.freeze_embeddings)
        if c.arch == "pooled":
            self.head = feedforward(c.embedding_size, c.hidden_size, c.num_layers, c.outputs, c.dropout)
            return
        if c.arch in RECURRENT:
            self.encoder = RecurrentEncoder(c.arch, c.embedding_size + c.lm_feature_size, c.hidden_size,
                                            c.num_layers, c.dropout, c.bidirectional, c.combine, c.rnn_impl)
            width = self.encoder.output_size
        else:
            self.encoder = TransformerEncoder(c.hidden_size, c.num_layers, c.num_heads, c.ff_size or 4 * c.hidden_size,
                                              c.dropout, c.norm_position, "gelu",
                                              input_size=c.embedding_size + c.lm_feature_size,
                                              positions=c.positions, max_positions=c.max_positions)
            width = c.hidden_size
        self.head = feedforward(width, c.head_size, 1, c.outputs, c.dropout)

    def forward(self, words: Tensor | None, lengths: Tensor | None, features: Tensor | None = None,
                lm: Tensor | None = None) -> Tensor:
        """words (B, T), lengths (B,) [, lm (B, T, Fl)] or features (B, F) -> class scores (B, K), or (B, 1)
        for sigmoid."""
        c = self.config
        if c.arch == "features":
            if features is None:
                raise SeqlabError("the features classifier needs each document's feature vector")
            return self.head(features)                                 # (B, K)
        return self.head(self.drop(self.encode(words, lengths, lm)))   # (B, K)

    def encode(self, words: Tensor, lengths: Tensor, lm: Tensor | None = None) -> Tensor:
        """words (B, T), lengths (B,) [, lm (B, T, Fl)] -> document vectors (B, D)."""
        c = self.config
        pooling = c.document_pooling
        x = self.embedding(words)                                      # (B, T, E)
        if self.lm_features is not None:
            if lm is None:
                raise SeqlabError("this classifier uses LM features: pass each token's (model.lm_features.embed)")
            x = torch.cat([x, lm.to(x.dtype)], dim=-1)                 # (B, T, E + Fl), Akbik et al. eq. 2
        x = self.drop(x)
        if c.arch == "pooled":
            return mean_pool(x, lengths) if pooling == "mean" else max_pool(x, lengths)   # (B, E)
        if c.arch in RECURRENT:
            h, final = self.encoder(x, lengths)                        # (B, T, 2H or H)
            if pooling == "last":                                      # h_n; bidirectional: Fig. 9.12
                return self.encoder.final_vector(final)                # (B, 2H or H)
        else:
            h, lengths = self.transform(x, words, lengths)             # (B, T', D)
            if pooling == "cls":
                return h[:, 0]                                         # (B, D)
        return mean_pool(h, lengths) if pooling == "mean" else max_pool(h, lengths)

    def transform(self, x: Tensor, words: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """The transformer encoder over x (B, T, E), with a classification token first when pooling
        is cls (the embedding of <s>); returns the states and their lengths."""
        c = self.config
        if c.document_pooling == "cls":
            first = self.drop(self.embedding(torch.full_like(words[:, :1], BOS)))   # (B, 1, E)
            if c.lm_feature_size:                                      # the token has no LM features: zeros
                first = torch.cat([first, first.new_zeros(*first.shape[:2], c.lm_feature_size)], dim=-1)
            x, lengths = torch.cat([first, x], dim=1), lengths + 1     # (B, T+1, E)
        T = x.size(1)
        if T > c.max_positions:
            raise SeqlabError(f"a document of {T} tokens is longer than this transformer's {c.max_positions} "
                              "positions; lower --max-length")
        return self.encoder(x, lengths), lengths                      # (B, T, D)


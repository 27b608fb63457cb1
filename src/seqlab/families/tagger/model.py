"""The sequence tagger (SLP 9.2.4 / 13.3.1): words -> per-token tag scores, from one composable model.

    words (B, T) --embedding--+                                   +-- softmax per token (13.3.1)
                              |-> (B, T, E) -> encoder -> (B, T, F) -> linear -> (B, T, K)
    chars (B, T, C) --char BiLSTM / CNN per word--+                   +-- or a linear-chain CRF
    lm (B, T, Fl) --contextual string embeddings--+      (optional, Akbik et al. 2018)

Encoders: `rnn`, `lstm`, `gru` (stacked, uni- or bidirectional, the two directions combined by
concatenation, sum, product or mean, SLP 9.2.6), `transformer` (a bidirectional encoder: the
blocks of SLP 9.4 without the causal mask) and `window` (the feedforward baseline: the embeddings
of the 2w+1 tokens around each position, concatenated, through one hidden layer, SLP 6.5); the
recurrent and transformer encoders come from `seqlab.nn.encoders`. Character features
(`seqlab.nn.char_encoder`: Lample et al. 2016, a BiLSTM over each word's characters; Ma & Hovy 2016,
a CNN with max-pooling) give unseen words a representation from their spelling. Contextual string
embeddings (`seqlab.nn.lm_features`, Akbik et al. 2018) add each word's states in frozen forward and
backward character LMs run over the whole sentence: the model holds the LMs (`model.lm_features`, their
weights saved with the tagger's) and `forward` takes their features `lm` (B, T, Fl), computed once per
sentence by `model.lm_features.embed` and cached by the task, since the LMs never change.

Sentences are right-padded; `lengths` (B,) says where each ends, and padding never changes a real
token's scores. The model returns emission scores; the task turns them into a loss, through the
CRF (`model.crf`) when there is one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.config import check_fields, option
from seqlab.data.vocab import PAD
from seqlab.errors import SeqlabError
from seqlab.models.base import Model
from seqlab.nn.char_encoder import CharEncoder
from seqlab.nn.crf import CRF
from seqlab.nn.encoders import RecurrentEncoder, TransformerEncoder
from seqlab.nn.lm_features import ContextualStringEmbeddings, check_width
from seqlab.nn.pooling import COMBINE, padding_mask

ENCODERS = ("rnn", "lstm", "gru", "transformer", "window")
CHAR_FEATURES = ("none", "lstm", "cnn")


@dataclass
class TaggerConfig:
    """What the tagger is (saved in config.json under "model")."""

    encoder: str = option("lstm", "the encoder", choices=ENCODERS)
    vocab_size: int = option(0, "word vocabulary size (set from the data)", at_least=0)
    num_labels: int = option(0, "number of tags (set from the data)", at_least=0)
    char_vocab_size: int = option(0, "character vocabulary size (set from the data)", at_least=0)
    embedding_size: int = option(100, "word embedding width (with --vectors: the vectors' width)", at_least=1)
    freeze_embeddings: bool = option(False, "keep the word embeddings as initialised (with --vectors: the "
                                            "pretrained vectors stay fixed; words without one keep a random "
                                            "vector)")
    hidden_size: int = option(128, "recurrent state per direction; the transformer's width; the window "
                                   "tagger's hidden layer", at_least=1)
    num_layers: int = option(1, "stacked encoder layers", flag="layers", at_least=1,
                             when={"encoder": ("rnn", "lstm", "gru", "transformer")})
    bidirectional: bool = option(True, "recurrent encoders: read the sentence both ways",
                                 when={"encoder": ("rnn", "lstm", "gru")})
    combine: str = option("concat", "how the two directions' states are combined (SLP 9.2.6)", choices=COMBINE,
                          when={"encoder": ("rnn", "lstm", "gru")})
    dropout: float = option(0.5, "dropout on the embeddings, between layers and before the output", at_least=0, below=1)
    char_features: str = option("lstm", "character-level word features: a BiLSTM over each word's characters "
                                        "(Lample et al. 2016), a CNN (Ma & Hovy 2016), or none",
                                choices=CHAR_FEATURES)
    char_embedding_size: int = option(25, "character embedding width", at_least=1,
                                      when={"char_features": ("lstm", "cnn")})
    char_hidden_size: int = option(25, "char BiLSTM state per direction, or the number of CNN filters", at_least=1,
                                   when={"char_features": ("lstm", "cnn")})
    char_kernel: int = option(3, "char CNN: characters per filter", at_least=1, when={"char_features": ("cnn",)})
    window: int = option(2, "window tagger: tokens on each side", at_least=0, when={"encoder": ("window",)})
    num_heads: int = option(4, "transformer: attention heads", flag="heads", at_least=1,
                            when={"encoder": ("transformer",)})
    ff_size: int = option(0, "transformer: feedforward width (0: 4 x hidden)", at_least=0,
                          when={"encoder": ("transformer",)})
    max_positions: int = option(512, "transformer: longest sentence (learned positions)", at_least=1,
                                when={"encoder": ("transformer",)})
    positions: str = option("learned", "transformer positional embeddings", choices=("learned", "sinusoidal"),
                            when={"encoder": ("transformer",)})
    norm_position: str = option("pre", "transformer LayerNorm after (post, as in the text) or before each "
                                       "sublayer (pre)", choices=("post", "pre"), when={"encoder": ("transformer",)})
    lm_feature_size: int = option(0, "width of the contextual string embeddings of the --lm-features LMs "
                                     "(set from them; 0: none)", at_least=0)
    crf: bool | None = option(None, "a linear-chain CRF output layer (Viterbi decoding) instead of per-token "
                                    "softmax (default: on for entity tags such as B-PER / I-PER, whose spans it "
                                    "keeps valid and which it learns faster, off for plain tags such as POS)")
    rnn_impl: str = option("fused", "recurrent encoders: fused kernels or the textbook cells",
                           choices=("fused", "textbook"), when={"encoder": ("rnn", "lstm", "gru")})

    def __post_init__(self):
        check_fields(self)
        if self.encoder == "transformer" and self.hidden_size % self.num_heads:
            raise SeqlabError(f"--hidden-size {self.hidden_size} must be a multiple of --heads {self.num_heads}")


class Tagger(Model):
    # the encoders' parameters moved into `seqlab.nn.encoders` (self.encoder)
    renamed_parameters = {"rnn.": "encoder.rnn.", "project.": "encoder.project.", "positions.": "encoder.positions.",
                          "blocks.": "encoder.blocks.", "final_norm.": "encoder.final_norm."}

    def __init__(self, config: TaggerConfig, constraints: tuple | None = None,
                 lm_features: ContextualStringEmbeddings | None = None):
        """`constraints`: (allowed, allowed_start, allowed_end) boolean tensors for the CRF, from
        `seqlab.data.tags.allowed_transitions`; they are saved with the weights. `lm_features`: the frozen
        character LMs whose states join each word's input (`config.lm_feature_size` wide)."""
        super().__init__()
        if config.vocab_size < 1 or config.num_labels < 1:
            raise SeqlabError("a tagger needs its vocabulary and label counts")
        self.config = c = config
        self.embedding = nn.Embedding(c.vocab_size, c.embedding_size, padding_idx=PAD)
        self.embedding.weight.requires_grad_(not c.freeze_embeddings)
        width = c.embedding_size
        self.chars = None
        if c.char_features != "none":
            if c.char_vocab_size < 1:
                raise SeqlabError("character features need a character vocabulary")
            self.chars = CharEncoder(c.char_features, c.char_vocab_size, c.char_embedding_size,
                                     c.char_hidden_size, c.char_kernel)
            width += self.chars.output_size
        self.lm_features = lm_features
        check_width(lm_features, c.lm_feature_size, "tagger")
        width += c.lm_feature_size
        self.drop = nn.Dropout(c.dropout)
        if c.encoder in ("rnn", "lstm", "gru"):
            self.encoder = RecurrentEncoder(c.encoder, width, c.hidden_size, c.num_layers, c.dropout,
                                            c.bidirectional, c.combine, c.rnn_impl)
            features = self.encoder.output_size
        elif c.encoder == "transformer":
            self.encoder = TransformerEncoder(c.hidden_size, c.num_layers, c.num_heads, c.ff_size or 4 * c.hidden_size,
                                              c.dropout, c.norm_position, "gelu", input_size=width,
                                              positions=c.positions, max_positions=c.max_positions)
            features = c.hidden_size
        else:                                                          # window
            self.hidden = nn.Linear((2 * c.window + 1) * width, c.hidden_size)
            features = c.hidden_size
        self.output = nn.Linear(features, c.num_labels)
        self.crf = CRF(c.num_labels, *(constraints or ())) if c.crf else None

    def forward(self, words: Tensor, lengths: Tensor, chars: Tensor | None = None,
                lm: Tensor | None = None) -> Tensor:
        """words (B, T), lengths (B,), chars (B, T, C), lm (B, T, Fl) -> emission scores (B, T, K)."""
        c = self.config
        B, T = words.shape
        x = self.embedding(words)                                      # (B, T, E)
        if self.chars is not None:
            if chars is None:
                raise SeqlabError("this tagger uses character features: pass the characters of each word")
            spelled = self.chars(chars.reshape(B * T, -1)).view(B, T, -1)   # (B, T, Fc)
            x = torch.cat([x, spelled], dim=-1)                        # (B, T, E + Fc)
        if self.lm_features is not None:
            if lm is None:
                raise SeqlabError("this tagger uses LM features: pass each word's (model.lm_features.embed)")
            x = torch.cat([x, lm.to(x.dtype)], dim=-1)                 # (B, T, E + Fc + Fl), Akbik et al. eq. 2
        x = self.drop(x)
        mask = padding_mask(lengths.to(words.device), T)               # (B, T)
        if c.encoder in ("rnn", "lstm", "gru"):
            h, _ = self.encoder(x, lengths)                            # (B, T, F)
        elif c.encoder == "transformer":
            if T > c.max_positions:
                raise SeqlabError(f"a sentence of {T} tokens is longer than this transformer tagger's "
                                  f"{c.max_positions} positions (--max-positions at training); split it")
            h = self.encoder(x, mask=mask)                             # (B, T, D)
        else:
            x = x * mask[:, :, None]                                   # padding reads as outside the sentence
            padded = F.pad(x, (0, 0, c.window, c.window))              # (B, T + 2w, E)
            windows = padded.unfold(1, 2 * c.window + 1, 1)            # (B, T, E, 2w+1)
            windows = windows.transpose(2, 3).reshape(B, T, -1)        # (B, T, (2w+1) E)
            h = torch.relu(self.hidden(windows))                       # (B, T, H)
        return self.output(self.drop(h))                               # (B, T, K)


"""The contracts every seqlab network follows, written once: `Model` (what the trainer and the
pipelines rely on), `LanguageModel` and `Seq2SeqModel` (their forward and decoding contracts), and the
output layer the language models and decoders share.

A `Model` is an `nn.Module` whose forward maps a batch's tensors to scores: logits (B, T, V) and a state
for a language model, logits (B, T, V) for a sequence-to-sequence model (teacher forcing), emission
scores (B, T, K) for a tagger, class scores (B, K) for a classifier. The task (`seqlab.tasks`) turns the
scores into a loss; the model knows nothing of losses or data. A state carried from one batch to the
next (truncated BPTT) lies along `state_batch_dim`, and `detach_state` cuts its graph between steps.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.data.vocab import BOS


class OutputLayer(nn.Module):
    """h (..., H) -> logits (..., V).

    Tied (SLP 13.2.3, Press & Wolf 2017): the output matrix is the transposed embedding matrix E,
    so the same vectors read and write words. When H differs from the embedding width E, h is first
    projected to E by a learned (E, H) matrix.
    """

    def __init__(self, input_size: int, embedding: nn.Embedding, tie: bool, bias: bool = True):
        super().__init__()
        vocab_size, embedding_size = embedding.weight.shape
        self.projection = (nn.Linear(input_size, embedding_size, bias=False)
                           if tie and input_size != embedding_size else None)
        self.decoder = nn.Linear(embedding_size if tie else input_size, vocab_size, bias=bias)
        if tie:
            self.decoder.weight = embedding.weight                    # (V, E), shared

    def forward(self, h: Tensor) -> Tensor:
        if self.projection is not None:
            h = self.projection(h)                                    # (..., E)
        return self.decoder(h)                                        # (..., V)


class Model(nn.Module):
    """The contract of every network (`seqlab.training.trainer.Trainer` uses nothing else): `forward`,
    the carried state's batch dimension, `detach_state` and `num_parameters`."""

    state_batch_dim = 0        # the batch dimension of a carried state's tensors
    # parameters renamed since a release, {"old.prefix.": "new.prefix."}: loading maps a saved run's names
    renamed_parameters: dict[str, str] = {}

    def detach_state(self, state):
        """Cut the graph at a segment boundary (truncated BPTT), keeping the values: a tensor or a tuple
        of tensors is detached; None, and a decoding state such as a KV cache, pass through unchanged."""
        if isinstance(state, Tensor):
            return state.detach()
        if isinstance(state, tuple):
            return tuple(self.detach_state(part) for part in state)
        return state

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class LanguageModel(Model):
    """A language model: `forward(tokens (B, T), state) -> (logits (B, T, V), state)`.

    `context_length` is None when it reads a stream of any length by carrying a state (RNNs, and the
    window LM, whose state is its last N-1 tokens), or the longest sequence it can attend over (the
    transformer, trained on independent windows; its decoding state is a KV cache)."""

    context_length: int | None = None

    def init_state(self, batch_size: int, device=None):
        return None

    @torch.no_grad()
    def step(self, tokens: Tensor, state):
        """Decoding: feed tokens (B, T) after what `state` has seen; logits (B, T, V) and new state."""
        return self(tokens, state)


class Seq2SeqModel(Model):
    """A sequence-to-sequence model (SLP 13.7-13.8, 9.4.1): an encoder reads the source, a decoder writes
    the target.

    Trained with teacher forcing (13.7.1): `forward(source (B, S), lengths (B,), target_in (B, T))` gives
    the logits (B, T, V) of every target position at once. Decoding (`seqlab.search`) drives the same
    model one token at a time:

        memory = model.encode(source, lengths)        what the decoder reads (a dict of batch-first tensors)
        state  = model.init_state(memory)             the decoder's state before the first token
        logits, state, weights = model.step(tokens, state, memory, need_weights)
        model.reorder_state(state, index) / model.reorder_memory(memory, index)   (beam search)

    The first token fed is `start_token`: <s> for encoder-decoders, <sep> for the language model."""

    start_token = BOS
    attends = False            # whether `step` can return attention weights over the source

    def __init__(self, config):
        super().__init__()
        self.config = config

    def target_room(self, lengths: Tensor) -> Tensor | None:
        """The most output tokens (</s> included) the decoder can produce after each source (B,), or
        None for no limit. The transformer decoder reads <s> and n - 1 tokens to produce n."""
        return None

    def reorder_memory(self, memory: dict, index: Tensor) -> dict:
        return {name: value.index_select(0, index) for name, value in memory.items()}

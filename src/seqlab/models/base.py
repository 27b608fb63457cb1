"""The contracts every seqlab network follows, written once: `Model` (what the trainer and the
pipelines rely on), `IncrementalDecoder` (the one decoding contract of every language model and every
sequence-to-sequence model, which `seqlab.decoding.search` drives), `LanguageModel` and `Seq2SeqModel` (their
forward and decoding contracts), and the output layer the language models and decoders share.

A `Model` is an `nn.Module` whose forward maps a batch's tensors to scores: logits (B, T, V) and a state
for a language model, logits (B, T, V) for a sequence-to-sequence model (teacher forcing), emission
scores (B, T, K) for a tagger, class scores (B, K) for a classifier. The task (`seqlab.families.<name>.task`)
turns the scores into a loss; the model knows nothing of losses or data. A state carried from one batch to the
next (truncated BPTT) lies along `state_batch_dim`, and `detach_state` cuts its graph between steps.

The language models and the sequence-to-sequence models end in an `OutputLayer` over a vocabulary
(`model.output`), and their forward takes `output="hidden"` to return, in place of the logits, the
states that layer's matrix multiplies (B, T, D): the task then computes the output layer and its loss
together (`seqlab.nn.fused_output.linear_cross_entropy`, never holding the (B, T, V) logits) from them
and `model.output.weight_and_bias()`. It is a keyword of `forward`, not a method of its own, because
the trainer calls the model through DistributedDataParallel (and torch.compile), which only see calls
of forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from seqlab.data.vocab import BOS, UNK
from seqlab.errors import SeqlabError
from seqlab.nn.adaptive_softmax import AdaptiveOutputLayer

OUTPUTS = ("logits", "hidden")     # what a language model's or a decoder's forward returns, by `output=`


class OutputLayer(nn.Module):
    """h (..., H) -> logits (..., V).

    Tied (SLP 13.2.3, Press & Wolf 2017): the output matrix is the transposed embedding matrix E,
    so the same vectors read and write words. When H differs from the embedding width E, h is first
    projected to E by a learned (E, H) matrix.

    `forward(h, output="hidden")` stops before the (V, D) matrix: it returns `project(h)` (..., D), which
    `weight_and_bias()` turns into the logits, project(h) W^T + b, exactly as `forward(h)` does.
    """

    def __init__(self, input_size: int, embedding: nn.Embedding, tie: bool, bias: bool = True):
        super().__init__()
        vocab_size, embedding_size = embedding.weight.shape
        self.projection = (nn.Linear(input_size, embedding_size, bias=False)
                           if tie and input_size != embedding_size else None)
        self.decoder = nn.Linear(embedding_size if tie else input_size, vocab_size, bias=bias)
        if tie:
            self.decoder.weight = embedding.weight                    # (V, E), shared

    def project(self, h: Tensor) -> Tensor:
        """h (..., H) -> what the (V, D) matrix multiplies (..., D): the tied projection's output, or h."""
        return h if self.projection is None else self.projection(h)   # (..., E)

    def weight_and_bias(self) -> tuple[Tensor, Tensor | None]:
        """The output matrix W (V, D) (the embedding matrix when tied) and its bias b (V,) or None."""
        return self.decoder.weight, self.decoder.bias

    def forward(self, h: Tensor, output: str = "logits") -> Tensor:
        """h (..., H) -> the logits (..., V), or with output="hidden" the projected states (..., D)."""
        if output not in OUTPUTS:
            raise SeqlabError(f"output={output!r}: a model's forward returns logits or hidden (the states "
                              "entering its output layer)")
        h = self.project(h)                                           # (..., D)
        return h if output == "hidden" else self.decoder(h)           # (..., V)


def build_output_layer(config, input_size: int, embedding: nn.Embedding, bias: bool = True) -> nn.Module:
    """A language model's output layer over h (..., input_size), from its model config (output_layer, vocab_size,
    tie_weights; with adaptive, cutoff_list and div_value): the full softmax's `OutputLayer` (tied to `embedding`
    with --tied), or with --output-layer adaptive the `seqlab.nn.adaptive_softmax.AdaptiveOutputLayer`."""
    if config.output_layer == "adaptive":
        return AdaptiveOutputLayer(input_size, config.vocab_size, config.cutoff_list, config.div_value, bias)
    return OutputLayer(input_size, embedding, config.tie_weights, bias)


class Model(nn.Module):
    """The contract of every network (`seqlab.training.trainer.Trainer` uses nothing else): `forward`,
    the carried state's batch dimension, `detach_state` and `num_parameters`. A network that ends in an
    `OutputLayer` over a vocabulary (`LanguageModel`, `Seq2SeqModel`) holds it as `output`, and its
    forward also takes `output="logits"` (the default) or `output="hidden"` (the states entering it)."""

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


@runtime_checkable
class IncrementalDecoder(Protocol):
    """The one incremental-decoding contract (fairseq's FairseqIncrementalDecoder) that every language
    model and every sequence-to-sequence model follows, and all that the searches of `seqlab.decoding.search`
    (greedy, sampling, beam) use once decoding has started:

        logits, state, weights = model.step(tokens, state, need_weights)
            tokens (B,): the last token of each row -> logits (B, V) of the next one, the new state, and
            the attention weights over the source (B, S) when asked for and the model has them (else None)
        state = model.reorder_state(state, index)
            index (B',): the rows of the state kept or repeated, in order (beam search follows the
            surviving hypotheses with it; finished rows leave the batch)

    How decoding starts differs, and stays explicit:

        state = lm.start(prompt)                  prompt (B, T): reads all tokens but the last, which
                                                  the search feeds first
        state = seq2seq.start(source, lengths)    encodes the source; the state carries the memory;
                                                  the search feeds `seq2seq.start_token` first
    """

    def step(self, tokens: Tensor, state: Any, need_weights: bool = False) -> tuple[Tensor, Any, Tensor | None]:
        ...

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        ...


class LanguageModel(Model):
    """A language model: `forward(tokens (B, T), state) -> (logits (B, T, V), state)` for training, and the
    `IncrementalDecoder` contract for generation. `forward(tokens, state, output="hidden")` returns the
    states entering its output layer `self.output` (an `OutputLayer`) in place of the logits: (B, T, D),
    with the same state; the task takes the loss from them (a fused output layer).

    `context_length` is None when it reads a stream of any length by carrying a state (RNNs, and the
    window LM, whose state is its last N-1 tokens), or the longest sequence it can attend over (the
    transformer, trained on independent windows; its decoding state is a KV cache and the tokens in it)."""

    context_length: int | None = None
    # a continuation is text: <unk> (a word the vocabulary lacks) is no text, so no search generates it (beside
    # the ids no model generates, `seqlab.decoding.search.blocked_tokens`); scoring still gives its probability
    never_generated: tuple[int, ...] = (UNK,)

    def init_state(self, batch_size: int, device=None):
        """The state `forward` carries before any text (training, scoring)."""
        return None

    def start(self, prompt: Tensor):
        """The decoding state after all the prompt's (B, T) tokens but the last, which the search feeds."""
        state = self.init_state(prompt.size(0), prompt.device)
        if prompt.size(1) > 1:
            _, state = self(prompt[:, :-1], state)
        return state

    def step(self, tokens: Tensor, state, need_weights: bool = False):
        """tokens (B,) after what `state` has read -> logits (B, V), the new state, None (no weights)."""
        logits, state = self(tokens[:, None], state)                   # (B, 1, V)
        return logits[:, 0], state, None

    def reorder_state(self, state, index: Tensor):
        """Rows `index` (B',) of a tensor state, or of each tensor of a tuple, along `state_batch_dim`."""
        if isinstance(state, tuple):
            return tuple(self.reorder_state(part, index) for part in state)
        return state.index_select(self.state_batch_dim, index)

    def start_rows(self, prompts: list[Tensor], room: int = 0):
        """The decoding state of B prompts (each (T_b,), of any lengths) as one batch, for up to `room` more steps:
        each read alone (`start`) and the states merged (`merge_states`). A model that can read them together
        and give each its own state says how (the RNNs: one packed pass)."""
        states = [self.start(prompt[None]) for prompt in prompts]
        return states[0] if len(states) == 1 else self.merge_states(states, room)

    def fits(self, prompt_length: int, steps: int) -> bool:
        """Whether a row of `prompt_length` tokens can be decoded `steps` more in a merged batch
        (`merge_states`): always, for a model that carries a state of any length."""
        return True

    def merge_states(self, states: list, room: int = 0):
        """One decoding state of B rows from B states of one row each (`start` of B prompts, of any lengths,
        read one by one): the search then steps every row at once, each as it would alone, for up to `room`
        steps. Tensor states (and tuples of them) are joined along `state_batch_dim`; a model whose rows stand
        at positions (the transformer's KV cache) says how it joins them."""
        first = states[0]
        if isinstance(first, tuple):
            return tuple(self.merge_states([state[i] for state in states], room) for i in range(len(first)))
        return torch.cat(states, dim=self.state_batch_dim)


@dataclass
class EncoderDecoderState:
    """A sequence-to-sequence model's decoding state: the encoder's memory (a dict of batch-first
    tensors) and the decoder's own state (RNN states, a KV cache, ...)."""

    memory: dict
    decoder: Any


class Seq2SeqModel(Model):
    """A sequence-to-sequence model (SLP 13.7-13.8, 9.4.1): an encoder reads the source, a decoder writes
    the target.

    Trained with teacher forcing (13.7.1): `forward(source (B, S), lengths (B,), target_in (B, T))` gives
    the logits (B, T, V) of every target position at once; with `output="hidden"`, the states entering
    the decoder's output layer `self.output` (an `OutputLayer`) instead, (B, T, D). Decoding
    (`seqlab.decoding.search`) drives the same model one token at a time through the `IncrementalDecoder` contract:

        state = model.start(source, lengths)          memory = encode(source, lengths), with the decoder's
                                                      state before the first token, init_state(memory)
        logits, state, weights = model.step(tokens, state, need_weights)
        state = model.reorder_state(state, index)     the memory and the decoder's state (reorder_decoder)

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

    def start(self, source: Tensor, lengths: Tensor) -> EncoderDecoderState:
        """Encode right-padded sources (B, S) with lengths (B,): the state before `start_token` is fed."""
        memory = self.encode(source, lengths)
        return EncoderDecoderState(memory, self.init_state(memory))

    def reorder_state(self, state: EncoderDecoderState, index: Tensor) -> EncoderDecoderState:
        return EncoderDecoderState(self.reorder_memory(state.memory, index),
                                   self.reorder_decoder(state.decoder, index))

    def reorder_memory(self, memory: dict, index: Tensor) -> dict:
        return {name: value.index_select(0, index) for name, value in memory.items()}

"""Greedy decoding, sampling and beam search in numpy, for models run on onnxruntime (the families' exported
runtimes, `seqlab.export.runtime.load_export`): the searches of `seqlab.decoding.core`, which the PyTorch
search follows too, on numpy arrays, and the logits processors of `seqlab.decoding.processors` in numpy.

A search drives a `decoder`, any object with

    step(tokens (B,) int64, state) -> (logits (B, V), state, weights (B, S) or None)
    reorder(state, index (B',) int64) -> state            the rows `index` of every array of the state

(`seqlab.families.lm.exported` and `seqlab.families.seq2seq.exported` wrap an export so). The rules being
the core's, greedy decoding and beam search give the tokens PyTorch gives for the same model
(tests/test_serve_onnx.py checks it against `seqlab.load(run)`), and the scores to float rounding.

Sampling draws from the same distribution, but with numpy's random generator (PCG64, seeded by `seed`), not
PyTorch's: a seed repeats its own continuation here, and gives a different, equally distributed one from
the PyTorch model's with the same seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import numpy as np

from seqlab.data.vocab import NEVER_GENERATED
from seqlab.decoding import core
from seqlab.decoding.core import Hypothesis, best_first  # noqa: F401  (re-exported)
from seqlab.decoding.options import Sampling, SamplingOptions, SearchOptions  # noqa: F401  (the searches' options)


class NumpyOps:
    """The array operations of `seqlab.decoding.core.Ops` on numpy arrays."""

    def arange(self, n: int) -> np.ndarray:
        return np.arange(n)

    def zeros(self, shape: tuple, floats: bool) -> np.ndarray:
        return np.zeros(shape, np.float32 if floats else np.int64)

    def full(self, n: int, value: int) -> np.ndarray:
        return np.full(n, value, np.int64)

    def index(self, values: list[int]) -> np.ndarray:
        return np.array(values)

    def repeat(self, x: np.ndarray, k: int) -> np.ndarray:
        return np.repeat(x, k)

    def cat(self, arrays: list[np.ndarray], axis: int) -> np.ndarray:
        return np.concatenate(arrays, axis=axis)

    def stack(self, arrays: list[np.ndarray]) -> np.ndarray:
        return np.stack(arrays)

    def topk(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Each row's k largest values and their indexes, largest first (equal values in index order, as
        `torch.topk`)."""
        part = np.argpartition(-x, k - 1, axis=1)[:, :k]                       # (n, k), unordered
        picked = np.take_along_axis(x, part, axis=1)
        index = np.take_along_axis(part, np.lexsort((part, -picked), axis=1), axis=1)
        return np.take_along_axis(x, index, axis=1), index

    def argsort(self, x: np.ndarray) -> np.ndarray:
        return np.argsort(x, axis=1)

    def take(self, x: np.ndarray, index: np.ndarray) -> np.ndarray:
        return np.take_along_axis(x, index, axis=1)

    def pick(self, x: np.ndarray, index: np.ndarray) -> np.ndarray:
        return x[np.arange(len(index)), index]

    def argwhere(self, mask: np.ndarray) -> list[list[int]]:
        return np.argwhere(mask).tolist()

    def log_softmax(self, x: np.ndarray) -> np.ndarray:
        return log_softmax(x)

    def host(self, x: np.ndarray) -> np.ndarray:
        return x

    def host_floats(self, x) -> np.ndarray:
        return np.asarray(x, np.float32)

    def host_zeros(self, shape: tuple) -> np.ndarray:
        return np.zeros(shape, np.float32)

    def full_like(self, x: np.ndarray, value: int) -> np.ndarray:
        return np.full_like(x, value)

    def minimum(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.minimum(x, y)

    def clamp_min(self, x: np.ndarray, low: int) -> np.ndarray:
        return np.maximum(x, low)


OPS = NumpyOps()


# ------------------------------------------------------------------------------ logits processors

@dataclass(frozen=True)
class Block:
    """A float32 copy of logits (B, V) with the never-generated ids at -inf (`BlockTokens`)."""

    ids: tuple[int, ...] = NEVER_GENERATED

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        logits = logits.astype(np.float32, copy=True)                          # (B, V)
        logits[:, list(self.ids)] = -np.inf
        return logits


block = Block()


def blocker(decoder) -> Block:
    """The ids a search of `decoder` never chooses: `block`'s, and those the decoder adds (`never_generated`: a
    language model's <unk>, as `seqlab.decoding.search.blocked_tokens` adds a PyTorch model's)."""
    extra = tuple(getattr(decoder, "never_generated", ()))
    return Block(NEVER_GENERATED + extra) if extra else block


def temperature(logits: np.ndarray, t: float) -> np.ndarray:
    """(z - max z) / t as `Temperature` divides: float32 steps of `core.temperature_scale`, each row's maximum
    exactly 0, no nan for any positive finite t."""
    m, factors = core.temperature_scale(t)
    logits = logits.astype(np.float32)
    with np.errstate(over="ignore"):                     # a tiny t: below the maximum, -inf (as in PyTorch)
        scaled = (logits - logits.max(axis=-1, keepdims=True)) / np.float32(m)    # (B, V), max 0
        for factor in factors:
            scaled = scaled * np.float32(factor)
    return scaled


def top_k(logits: np.ndarray, k: int) -> np.ndarray:
    """Every logit below the k-th largest of its row at -inf (`TopK`)."""
    V = logits.shape[-1]
    if k >= V:
        return logits
    kth = np.partition(logits, V - k, axis=-1)[:, V - k:V - k + 1]             # (B, 1)
    return np.where(logits < kth, -np.inf, logits).astype(logits.dtype)


def top_p(logits: np.ndarray, p: float) -> np.ndarray:
    """The smallest set of most likely tokens whose probability reaches p; the rest at -inf (`TopP`)."""
    order = np.argsort(-logits, axis=-1, kind="stable")                        # (B, V), most likely first
    ranked = np.take_along_axis(logits, order, axis=-1)
    probs = softmax(ranked)
    before = np.cumsum(probs, axis=-1) - probs                                 # mass of better tokens
    ranked = np.where(before >= np.float32(core.nucleus_mass(p)), -np.inf, ranked).astype(logits.dtype)
    out = np.empty_like(logits)
    np.put_along_axis(out, order, ranked, axis=-1)
    return out


PROCESSORS = {"temperature": lambda t: partial(temperature, t=t), "top_k": lambda k: partial(top_k, k=k),
              "top_p": lambda p: partial(top_p, p=p)}


def processors_for(options: Sampling | None = None, sample: bool = False) -> list:
    """`block`, then the processors of `core.processor_plan` (`seqlab.decoding.processors.processors_for`)."""
    return [block, *(PROCESSORS[name](value) for name, value in core.processor_plan(options, sample))]


def process(logits: np.ndarray, processors: list) -> np.ndarray:
    for processor in processors:
        logits = processor(logits)
    return logits


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x: np.ndarray) -> np.ndarray:
    """log softmax of float32 rows (B, V), -inf kept."""
    top = x.max(axis=-1, keepdims=True)
    return (x - top - np.log(np.exp(x - top).sum(axis=-1, keepdims=True))).astype(np.float32)


def choose_tokens(logits: np.ndarray, processors: list, sample: bool,
                  generator: np.random.Generator | None = None) -> np.ndarray:
    """The next tokens (B,) int64: the argmax of the processed logits (the first of equal ones, as torch's),
    or a draw from their softmax."""
    scores = process(logits, processors)                                       # (B, V)
    if not sample:
        return scores.argmax(axis=-1).astype(np.int64)
    generator = generator or np.random.default_rng()
    cumulative = np.cumsum(softmax(scores.astype(np.float64)), axis=-1)        # (B, V)
    u = 1.0 - generator.random((scores.shape[0], 1))                           # (B, 1) in (0, 1]
    # the first token whose cumulative probability reaches u: never one of probability 0
    return (cumulative < u * cumulative[:, -1:]).sum(axis=-1).astype(np.int64)


def seeded(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(seed)


def chooser(options: Sampling | None, sample: bool):
    """`choose(blocked logits) -> tokens` for `core.greedy_steps`: the processors after the block, then the
    argmax or a draw from numpy's generator seeded with `options.seed`."""
    return partial(choose_tokens, processors=processors_for(options, sample)[1:], sample=sample,
                   generator=seeded(options.seed) if sample else None)


# ------------------------------------------------------------------------------ the searches

def greedy_steps(decoder, state, tokens: np.ndarray, processors: list, sample: bool = False,
                 generator: np.random.Generator | None = None) -> Iterator[tuple]:
    """Greedy decoding or sampling, one step per `next()`, without end (`core.greedy_steps`): `processors`
    are those of `processors_for` (`block` first)."""
    return core.greedy_steps(decoder, OPS, state, tokens, blocker(decoder),
                             partial(choose_tokens, processors=processors[1:], sample=sample, generator=generator))


def beam_steps(decoder, state, tokens: np.ndarray, limit: np.ndarray, beam: int, length_penalty: float,
               ends_at_eos: bool = True, need_weights: bool = False,
               lengths: np.ndarray | None = None, trace: list[dict] | None = None) -> list[list[Hypothesis]]:
    """Beam search from a started state of B sentences to each sentence's `limit` (B,): every finished
    hypothesis of each sentence, unsorted (`core.beam_steps`; its tree appended to `trace`, if given)."""
    return core.beam_steps(decoder, OPS, state, tokens, limit, beam, length_penalty, blocker(decoder), ends_at_eos,
                           need_weights, lengths, trace)


def max_lengths(lengths: np.ndarray, max_length: int = 0, room: np.ndarray | None = None,
                cap: int = 0) -> np.ndarray:
    """Each sentence's output limit (B,): `max_length`, or 2 x its source length + 10 (at most `cap`), within
    `room` (`core.output_limits`)."""
    return core.output_limits(OPS, np.asarray(lengths, np.int64), max_length, room, cap)


def decode(decoder, state, lengths: np.ndarray, limit: np.ndarray, start_token: int,
           options: SearchOptions | None = None, need_weights: bool = False,
           trace: list[dict] | None = None) -> list[list[Hypothesis]]:
    """Decode a batch of B started sources with lengths (B,) to their limits (B,): `options.nbest`
    hypotheses per sentence, best first (greedy or sampled with beam 1: `core.greedy_steps`; beam search:
    `core.beam_steps`, its tree appended to `trace` if given, with a beam of 1 too). With `need_weights`, each
    hypothesis carries its attention over the source (the decoder's step must then give weights)."""
    options = options or SearchOptions()
    tokens = OPS.full(len(lengths), start_token)
    if options.beam > 1 or trace is not None:
        found = core.beam_steps(decoder, OPS, state, tokens, limit, options.beam, options.length_penalty,
                                blocker(decoder), True, need_weights, lengths, trace)
        return [best_first(hypotheses, options.nbest) for hypotheses in found]
    steps = core.greedy_steps(decoder, OPS, state, tokens, blocker(decoder), chooser(options, options.sample))
    return [[h] for h in core.greedy_outputs(OPS, steps, lengths, limit, options.length_penalty, need_weights)]


def generate_ids(decoder, state, last: int, options: SamplingOptions) -> Iterator[int]:
    """Yield new token ids one at a time after a prompt: `state` has read all its tokens but the `last`
    (`seqlab.decoding.search.generate_ids`). With `options.beam` > 1, the ids of the best beam hypothesis, once
    the search is over."""
    if options.beam > 1:
        (best,) = lm_beam_search(decoder, state, last, options)
        yield from core.best_continuation(best)
        return
    steps = core.greedy_steps(decoder, OPS, state, np.array([last], np.int64), blocker(decoder),
                              chooser(options, not options.greedy), scores=False)
    yield from core.continuation(steps, options.max_tokens, options.stop_at_eos)


def lm_beam_search(decoder, state, last: int, options: SamplingOptions, nbest: int = 1) -> list[Hypothesis]:
    """The `nbest` continuations of highest length-normalised log probability found by a beam of
    `options.beam`, best first (`core.lm_beam`)."""
    return core.lm_beam(decoder, OPS, state, np.array([last], np.int64), options, blocker(decoder), nbest)

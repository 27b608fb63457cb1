"""Greedy decoding, sampling and beam search in numpy, for models run on onnxruntime (`seqlab.export.runtime`):
`seqlab.decoding.search` and `seqlab.decoding.processors` without PyTorch.

A search drives a `decoder`, any object with

    step(tokens (B,) int64, state) -> (logits (B, V), state, weights (B, S) or None)
    reorder(state, index (B',) int64) -> state            the rows `index` of every array of the state

(`seqlab.families.lm.exported` and `seqlab.families.seq2seq.exported` wrap an export so). The rules are those of
`seqlab.decoding.search`, which its docstring explains: the ids that are never an output (<pad>, <s>, <sep>) are
blocked in every search; sampling also applies the temperature, then top-k, then top-p (`processors_for`);
beam search ranks the 2K best extensions of each sentence, an extension by </s> among the first K finishes
a hypothesis, a sentence is done when K have finished or at its length limit, and the finished ones are
ranked by log p / length^alpha. So greedy decoding and beam search give the tokens PyTorch gives for the
same model (tests/test_serve_onnx.py checks it against `seqlab.load(run)`), and the scores to float rounding.

Sampling draws from the same distribution, but with numpy's random generator (PCG64, seeded by `seed`), not
PyTorch's: a seed repeats its own continuation here, and gives a different, equally distributed one from
the PyTorch model's with the same seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice

import numpy as np

from seqlab.data.vocab import EOS, NEVER_GENERATED
from seqlab.decoding.options import Sampling, SamplingOptions, SearchOptions  # seqlab.decoding.search's own options
from seqlab.errors import SeqlabError


@dataclass
class Hypothesis:
    """One output (`seqlab.decoding.search.Hypothesis`): its token ids (without </s>), the summed log probability
    (of </s> too, when it ended with one), the length-normalised score, and the attention weights of each
    output step over the real source positions (len(tokens) + finished, S), when asked for."""

    tokens: list[int]
    score: float
    normalized: float
    finished: bool
    attention: np.ndarray | None = field(default=None, repr=False)


# ------------------------------------------------------------------------------ logits processors

def block(logits: np.ndarray) -> np.ndarray:
    """A float32 copy of logits (B, V) with the never-generated ids at -inf (`BlockTokens`)."""
    logits = logits.astype(np.float32, copy=True)                              # (B, V)
    logits[:, list(NEVER_GENERATED)] = -np.inf
    return logits


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
    ranked = np.where(before >= p, -np.inf, ranked).astype(logits.dtype)
    out = np.empty_like(logits)
    np.put_along_axis(out, order, ranked, axis=-1)
    return out


def processors_for(options: Sampling | None = None, sample: bool = False) -> list:
    """`block` always; when sampling, then the temperature, top-k and top-p, each only where it changes
    something, in that order (`seqlab.decoding.processors.processors_for`)."""
    processors: list = [block]
    if not sample or options is None:
        return processors
    if options.temperature != 1.0:
        processors.append(lambda z, t=options.temperature: z / np.float32(t))
    if options.top_k:
        processors.append(lambda z, k=options.top_k: top_k(z, k))
    if options.top_p < 1.0:
        processors.append(lambda z, q=options.top_p: top_p(z, q))
    return processors


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


# ------------------------------------------------------------------------------ the searches

def greedy_steps(decoder, state, tokens: np.ndarray, processors: list, sample: bool = False,
                 generator: np.random.Generator | None = None) -> Iterator[tuple]:
    """Greedy decoding or sampling, one step per `next()`, without end: feed tokens (B,), choose the next
    ones; yield them (B,), their log probabilities under the model (B,) and the attention weights (B, S)
    or None (`seqlab.decoding.search.greedy_steps`)."""
    while True:
        logits, state, weights = decoder.step(tokens, state)                   # (B, V)
        log_probs = log_softmax(block(logits))                                 # (B, V)
        tokens = choose_tokens(logits, processors, sample, generator)          # (B,)
        yield tokens, log_probs[np.arange(len(tokens)), tokens], weights


def beam_steps(decoder, state, tokens: np.ndarray, limit: np.ndarray, beam: int, length_penalty: float,
               ends_at_eos: bool = True, need_weights: bool = False,
               lengths: np.ndarray | None = None) -> list[list[Hypothesis]]:
    """Beam search of width K = `beam` from a started state of B sentences (`tokens` (B,) the first fed) to
    each sentence's `limit` (B,): every finished hypothesis of each sentence, unsorted
    (`seqlab.decoding.search.beam_steps`, step for step). `lengths` (B,): the real source positions the attention
    weights keep."""
    B, K = len(tokens), beam
    expand = np.repeat(np.arange(B), K)                                         # (B*K,)
    state, tokens = decoder.reorder(state, expand), tokens[expand]
    scores = np.zeros((B, K), np.float32)
    scores[:, 1:] = -np.inf                       # at the start only one hypothesis per sentence is live
    history = np.zeros((B * K, 0), np.int64)
    attention = None                              # (B*K, t, S), from the first step's weights
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    alive = list(range(B))                        # the original sentence of each live row group

    def finish(b: int, row: int, score: float, ended: bool, weights: np.ndarray | None) -> None:
        ids = history[row].tolist()
        n = len(ids) + ended
        attn = None
        if need_weights:
            rows = attention[row] if weights is None else np.concatenate([attention[row], weights[row][None]])
            attn = rows[:n, :int(lengths[b])]
        finished[b].append(Hypothesis(ids, score, score / max(n, 1) ** length_penalty, ended, attn))

    for t in range(int(limit.max())):
        logits, state, weights = decoder.step(tokens, state)
        V = logits.shape[-1]
        if t == 0 and ends_at_eos and K > V - len(NEVER_GENERATED):
            raise SeqlabError(f"--beam {K} is larger than the {V - len(NEVER_GENERATED)} tokens the model can "
                              "produce; use a smaller beam")
        if need_weights:
            weights = np.asarray(weights, np.float32)
            if attention is None:
                attention = np.zeros((weights.shape[0], 0, weights.shape[1]), np.float32)
        log_probs = log_softmax(block(logits))                                 # (n*K, V)
        n = len(alive)
        candidates = (scores.reshape(n, K, 1) + log_probs.reshape(n, K, V)).reshape(n, K * V)
        top = best_indices(candidates, 2 * K)                                  # (n, 2K)
        top_scores = np.take_along_axis(candidates, top, axis=1)
        top_beams, top_tokens = top // V, top % V
        is_eos = top_tokens == EOS if ends_at_eos else np.zeros_like(top_tokens, dtype=bool)
        # the next beam: the first K candidates that do not end the sentence
        chosen = np.argsort(np.arange(2 * K)[None, :] + is_eos * (2 * K), axis=1)[:, :K]     # (n, K)
        next_scores = np.take_along_axis(top_scores, chosen, axis=1)
        next_beams = np.take_along_axis(top_beams, chosen, axis=1)
        next_tokens = np.take_along_axis(top_tokens, chosen, axis=1)
        for i, j in np.argwhere(is_eos[:, :K] & (top_scores[:, :K] > -np.inf)).tolist():
            b = alive[i]                                        # ended hypotheses among the best K
            if len(finished[b]) < K:
                finish(b, i * K + int(top_beams[i, j]), float(top_scores[i, j]), True, weights)
        rows = (np.arange(n)[:, None] * K + next_beams).reshape(-1)            # parent rows (n*K,)
        history = np.concatenate([history[rows], next_tokens.reshape(-1, 1)], axis=1)
        if need_weights:
            attention = np.concatenate([attention, weights[:, None]], axis=1)[rows]
        scores, tokens = next_scores, next_tokens.reshape(-1)
        keep = []
        for i, b in enumerate(alive):
            if len(finished[b]) < K and t + 1 >= int(limit[b]):   # out of room: the live ones finish as they are
                for k in range(K):
                    if scores[i, k] > -np.inf and len(finished[b]) < K:
                        finish(b, i * K + k, float(scores[i, k]), False, None)
            if len(finished[b]) < K:
                keep.append(i)
        if not keep:
            break
        if len(keep) < n:                                        # finished sentences leave the batch
            index = np.array(keep)
            row_index = (index[:, None] * K + np.arange(K)).reshape(-1)
            alive = [alive[i] for i in keep]
            scores, tokens, history = scores[index], tokens[row_index], history[row_index]
            if need_weights:
                attention = attention[row_index]
            rows = rows[row_index]
        state = decoder.reorder(state, rows)                     # follow the surviving hypotheses
    return finished


def best_indices(values: np.ndarray, k: int) -> np.ndarray:
    """The indexes (n, k) of each row's k largest values, largest first (`torch.topk`; equal values in
    index order)."""
    part = np.argpartition(-values, k - 1, axis=1)[:, :k]                      # (n, k), unordered
    picked = np.take_along_axis(values, part, axis=1)
    order = np.lexsort((part, -picked), axis=1)
    return np.take_along_axis(part, order, axis=1)


def best_first(hypotheses: list[Hypothesis], nbest: int) -> list[Hypothesis]:
    return sorted(hypotheses, key=lambda h: -h.normalized)[:nbest]


# ------------------------------------------------------------------------ sequence to sequence

def max_lengths(lengths: np.ndarray, max_length: int = 0) -> np.ndarray:
    """Each sentence's output limit (B,): `max_length`, or 2 x its source length + 10 (`seqlab.decoding.search.max_lengths`
    for decoders without a room limit, as the RNN ones; `ExportedSeq2Seq.limits` applies the others')."""
    return np.full_like(lengths, max_length) if max_length else 2 * lengths + 10


def decode(decoder, state, lengths: np.ndarray, limit: np.ndarray, start_token: int,
           options: SearchOptions | None = None, need_weights: bool = False) -> list[list[Hypothesis]]:
    """Decode a batch of B started sources with lengths (B,) to their limits (B,): `options.nbest`
    hypotheses per sentence, best first (`seqlab.decoding.search.decode`). With `need_weights`, each hypothesis
    carries its attention over the source (the decoder's step must then give weights)."""
    options = options or SearchOptions()
    tokens = np.full(len(lengths), start_token, np.int64)
    if options.beam > 1:
        finished = beam_steps(decoder, state, tokens, limit, options.beam, options.length_penalty, True,
                              need_weights, lengths)
        return [best_first(hyps, options.nbest) for hyps in finished]
    steps = greedy_steps(decoder, state, tokens, processors_for(options, options.sample), options.sample,
                         seeded(options.seed) if options.sample else None)
    return [[h] for h in greedy(steps, lengths, limit, options.length_penalty, need_weights)]


def greedy(steps: Iterator, lengths: np.ndarray, limit: np.ndarray, length_penalty: float,
           need_weights: bool) -> list[Hypothesis]:
    """The outputs of a greedy (or sampling) search `steps` over B sentences (`seqlab.decoding.search.greedy`)."""
    B = len(lengths)
    outputs: list[list[int]] = [[] for _ in range(B)]
    scores = [0.0] * B
    finished = [False] * B
    done = [False] * B
    attention: list[np.ndarray] = []
    for tokens, log_probs, weights in islice(steps, int(limit.max())):
        if need_weights:
            attention.append(np.asarray(weights, np.float32))
        chosen = log_probs.tolist()
        for b, token in enumerate(tokens.tolist()):
            if done[b]:
                continue
            scores[b] += chosen[b]
            if token == EOS:
                finished[b] = done[b] = True
            else:
                outputs[b].append(token)
                done[b] = len(outputs[b]) >= int(limit[b])
        if all(done):
            break
    results = []
    for b in range(B):
        n = len(outputs[b]) + finished[b]
        weights = np.stack([w[b, :int(lengths[b])] for w in attention[:n]]) if need_weights else None
        results.append(Hypothesis(outputs[b], scores[b], scores[b] / max(n, 1) ** length_penalty, finished[b],
                                  weights))
    return results


# ------------------------------------------------------------------------------ language models

def generate_ids(decoder, state, last: int, options: SamplingOptions) -> Iterator[int]:
    """Yield new token ids one at a time after a prompt: `state` has read all its tokens but the `last`
    (`seqlab.decoding.search.generate_ids`). With `options.beam` > 1, the ids of the best beam hypothesis, once the
    search is over."""
    if options.beam > 1:
        (best,) = lm_beam_search(decoder, state, last, options)
        yield from best.tokens
        if best.finished:
            yield EOS
        return
    sample = not options.greedy
    steps = greedy_steps(decoder, state, np.array([last], np.int64), processors_for(options, sample), sample,
                         seeded(options.seed) if sample else None)
    for tokens, _, _ in islice(steps, options.max_tokens):
        token = int(tokens[0])
        yield token
        if options.stop_at_eos and token == EOS:
            return


def lm_beam_search(decoder, state, last: int, options: SamplingOptions, nbest: int = 1) -> list[Hypothesis]:
    """The `nbest` continuations of highest length-normalised log probability found by a beam of
    `options.beam`, best first; every hypothesis runs to `options.max_tokens`, unless `options.stop_at_eos`
    (`seqlab.decoding.search.lm_beam_search`)."""
    if options.max_tokens == 0:
        return [Hypothesis([], 0.0, 0.0, False)]
    (finished,) = beam_steps(decoder, state, np.array([last], np.int64), np.array([options.max_tokens]),
                             options.beam, options.length_penalty, ends_at_eos=options.stop_at_eos)
    return best_first(finished, nbest)

"""The torch-free core of decoding: the rules every search follows, written once for PyTorch tensors
(`seqlab.decoding.search`, the trained models) and numpy arrays (`seqlab.decoding.numpy_search`, the ONNX
exports on onnxruntime), so that both give the same tokens for the same model.

A search drives a `decoder`, any object with

    step(tokens (B,), state) -> (logits (B, V), state, weights (B, S) or None)
    reorder(state, index (B',)) -> state            the rows `index` of the state, in order

(`ModelDecoder` makes one of a PyTorch model's `step` and `reorder_state`), and does its array work through
`ops`, one of two small backends (`TorchOps`, `NumpyOps`) with the same few operations (`Ops`).

What lives here:

- the processors' rules (`processor_plan`): the ids never generated (<pad>, <s>, <sep>, and those the model
  adds: a language model's <unk>, since its continuation is text) are blocked in every search; sampling also
  applies the temperature, then top-k, then top-p, each only where it changes something (greedy and beam
  search never need them: they do not change the argmax, and a beam ranks by the model's own probabilities);
  their arithmetic at the extremes, the same in both runtimes (`temperature_scale`, `nucleus_mass`);
- greedy decoding and sampling (SLP 13.4, 9.2.3): ONE loop, `sampling_steps`, feeds one token per step and
  chooses the next ones with a `Strategy` (the argmax, or a draw: the PyTorch strategies are
  `seqlab.decoding.search`'s); rows may leave the batch between steps. `greedy_steps` yields the chosen tokens with
  their log probabilities; `greedy_outputs` ends each sentence at </s> or its limit;
  `continuation` is a language model's continuation of a prompt;
- beam search (SLP 13.4, Fig. 13.8), `beam_steps`: the K best partial outputs of each sentence. At each step
  every live hypothesis is extended by every token, and the 2K best extensions of the sentence are ranked:
  an extension by </s> among the first K is a finished hypothesis; the first K others are the next beam. A
  sentence is done when K hypotheses have finished (fairseq's rule), or when it reaches its maximum length,
  where its live hypotheses are finished as they are. The finished ones are ranked by their log probability
  divided by length^α (`normalized`; α = 0 ranks by the raw sum, which favours short outputs). The state
  (RNN states or KV caches, and the encoder's memory) is reordered to follow the surviving hypotheses, and
  finished sentences leave the batch. A language model's beam (one prompt, `lm_beam`) runs every hypothesis
  to max_tokens, </s> being a line end, unless stop_at_eos makes </s> end a hypothesis;
- each sentence's output limit (`output_limits`), and a continuation as text, piece by piece (`text_pieces`);
- between steps: `checkpoint()`, which a server's scheduler answers (stopping work whose requests have gone,
  letting other work run), and `slices`, which cuts long work that is not a search (scoring, tagging,
  classifying, reading a long prompt) into slices of a bounded time with a checkpoint between them.
"""

from __future__ import annotations

import math
import struct
import threading
import time
from collections.abc import Callable, Generator, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Protocol

from seqlab.config import OptionError
from seqlab.data.vocab import EOS


@dataclass
class Hypothesis:
    """One output: its token ids (without </s>), the summed log probability (of </s> too, when it ended
    with one), the length-normalised score it was ranked by, and the attention weights of each output
    step over the real source positions (len(tokens) + finished, S), when asked for (a tensor or an array,
    as the search's backend holds them)."""

    tokens: list[int]
    score: float
    normalized: float
    finished: bool
    attention: Any = field(default=None, repr=False)


class Ops(Protocol):
    """The array operations a search needs, on a backend's arrays (PyTorch tensors on a device, or numpy
    arrays); "host" arrays hold the attention weights a hypothesis keeps (CPU tensors, numpy arrays)."""

    def arange(self, n: int): ...                              # 0 .. n-1, int64
    def zeros(self, shape: tuple, floats: bool): ...           # float32 or int64 zeros
    def full(self, n: int, value: int): ...                    # (n,) int64
    def index(self, values: list[int]): ...                    # int64 indices
    def repeat(self, x, k: int): ...                           # each element k times, in place
    def cat(self, arrays: list, axis: int): ...
    def stack(self, arrays: list): ...
    def topk(self, x, k: int) -> tuple: ...                    # each row's k largest, largest first: (values, indices)
    def argsort(self, x): ...                                  # along axis 1 (distinct values)
    def take(self, x, index): ...                              # along axis 1: x[i, index[i, j]]
    def pick(self, x, index): ...                              # x[i, index[i]] (B,)
    def argwhere(self, mask) -> list[list[int]]: ...
    def log_softmax(self, x): ...                              # over the last axis, float32
    def host(self, x): ...                                     # indices usable on host arrays
    def host_floats(self, x): ...                              # float32 on the host
    def host_zeros(self, shape: tuple): ...                    # float32 zeros on the host
    def full_like(self, x, value: int): ...
    def minimum(self, x, y): ...
    def clamp_min(self, x, low: int): ...


class ModelDecoder:
    """A PyTorch model under the incremental-decoding contract (`seqlab.models.base.IncrementalDecoder`) as
    the decoder a search drives; its step gives the attention weights when `need_weights`."""

    def __init__(self, model, need_weights: bool = False):
        self.model, self.need_weights = model, need_weights

    def step(self, tokens, state):
        return self.model.step(tokens, state, self.need_weights)

    def reorder(self, state, index):
        return self.model.reorder_state(state, index)


# ------------------------------------------------------------------------------ between steps

_hook = threading.local()


def set_checkpoint(hook: Callable[[], None] | None) -> None:
    """Make `hook` this thread's `checkpoint` (the server's scheduler: it stops work whose requests have gone,
    and lets other waiting work run)."""
    _hook.call = hook


def set_read_threads(threads: int) -> None:
    """Make this thread read a batch's prompts (`seqlab.decoding.search.reading`) on `threads` CPU threads (0: on
    as many as the rest of its work). The server's inference thread reads on every core: reading B prompts is one
    wide kernel call per layer, where a second core pays, while a step of a few rows is too small to share."""
    _hook.read_threads = threads


def read_threads() -> int:
    """This thread's `set_read_threads` (0: not set)."""
    return getattr(_hook, "read_threads", 0)


def set_work_threads(threads: int) -> None:
    """Note the CPU threads this thread's work runs on outside a read on the read threads
    (`seqlab.decoding.search.reading` sets it while it reads; 0: none): a long read, cut into slices, goes back to
    them, so that it leaves the server's event loop its core."""
    _hook.work_threads = threads


def work_threads() -> int:
    """This thread's `set_work_threads` (0: not inside a read on the read threads)."""
    return getattr(_hook, "work_threads", 0)


def checkpoint() -> None:
    """Called by every search once per step, and by sliced work once per slice (`slices`): the thread's hook
    (`set_checkpoint`), if it has one, may raise to stop the work there."""
    hook = getattr(_hook, "call", None)
    if hook is not None:
        began = time.perf_counter()
        try:
            hook()
        finally:
            _hook.away = getattr(_hook, "away", 0.0) + time.perf_counter() - began   # others' work, not ours


FIRST_SLICE = 256                             # units (token positions) of a slice whose pace is not known yet


def set_slice_seconds(seconds: float, first: int = FIRST_SLICE) -> None:
    """Make `slices` cut this thread's long work (scoring, tagging, classifying, reading long inputs) into slices of
    about `seconds` each, with a `checkpoint()` before each (0: one slice, the whole work, as outside a server);
    `first`: the units of cost of a first slice, before the work's pace is known. The server's scheduler sets it on
    its inference thread (`--slice-ms`)."""
    _hook.slice_seconds, _hook.first_slice = seconds, first
    _hook.pace = {}


LEAST_ROWS = 16       # a matrix product of fewer rows runs another kernel (oneDNN's small-matrix path on CPU) whose
                      # last digits differ: a slice gives its products at least this many rows, so that its figures
                      # are those of the whole pass


def least_items(rows_per_item: int) -> int:
    """The fewest items a slice holds for its matrix products to have LEAST_ROWS rows: a time step of B texts
    is B rows, a text of T tokens T rows."""
    return max(1, -(-LEAST_ROWS // max(1, rows_per_item)))


def slice_budget(pace: Hashable) -> float | None:
    """The units of cost a slice of the work `pace` may hold now on this thread (`slices`), or None outside a
    server's thread (no slicing): a computation that fits one slice can run as it runs unsliced."""
    seconds = getattr(_hook, "slice_seconds", 0.0)
    if not seconds:
        return None
    rate = _hook.pace.get(pace)
    return _hook.first_slice if rate is None else seconds / max(rate, 1e-12)


def slices(costs: Sequence[int], pace: Hashable, least: int = 1) -> Iterator[range]:
    """The items 0..n-1 of some work (texts, sentences, time steps), `costs` their cost (their token positions,
    say), cut into runs of consecutive items that each take about this thread's slice time (`set_slice_seconds`),
    with a `checkpoint()` before each run: between two slices the server runs other requests' waiting work, and
    stops this work when its requests have gone or are past their deadline. A run holds at least `least` items
    (and so does the last: it takes the remainder); the caller's computation must give the same figures however
    its items are cut. `pace` names the kind of work (the model and what it does): its measured seconds per unit
    of cost size the first slice of the next such work. Without a slice time (outside a server): one run of every
    item, and no checkpoint."""
    total = len(costs)
    if slice_budget(pace) is None:
        if total:
            yield range(total)
        return
    paces = _hook.pace
    start = 0
    while start < total:
        rate = paces.get(pace)                                     # seconds per unit of cost
        budget = slice_budget(pace)
        stop, spent = start, 0
        while stop < total and (stop - start < least or spent + costs[stop] <= budget or stop == start):
            spent += costs[stop]
            stop += 1
        if total - stop < least:                                   # no run shorter than `least`: take the rest
            spent += sum(costs[stop:])
            stop = total
        checkpoint()
        began, away = time.perf_counter(), getattr(_hook, "away", 0.0)
        yield range(start, stop)
        took = time.perf_counter() - began - (getattr(_hook, "away", 0.0) - away)   # less the checkpoints inside
        if spent > 0 and took > 0:
            measured = took / spent
            paces[pace] = measured if rate is None else (rate + measured) / 2
        start = stop


# ------------------------------------------------------------------------------ rules


def processor_plan(options=None, sample: bool = False) -> list[tuple[str, float]]:
    """The processors a search applies after blocking the never-generated ids, in order, as (name, value):
    none unless sampling; when sampling, the temperature, top-k and top-p of `options` (a
    `seqlab.decoding.options.Sampling`), each only where it changes something."""
    if not sample or options is None:
        return []
    plan: list[tuple[str, float]] = []
    if options.temperature != 1.0:
        plan.append(("temperature", options.temperature))
    if options.top_k:
        plan.append(("top_k", options.top_k))
    if options.top_p < 1.0:
        plan.append(("top_p", options.top_p))
    return plan


FLOAT32_TINY = 2.0**-126                      # float32's smallest normal number


def temperature_scale(t: float) -> tuple[float, list[float]]:
    """How every search divides float32 logits by a temperature t, for any positive finite t (1e-300 is 0 in
    float32 and 1e308 inf, and z / t would be nan): as t = m 2^e with m in [0.5, 1) (`math.frexp`), z / m (m
    rounded to float32), then times 2^-e in factors a float32 holds (2^-126 to 2^127: exact, but for an
    overflow to -inf or an underflow to 0). Returns (m, factors). For a t and logits of float32's normal range
    this is z / float32(t) to the last bit; on logits shifted to a row maximum of 0 (`Temperature`) the maximum
    stays 0 and nothing is nan. Plain float32 arithmetic, so that PyTorch (any device) and numpy agree."""
    m, e = math.frexp(t)
    factors, k = [], -e
    while k:
        step = max(-126, min(127, k))
        factors.append(2.0**step)
        k -= step
    return struct.unpack("f", struct.pack("f", m))[0], factors


def nucleus_mass(p: float) -> float:
    """The p a top-p rule compares float32 masses with: p itself, or float32's smallest normal number for a
    smaller p (5e-324 is 0 in float32, and `mass >= 0` would keep no token at all). The same tokens either
    way: the most likely token alone, since every other has at least its probability (1/V or more) before it."""
    return max(p, FLOAT32_TINY)


def normalized(score: float, length: int, alpha: float) -> float:
    """The score a hypothesis is ranked by: log p / length^α."""
    return score / max(length, 1) ** alpha


def best_first(hypotheses: list[Hypothesis], nbest: int) -> list[Hypothesis]:
    return sorted(hypotheses, key=lambda h: -h.normalized)[:nbest]


def output_limits(ops: Ops, lengths, max_length: int, room=None, cap: int = 0):
    """Each sentence's output limit (B,): `max_length`, or 2 x its source length + 10 (at most `cap`, when one is
    given), within what the decoder can hold (`room`, (B,) or None: a transformer's positions)."""
    limit = ops.full_like(lengths, max_length) if max_length else 2 * lengths + 10
    if cap and not max_length:
        limit = ops.minimum(limit, ops.full_like(lengths, cap))
    return limit if room is None else ops.minimum(limit, ops.clamp_min(room, 1))


def check_beam_width(beam: int, vocabulary: int, blocked: int) -> None:
    if beam > vocabulary - blocked:
        raise OptionError(f"{{beam}} {beam} is larger than the {vocabulary - blocked} tokens the model can "
                          "produce; use a smaller beam", {"beam": "--beam"})


# ------------------------------------------------------------------------------ greedy decoding and sampling


class Strategy(Protocol):
    """How a greedy or sampling search chooses each step's tokens (`sampling_steps`): the argmax, or a draw from
    the processed distribution (`seqlab.decoding.search`'s `Greedy`, `Draw`, `NucleusDraw`, `TopKDraw`,
    `RowDraws`; numpy's `choose_tokens`). A strategy that holds per-row state (a generator per row) follows the
    rows that stay when others leave the batch (`keep`)."""

    def choose(self, blocked) -> Any:
        """The next tokens (B,) from the logits with the never-generated ids at -inf (B, V)."""
        ...

    def keep(self, index) -> None:
        """Only the rows `index` (B',) of the batch go on."""
        ...


@dataclass(frozen=True)
class Choose:
    """A choice function `blocked (B, V) -> tokens (B,)` as a `Strategy` without per-row state."""

    choose: Callable

    def keep(self, index) -> None:
        pass


def sampling_steps(decoder, ops: Ops, state, tokens, block: Callable, strategy: Strategy) -> Generator:
    """THE loop of greedy decoding and sampling (SLP 13.4, 9.2.3), one step per `next()`, without end: feed tokens
    (B,), block the never-generated ids once (`block`), choose the next tokens (`strategy.choose`); yield (tokens
    (B,), logits (B, V) as the model gave them, blocked logits (B, V), attention weights (B, S) or None). Send it
    the indices of the rows that go on (a list; None: all) to make the others leave the batch: the state, the
    fed tokens and the strategy follow them (`decoder.reorder`, `strategy.keep`)."""
    while True:
        checkpoint()
        logits, state, weights = decoder.step(tokens, state)                       # (B, V)
        blocked = block(logits)                                                    # (B, V)
        tokens = strategy.choose(blocked)                                          # (B,)
        keep = yield tokens, logits, blocked, weights
        if keep is not None:                                                       # rows leave the batch
            index = ops.index(keep)
            state = decoder.reorder(state, index)
            tokens = tokens[index]
            strategy.keep(index)


def greedy_steps(decoder, ops: Ops, state, tokens, block: Callable, choose: Callable | Strategy,
                 scores: bool = True) -> Iterator[tuple]:
    """Greedy decoding or sampling (`sampling_steps`), one step per `next()`, without end: yield the chosen tokens
    (B,) (`choose(blocked logits)` or a `Strategy`: the argmax, or a draw after the sampling processors), their
    log probabilities under the model with the never-generated ids blocked (B,) (None without `scores`: a caller
    that never reads them spares a log-softmax over the vocabulary per token) and the attention weights (B, S)
    or None."""
    strategy = choose if hasattr(choose, "keep") else Choose(choose)
    for chosen, _, blocked, weights in sampling_steps(decoder, ops, state, tokens, block, strategy):
        yield chosen, ops.pick(ops.log_softmax(blocked), chosen) if scores else None, weights


def greedy_outputs(ops: Ops, steps: Iterator, lengths, limit, length_penalty: float,
                   need_weights: bool) -> list[Hypothesis]:
    """The outputs of a greedy (or sampling) search `steps` over B sentences with source lengths (B,): each
    ends at its first </s> or its limit (B,)."""
    B = len(lengths)
    outputs: list[list[int]] = [[] for _ in range(B)]
    scores = [0.0] * B
    finished = [False] * B
    done = [False] * B
    attention: list = []
    for tokens, log_probs, weights in islice(steps, int(limit.max())):
        if need_weights:
            attention.append(ops.host_floats(weights))
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
        weights = ops.stack([w[b, :int(lengths[b])] for w in attention[:n]]) if need_weights else None
        results.append(Hypothesis(outputs[b], scores[b], normalized(scores[b], n, length_penalty), finished[b],
                                  weights))
    return results


def continuation(steps: Iterator, max_tokens: int, stop_at_eos: bool) -> Iterator[int]:
    """A language model's continuation from a greedy or sampling search of one row: up to `max_tokens` ids,
    or up to and with its first </s> when `stop_at_eos`."""
    for tokens, _, _ in islice(steps, max_tokens):
        token = int(tokens[0])
        yield token
        if stop_at_eos and token == EOS:
            return


def best_continuation(best: Hypothesis) -> Iterator[int]:
    """The ids of a beam search's best continuation, with the </s> that ended it."""
    yield from best.tokens
    if best.finished:
        yield EOS


# ------------------------------------------------------------------------------ beam search


def beam_steps(decoder, ops: Ops, state, tokens, limit, beam: int, length_penalty: float, block: Callable,
               ends_at_eos: bool = True, need_weights: bool = False, lengths=None,
               trace: list[dict] | None = None) -> list[list[Hypothesis]]:
    """Beam search of width K = `beam` from a started state of B sentences (B rows; `tokens` (B,) the first
    fed) to each sentence's `limit` (B,): every finished hypothesis of each sentence, unsorted. `block` sets
    the never-generated ids' logits to -inf (its `ids` are counted for the beam's width). With `ends_at_eos`
    False, </s> is an ordinary token and every hypothesis runs to its limit (and a beam may be wider than
    the tokens the model can produce: it fills as the prefixes grow). `lengths` (B,): the real source
    positions the attention weights keep.

    With a `trace` list, the search's tree is appended to it as it grows (what `seqlab explore` draws): a node
    {"id", "parent" (None: the sentence's start), "sentence", "step", "token", "score" (the prefix's summed log
    probability), "status"} for each of the 2K best candidates of each step, "kept" (in the next beam), "ended"
    (finished with </s> among the best K), "dropped" (among the 2K, not taken) or "late" (ended after the
    sentence had its K); then {"finished": node id, "sentence", "score", "normalized", "ended"} for each
    hypothesis as it finishes (a live one cut at the limit too). Nothing is recorded without one."""
    B, K = len(tokens), beam
    expand = ops.repeat(ops.arange(B), K)                                          # (B*K,)
    state, tokens = decoder.reorder(state, expand), tokens[expand]
    scores = ops.zeros((B, K), floats=True)
    scores[:, 1:] = float("-inf")                 # at the start only one hypothesis per sentence is live
    history = ops.zeros((B * K, 0), floats=False)
    attention = None                              # (B*K, t, S), from the first step's weights
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    alive = list(range(B))                        # the original sentence of each live batch row group
    nodes: list[int | None] = [None] * (B * K)    # with a trace: the tree node of each live row

    def finish(b: int, row: int, score: float, ended: bool, weights, node: int | None = None) -> None:
        ids = history[row].tolist()
        n = len(ids) + ended
        attn = None
        if need_weights:
            rows = attention[row] if weights is None else ops.cat([attention[row], weights[row][None]], 0)
            attn = rows[:n, :int(lengths[b])]
        finished[b].append(Hypothesis(ids, score, normalized(score, n, length_penalty), ended, attn))
        if trace is not None:
            trace.append({"finished": node, "sentence": b, "score": score,
                          "normalized": normalized(score, n, length_penalty), "ended": ended})

    for t in range(int(limit.max())):
        checkpoint()
        logits, state, weights = decoder.step(tokens, state)
        V = logits.shape[-1]
        if t == 0 and ends_at_eos:
            check_beam_width(K, V, len(block.ids))
        if need_weights:
            weights = ops.host_floats(weights)
            if attention is None:
                attention = ops.host_zeros((weights.shape[0], 0, weights.shape[1]))
        log_probs = ops.log_softmax(block(logits))                                 # (n*K, V)
        n = len(alive)
        candidates = (scores.reshape(n, K, 1) + log_probs.reshape(n, K, V)).reshape(n, K * V)
        top_scores, top = ops.topk(candidates, 2 * K)                              # (n, 2K)
        top_beams, top_tokens = top // V, top % V
        is_eos = top_tokens == (EOS if ends_at_eos else -1)
        # the next beam: the first K candidates that do not end the sentence
        chosen = ops.argsort(ops.arange(2 * K)[None, :] + is_eos * (2 * K))[:, :K]    # (n, K)
        next_scores = ops.take(top_scores, chosen)
        next_beams = ops.take(top_beams, chosen)
        next_tokens = ops.take(top_tokens, chosen)
        made = traced(trace, nodes, alive, t, K, top_scores, top_beams, top_tokens, chosen, is_eos) \
            if trace is not None else None                     # (n, 2K) node ids of the candidates
        for i, j in ops.argwhere(is_eos[:, :K] & (top_scores[:, :K] > float("-inf"))):
            b = alive[i]                                        # ended hypotheses among the best K
            if len(finished[b]) < K:
                finish(b, i * K + int(top_beams[i, j]), float(top_scores[i, j]), True, weights,
                       None if made is None else made[i][j])
            elif made is not None and trace is not None:
                trace[made[i][j]]["status"] = "late"
        if made is not None:
            nodes = [made[i][c] for i, row in enumerate(chosen.tolist()) for c in row]
        rows = (ops.arange(n)[:, None] * K + next_beams).reshape(-1)              # parent rows (n*K,)
        history = ops.cat([history[rows], next_tokens.reshape(-1, 1)], 1)
        if need_weights:
            attention = ops.cat([attention, weights[:, None]], 1)[ops.host(rows)]
        scores, tokens = next_scores, next_tokens.reshape(-1)
        keep = []
        for i, b in enumerate(alive):
            if len(finished[b]) < K and t + 1 >= int(limit[b]):   # out of room: the live ones finish as they are
                for k in range(K):
                    if scores[i, k] > float("-inf") and len(finished[b]) < K:
                        finish(b, i * K + k, float(scores[i, k]), False, None, nodes[i * K + k])
            if len(finished[b]) < K:
                keep.append(i)
        if not keep:
            break
        if len(keep) < n:                                        # finished sentences leave the batch
            index = ops.index(keep)
            row_index = (index[:, None] * K + ops.arange(K)).reshape(-1)
            alive = [alive[i] for i in keep]
            scores, tokens, history = scores[index], tokens[row_index], history[row_index]
            if need_weights:
                attention = attention[ops.host(row_index)]
            if trace is not None:
                nodes = [nodes[r] for r in row_index.tolist()]
            rows = rows[row_index]
        state = decoder.reorder(state, rows)                     # follow the surviving hypotheses
    return finished


def traced(trace: list[dict], nodes: list[int | None], alive: list[int], t: int, K: int, top_scores, top_beams,
           top_tokens, chosen, is_eos) -> list[list[int | None]]:
    """`beam_steps`' tree: append a node for each of step `t`'s 2K best candidates of each live sentence (those
    of score -inf, which no prefix reaches, are left out); their ids (n, 2K), None where left out."""
    scores, beams, tokens = top_scores.tolist(), top_beams.tolist(), top_tokens.tolist()
    taken, eos = [set(row) for row in chosen.tolist()], is_eos.tolist()
    made: list[list[int | None]] = []
    for i, b in enumerate(alive):
        row: list[int | None] = []
        for j, score in enumerate(scores[i]):
            if score == float("-inf"):
                row.append(None)
                continue
            status = "ended" if eos[i][j] and j < K else "kept" if j in taken[i] else "dropped"
            row.append(len(trace))
            trace.append({"id": len(trace), "parent": nodes[i * K + beams[i][j]], "sentence": b, "step": t,
                          "token": tokens[i][j], "score": score, "status": status})
        made.append(row)
    return made


def lm_beam(decoder, ops: Ops, state, last, options, block: Callable, nbest: int = 1) -> list[Hypothesis]:
    """The `nbest` continuations of one prompt (`state` has read all its tokens but `last`, (1,)) of highest
    length-normalised log probability found by a beam of `options.beam` (a `SamplingOptions`), best first.
    Every hypothesis runs to `options.max_tokens`, unless `options.stop_at_eos`, where </s> ends one (its
    tokens then exclude the </s>, finished is True)."""
    if options.max_tokens == 0:
        return [Hypothesis([], 0.0, 0.0, False)]
    (found,) = beam_steps(decoder, ops, state, last, ops.index([options.max_tokens]), options.beam,
                          options.length_penalty, block, ends_at_eos=options.stop_at_eos)
    return best_first(found, nbest)


# ------------------------------------------------------------------------------ text


def text_pieces(ids: Iterable[int], body: list[int], detokenize: Callable[[list[int]], str], stop_at_eos: bool,
                whole: bool) -> Generator[str, None, str]:
    """The continuation of a prompt (its ids `body`) as text, piece by piece as the generated `ids` come: the
    text each id adds (nothing while half a UTF-8 character waits for the rest, with byte-level BPE, and nothing
    of a half character the ids end in); the first `</s>` ends it with `stop_at_eos`; `whole` (beam search,
    whose ids come at the end) yields it once. Returns why it ended: "stop" (that `</s>`) or "length" (the ids
    ran out).

    A line's text never depends on the lines before it (`</s>` is a line break), so only the current line is
    detokenized again for each id: the body's last line, then the continuation's (a long prompt made each id cost
    the whole prompt); a checkpoint at each id lets a server run other work between two."""
    breaks = [i for i, token in enumerate(body) if token == EOS]
    line = list(body[breaks[-1] + 1:] if breaks else body)          # the ids of the line the next id joins
    shown = len(detokenize(line)) if line else 0                     # its text already shown
    generated: list[int] = []
    reason = "length"
    for token in ids:
        checkpoint()
        if stop_at_eos and token == EOS:
            reason = "stop"
            break
        generated.append(token)
        if whole:
            continue
        if token == EOS:                                             # the line ends: its rest and a line break
            piece = (detokenize(line)[shown:] if line else "") + "\n"
            line, shown = [], 0
            yield piece
            continue
        line.append(token)
        text = detokenize(line)
        if text.endswith("\ufffd"):
            continue
        piece = text[shown:]
        shown = len(text)
        if piece:
            yield piece
    if whole and generated:
        kept = len(generated)
        text = detokenize(line + generated)
        while text.endswith("\ufffd") and kept:       # the half character it ends in is left out, as above
            kept -= 1
            text = detokenize(line + generated[:kept])
        yield text[shown:]
    return reason

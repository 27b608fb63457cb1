"""Decoding any model that follows the incremental-decoding contract (`seqlab.models.base.IncrementalDecoder`:
`step` and `reorder_state`): greedy, sampling and beam search, for sequence-to-sequence models (batched over
sentences, `decode`) and for language models (a prompt's continuation, `generate_ids`; n sampled
continuations of one prompt as one batch, `sample_ids`).

A search starts the model (`model.start(source, lengths)`, then `start_token`; `lm.start(prompt)`, then the
prompt's last token), feeds one token per step and reads the next token's logits. The logits pass through
the logits processors of `seqlab.decoding.processors`: the tokens that are never an output (<pad>, <s>, <sep>) are
blocked in every search; sampling also applies the temperature, top-k and top-p.

Greedy decoding takes the most likely token at each step (SLP 13.4); sampling draws it from the softmax,
optionally sharpened by a temperature and cut to the top k tokens or the top-p mass (SLP 9.2.3 for the
language models' generation; prompted completion, 9.4.1).

Beam search (SLP 13.4, Fig. 13.8) keeps the K best partial outputs of each sentence. At each step every
live hypothesis is extended by every token, and the 2K best extensions of the sentence are ranked: an
extension by </s> among the first K is a finished hypothesis; the first K others are the next beam. A
sentence is done when K hypotheses have finished (fairseq's rule), or when it reaches its maximum length,
where its live hypotheses are finished as they are. The finished ones are ranked by their log probability
divided by length^α (length normalisation; α = 0 ranks by the raw sum, which favours short outputs). The
model's state (RNN states or KV caches, and the encoder's memory) is reordered to follow the surviving
hypotheses, and finished sentences leave the batch. A language model's beam (one prompt) runs every
hypothesis to max_tokens, </s> being a line end, unless stop_at_eos makes </s> end a hypothesis.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import islice

import torch
from torch import Tensor

from seqlab.data.vocab import EOS
from seqlab.decoding.options import Sampling, SamplingOptions, SearchOptions  # noqa: F401  (re-exported)
from seqlab.decoding.processors import NEVER_GENERATED, BlockTokens, nucleus, process, processors_for
from seqlab.errors import SeqlabError


@dataclass
class Hypothesis:
    """One output: its token ids (without </s>), the summed log probability (of </s> too, when it ended
    with one), the length-normalised score it was ranked by, and the attention weights of each output
    step over the real source positions (len(tokens) + finished, S), when asked for."""

    tokens: list[int]
    score: float
    normalized: float
    finished: bool
    attention: Tensor | None = field(default=None, repr=False)


def max_lengths(lengths: Tensor, options: SearchOptions, model) -> Tensor:
    """Each sentence's output limit (B,): --max-length, or 2 x its source length + 10, within what the
    decoder can hold (`model.target_room`)."""
    limit = torch.full_like(lengths, options.max_length) if options.max_length else 2 * lengths + 10
    room = model.target_room(lengths)
    if room is not None:
        limit = torch.minimum(limit, room.clamp(min=1))
    return limit.cpu()


# ------------------------------------------------------------------------------ choosing a token


def blocked_tokens(model) -> BlockTokens:
    """The tokens a search never chooses: <pad>, <s>, <sep>, and those the model adds (`never_generated`:
    a copy model's <unk>, since it writes a source word instead)."""
    extra = tuple(getattr(model, "never_generated", ()))
    return BlockTokens(NEVER_GENERATED + extra) if extra else BlockTokens()


def choose_tokens(logits: Tensor, processors: list, sample: bool,
                  generator: torch.Generator | None = None) -> Tensor:
    """The next tokens (B,) from logits (B, V): the argmax of the processed logits, or a draw from their
    softmax."""
    scores = process(logits, processors)                                      # (B, V)
    if not sample:
        return scores.argmax(dim=-1)
    return torch.multinomial(scores.softmax(dim=-1), 1, generator=generator).squeeze(1)


def choose(logits: Tensor, options: SamplingOptions, generator: torch.Generator | None = None) -> Tensor:
    """The next token (B,) from the last position's logits (B, V), as `options` say (greedy or sampled)."""
    return choose_tokens(logits, processors_for(options, sample=not options.greedy), not options.greedy, generator)


def seeded(seed: int | None, device) -> torch.Generator | None:
    return None if seed is None else torch.Generator(device=device or "cpu").manual_seed(seed)


def greedy_steps(model, state, tokens: Tensor, processors: list, sample: bool = False,
                 generator: torch.Generator | None = None, need_weights: bool = False, scores: bool = True):
    """Greedy decoding or sampling, one step per `next()`, without end: feed tokens (B,), choose the next
    ones; yield them (B,), their log probabilities under the model (B,) (None without `scores`: a caller
    that never reads them spares a log-softmax over the vocabulary per token) and the attention weights
    (B, S) or None. The never-generated tokens are blocked once per step, for the choice and the log
    probabilities alike."""
    block = blocked_tokens(model)
    rest = processors[1:] if processors[:1] == [BlockTokens()] else processors   # `block` is applied below
    while True:
        logits, state, weights = model.step(tokens, state, need_weights)                # (B, V)
        blocked = block(logits)                                                        # (B, V)
        tokens = choose_tokens(blocked, rest, sample, generator)                       # (B,)
        log_probs = torch.log_softmax(blocked, dim=-1).gather(1, tokens[:, None])[:, 0] if scores else None
        yield tokens, log_probs, weights


def beam_steps(model, state, tokens: Tensor, limit: Tensor, beam: int, length_penalty: float,
               ends_at_eos: bool = True, need_weights: bool = False,
               lengths: Tensor | None = None) -> list[list[Hypothesis]]:
    """Beam search of width K = `beam` from a started state of B sentences (B rows; `tokens` (B,) the
    first fed) to each sentence's `limit` (B,): every finished hypothesis of each sentence, unsorted.
    With `ends_at_eos` False, </s> is an ordinary token and every hypothesis runs to its limit (and a
    beam may be wider than the tokens the model can produce: it fills as the prefixes grow). `lengths`
    (B,): the real source positions the attention weights keep."""
    B, K, device = tokens.size(0), beam, tokens.device
    expand = torch.arange(B, device=device).repeat_interleave(K)                    # (B*K,)
    state, tokens = model.reorder_state(state, expand), tokens[expand]
    scores = torch.zeros(B, K, device=device)
    scores[:, 1:] = float("-inf")                 # at the start only one hypothesis per sentence is live
    history = torch.zeros(B * K, 0, dtype=torch.long, device=device)
    attention = None                              # (B*K, t, S), from the first step's weights
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    alive = list(range(B))                        # the original sentence of each live batch row group
    block = blocked_tokens(model)

    def finish(b: int, row: int, score: float, ended: bool, weights: Tensor | None) -> None:
        ids = history[row].tolist()
        n = len(ids) + ended
        attn = None
        if need_weights:
            rows = attention[row] if weights is None else torch.cat([attention[row], weights[row][None]])
            attn = rows[:n, :int(lengths[b])]
        finished[b].append(Hypothesis(ids, score, score / max(n, 1) ** length_penalty, ended, attn))

    for t in range(int(limit.max())):
        logits, state, weights = model.step(tokens, state, need_weights)
        V = logits.size(-1)
        if t == 0 and ends_at_eos and K > V - len(block.ids):
            raise SeqlabError(f"--beam {K} is larger than the {V - len(block.ids)} tokens the model can "
                              "produce; use a smaller beam")
        if need_weights:
            weights = weights.float().cpu()
            if attention is None:
                attention = weights.new_zeros(weights.size(0), 0, weights.size(1))
        log_probs = torch.log_softmax(block(logits), dim=-1)                           # (n*K, V)
        n = len(alive)
        candidates = (scores.view(n, K, 1) + log_probs.view(n, K, V)).view(n, K * V)
        top_scores, top = candidates.topk(2 * K, dim=1)                                 # (n, 2K)
        top_beams, top_tokens = top // V, top % V
        is_eos = top_tokens == EOS if ends_at_eos else torch.zeros_like(top_tokens, dtype=torch.bool)
        # the next beam: the first K candidates that do not end the sentence
        rank = torch.arange(2 * K, device=device).expand(n, -1) + is_eos * (2 * K)
        chosen = rank.argsort(dim=1)[:, :K]                                             # (n, K)
        next_scores = top_scores.gather(1, chosen)
        next_beams = top_beams.gather(1, chosen)
        next_tokens = top_tokens.gather(1, chosen)
        eos_rows = (is_eos[:, :K] & (top_scores[:, :K] > float("-inf"))).nonzero().tolist()
        for i, j in eos_rows:                                   # ended hypotheses among the best K
            b = alive[i]
            if len(finished[b]) < K:
                finish(b, i * K + int(top_beams[i, j]), float(top_scores[i, j]), True, weights)
        rows = (torch.arange(n, device=device)[:, None] * K + next_beams).view(-1)       # parent rows (n*K,)
        history = torch.cat([history[rows], next_tokens.view(-1, 1)], dim=1)
        if need_weights:
            attention = torch.cat([attention, weights[:, None]], dim=1)[rows.cpu()]
        scores, tokens = next_scores, next_tokens.view(-1)
        keep = []
        for i, b in enumerate(alive):
            if len(finished[b]) < K and t + 1 >= int(limit[b]):   # out of room: the live ones finish as they are
                for k in range(K):
                    if scores[i, k] > float("-inf") and len(finished[b]) < K:
                        finish(b, i * K + k, float(scores[i, k]), False, None)
            if len(finished[b]) < K:
                keep.append(i)
        if not keep:
            break
        if len(keep) < n:                                        # finished sentences leave the batch
            index = torch.tensor(keep, device=device)
            row_index = (index[:, None] * K + torch.arange(K, device=device)).view(-1)
            alive = [alive[i] for i in keep]
            scores, tokens, history = scores[index], tokens[row_index], history[row_index]
            if need_weights:
                attention = attention[row_index.cpu()]
            rows = rows[row_index]
        state = model.reorder_state(state, rows)                 # follow the surviving hypotheses
    return finished


def best_first(hypotheses: list[Hypothesis], nbest: int) -> list[Hypothesis]:
    return sorted(hypotheses, key=lambda h: -h.normalized)[:nbest]


# ------------------------------------------------------------------------ sequence to sequence


def start_model(model, source: Tensor, lengths: Tensor, source_copy: Tensor | None = None):
    """`model.start(source, lengths)`; a copy model's (See et al. 2017) with the sources' extended ids too."""
    return model.start(source, lengths) if source_copy is None else model.start(source, lengths, source_copy)


@torch.no_grad()
def decode(model, source: Tensor, lengths: Tensor, options: SearchOptions | None = None,
           need_weights: bool = False, source_copy: Tensor | None = None) -> list[list[Hypothesis]]:
    """Decode a batch of right-padded sources (B, S) with lengths (B,): `options.nbest` hypotheses per
    sentence, best first. With `need_weights`, each hypothesis carries its attention over the source
    (models that attend: the RNNs with attention and the transformer's last cross-attention layer).
    A copy model takes `source_copy` (B, S), the sources' extended ids; its hypotheses' ids from V on are
    copied source words (`PairBatch.oovs`)."""
    options = options or SearchOptions()
    need_weights = need_weights and model.attends        # models without attention have no weights to give
    was_training = model.training
    model.eval()
    try:
        if options.beam == 1:
            return [[h] for h in greedy(model, source, lengths, options, need_weights, source_copy)]
        return beam_search(model, source, lengths, options, need_weights, source_copy)
    finally:
        model.train(was_training)


@torch.no_grad()
def greedy(model, source: Tensor, lengths: Tensor, options: SearchOptions, need_weights: bool = False,
           source_copy: Tensor | None = None):
    """The most likely token at each step (or a sampled one, with options.sample)."""
    B = source.size(0)
    limit = max_lengths(lengths, options, model)
    state = start_model(model, source, lengths, source_copy)
    tokens = torch.full((B,), model.start_token, dtype=torch.long, device=source.device)
    generator = seeded(options.seed, source.device) if options.sample else None
    steps = greedy_steps(model, state, tokens, processors_for(options, options.sample), options.sample,
                         generator, need_weights)
    outputs: list[list[int]] = [[] for _ in range(B)]
    scores = [0.0] * B
    finished = [False] * B
    done = [False] * B
    attention: list[Tensor] = []
    for tokens, log_probs, weights in islice(steps, int(limit.max())):
        if need_weights:
            attention.append(weights.float().cpu())
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
        weights = torch.stack([w[b, :int(lengths[b])] for w in attention[:n]]) if need_weights else None
        results.append(Hypothesis(outputs[b], scores[b], scores[b] / max(n, 1) ** options.length_penalty,
                                  finished[b], weights))
    return results


@torch.no_grad()
def beam_search(model, source: Tensor, lengths: Tensor, options: SearchOptions,
                need_weights: bool = False, source_copy: Tensor | None = None) -> list[list[Hypothesis]]:
    """Beam search over a batch of sources: `options.nbest` hypotheses per sentence, best first."""
    limit = max_lengths(lengths, options, model)
    state = start_model(model, source, lengths, source_copy)
    tokens = torch.full((source.size(0),), model.start_token, dtype=torch.long, device=source.device)
    finished = beam_steps(model, state, tokens, limit, options.beam, options.length_penalty, True, need_weights,
                          lengths)
    return [best_first(hyps, options.nbest) for hyps in finished]


# ------------------------------------------------------------------------------ language models


def check_prompt(model, context: list[int]) -> None:
    window = model.context_length
    if window is not None and len(context) > window:
        raise SeqlabError(f"the prompt is {len(context)} tokens (with the leading </s>), longer than the "
                          f"model's context of {window} tokens; shorten it or keep its end "
                          f"(--truncate-prompt)")


@torch.inference_mode()
def generate_ids(model, context: list[int], options: SamplingOptions, device=None) -> Iterator[int]:
    """Yield new token ids one at a time after `context` (which starts with `</s>`, a line start): sampled,
    or greedy. With `options.beam` > 1, the ids of the best beam hypothesis (`lm_beam_search`), once the
    search is over. Runs in inference mode (no autograd bookkeeping per operation, a few percent of a small
    model's step)."""
    if options.beam > 1:
        (best,) = lm_beam_search(model, context, options, device)
        yield from best.tokens
        if best.finished:
            yield EOS
        return
    model.eval()
    check_prompt(model, context)
    prompt = torch.tensor([context], device=device)                                    # (1, T)
    state = model.start(prompt)
    sample = not options.greedy
    steps = greedy_steps(model, state, prompt[:, -1], processors_for(options, sample), sample,
                         seeded(options.seed, device) if sample else None, scores=False)
    for tokens, _, _ in islice(steps, options.max_tokens):
        token = tokens.item()
        yield token
        if options.stop_at_eos and token == EOS:
            return


def nucleus_choose(logits: Tensor, options: SamplingOptions, generator: torch.Generator | None = None) -> Tensor:
    """The next tokens (B,) sampled from logits (B, V) from the distribution `choose` samples from (blocked
    tokens, temperature, top-k, top-p, in that order), without sorting every row: the top-p set is
    `processors.nucleus`, and the draw inverts each row's cumulative distribution at a uniform u (B,)."""
    scores = process(logits, processors_for(replace(options, top_p=1.0), sample=True))   # (B, V)
    probs = scores.softmax(dim=-1)
    if options.top_p < 1.0:
        probs = probs * nucleus(scores, options.top_p)
    cumulative = probs.cumsum(dim=-1)                                                    # (B, V)
    total = cumulative[:, -1:]
    u = torch.rand(probs.size(0), 1, generator=generator, device=probs.device) * total  # in [0, total)
    u = torch.minimum(u, torch.nextafter(total, torch.zeros_like(total)))               # even once rounded
    return torch.searchsorted(cumulative, u, right=True).squeeze(1)     # the first token whose cumulative > u


@torch.no_grad()
def sample_ids(model, context: list[int], options: SamplingOptions, n: int, device=None) -> list[list[int]]:
    """`n` continuations of one prompt `context` (starting with `</s>`) sampled as one batch of n rows: the
    prompt is read once, its state copied to n rows (`reorder_state`), and each step draws the n next
    tokens at once (`nucleus_choose`: the distribution `generate_ids` samples from, temperature, top-k and
    top-p included) from one generator seeded with `options.seed`; `options.greedy` takes the argmax. Each
    row is what `generate_ids` yields: `options.max_tokens` ids, or up to and with its first </s> when
    `options.stop_at_eos`. The rows are independent draws, not the continuations of seeds seed, seed + 1,
    ...: the same distribution, other draws."""
    if options.beam > 1:
        raise SeqlabError("sample_ids samples; beam search finds one continuation (use generate_ids)")
    if n < 1:
        raise SeqlabError(f"sample_ids needs at least one continuation, got {n}")
    model.eval()
    check_prompt(model, context)
    prompt = torch.tensor([context], device=device)                                    # (1, T)
    rows = torch.zeros(n, dtype=torch.long, device=prompt.device)                      # n copies of row 0
    state = model.reorder_state(model.start(prompt), rows)
    tokens = prompt[rows, -1]                                                          # (n,)
    generator = None if options.greedy else seeded(options.seed, device)
    drawn = []
    for _ in range(options.max_tokens):
        logits, state, _ = model.step(tokens, state)                                   # (n, V)
        tokens = (choose_tokens(logits, processors_for(options), sample=False) if options.greedy
                  else nucleus_choose(logits, options, generator))
        drawn.append(tokens)
    if not drawn:
        return [[] for _ in range(n)]
    outputs = torch.stack(drawn, dim=1).tolist()                                       # (n, max_tokens)
    if options.stop_at_eos:
        outputs = [ids[:ids.index(EOS) + 1] if EOS in ids else ids for ids in outputs]
    return outputs


@torch.no_grad()
def lm_beam_search(model, context: list[int], options: SamplingOptions, device=None,
                   nbest: int = 1) -> list[Hypothesis]:
    """The `nbest` continuations of `context` (one prompt) of highest length-normalised log probability
    found by a beam of `options.beam`, best first. Every hypothesis runs to `options.max_tokens`, unless
    `options.stop_at_eos`, where </s> ends one (its tokens then exclude the </s>, finished is True)."""
    model.eval()
    check_prompt(model, context)
    if options.max_tokens == 0:
        return [Hypothesis([], 0.0, 0.0, False)]
    prompt = torch.tensor([context], device=device)                                    # (1, T)
    limit = torch.tensor([options.max_tokens])
    (finished,) = beam_steps(model, model.start(prompt), prompt[:, -1], limit, options.beam,
                             options.length_penalty, ends_at_eos=options.stop_at_eos)
    return best_first(finished, nbest)

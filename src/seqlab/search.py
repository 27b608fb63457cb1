"""Decoding a sequence-to-sequence model: greedy, sampling and beam search, batched over sentences.

The model is driven through its decoding contract (`seqlab.models.seq2seq`): encode the sources once,
then feed one token per step and read the next token's logits. Tokens that are never a target
(<pad>, <s>, <sep>) are never produced.

Greedy decoding takes the most likely token at each step (SLP 13.4); sampling draws it from the
softmax, optionally sharpened by a temperature and cut to the top k tokens or the top-p mass
(`seqlab.decoding`, shared with the language models).

Beam search (SLP 13.4, Fig. 13.8) keeps the K best partial translations of each sentence. At each step
every live hypothesis is extended by every token, and the 2K best extensions of the sentence are
ranked: an extension by </s> among the first K is a finished hypothesis; the first K others are the
next beam. A sentence is done when K hypotheses have finished (fairseq's rule), or when it reaches
its maximum length, where its live hypotheses are finished as they are. The finished ones are ranked
by their log probability divided by length^α (length normalisation; α = 0 ranks by the raw sum,
which favours short outputs). The decoder's state (RNN states or KV caches) and the encoder's memory
are reordered to follow the surviving hypotheses, and finished sentences leave the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from seqlab.config import check_fields, option
from seqlab.data.vocab import EOS
from seqlab.decoding import NEVER_GENERATED, Sampling, SamplingOptions, blocked, choose
from seqlab.errors import SeqlabError


@dataclass
class SearchOptions(Sampling):
    """How to decode (`seqlab translate` / `summarize` options; the sampling ones are `Sampling`'s)."""

    beam: int = option(1, "beam size; 1: greedy (or sampling, with sample=True)", at_least=1)
    max_length: int = option(0, "most output tokens, </s> included (0: 2 x the source length + 10, within the "
                             "model's limit)", at_least=0)
    length_penalty: float = option(1.0, "rank beam hypotheses by log p / length^alpha (0: raw log p)", at_least=0)
    sample: bool = option(False, "sample each token (with beam 1)")
    nbest: int = option(1, "beam search: hypotheses returned per sentence", at_least=1)

    def __post_init__(self):
        check_fields(self)
        if self.sample and self.beam > 1:
            raise SeqlabError("sampling draws one output per sentence; use --beam 1 with --sample")
        if self.nbest > self.beam:
            raise SeqlabError(f"--nbest must be between 1 and --beam ({self.beam}), got {self.nbest}")


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


@torch.no_grad()
def decode(model, source: Tensor, lengths: Tensor, options: SearchOptions | None = None,
           need_weights: bool = False) -> list[list[Hypothesis]]:
    """Decode a batch of right-padded sources (B, S) with lengths (B,): `options.nbest` hypotheses per
    sentence, best first. With `need_weights`, each hypothesis carries its attention over the source
    (models that attend: the RNNs with attention and the transformer's last cross-attention layer)."""
    options = options or SearchOptions()
    need_weights = need_weights and model.attends        # models without attention have no weights to give
    was_training = model.training
    model.eval()
    try:
        if options.beam == 1:
            return [[h] for h in greedy(model, source, lengths, options, need_weights)]
        return beam_search(model, source, lengths, options, need_weights)
    finally:
        model.train(was_training)


@torch.no_grad()
def greedy(model, source: Tensor, lengths: Tensor, options: SearchOptions, need_weights: bool = False):
    """The most likely token at each step (or a sampled one, with options.sample)."""
    B = source.size(0)
    limit = max_lengths(lengths, options, model)
    memory = model.encode(source, lengths)
    state = model.init_state(memory)
    tokens = torch.full((B,), model.start_token, dtype=torch.long, device=source.device)
    sampling = SamplingOptions(temperature=options.temperature, top_k=options.top_k, top_p=options.top_p)
    generator = None
    if options.sample and options.seed is not None:
        generator = torch.Generator(device=source.device).manual_seed(options.seed)
    outputs: list[list[int]] = [[] for _ in range(B)]
    scores = [0.0] * B
    finished = [False] * B
    done = [False] * B
    steps: list[Tensor] = []
    for _ in range(int(limit.max())):
        logits, state, weights = model.step(tokens, state, memory, need_weights)
        if need_weights:
            steps.append(weights.float().cpu())
        allowed = blocked(logits)
        log_probs = torch.log_softmax(allowed, dim=-1)                              # (B, V)
        tokens = choose(logits, sampling, generator) if options.sample else allowed.argmax(dim=-1)   # (B,)
        chosen = log_probs.gather(1, tokens[:, None])[:, 0].tolist()
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
        attention = torch.stack([w[b, :int(lengths[b])] for w in steps[:n]]) if need_weights else None
        results.append(Hypothesis(outputs[b], scores[b], scores[b] / max(n, 1) ** options.length_penalty,
                                  finished[b], attention))
    return results


@torch.no_grad()
def beam_search(model, source: Tensor, lengths: Tensor, options: SearchOptions,
                need_weights: bool = False) -> list[list[Hypothesis]]:
    B, K, device = source.size(0), options.beam, source.device
    limit = max_lengths(lengths, options, model)
    memory = model.encode(source, lengths)
    state = model.init_state(memory)
    expand = torch.arange(B, device=device).repeat_interleave(K)                    # (B*K,)
    memory, state = model.reorder_memory(memory, expand), model.reorder_state(state, expand)
    scores = torch.zeros(B, K, device=device)
    scores[:, 1:] = float("-inf")                 # at the start only one hypothesis per sentence is live
    tokens = torch.full((B * K,), model.start_token, dtype=torch.long, device=device)
    history = torch.zeros(B * K, 0, dtype=torch.long, device=device)
    attention = torch.zeros(B * K, 0, source.size(1)) if need_weights else None
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    alive = list(range(B))                        # the original sentence of each live batch row group
    alpha = options.length_penalty

    def finish(b: int, row: int, score: float, ended: bool, weights: Tensor | None) -> None:
        ids = history[row].tolist()
        n = len(ids) + ended
        attn = None
        if need_weights:
            rows = attention[row] if weights is None else torch.cat([attention[row], weights[row][None]])
            attn = rows[:n, :int(lengths[b])]
        finished[b].append(Hypothesis(ids, score, score / max(n, 1) ** alpha, ended, attn))

    for t in range(int(limit.max())):
        logits, state, weights = model.step(tokens, state, memory, need_weights)
        V = logits.size(-1)
        if t == 0 and K > V - len(NEVER_GENERATED):
            raise SeqlabError(f"--beam {K} is larger than the {V - len(NEVER_GENERATED)} tokens the model can "
                              "produce; use a smaller beam")
        if need_weights:
            weights = weights.float().cpu()
        log_probs = torch.log_softmax(blocked(logits), dim=-1)                         # (n*K, V)
        n = len(alive)
        candidates = (scores.view(n, K, 1) + log_probs.view(n, K, V)).view(n, K * V)
        top_scores, top = candidates.topk(2 * K, dim=1)                                 # (n, 2K)
        top_beams, top_tokens = top // V, top % V
        is_eos = top_tokens == EOS
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
        state = model.reorder_state(state, rows)      # the memory is the same for every beam of a sentence
        keep = []
        for i, b in enumerate(alive):
            if len(finished[b]) < K and t + 1 >= int(limit[b]):   # out of room: the live ones finish as they are
                for k in range(K):
                    if scores[i, k] > float("-inf") and len(finished[b]) < K:
                        finish(b, i * K + k, float(scores[i, k]), False, None)
            if len(finished[b]) < K:
                keep.append(i)
        if len(keep) < n:                                        # finished sentences leave the batch
            if not keep:
                break
            index = torch.tensor(keep, device=device)
            row_index = (index[:, None] * K + torch.arange(K, device=device)).view(-1)
            alive = [alive[i] for i in keep]
            scores, tokens, history = scores[index], tokens[row_index], history[row_index]
            if need_weights:
                attention = attention[row_index.cpu()]
            state = model.reorder_state(state, row_index)
            memory = model.reorder_memory(memory, row_index)
    return [sorted(hyps, key=lambda h: -h.normalized)[:options.nbest] for hyps in finished]

"""The PyTorch strategies of the decoding core's one greedy-or-sampling loop (`seqlab.decoding.core.sampling_steps`,
a `core.Strategy` each): how the next tokens (B,) are chosen from logits whose never-generated ids are at -inf
(B, V). Each draws from PyTorch's generators in its own fixed way, so that every search that uses it makes the
same draws, in the same order, as before it shared the loop:

    Greedy       the argmax (SLP 13.4)
    Draw         the processors (`processors_for`: temperature, top-k, top-p, in that order), then the argmax or
                 one `torch.multinomial` draw per row from their softmax (SLP 9.2.3): `generate`, seq2seq sampling
    NucleusDraw  the same distribution without sorting every row: the nucleus as a mask (`processors.nucleus`), and
                 one uniform per row inverting the cumulative distribution: n continuations of a prompt at once
                 (`seqlab.decoding.search.sample_ids`)
    TopKDraw     a draw among the k largest logits only (the softmax of k values, not of the vocabulary): the
                 memorisation audit's samples (`seqlab.decoding.search.decode_batch`)
    RowDraws     each row with its own options, and its own generator when it has a seed: a batch of
                 completions, each row what it would draw alone (`seqlab.families.lm.completion`)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from seqlab.decoding.options import Sampling
from seqlab.decoding.processors import BlockTokens, nucleus, process, processors_for


def choose_tokens(logits: Tensor, processors: list, sample: bool,
                  generator: torch.Generator | None = None) -> Tensor:
    """The next tokens (B,) from logits (B, V): the argmax of the processed logits, or a draw from their
    softmax."""
    scores = process(logits, processors)                                      # (B, V)
    if not sample:
        return scores.argmax(dim=-1)
    return multinomial_draw(scores.softmax(dim=-1), generator)


def multinomial_draw(probs: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """One draw per row (B,) from probabilities (B, V): `torch.multinomial(probs, 1, generator=generator)[:, 0]`,
    the same draws from the same generator, as PyTorch computes it for one sample (the exponential race: the
    argmax of p / q, q ~ Exp(1) drawn for every token), without its check of the whole input (a max, a min and a
    device sync, twice the cost of the draw at a small vocabulary). Every search's probabilities are a softmax over
    logits of which some are finite, so there is nothing to check."""
    q = torch.empty_like(probs).exponential_(generator=generator)              # (B, V)
    return torch.div(probs, q, out=q).argmax(dim=-1)                           # (B,)


def nucleus_draw(blocked: Tensor, options: Sampling, generator: torch.Generator | None = None) -> Tensor:
    """The next tokens (B,) sampled from blocked logits (B, V) after the temperature, top-k and top-p of `options`
    (in that order), without sorting every row: the top-p set is `processors.nucleus`, and the draw inverts each
    row's cumulative distribution at a uniform u (B,)."""
    rest = processors_for(replace(options, top_p=1.0), sample=True)[1:]                 # after the block
    scores = process(blocked, rest)                                                     # (B, V)
    probs = scores.softmax(dim=-1)
    if options.top_p < 1.0:
        probs = probs * nucleus(scores, options.top_p)
    cumulative = probs.cumsum(dim=-1)                                                    # (B, V)
    total = cumulative[:, -1:]
    u = torch.rand(probs.size(0), 1, generator=generator, device=probs.device) * total  # in [0, total)
    u = torch.minimum(u, torch.nextafter(total, torch.zeros_like(total)))               # even once rounded
    return torch.searchsorted(cumulative, u, right=True).squeeze(1)     # the first token whose cumulative > u


class Strategy:
    """A strategy without per-row state: rows leaving the batch change nothing in it."""

    def choose(self, blocked: Tensor) -> Tensor:
        raise NotImplementedError

    def keep(self, index: Tensor) -> None:
        pass


class Greedy(Strategy):
    """The most likely token (SLP 13.4)."""

    def choose(self, blocked: Tensor) -> Tensor:
        return blocked.argmax(dim=-1)                                           # (B,)


@dataclass
class Draw(Strategy):
    """`processors` (those after the block, `processors_for(options, sample)[1:]`), then the argmax, or with
    `sample` one draw per row from their softmax with `generator`."""

    processors: list
    sample: bool
    generator: torch.Generator | None = None

    def choose(self, blocked: Tensor) -> Tensor:
        return choose_tokens(blocked, self.processors, self.sample, self.generator)


@dataclass
class NucleusDraw(Strategy):
    """`nucleus_draw`: the distribution `Draw` samples from, one uniform per row from `generator`."""

    options: Sampling
    generator: torch.Generator | None = None

    def choose(self, blocked: Tensor) -> Tensor:
        return nucleus_draw(blocked, self.options, self.generator)


@dataclass
class TopKDraw(Strategy):
    """A draw from the softmax of each row's k largest logits (`TopK` then sampling, without a softmax over the
    whole vocabulary)."""

    k: int
    generator: torch.Generator | None = None

    def choose(self, blocked: Tensor) -> Tensor:
        values, ids = blocked.topk(min(self.k, blocked.size(-1)), dim=-1)                   # (B, k)
        pick = torch.multinomial(values.softmax(dim=-1), 1, generator=self.generator)      # (B, 1)
        return ids.gather(1, pick)[:, 0]


class RowDraws:
    """Each row's token chosen with its own options (`Sampling` and `greedy`), as that row alone would choose it:
    rows with the same processors are processed together; greedy rows take the argmax; a row with a generator
    (a seed) draws from it, the others share one draw from PyTorch's. Rows that leave the batch leave it here too
    (`keep`)."""

    def __init__(self, options: list, generators: list[torch.Generator | None]):
        self.options, self.generators = list(options), list(generators)

    def keep(self, index: Tensor) -> None:
        self.options = [self.options[i] for i in index.tolist()]
        self.generators = [self.generators[i] for i in index.tolist()]

    def choose(self, blocked: Tensor) -> Tensor:
        chosen = torch.empty(len(self.options), dtype=torch.long, device=blocked.device)
        groups: dict[tuple, list[int]] = defaultdict(list)
        for j, o in enumerate(self.options):
            groups[(o.greedy, o.temperature, o.top_k, o.top_p)].append(j)
        for members in groups.values():
            first = self.options[members[0]]
            sample = not first.greedy
            rest = [p for p in processors_for(first, sample) if p != BlockTokens()]      # the block is the model's
            index = torch.tensor(members, device=blocked.device)
            scores = process(blocked.index_select(0, index), rest)                          # (m, V)
            if not sample:
                chosen[index] = scores.argmax(dim=-1)
                continue
            probs = scores.softmax(dim=-1)                                                  # (m, V)
            shared = [k for k, j in enumerate(members) if self.generators[j] is None]
            own = [k for k, j in enumerate(members) if self.generators[j] is not None]
            if own:                                               # each seeded row's draw from its own generator
                draws = [torch.multinomial(probs[k:k + 1], 1, generator=self.generators[members[k]]) for k in own]
                chosen[index[torch.tensor(own, device=blocked.device)]] = torch.cat(draws)[:, 0]
            if shared:
                at = torch.tensor(shared, device=blocked.device)
                chosen[index[at]] = torch.multinomial(probs.index_select(0, at), 1).squeeze(1)
        return chosen

"""Logits processors: small composable callables `logits (B, V) -> logits (B, V)` that every search
(`seqlab.decoding.search`: greedy, sampling, beam) applies the same way before it chooses a token.

    BlockTokens   the ids that are never generated (<pad>, <s>, <sep>; with a language model's search, <unk>
                  too: `seqlab.decoding.search.blocked_tokens`) get -inf
    Temperature   (z - max z) / τ: below 1 sharpens softmax(z / τ), above 1 flattens it
    TopK          keep the k largest logits (the rest -inf)
    TopP          keep the smallest set of tokens whose probability reaches p (nucleus sampling,
                  Holtzman et al. 2020)

`nucleus` is TopP's kept set as a mask, for a sampler that draws from the nucleus directly
(`seqlab.decoding.search.sample_ids`): the same tokens, found by bisecting each row's probabilities rather than by
sorting the whole vocabulary (a full sort of a batch of 33k-word rows is most of a CPU sampling step).

Every positive finite temperature and every top-p in (0, 1] keep the arithmetic finite (`Temperature`,
`core.nucleus_mass`); the numpy searches (`seqlab.decoding.numpy_search`) do the same float32 operations.

Greedy decoding and beam search apply `BlockTokens` only (the others never change the argmax, and a
beam ranks by the model's own probabilities); sampling applies them all, in the order above
(`processors_for`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from seqlab.data.vocab import NEVER_GENERATED
from seqlab.decoding.core import nucleus_mass, processor_plan, temperature_scale


@dataclass(frozen=True)
class BlockTokens:
    """A float copy of the logits with `ids` at -inf (the input is never modified)."""

    ids: tuple[int, ...] = NEVER_GENERATED

    def __call__(self, logits: Tensor) -> Tensor:
        ids = id_tensor(self.ids, logits.device)                               # one copy-and-fill, not an
        return logits.float().index_fill(1, ids, float("-inf"))                # indexed write: (B, V)


@functools.lru_cache(maxsize=32)
def id_tensor(ids: tuple[int, ...], device: torch.device) -> Tensor:
    """`ids` as a tensor on `device`, made once (torch.tensor costs more than the fill it serves); an ordinary
    tensor even when first asked for in inference mode, so that any mode may use it."""
    with torch.inference_mode(False):
        return torch.tensor(ids, device=device)


@dataclass(frozen=True)
class Temperature:
    """(z - max z) / τ: softmax(z / τ) (the shift changes nothing in it) is sharper for τ < 1, flatter for τ > 1.

    Shifted, each row's maximum is exactly 0 and the rest at most 0, and divided as `core.temperature_scale`
    says, any positive finite τ keeps it so, without a nan (z / τ in float32 is nan for τ = 1e-300, which is 0
    there, or 1e308, which is inf). As τ -> 0 every logit below the maximum goes to -inf (the argmax, ties
    shared); as τ -> inf every one goes to 0 (uniform over the ids not blocked); the blocked ids stay -inf."""

    temperature: float

    def __call__(self, logits: Tensor) -> Tensor:
        m, factors = temperature_scale(self.temperature)
        logits = logits.float()
        scaled = (logits - logits.max(dim=-1, keepdim=True).values) / m        # (B, V), max 0
        for factor in factors:
            scaled = scaled * factor
        return scaled


@dataclass(frozen=True)
class TopK:
    """Every logit below the k-th largest of its row at -inf (k >= V keeps them all)."""

    k: int

    def __call__(self, logits: Tensor) -> Tensor:
        if self.k >= logits.size(-1):
            return logits
        kth = torch.topk(logits, self.k, dim=-1).values[:, -1:]                # (B, 1)
        return logits.masked_fill(logits < kth, float("-inf"))


@dataclass(frozen=True)
class TopP:
    """The smallest set of most likely tokens whose probability reaches p is kept; the rest at -inf."""

    p: float

    def __call__(self, logits: Tensor) -> Tensor:
        sorted_logits, order = logits.sort(dim=-1, descending=True)            # (B, V)
        probs = sorted_logits.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs                                  # mass of better tokens
        dropped = before >= nucleus_mass(self.p)                               # (B, V), in sorted order
        return logits.masked_fill(dropped.scatter(-1, order, dropped), float("-inf"))   # back in place


def nucleus(logits: Tensor, p: float, steps: int = 12) -> Tensor:
    """TopP's nucleus (Holtzman et al. 2020) as a mask (B, V), found without sorting the whole row: the
    smallest set of most likely tokens whose probability reaches p, as `TopP` keeps it.

    A threshold t splits a row: if the tokens at or above t hold mass below p, each of them has less than p
    before it and is in; if they hold p or more, every token below t has at least p before it and is out.
    `steps` bisections of each row's range of log probabilities leave a band [low, high) between an "out"
    threshold and an "in" one; only the few tokens in the band are sorted, and each is in while the mass
    above high plus the band's better tokens stays below p (TopP's rule, `before < p`)."""
    p = nucleus_mass(p)
    log_probs = logits.float().log_softmax(dim=-1)                             # (B, V)
    probs = log_probs.exp()
    low = log_probs.masked_fill(log_probs == float("-inf"), 0.0).min(dim=-1, keepdim=True).values    # (B, 1)
    high = log_probs.max(dim=-1, keepdim=True).values + 1.0                    # nothing at or above: mass 0 < p
    for _ in range(steps):
        middle = (low + high) / 2
        holds = (probs * (log_probs >= middle)).sum(dim=-1, keepdim=True) >= p  # (B, 1)
        low, high = torch.where(holds, middle, low), torch.where(holds, high, middle)
    surely_in = log_probs >= high                                              # (B, V)
    band = (log_probs >= low) & ~surely_in
    k = int(band.sum(dim=-1).max())
    if k == 0:
        return surely_in
    band_log_probs, ids = log_probs.masked_fill(~band, float("-inf")).topk(k, dim=-1)   # (B, k), descending
    band_probs = band_log_probs.exp()
    before = (probs * surely_in).sum(dim=-1, keepdim=True) + band_probs.cumsum(dim=-1) - band_probs
    in_band = band_log_probs > float("-inf")                                   # rows with fewer than k: padding
    return surely_in.scatter(-1, ids, torch.where(in_band, before < p, surely_in.gather(-1, ids)))


PROCESSORS = {"temperature": Temperature, "top_k": TopK, "top_p": TopP}


def processors_for(options=None, sample: bool = False) -> list:
    """The processors a search applies: `BlockTokens` always; when sampling, then the temperature, top-k
    and top-p of `options` (a `seqlab.decoding.options.Sampling`), each only where it changes something
    (`seqlab.decoding.core.processor_plan`, the rule the numpy searches follow too)."""
    return [BlockTokens(), *(PROCESSORS[name](value) for name, value in processor_plan(options, sample))]


def process(logits: Tensor, processors: list) -> Tensor:
    """Apply the processors in order: logits (B, V) -> logits (B, V)."""
    for processor in processors:
        logits = processor(logits)
    return logits

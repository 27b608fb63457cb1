"""Logits processors: small composable callables `logits (B, V) -> logits (B, V)` that every search
(`seqlab.search`: greedy, sampling, beam) applies the same way before it chooses a token.

    BlockTokens   the ids that are never generated (<pad>, <s>, <sep>) get -inf
    Temperature   z / τ: below 1 sharpens softmax(z / τ), above 1 flattens it
    TopK          keep the k largest logits (the rest -inf)
    TopP          keep the smallest set of tokens whose probability reaches p (nucleus sampling,
                  Holtzman et al. 2020)

Greedy decoding and beam search apply `BlockTokens` only (the others never change the argmax, and a
beam ranks by the model's own probabilities); sampling applies them all, in the order above
(`processors_for`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from seqlab.data.vocab import NEVER_GENERATED


@dataclass(frozen=True)
class BlockTokens:
    """A float copy of the logits with `ids` at -inf (the input is never modified)."""

    ids: tuple[int, ...] = NEVER_GENERATED

    def __call__(self, logits: Tensor) -> Tensor:
        logits = logits.float().clone()                                        # (B, V)
        logits[:, list(self.ids)] = float("-inf")
        return logits


@dataclass(frozen=True)
class Temperature:
    """z / τ: softmax(z / τ) is sharper for τ < 1, flatter for τ > 1."""

    temperature: float

    def __call__(self, logits: Tensor) -> Tensor:
        return logits / self.temperature                                       # (B, V)


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
        sorted_logits = sorted_logits.masked_fill(before >= self.p, float("-inf"))
        return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


def processors_for(options=None, sample: bool = False) -> list:
    """The processors a search applies: `BlockTokens` always; when sampling, then the temperature, top-k
    and top-p of `options` (a `seqlab.search.Sampling`), each only where it changes something."""
    processors: list = [BlockTokens()]
    if not sample or options is None:
        return processors
    if options.temperature != 1.0:
        processors.append(Temperature(options.temperature))
    if options.top_k:
        processors.append(TopK(options.top_k))
    if options.top_p < 1.0:
        processors.append(TopP(options.top_p))
    return processors


def process(logits: Tensor, processors: list) -> Tensor:
    """Apply the processors in order: logits (B, V) -> logits (B, V)."""
    for processor in processors:
        logits = processor(logits)
    return logits

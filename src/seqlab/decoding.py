"""Autoregressive generation (SLP 9.2.3; prompted completion, 9.4.1), kept outside the models.

Each new token costs one `model.step` on the state of the tokens before it: the carried hidden
state of an RNN, the last N-1 tokens of the window LM, the KV cache of the transformer. When a
transformer's cache reaches its context length, the most recent half of the context is re-encoded
into a fresh cache and generation goes on (one pass per context/2 tokens, not one per token).

Choosing the next token: greedy (argmax), or sampling from softmax(logits / temperature) restricted
to the k most likely tokens (top-k) and/or the smallest set whose probability reaches p (top-p,
nucleus sampling, Holtzman et al. 2020).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from seqlab.config import check_fields, option
from seqlab.data.vocab import BOS, EOS, PAD, SEP
from seqlab.errors import SeqlabError

NEVER_GENERATED = (PAD, BOS, SEP)       # ids that are never a language model's target


@dataclass
class Sampling:
    """How a sampled token is drawn: the options that language-model generation (`SamplingOptions`) and
    sequence-to-sequence decoding (`seqlab.search.SearchOptions`) share."""

    temperature: float = option(1.0, "softmax temperature; below 1 sharpens, above 1 flattens", above=0)
    top_k: int = option(0, "sample among the k most likely tokens (0: all)", at_least=0)
    top_p: float = option(1.0, "sample among the most likely tokens holding probability p", above=0, at_most=1)
    seed: int | None = option(None, "random seed for reproducible samples", at_least=0, below=2**63)

    def __post_init__(self):
        check_fields(self)


@dataclass
class SamplingOptions(Sampling):
    """How to choose each generated token (`seqlab generate` options)."""

    max_tokens: int = option(200, "tokens to generate", at_least=0)
    greedy: bool = option(False, "always take the most likely token")
    stop_at_eos: bool = option(False, "stop at the first </s> (a line end); otherwise go on past line breaks "
                                      "until max_tokens")


def blocked(logits: Tensor) -> Tensor:
    """A float copy of logits (B, V) with the tokens that are never generated at -inf."""
    logits = logits.float().clone()
    logits[:, list(NEVER_GENERATED)] = float("-inf")
    return logits


def filter_logits(logits: Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> Tensor:
    """Logits (B, V) -> logits with the excluded tokens at -inf, divided by the temperature."""
    logits = blocked(logits) / temperature
    if top_k and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]                 # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)            # (B, V)
        probs = sorted_logits.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs                                  # mass of better tokens
        sorted_logits = sorted_logits.masked_fill(before >= top_p, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    return logits


def choose(logits: Tensor, options: SamplingOptions, generator: torch.Generator | None = None) -> Tensor:
    """The next token (B,) from the last position's logits (B, V)."""
    if options.greedy:
        return blocked(logits).argmax(dim=-1)
    probs = filter_logits(logits, options.temperature, options.top_k, options.top_p).softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


@torch.no_grad()
def generate_ids(model, context: list[int], options: SamplingOptions, device=None) -> Iterator[int]:
    """Yield new token ids one at a time after `context` (which starts with `</s>`, a line start)."""
    model.eval()
    window = model.context_length
    if window is not None and len(context) > window:
        raise SeqlabError(f"the prompt is {len(context)} tokens (with the leading </s>), longer than the "
                          f"model's context of {window} tokens; shorten it or keep its end "
                          f"(--truncate-prompt)")
    generator = None
    if options.seed is not None:
        generator = torch.Generator(device=device or "cpu").manual_seed(options.seed)
    history = list(context)
    state = model.init_state(1, device)
    logits, state = model.step(torch.tensor([history], device=device), state)   # (1, T, V)
    for _ in range(options.max_tokens):
        token = int(choose(logits[:, -1], options, generator))
        yield token
        if options.stop_at_eos and token == EOS:
            return
        history.append(token)
        if window is not None and state.length >= window:    # the cache is full: keep the recent half
            keep = history[-max(1, window // 2):]
            state = model.init_state(1, device)
            logits, state = model.step(torch.tensor([keep], device=device), state)
        else:
            logits, state = model.step(torch.tensor([[token]], device=device), state)

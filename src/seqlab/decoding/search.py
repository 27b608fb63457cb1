"""Decoding PyTorch models that follow the incremental-decoding contract (`seqlab.models.base.IncrementalDecoder`:
`start`, `step` and `reorder_state`): greedy, sampling and beam search, for sequence-to-sequence models
(batched over sentences, `decode`) and for language models (a prompt's continuation, `generate_ids`; n sampled
continuations of one prompt as one batch, `sample_ids`).

A search starts the model (`model.start(source, lengths)`, then `start_token`; `lm.start(prompt)`, then the
prompt's last token), feeds one token per step and reads the next token's logits. The rules of every search
(which processors apply, greedy bookkeeping, beam ranking, length normalisation) are `seqlab.decoding.core`'s,
shared with the numpy searches of the ONNX exports (`seqlab.decoding.numpy_search`); this module holds the
PyTorch side: the logits processors (`seqlab.decoding.processors`), the draws from PyTorch's generator, and
`TorchOps`, the few tensor operations the core asks for.

Greedy decoding takes the most likely token at each step (SLP 13.4); sampling draws it from the softmax,
optionally sharpened by a temperature and cut to the top k tokens or the top-p mass (SLP 9.2.3 for the
language models' generation; prompted completion, 9.4.1); beam search (SLP 13.4, Fig. 13.8) is
`seqlab.decoding.core.beam_steps`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice

import torch
from torch import Tensor

from seqlab.data.vocab import EOS
from seqlab.decoding import core
from seqlab.decoding.core import Hypothesis, ModelDecoder, best_first  # noqa: F401  (re-exported)
from seqlab.decoding.options import Sampling, SamplingOptions, SearchOptions, prompt_too_long  # noqa: F401  (re-exported)
from seqlab.decoding.processors import NEVER_GENERATED, BlockTokens, processors_for
from seqlab.decoding.sampling import Draw, Greedy, NucleusDraw, TopKDraw, choose_tokens, nucleus_draw
from seqlab.errors import SeqlabError


class TorchOps:
    """The array operations of `seqlab.decoding.core.Ops` on PyTorch tensors on `device` (the attention
    weights a hypothesis keeps on the CPU)."""

    def __init__(self, device):
        self.device = device

    def arange(self, n: int) -> Tensor:
        return torch.arange(n, device=self.device)

    def zeros(self, shape: tuple, floats: bool) -> Tensor:
        return torch.zeros(*shape, device=self.device, dtype=torch.float32 if floats else torch.long)

    def full(self, n: int, value: int) -> Tensor:
        return torch.full((n,), value, dtype=torch.long, device=self.device)

    def index(self, values: list[int]) -> Tensor:
        return torch.tensor(values, device=self.device)

    def repeat(self, x: Tensor, k: int) -> Tensor:
        return x.repeat_interleave(k)

    def cat(self, arrays: list[Tensor], axis: int) -> Tensor:
        return torch.cat(arrays, dim=axis)

    def stack(self, arrays: list[Tensor]) -> Tensor:
        return torch.stack(arrays)

    def topk(self, x: Tensor, k: int) -> tuple[Tensor, Tensor]:
        return x.topk(k, dim=1)

    def argsort(self, x: Tensor) -> Tensor:
        return x.argsort(dim=1)

    def take(self, x: Tensor, index: Tensor) -> Tensor:
        return x.gather(1, index)

    def pick(self, x: Tensor, index: Tensor) -> Tensor:
        return x.gather(1, index[:, None])[:, 0]

    def argwhere(self, mask: Tensor) -> list[list[int]]:
        return mask.nonzero().tolist()

    def log_softmax(self, x: Tensor) -> Tensor:
        return torch.log_softmax(x, dim=-1)

    def host(self, x: Tensor) -> Tensor:
        return x.cpu()

    def host_floats(self, x: Tensor) -> Tensor:
        return x.float().cpu()

    def host_zeros(self, shape: tuple) -> Tensor:
        return torch.zeros(*shape)

    def full_like(self, x: Tensor, value: int) -> Tensor:
        return torch.full_like(x, value)

    def minimum(self, x: Tensor, y: Tensor) -> Tensor:
        return torch.minimum(x, y)

    def clamp_min(self, x: Tensor, low: int) -> Tensor:
        return x.clamp(min=low)


def max_lengths(lengths: Tensor, options: SearchOptions, model) -> Tensor:
    """Each sentence's output limit (B,): --max-length, or 2 x its source length + 10, within what the
    decoder can hold (`model.target_room`)."""
    return core.output_limits(TorchOps(lengths.device), lengths, options.max_length,
                              model.target_room(lengths), options.length_cap).cpu()


# ------------------------------------------------------------------------------ choosing a token


def blocked_tokens(model) -> BlockTokens:
    """The tokens a search never chooses: <pad>, <s>, <sep>, and those the model adds (`never_generated`: a
    language model's <unk>, since its continuation is text; a copy model's <unk>, since it writes a source word
    instead)."""
    extra = tuple(getattr(model, "never_generated", ()))
    return BlockTokens(NEVER_GENERATED + extra) if extra else BlockTokens()


def choose(logits: Tensor, options: SamplingOptions, generator: torch.Generator | None = None) -> Tensor:
    """The next token (B,) from the last position's logits (B, V), as `options` say (greedy or sampled)."""
    return choose_tokens(logits, processors_for(options, sample=not options.greedy), not options.greedy, generator)


@contextmanager
def reading() -> Iterator[None]:
    """Around the reading of a batch's prompts (or texts): PyTorch's CPU threads set to this thread's read threads
    (`core.set_read_threads`, when set), then back. Each row's figures are the same on any number of threads. A
    read long enough to be cut into slices (`core.slices`) runs on the other threads (`core.work_threads`)."""
    threads, before = core.read_threads(), torch.get_num_threads()
    if not threads or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    core.set_work_threads(before)
    try:
        yield
    finally:
        core.set_work_threads(0)
        torch.set_num_threads(before)


@contextmanager
def work_threads() -> Iterator[None]:
    """Inside `reading`, a long read's own CPU threads (`core.work_threads`): those outside the read, then back."""
    threads, before = core.work_threads(), torch.get_num_threads()
    if not threads or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def seeded(seed: int | None, device) -> torch.Generator | None:
    return None if seed is None else torch.Generator(device=device or "cpu").manual_seed(seed)


# ------------------------------------------------------------------------------ the searches, on a model


def greedy_steps(model, state, tokens: Tensor, processors: list, sample: bool = False,
                 generator: torch.Generator | None = None, need_weights: bool = False, scores: bool = True):
    """Greedy decoding or sampling of `model`, one step per `next()`, without end (`core.greedy_steps`):
    `processors` are those of `processors_for` (their `BlockTokens` is the model's, applied once per step)."""
    rest = processors[1:] if processors[:1] == [BlockTokens()] else processors   # the block is the model's
    return core.greedy_steps(ModelDecoder(model, need_weights), TorchOps(tokens.device), state, tokens,
                             blocked_tokens(model), Draw(rest, sample, generator), scores)


def beam_steps(model, state, tokens: Tensor, limit: Tensor, beam: int, length_penalty: float,
               ends_at_eos: bool = True, need_weights: bool = False,
               lengths: Tensor | None = None, trace: list[dict] | None = None) -> list[list[Hypothesis]]:
    """Beam search of `model` from a started state of B sentences to each sentence's `limit` (B,): every
    finished hypothesis of each sentence, unsorted (`core.beam_steps`; its tree appended to `trace`, if given)."""
    return core.beam_steps(ModelDecoder(model, need_weights), TorchOps(tokens.device), state, tokens, limit, beam,
                           length_penalty, blocked_tokens(model), ends_at_eos, need_weights, lengths, trace)


# ------------------------------------------------------------------------ sequence to sequence


def start_model(model, source: Tensor, lengths: Tensor, source_copy: Tensor | None = None):
    """`model.start(source, lengths)`; a copy model's (See et al. 2017) with the sources' extended ids too."""
    return model.start(source, lengths) if source_copy is None else model.start(source, lengths, source_copy)


@torch.no_grad()
def decode(model, source: Tensor, lengths: Tensor, options: SearchOptions | None = None,
           need_weights: bool = False, source_copy: Tensor | None = None,
           trace: list[dict] | None = None) -> list[list[Hypothesis]]:
    """Decode a batch of right-padded sources (B, S) with lengths (B,): `options.nbest` hypotheses per
    sentence, best first. With `need_weights`, each hypothesis carries its attention over the source
    (models that attend: the RNNs with attention and the transformer's last cross-attention layer).
    A copy model takes `source_copy` (B, S), the sources' extended ids; its hypotheses' ids from V on are
    copied source words (`PairBatch.oovs`). With a `trace` list, the beam's tree is appended to it
    (`core.beam_steps`; a beam of 1, greedy decoding's outputs, is then searched as a beam too)."""
    options = options or SearchOptions()
    need_weights = need_weights and model.attends        # models without attention have no weights to give
    was_training = model.training
    model.eval()
    try:
        if options.beam == 1 and trace is None:
            return [[h] for h in greedy(model, source, lengths, options, need_weights, source_copy)]
        return beam_search(model, source, lengths, options, need_weights, source_copy, trace)
    finally:
        model.train(was_training)


@torch.no_grad()
def greedy(model, source: Tensor, lengths: Tensor, options: SearchOptions, need_weights: bool = False,
           source_copy: Tensor | None = None) -> list[Hypothesis]:
    """The most likely token at each step (or a sampled one, with options.sample)."""
    limit = max_lengths(lengths, options, model)
    state = start_model(model, source, lengths, source_copy)
    tokens = torch.full((source.size(0),), model.start_token, dtype=torch.long, device=source.device)
    generator = seeded(options.seed, source.device) if options.sample else None
    steps = greedy_steps(model, state, tokens, processors_for(options, options.sample), options.sample,
                         generator, need_weights)
    return core.greedy_outputs(TorchOps(source.device), steps, lengths, limit, options.length_penalty, need_weights)


@torch.no_grad()
def beam_search(model, source: Tensor, lengths: Tensor, options: SearchOptions,
                need_weights: bool = False, source_copy: Tensor | None = None,
                trace: list[dict] | None = None) -> list[list[Hypothesis]]:
    """Beam search over a batch of sources: `options.nbest` hypotheses per sentence, best first (the tree
    appended to `trace`, if given)."""
    limit = max_lengths(lengths, options, model)
    state = start_model(model, source, lengths, source_copy)
    tokens = torch.full((source.size(0),), model.start_token, dtype=torch.long, device=source.device)
    finished = beam_steps(model, state, tokens, limit, options.beam, options.length_penalty, True, need_weights,
                          lengths, trace)
    return [best_first(hyps, options.nbest) for hyps in finished]


# ------------------------------------------------------------------------------ language models


def check_prompt(model, context: list[int]) -> None:
    """A prompt (its ids, with the leading </s>) longer than the model's context is refused
    (`options.prompt_too_long`: the command line's message names --truncate-prompt, a request's does not)."""
    window = model.context_length
    if window is not None and len(context) > window:
        raise prompt_too_long(len(context), window)


@torch.inference_mode()
def generate_ids(model, context: list[int], options: SamplingOptions, device=None) -> Iterator[int]:
    """Yield new token ids one at a time after `context` (which starts with `</s>`, a line start): sampled,
    or greedy. With `options.beam` > 1, the ids of the best beam hypothesis (`lm_beam_search`), once the
    search is over. Runs in inference mode (no autograd bookkeeping per operation, a few percent of a small
    model's step)."""
    if options.beam > 1:
        (best,) = lm_beam_search(model, context, options, device)
        yield from core.best_continuation(best)
        return
    model.eval()
    check_prompt(model, context)
    prompt = torch.tensor([context], device=device)                                    # (1, T)
    sample = not options.greedy
    steps = greedy_steps(model, model.start(prompt), prompt[:, -1], processors_for(options, sample), sample,
                         seeded(options.seed, device) if sample else None, scores=False)
    yield from core.continuation(steps, options.max_tokens, options.stop_at_eos)


def nucleus_choose(logits: Tensor, options: SamplingOptions, generator: torch.Generator | None = None,
                   block: BlockTokens | None = None) -> Tensor:
    """The next tokens (B,) sampled from logits (B, V) from the distribution `choose` samples from (blocked
    tokens, `block`: the model's, `blocked_tokens`, by default `BlockTokens()`; temperature, top-k, top-p, in
    that order), without sorting every row: the top-p set is `processors.nucleus`, and the draw inverts each
    row's cumulative distribution at a uniform u (B,)."""
    return nucleus_draw((block or BlockTokens())(logits), options, generator)


@torch.no_grad()
def sample_ids(model, context: list[int], options: SamplingOptions, n: int, device=None) -> list[list[int]]:
    """`n` continuations of one prompt `context` (starting with `</s>`) sampled as one batch of n rows: the
    prompt is read once, its state copied to n rows (`reorder_state`), and each step draws the n next
    tokens at once (`sampling.NucleusDraw`: the distribution `generate_ids` samples from, temperature, top-k and
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
    strategy = Greedy() if options.greedy else NucleusDraw(options, seeded(options.seed, device))
    steps = core.sampling_steps(ModelDecoder(model), TorchOps(prompt.device), state, tokens, blocked_tokens(model),
                                strategy)
    drawn = [step[0] for step in islice(steps, options.max_tokens)]                   # (n,) each
    if not drawn:
        return [[] for _ in range(n)]
    outputs = torch.stack(drawn, dim=1).tolist()                                       # (n, max_tokens)
    if options.stop_at_eos:
        outputs = [ids[:ids.index(EOS) + 1] if EOS in ids else ids for ids in outputs]
    return outputs


@torch.no_grad()
def decode_batch(model, prompts: Tensor, steps: int, top_k: int = 0,
                 generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Continue B prompts of one length (B, T) by `steps` tokens at once (`core.sampling_steps`): greedy (top_k 0:
    the argmax, as `greedy_steps`) or top-k sampling (`TopKDraw`). Only the tokens that are never generated in any
    search (<pad>, <s>, <sep>: `BlockTokens()`) are blocked, not those the model adds (a language model's <unk>):
    what the model reproduces of its training text holds <unk> where the text had a rare word. Returns the tokens
    (B, steps) and their log-probabilities under the model, log softmax(z)_w = z_w - logsumexp(z) (B, steps)."""
    model.eval()
    strategy = TopKDraw(top_k, generator) if top_k else Greedy()
    loop = core.sampling_steps(ModelDecoder(model), TorchOps(prompts.device), model.start(prompts), prompts[:, -1],
                               BlockTokens(), strategy)
    tokens, log_probs = [], []
    for chosen, logits, _, _ in islice(loop, steps):
        logits = logits.float()                                                         # (B, V)
        log_probs.append(logits.gather(1, chosen[:, None])[:, 0] - torch.logsumexp(logits, dim=-1))
        tokens.append(chosen)
    return torch.stack(tokens, dim=1), torch.stack(log_probs, dim=1)


@torch.no_grad()
def lm_beam_search(model, context: list[int], options: SamplingOptions, device=None,
                   nbest: int = 1) -> list[Hypothesis]:
    """The `nbest` continuations of `context` (one prompt) of highest length-normalised log probability
    found by a beam of `options.beam`, best first (`core.lm_beam`)."""
    model.eval()
    check_prompt(model, context)
    prompt = torch.tensor([context], device=device)                                    # (1, T)
    return core.lm_beam(ModelDecoder(model), TorchOps(prompt.device), model.start(prompt), prompt[:, -1], options,
                        blocked_tokens(model), nbest)

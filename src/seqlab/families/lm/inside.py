"""The PyTorch side of the language model's `explain` part (`seqlab.families.lm.explain`): the views computed on
the trained model's own forward pass and searches, built by `seqlab.families.lm.views`.

    next-token   `TrainedLM.distributions`, the windows `TrainedLM.score` reads, each position's whole softmax
    generation   `core.sampling_steps` with the strategy `seqlab generate` uses (the same draws for a seed), or
                 `core.beam_steps` with its trace (the search of `lm_beam`)
    gates        `seqlab.nn.inside.recurrent_record` on the model's `RecurrentStack`, fed its embeddings
    attention    one forward pass within `seqlab.nn.inside.attention_kept`, its logits checked against the
                 model's own (`same_outputs`)
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from seqlab.contract.views import ExplainOptions, Panel, View, ViewSpec, gate_panels
from seqlab.data.vocab import EOS
from seqlab.decoding import core
from seqlab.decoding.options import SamplingOptions
from seqlab.decoding.processors import process, processors_for
from seqlab.decoding.sampling import Draw
from seqlab.decoding.search import ModelDecoder, TorchOps, blocked_tokens, seeded
from seqlab.decoding.search import beam_steps as search_beam_steps
from seqlab.errors import SeqlabWarning
from seqlab.families.lm.views import (
    Position,
    Read,
    generation_view,
    next_token_view,
    read_text,
    round_to,
)
from seqlab.nn.inside import attention_kept, float_cpu, kept, recurrent_record, same_outputs


def explain(trained: Any, text: str, specs: Sequence[ViewSpec],
            options: ExplainOptions) -> tuple[list[str], list[View], bool]:
    """Each view of `specs` of the trained LM on `text`, the model in evaluation mode (then as it was)."""
    model = trained.model
    was_training = model.training
    model.eval()
    try:
        with warnings.catch_warnings():          # words the model never saw are read as <unk>: the note says so
            warnings.simplefilter("ignore", SeqlabWarning)
            read = read_text(trained, text)
            views = []
            for spec in specs:
                core.checkpoint()
                views.append(BUILDERS[spec.name](spec, trained, read, options))
    finally:
        model.train(was_training)
    return read.labels, views, read.truncated


# ------------------------------------------------------------------------------ next-token


@torch.no_grad()
def positions(trained: Any, read: Read, k: int) -> list[Position]:
    """Each position's actual-token log probability, rank and top-k, from the model's softmax over the vocabulary."""
    found = []
    for log_probs, targets in trained.distributions(torch.tensor(read.ids)):             # (n, V), (n,)
        actual = log_probs.gather(1, targets[:, None])                                     # (n, 1)
        rank = (log_probs > actual).sum(dim=-1) + 1                                        # (n,)
        top = log_probs.topk(min(k, log_probs.size(-1)), dim=-1)                           # (n, k) each
        for a, r, ids, values in zip(actual[:, 0].tolist(), rank.tolist(), top.indices.tolist(),
                                     top.values.tolist(), strict=True):
            found.append(Position(a, r, list(zip(ids, values, strict=True))))
    return found


def next_token(spec: ViewSpec, trained: Any, read: Read, options: ExplainOptions) -> View:
    return next_token_view(spec, trained, read, positions(trained, read, options.top_k))


# ------------------------------------------------------------------------------ generation


class TorchRuntime:
    """The trained model's searches (`seqlab.decoding.search`), as `TrainedLM.generate` runs them."""

    def __init__(self, trained: Any):
        self.model, self.device = trained.model, trained.device
        self.context = self.model.context_length

    @torch.inference_mode()
    def sampled(self, prompt: list[int], options: SamplingOptions) -> Iterator[tuple[int, Any, Any]]:
        sample = not options.greedy
        rest = processors_for(options, sample)[1:]                          # after the block: `generate_ids`'
        tokens = torch.tensor([prompt], device=self.device)                                  # (1, T)
        strategy = Draw(rest, sample, seeded(options.seed, self.device) if sample else None)
        steps = core.sampling_steps(ModelDecoder(self.model), TorchOps(self.device), self.model.start(tokens),
                                    tokens[:, -1], blocked_tokens(self.model), strategy)
        for chosen, _, blocked, _ in steps:                                                  # (1,), _, (1, V)
            drawn_from = process(blocked, rest).softmax(dim=-1)[0]                           # (V,)
            yield int(chosen[0]), drawn_from.float().cpu().numpy(), \
                torch.log_softmax(blocked, dim=-1)[0].float().cpu().numpy()

    @torch.inference_mode()
    def beam(self, prompt: list[int], beam: int, length_penalty: float,
             max_tokens: int) -> tuple[list[dict], list[core.Hypothesis]]:
        tokens = torch.tensor([prompt], device=self.device)                                  # (1, T)
        trace: list[dict] = []
        (found,) = search_beam_steps(self.model, self.model.start(tokens), tokens[:, -1], torch.tensor([max_tokens]),
                                     beam, length_penalty, ends_at_eos=True, trace=trace)
        return trace, found


def generation(spec: ViewSpec, trained: Any, read: Read, options: ExplainOptions) -> View:
    return generation_view(spec, trained, read, options, TorchRuntime(trained))


# ------------------------------------------------------------------------------ gates and attention


def cells(values: torch.Tensor) -> list[list[float]]:
    return [[round_to(v, 4) for v in row] for row in values.tolist()]


@torch.no_grad()
def gates(spec: ViewSpec, trained: Any, read: Read, options: ExplainOptions) -> View:
    """Per layer and direction, panels of h and each gate: the units whose h varies most, by the tokens read."""
    model = float_cpu(trained.model)
    stack = model.rnn
    ids = [EOS, *read.ids]                                                       # from a line start
    columns = ["</s>", *read.labels]
    layers = recurrent_record(stack, model.embedding(torch.tensor([ids])))      # (1, T, E) in
    bounded = stack.cell != "rnn" or stack.nonlinearity == "tanh"
    panels, note = gate_panels(layers, stack.cell, columns, options.units, bounded)
    return View.of(spec, panels=panels, note=note)


@torch.no_grad()
def attention(spec: ViewSpec, trained: Any, read: Read, options: ExplainOptions) -> View:
    """One forward pass with every head's weights kept: a panel per layer and head, queries by keys."""
    model = float_cpu(trained.model)
    ids, labels = [EOS, *read.ids], ["</s>", *read.labels]
    note = ""
    if len(ids) > model.context_length:
        ids, labels = ids[:model.context_length], labels[:model.context_length]
        note = f"the first {model.context_length} tokens (the model's context)"
    tokens = torch.tensor([ids])                                                 # (1, T)
    with attention_kept(model) as modules:
        logits, _ = model(tokens)                                                # (1, T, V)
        weights = kept(modules)                                                  # (nh, T, T) per layer
    own, _ = model(tokens)                                                       # the model's own attention
    same_outputs(own, logits, "attention")
    panels = []
    for l, (_, w) in enumerate(weights, start=1):
        for head in range(w.size(0)):
            panels.append(Panel(f"layer {l}, head {head + 1}", labels, labels, cells(w[head]), (0.0, 1.0),
                                group=f"layer {l}"))
    return View.of(spec, panels=panels, lines=True, note=note)


BUILDERS = {"next-token": next_token, "generation": generation, "gates": gates, "attention": attention}

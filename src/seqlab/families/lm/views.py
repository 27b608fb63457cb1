"""The language model's views (`seqlab.families.lm.explain`) built from plain numbers, whatever the runtime computed
them: the text read as the model reads it, the next-token strip from each position's probabilities, the generation
tree from a runtime's searches (PyTorch's, `seqlab.families.lm.inside.TorchRuntime`; an ONNX export's,
`seqlab.families.lm.explain.NumpyRuntime`). Torch-free."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Protocol

import numpy as np

from seqlab.contract.views import MAX_TOKENS, ExplainOptions, View, ViewSpec
from seqlab.data.vocab import EOS
from seqlab.decoding import core
from seqlab.decoding.options import SamplingOptions
from seqlab.errors import SeqlabError
from seqlab.families.lm.vocab import reverse_lines, unknown_tokens_note

# ------------------------------------------------------------------------------ the text, read


@dataclass
class Read:
    """The text as the model reads it: the ids of its tokens (`</s>` at each line end but the last line's, unless
    the text ends with a line break), each token's label, whether it was cut to MAX_TOKENS, and what reading it
    warned of (tokens the vocabulary lacks)."""

    ids: list[int]
    labels: list[str]
    truncated: bool
    note: str


def read_text(model: Any, text: str) -> Read:
    """`text` read as `seqlab score` reads it (its lines, reversed for a --reverse model, each ending in `</s>`),
    its last line's `</s>` left out unless the text ends with a line break (`completion.prompt_logprobs`)."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":           # a final newline adds no line
        lines.pop()
    if getattr(model, "reverse", False):
        lines = reverse_lines(lines)
    token_lines = model.tokenizer.tokenize_lines(lines)
    tokens = [t for line in token_lines for t in [*line, "</s>"]]
    if not text.endswith("\n"):
        tokens.pop()
    if not tokens:
        raise SeqlabError("the text to explain has no tokens the model reads: give a sentence")
    truncated = len(tokens) > MAX_TOKENS
    tokens = tokens[:MAX_TOKENS]
    ids = model.vocab.encode(tokens)
    return Read(ids, spell(model, ids), truncated, unknown_tokens_note(tokens, model.vocab) or "")


def spell(model: Any, ids: list[int]) -> list[str]:
    """Each token as a reader reads it: a BPE piece detokenized, a space as '␣', `</s>` and `<unk>` as they are."""
    labels = []
    for token in model.vocab.decode(ids):
        if token.startswith("<") and token.endswith(">"):
            labels.append(token)
            continue
        text = model.tokenizer.detokenize([token])
        labels.append("␣" if not text.strip() else text.strip())
    return labels


def round_to(value: float, digits: int = 5) -> float:
    """`value` to `digits` significant digits (the payload's numbers; exact ones where a test compares them)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - int(math.floor(math.log10(abs(value)))))


# ------------------------------------------------------------------------------ next-token


@dataclass
class Position:
    """What the model gave one position: the actual token's log probability and rank, the top-k (id, log p)."""

    logprob: float
    rank: int
    top: list[tuple[int, float]]


class Labels(dict):
    """Token id -> its label (`spell`), spelt once each."""

    def __init__(self, model: Any):
        super().__init__()
        self.model = model

    def __missing__(self, token: int) -> str:
        self[token] = spell(self.model, [token])[0]
        return self[token]


def next_token_view(spec: ViewSpec, model: Any, read: Read, positions: list[Position]) -> View:
    """The strip: each token's surprisal in bits, with its probability, rank and alternatives."""
    labels, details, values = Labels(model), [], []
    for label, position in zip(read.labels, positions, strict=True):
        values.append(-position.logprob / math.log(2))
        details.append({"token": label, "probability": math.exp(position.logprob), "logprob": position.logprob,
                        "rank": position.rank,
                        "alternatives": [[labels[i], round_to(math.exp(lp))] for i, lp in position.top]})
    notes = [read.note] + ([f"the text's first {MAX_TOKENS} tokens"] if read.truncated else [])
    return View.of(spec, tokens=read.labels, values=values, details=details, note="; ".join(n for n in notes if n),
                   label="surprisal in bits, -log2 p(token | the tokens before it)")


# ------------------------------------------------------------------------------ generation


class Runtime(Protocol):
    """What generation step by step asks of a runtime (PyTorch's, `inside.TorchRuntime`; numpy's, `NumpyRuntime`):
    the searches of `seqlab.decoding`, as `seqlab generate` runs them."""

    context: int | None                 # the model's context (a transformer's), None for a stream

    def sampled(self, prompt: list[int], options: SamplingOptions) -> Iterator[tuple[int, Any, Any]]:
        """Greedy decoding or sampling after `prompt` (from `</s>`), a step per `next()`: the id chosen, the
        distribution it was chosen from (V,) (after the temperature, top-k and top-p when sampling) and the search's
        log probabilities (V,) (the never-generated ids blocked), as numpy arrays."""
        ...

    def beam(self, prompt: list[int], beam: int, length_penalty: float,
             max_tokens: int) -> tuple[list[dict], list[core.Hypothesis]]:
        """A beam search after `prompt` ending at `</s>` (`core.beam_steps`): its trace and its finished
        hypotheses (in the trace's order)."""
        ...


def sampling_options(options: ExplainOptions) -> SamplingOptions:
    """`seqlab generate`'s options of a greedy or sampled continuation to the line's end."""
    if options.strategy == "greedy":
        return SamplingOptions(max_tokens=options.max_tokens, greedy=True, stop_at_eos=True)
    return SamplingOptions(max_tokens=options.max_tokens, temperature=options.temperature, top_k=options.top_k,
                           top_p=options.top_p, seed=options.seed, stop_at_eos=True)


def generation_view(spec: ViewSpec, model: Any, read: Read, options: ExplainOptions, runtime: Runtime) -> View:
    """The tree of a continuation of the text (`options.strategy`), the text its prompt."""
    if getattr(model, "reverse", False):
        return View.of(spec, note="this model reads right to left (--reverse): it generates nothing")
    prompt, notes = [EOS, *read.ids], []
    if runtime.context is not None and len(prompt) > runtime.context:
        prompt = prompt[-runtime.context:]
        notes.append(f"continued from the text's last {runtime.context} tokens (the model's context)")
    labels = Labels(model)

    def text_of(ids: list[int]) -> str:
        return "".join(core.text_pieces(ids, prompt[1:], model.detokenize, True, whole=True))

    if options.strategy == "beam":
        view = beam_view(spec, runtime, prompt, options, labels, text_of)
    else:
        view = sampled_view(spec, runtime, prompt, options, labels, text_of)
    view.note = "; ".join([*notes, view.note] if view.note else notes)
    return view


def sampled_view(spec: ViewSpec, runtime: Runtime, prompt: list[int], options: ExplainOptions, labels: Labels,
                 text_of) -> View:
    """Greedy or sampled: per step, the chosen token (kept; ended at `</s>`) and the top-k others (dropped), each
    with its probability in the distribution the token was chosen from."""
    sampling = sampling_options(options)
    nodes: list[dict] = []
    chosen: list[int] = []
    parent, score = None, 0.0
    for step, (token, probs, logprobs) in enumerate(islice(runtime.sampled(prompt, sampling), sampling.max_tokens)):
        core.checkpoint()
        node = len(nodes)
        nodes.append({"id": node, "parent": parent, "step": step, "token": labels[token],
                      "score": float(probs[token]), "logprob": float(logprobs[token]),
                      "status": "ended" if token == EOS else "kept"})
        for other in np.argsort(-probs, kind="stable")[:options.top_k].tolist():
            if other != token and probs[other] > 0:
                nodes.append({"id": len(nodes), "parent": parent, "step": step, "token": labels[other],
                              "score": round_to(float(probs[other])), "logprob": round_to(float(logprobs[other])),
                              "status": "dropped"})
        chosen.append(token)
        score += float(logprobs[token])
        parent = node
        if token == EOS:
            break
    finished = [{"node": parent, "tokens": [labels[t] for t in chosen], "text": text_of(chosen), "score": score,
                 "normalized": core.normalized(score, len(chosen), 1.0), "rank": 1}]
    how = ("the most likely token" if options.strategy == "greedy" else
           f"a draw (seed {options.seed}) after temperature {options.temperature:g}, top-k {options.top_k} and "
           f"top-p {options.top_p:g}")
    return View.of(spec, nodes=nodes, finished=finished,
                   note=f"each step {how}; the {options.top_k} most likely tokens shown",
                   label="probability of each candidate in the distribution it was chosen from")


def beam_view(spec: ViewSpec, runtime: Runtime, prompt: list[int], options: ExplainOptions, labels: Labels,
              text_of) -> View:
    """A beam search's tree (`core.beam_steps`' trace) and its finished hypotheses, best first."""
    trace, found = runtime.beam(prompt, options.beam, options.length_penalty, options.max_tokens)
    nodes = [{"id": n["id"], "parent": n["parent"], "step": n["step"], "token": labels[n["token"]],
              "score": n["score"], "status": n["status"]} for n in trace if "id" in n]
    ends = [n for n in trace if "finished" in n]
    order = sorted(range(len(found)), key=lambda j: -found[j].normalized)            # `core.best_first`'s
    finished = []
    for rank, j in enumerate(order, start=1):
        ids = list(core.best_continuation(found[j]))
        finished.append({"node": ends[j]["finished"], "tokens": [labels[t] for t in ids], "text": text_of(ids),
                         "score": found[j].score, "normalized": found[j].normalized, "rank": rank})
    return View.of(spec, nodes=nodes, finished=finished,
                   note=f"beam {options.beam}, ranked by log p / length^{options.length_penalty:g}",
                   label="summed log probability of the prefix")

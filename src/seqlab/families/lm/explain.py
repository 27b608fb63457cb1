"""What `seqlab explore` shows of a language model: the family's `explain` part (`seqlab.contract.views`).

    next-token   every architecture: at each position of the text, read from a line start as `seqlab score`
                 reads it, the probability of the actual next token, its rank and the top-k alternatives; the
                 strip's heat is the surprisal -log2 p (SLP 13.2, 9.4)
    generation   every architecture: the text continued token by token, greedy (SLP 13.4), sampled after the
                 temperature, top-k and top-p (9.2.3), or a beam search (13.4, Fig. 13.8), with the candidates each
                 step kept and dropped, as `seqlab generate` decodes
    gates        rnn, lstm, gru: the hidden state and the gates per unit and token (13.1, 13.20-13.27, 9.10-9.13)
    attention    transformer: each layer's and head's causal self-attention weights (9.20-9.21)

This module is torch-free: the views, the texts to try and the numpy runtime of an ONNX export (`explain_exported`:
next-token and generation, from the step graph's logits); the views are built from plain numbers by
`seqlab.families.lm.views`. The PyTorch side, the model's own forward pass with its gates and attention recorded,
is `seqlab.families.lm.inside`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seqlab.contract.views import ExplainOptions, View, ViewSpec
from seqlab.decoding import core
from seqlab.decoding.options import SamplingOptions
from seqlab.errors import SeqlabError, SeqlabWarning
from seqlab.families.lm.views import Position, Read, generation_view, next_token_view, read_text

RECURRENT = ("rnn", "lstm", "gru")
EXAMPLE_CHARS = 300           # an example text's characters, at most

VIEWS = (
    ViewSpec("next-token", "tokens", "Next-token probabilities",
             "at each position, the probability y_t = softmax(V h_t) (SLP 13.2; 9.4 for the transformer) gives the "
             "token that comes next, its rank among the vocabulary and the most likely alternatives; the heat is "
             "the surprisal -log2 p in bits", exported=True),
    ViewSpec("generation", "tree", "Generation step by step",
             "the text continued a token at a time to its line's end: greedy (the argmax, SLP 13.4), sampled after "
             "the temperature, top-k and top-p (9.2.3), or a beam search (13.4, Fig. 13.8) ranking by "
             "log p / length^alpha, with the candidates each step kept and dropped", exported=True),
    ViewSpec("gates", "matrix", "Hidden states and gates",
             "per layer, the hidden state h_t (SLP 13.1) and the gates of each unit at each token read: the LSTM's "
             "add i, forget f and output o gates and its context c (13.20-13.27), the GRU's update z and reset r "
             "(9.10-9.13), from the textbook cells on the layer's own weights",
             archs=RECURRENT, why_not_exported="the ONNX step graph outputs the logits and the next state, not "
                                               "the hidden states of the lower layers or the gates"),
    ViewSpec("attention", "matrix", "Self-attention",
             "each layer's and head's causal self-attention weights softmax(q_i k_j / sqrt(d_k)) (SLP 9.20-9.21): "
             "row i the token read, its weights over the tokens j <= i",
             archs=("transformer",), why_not_exported="the ONNX graph outputs the logits only, not the weights "
                                                      "of each head"),
)


# ------------------------------------------------------------------------------ the contract's functions


def arch(model: Any) -> str:
    """The run's --arch (an export's, from its config.json)."""
    return model.config.model.arch if hasattr(model, "model") else model.arch


def explain(trained: Any, text: str, specs: Sequence[ViewSpec],
            options: ExplainOptions) -> tuple[list[str], list[View], bool]:
    """The views of `specs` of a trained language model on `text` (`seqlab.families.lm.inside`, on PyTorch)."""
    from seqlab.families.lm import inside

    return inside.explain(trained, text, specs, options)


def explain_exported(exported: Any, text: str, specs: Sequence[ViewSpec],
                     options: ExplainOptions) -> tuple[list[str], list[View], bool]:
    """next-token and generation on an ONNX export (`ExportedLM`), from its step graph's logits."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeqlabWarning)
        read = read_text(exported, text)
        views = []
        for spec in specs:
            core.checkpoint()
            if spec.name == "next-token":
                views.append(next_token_view(spec, exported, read, exported_positions(exported, read, options.top_k)))
            elif spec.name == "generation":
                views.append(generation_view(spec, exported, read, options, NumpyRuntime(exported)))
    return read.labels, views, read.truncated


def examples(model: Any, count: int) -> list[str]:
    """The first `count` non-empty lines of the run's --valid file (the bundled corpus's validation lines when it
    trained on that), each cut to EXAMPLE_CHARS characters; [] when the file is gone or was a prepared folder."""
    config = model.config
    data = config["data"] if isinstance(config, dict) else vars(config.data)
    valid, train, prepared = data.get("valid") or "", data.get("train") or "", data.get("prepared") or ""
    if count < 1:
        return []
    if not valid and not train and not prepared:
        from seqlab.data.readers import default_corpus

        lines: Iterator[str] = iter(default_corpus()[1])
    elif valid and Path(valid).is_file():
        lines = file_lines(valid, data.get("text_column") or "text")
    else:
        return []
    found = []
    try:
        for line in lines:
            if line.strip():
                found.append(line.strip()[:EXAMPLE_CHARS])
                if len(found) == count:
                    break
    except (OSError, UnicodeDecodeError, SeqlabError):
        pass                                        # texts to try: what was read before the file failed
    return found


def file_lines(path: str, column: str) -> Iterator[str]:
    """A split's lines as training reads them (a .jsonl or .parquet file's texts in `column`), block by block."""
    from seqlab.data.prepare_text import Source, block_lines

    for block in Source(path, "the validation file", column=column).blocks():
        yield from block_lines(*block)


# ------------------------------------------------------------------------------ on an ONNX export


def exported_positions(exported: Any, read: Read, k: int) -> list[Position]:
    """Each position's `Position` from the export's step graph (`ExportedLM.distributions`)."""
    found: dict[int, Position] = {}

    def keep(p: int, row: np.ndarray) -> None:
        actual = float(row[read.ids[p]])
        top = np.argsort(-row, kind="stable")[:k]                                        # most likely first
        found[p] = Position(actual, int((row > actual).sum()) + 1, [(int(i), float(row[i])) for i in top])

    exported.distributions(read.ids, keep)
    return [found[p] for p in range(len(read.ids))]


class NumpyRuntime:
    """An ONNX export's searches (`seqlab.decoding.numpy_search`, on its step graph), as `ExportedLM.generate`
    runs them: greedy and beam search give the PyTorch model's tokens, sampling numpy's draws."""

    def __init__(self, exported: Any):
        self.exported, self.context = exported, exported.context

    def sampled(self, prompt: list[int], options: SamplingOptions) -> Iterator[tuple[int, Any, Any]]:
        from seqlab.decoding import numpy_search as search
        from seqlab.families.lm.exported import Decoder

        decoder, sample = Decoder(self.exported), not options.greedy
        rest = search.processors_for(options, sample)[1:]                            # after the block
        steps = core.sampling_steps(decoder, search.OPS, self.exported.started(prompt),
                                    np.array([prompt[-1]], np.int64), search.blocker(decoder),
                                    core.Choose(search.chooser(options, sample)))
        for chosen, _, blocked, _ in steps:                                          # (1,), _, (1, V)
            yield int(chosen[0]), search.softmax(search.process(blocked, rest))[0], search.log_softmax(blocked)[0]

    def beam(self, prompt: list[int], beam: int, length_penalty: float,
             max_tokens: int) -> tuple[list[dict], list[core.Hypothesis]]:
        from seqlab.decoding import numpy_search as search
        from seqlab.families.lm.exported import Decoder

        trace: list[dict] = []
        (found,) = search.beam_steps(Decoder(self.exported), self.exported.started(prompt),
                                     np.array([prompt[-1]], np.int64), np.array([max_tokens], np.int64), beam,
                                     length_penalty, True, trace=trace)
        return trace, found

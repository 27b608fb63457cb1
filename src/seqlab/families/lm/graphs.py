"""A language model's ONNX graph (`seqlab export RUN --format onnx`): one decoding step, the state as inputs
and outputs (batch and sequence axes dynamic):

    rnn / lstm / gru   step.onnx   tokens (B,), h (B, L, H)[, c] -> logits (B, V), h[, c]
    ffn                step.onnx   tokens (B,), history (B, N-1) -> logits (B, V), history
    transformer        step.onnx   window (B, n) -> logits (B, V) of the last position

The transformer re-reads its window of at most `context` tokens at every step instead of carrying a KV
cache: the graph is the training forward pass (no in-graph cache writes, no position or mask bookkeeping),
and it reproduces the PyTorch model's sliding behaviour exactly (when the context is full, it goes on from
its most recent context // 2 tokens), at a cost that grows with the window rather than one token per step.
`seqlab.families.lm.exported` runs it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from seqlab.data.vocab import EOS
from seqlab.errors import SeqlabError
from seqlab.export.graphs import Graph, export_graph, layers_first


class RecurrentStepGraph(Graph):
    """tokens (B,), h (B, L, H)[, c (B, L, H)] -> logits (B, V), h[, c]: one step of an RNN language model."""

    def forward(self, tokens: Tensor, h: Tensor, c: Tensor | None = None):
        state = layers_first(h) if c is None else (layers_first(h), layers_first(c))   # (L, B, H)
        logits, state, _ = self.model.step(tokens, state)                  # (B, V)
        if c is None:
            return logits, layers_first(state)
        return logits, *(layers_first(part) for part in state)


class WindowStepGraph(Graph):
    """tokens (B,), history (B, N-1) -> logits (B, V), history: one step of the window (FFN) LM."""

    def forward(self, tokens: Tensor, history: Tensor):
        logits, history, _ = self.model.step(tokens, history)              # (B, V), (B, N-1)
        return logits, history


class TransformerStepGraph(Graph):
    """window (B, n) -> logits (B, V) of its last position: the transformer LM re-reads its window."""

    def forward(self, window: Tensor) -> Tensor:
        logits, _ = self.model(window, None)                               # (B, n, V)
        return logits[:, -1]                                               # (B, V)


def refuse(saved: dict) -> None:
    """What cannot be exported, from the run's config.json, before anything is loaded."""
    if saved.get("data", {}).get("reverse"):   # the runtime would generate right to left, as `generate` refuses to
        raise SeqlabError("a --reverse language model reads its text right to left: it is a feature extractor for "
                          "--lm-features, not exported to ONNX")


def export(trained, out: Path) -> dict:
    """The step graph of the trained LM into `out`: {"step": its file, inputs and outputs}."""
    model, arch = trained.model, trained.config.model.arch
    tokens, B = torch.tensor([5, 6]), 2
    path = out / "step.onnx"
    if arch == "transformer":
        window = torch.tensor([[EOS, 5, 6], [EOS, 6, 5]])
        return {"step": export_graph(TransformerStepGraph(model), (window,), path, ["window"], ["logits"],
                                     {"window": {0: "B", 1: "n"}, "logits": {0: "B"}})}
    if arch == "ffn":
        history = model.init_state(B)
        return {"step": export_graph(WindowStepGraph(model), (tokens, history), path, ["tokens", "history"],
                                     ["logits", "next_history"], {name: {0: "B"} for name in
                                                                  ("tokens", "history", "logits", "next_history")})}
    state = model.init_state(B)
    lstm = isinstance(state, tuple)
    names = ["h", "c"] if lstm else ["h"]
    args = (tokens, *(layers_first(part) for part in state)) if lstm else (tokens, layers_first(state))
    axes = {"tokens": {0: "B"}, "logits": {0: "B"}, **{n: {0: "B"} for n in names},
            **{f"next_{n}": {0: "B"} for n in names}}
    return {"step": export_graph(RecurrentStepGraph(model), args, path, ["tokens", *names], ["logits", *(
        f"next_{n}" for n in names)], axes)}

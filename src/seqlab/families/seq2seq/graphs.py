"""A sequence-to-sequence model's ONNX graphs (`seqlab export RUN --format onnx`), batch and sequence axes
dynamic; `seqlab.families.seq2seq.exported` runs them:

    rnn / lstm / gru (with or without attention):
    encoder.onnx      source (B, S), lengths (B,) -> the memory (outputs, h0[, c0], context[, prepared])
    decoder_step.onnx tokens (B,), h (B, L, D)[, c], the memory -> logits (B, V), h[, c], and with attention
                      the weights (B, S) over the source
    transformer:
    encoder.onnx      source (B, S), lengths (B,) -> k0, v0, k1, ... (B, nh, S, hs), each decoder layer's
                      cross-attention keys and values
    decoder_step.onnx prefix (B, t), mask (B, S), k0, v0, ... -> logits (B, V) and the last layer's
                      cross-attention weights (B, S), averaged over heads, of the last position
    lm (source ⊕ <sep> ⊕ target):
    decoder_step.onnx source (B, S) left-padded, mask (B, S), prefix (B, t) -> logits (B, V) of the last
                      position; each row's positions count from its own first token (clamped to the last
                      position, as PyTorch's), its padding masked out of every key. The left-padding is done
                      in numpy (no encoder graph).

Both transformers re-read their target prefix <s> y_1 .. y_{t-1} (<sep> y_1 .. for the lm) at every step, as
the transformer LM re-reads its window: their state is the prefix. The step graph is the teacher-forced
forward pass, exact and free of in-graph cache writes and per-row cache bookkeeping, at a cost that grows
with the prefix (and, for the lm, the source).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from seqlab.data.vocab import BOS, SEP
from seqlab.errors import SeqlabError
from seqlab.export.graphs import Graph, export_graph, layers_first
from seqlab.models.base import EncoderDecoderState

MEMORY = ("outputs", "h0", "c0", "context", "prepared")


class EncoderGraph(Graph):
    """source (B, S), lengths (B,) -> the RNN encoder-decoder's memory, in `names` order."""

    def __init__(self, model, names: list[str]):
        super().__init__(model)
        self.names = names

    def forward(self, source: Tensor, lengths: Tensor):
        memory = self.model.encode(source, lengths)
        return tuple(memory[name] for name in self.names)


class DecoderStepGraph(Graph):
    """tokens (B,), h (B, L, D)[, c], the memory it reads -> logits (B, V), h[, c][, weights (B, S)]: one step
    of the RNN decoder (eqs. 13.32-13.37). `inputs` names what it takes, in order: the context c without
    attention; the encoder outputs, their mask and their prepared keys with it (an ONNX graph takes no
    None), and then it also gives the attention weights α_i over the source (eq. 13.36)."""

    def __init__(self, model, inputs: list[str], lstm: bool):
        super().__init__(model)
        self.inputs, self.lstm = inputs, lstm

    def forward(self, *values: Tensor):
        given = dict(zip(self.inputs, values, strict=True))
        memory = {name: given.get(name) for name in ("outputs", "mask", "context", "prepared")}
        h = layers_first(given["h"])                                        # (L, B, D)
        state = (h, layers_first(given["c"])) if self.lstm else h
        logits, new, weights = self.model.step(given["tokens"], EncoderDecoderState(memory, state),
                                               need_weights=True)          # (B, V), (B, S) or None
        parts = new.decoder if self.lstm else (new.decoder,)
        return logits, *(layers_first(part) for part in parts), *(() if weights is None else (weights,))


class TransformerEncoderGraph(Graph):
    """source (B, S), lengths (B,) -> the cross-attention keys and values of every decoder layer, k0, v0,
    k1, ... (B, nh, S, hs): the transformer encoder's output, projected once per sentence."""

    def forward(self, source: Tensor, lengths: Tensor):
        memory = self.model.encode(source, lengths)
        return tuple(memory[f"{kv}{layer}"] for layer in range(len(self.model.decoder)) for kv in "kv")


class TransformerDecoderGraph(Graph):
    """prefix (B, t), mask (B, S), k0, v0, ... -> logits (B, V) and cross-attention weights (B, S) (the last
    layer's, averaged over heads) of the prefix's last position: the decoder re-reads the target prefix
    <s> y_1 .. y_{t-1} at every step, positions 0 .. t-1, as teacher forcing does."""

    def forward(self, prefix: Tensor, mask: Tensor, *keys_values: Tensor):
        memory = {"mask": mask, **{f"{kv}{layer}": keys_values[2 * layer + i]
                                   for layer in range(len(self.model.decoder)) for i, kv in enumerate("kv")}}
        x = self.model._embed(self.model.target_embedding, self.model.target_positions, prefix)   # (B, t, d)
        logits, weights = self.model._decode(x, memory, None, need_weights=True)   # (B, t, V), (B, t, S)
        return logits[:, -1], weights[:, -1]


class SeparatorStepGraph(Graph):
    """source (B, S) left-padded, mask (B, S) True at its real positions, prefix (B, t) = <sep> y_1 ..
    y_{t-1} -> logits (B, V) of the last position: the separator LM re-reads source ⊕ <sep> ⊕ prefix at
    every step, each row's positions counted from its own first token and its padding masked out of every
    key (`SeparatorLM.init_state` and `step`, which fill the same positions and padding into its cache)."""

    def forward(self, source: Tensor, mask: Tensor, prefix: Tensor) -> Tensor:
        lm, S = self.model.lm, source.size(1)
        sequence = torch.cat([source, prefix], dim=1)                              # (B, S + t)
        shift = S - mask.sum(dim=1)                                                # (B,) padding per row
        columns = torch.arange(sequence.size(1), device=source.device)[None, :]    # (1, S + t)
        positions = (columns - shift[:, None]).clamp(0, self.model.config.max_positions - 1)   # (B, S + t)
        padding = torch.cat([~mask, torch.zeros_like(prefix, dtype=torch.bool)], dim=1)       # (B, S + t)
        h = lm.hidden(sequence, positions, None, padding)                          # (B, S + t, D)
        return lm.output(h[:, -1])                                                 # (B, V)


def refuse(saved: dict) -> None:
    """What cannot be exported, from the run's config.json, before anything is loaded."""
    for name in ("copy", "coverage"):          # See et al. 2017's pointer-generator: its step has no graph yet
        if saved.get("model", {}).get(name):
            raise SeqlabError(f"--{name} models cannot be exported to ONNX yet")


def export(trained, out: Path) -> dict:
    """The encoder and decoder-step graphs of the trained model into `out`."""
    arch = trained.config.model.arch
    if arch == "transformer":
        return export_transformer_seq2seq(trained.model, out)
    if arch == "lm":
        return export_separator_lm(trained.model, out)
    return export_rnn_seq2seq(trained.model, out)


def export_transformer_seq2seq(model, out: Path) -> dict:
    source, lengths = torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([3, 2])
    memory = model.encode(source, lengths)
    kv = [f"{name}{layer}" for layer in range(len(model.decoder)) for name in "kv"]
    kv_axes = {name: {0: "B", 2: "S"} for name in kv}
    graphs = {"encoder": export_graph(TransformerEncoderGraph(model), (source, lengths), out / "encoder.onnx",
                                      ["source", "lengths"], kv, {"source": {0: "B", 1: "S"}, "lengths": {0: "B"},
                                                                  **kv_axes})}
    prefix = torch.tensor([[BOS, 5, 6], [BOS, 6, 5]])      # t > 1: the causal mask is part of the trace
    args = (prefix, memory["mask"], *(memory[name] for name in kv))
    graphs["decoder_step"] = export_graph(TransformerDecoderGraph(model), args, out / "decoder_step.onnx",
                                          ["prefix", "mask", *kv], ["logits", "weights"],
                                          {"prefix": {0: "B", 1: "t"}, "mask": {0: "B", 1: "S"}, **kv_axes,
                                           "logits": {0: "B"}, "weights": {0: "B", 1: "S"}})
    return graphs


def export_separator_lm(model, out: Path) -> dict:
    memory = model.encode(torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([3, 2]))   # left-padded (B, S)
    prefix = torch.tensor([[SEP, 5, 6], [SEP, 6, 5]])      # t > 1: the causal mask is part of the trace
    return {"decoder_step": export_graph(SeparatorStepGraph(model), (memory["source"], memory["mask"], prefix),
                                         out / "decoder_step.onnx", ["source", "mask", "prefix"], ["logits"],
                                         {"source": {0: "B", 1: "S"}, "mask": {0: "B", 1: "S"},
                                          "prefix": {0: "B", 1: "t"}, "logits": {0: "B"}})}


def export_rnn_seq2seq(model, out: Path) -> dict:
    source, lengths = torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([3, 2])
    memory = model.encode(source, lengths)
    names = [name for name in MEMORY if name in memory]
    axes = {"source": {0: "B", 1: "S"}, "lengths": {0: "B"}, "outputs": {0: "B", 1: "S"}, "h0": {0: "B"},
            "c0": {0: "B"}, "context": {0: "B"}, "prepared": {0: "B", 1: "S"}}
    graphs = {"encoder": export_graph(EncoderGraph(model, names), (source, lengths), out / "encoder.onnx",
                                      ["source", "lengths"], names, {k: v for k, v in axes.items() if k in
                                                                     ["source", "lengths", *names]})}
    lstm = "c0" in memory
    values = {"tokens": torch.tensor([2, 2]), "h": memory["h0"], "c": memory.get("c0"), **memory}   # (B, L, D)
    states = ["h", "c"] if lstm else ["h"]
    inputs = ["tokens", *states, *(["outputs", "mask", "prepared"] if model.attends else ["context"])]
    outputs = ["logits", *(f"next_{n}" for n in states), *(["weights"] if model.attends else [])]
    step_axes = {"tokens": {0: "B"}, "h": {0: "B"}, "c": {0: "B"}, "outputs": {0: "B", 1: "S"},
                 "mask": {0: "B", 1: "S"}, "context": {0: "B"}, "prepared": {0: "B", 1: "S"}, "logits": {0: "B"},
                 "next_h": {0: "B"}, "next_c": {0: "B"}, "weights": {0: "B", 1: "S"}}
    graphs["decoder_step"] = export_graph(DecoderStepGraph(model, inputs, lstm), tuple(values[n] for n in inputs),
                                          out / "decoder_step.onnx", inputs, outputs,
                                          {k: v for k, v in step_axes.items() if k in inputs + outputs})
    return graphs

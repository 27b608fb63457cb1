"""A tagger's ONNX graph (`seqlab export RUN --format onnx`), batch and sequence axes dynamic:

    tagger.onnx   words (B, T), lengths (B,)[, chars (B, T, C)] -> emissions (B, T, K)

With a CRF, crf.json holds the transition, start and end scores (the scheme's penalties added), for
Viterbi and the marginals in numpy (`seqlab.families.tagger.exported`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from seqlab.errors import SeqlabError
from seqlab.export.graphs import Graph, export_graph
from seqlab.fileio import atomic_write_json


class TaggerGraph(Graph):
    """words (B, T), lengths (B,)[, chars (B, T, C)] -> emission scores (B, T, K)."""

    def forward(self, words: Tensor, lengths: Tensor, chars: Tensor | None = None) -> Tensor:
        return self.model(words, lengths, chars)                           # (B, T, K)


def refuse(saved: dict) -> None:
    """Nothing in a tagger's config.json stops an export before it is loaded (--lm-features: `export`)."""


def export(trained, out: Path) -> dict:
    """The emissions graph (and crf.json) of the trained tagger into `out`."""
    model = trained.model
    if getattr(model, "lm_features", None) is not None:
        raise SeqlabError("a tagger with --lm-features (character LMs run over each sentence) is not exported "
                          "to ONNX; serve it with seqlab serve instead")
    words, lengths = torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([3, 2])
    args, inputs = (words, lengths), ["words", "lengths"]
    axes = {"words": {0: "B", 1: "T"}, "lengths": {0: "B"}, "emissions": {0: "B", 1: "T"}}
    if model.chars is not None:
        args += (torch.full((2, 3, 4), 5),)
        inputs.append("chars")
        axes["chars"] = {0: "B", 1: "T", 2: "C"}
    graphs = {"tagger": export_graph(TaggerGraph(model), args, out / "tagger.onnx", inputs, ["emissions"], axes)}
    if model.crf is not None:
        transitions, start, end = (t.detach().float().tolist() for t in model.crf._scores())
        atomic_write_json(out / "crf.json", {"transitions": transitions, "start": start, "end": end})
    return graphs

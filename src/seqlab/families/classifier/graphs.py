"""A classifier's ONNX graph (`seqlab export RUN --format onnx`), the batch and sequence axes dynamic:

    classifier.onnx   words (B, T), lengths (B,) -> scores (B, K)
                      (the features arch: features (B, F) -> scores (B, K))

`seqlab.families.classifier.exported` runs it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from seqlab.errors import SeqlabError
from seqlab.export.graphs import Graph, export_graph


class ClassifierGraph(Graph):
    """words (B, T), lengths (B,) -> class scores (B, K)."""

    def forward(self, words: Tensor, lengths: Tensor) -> Tensor:
        return self.model(words, lengths)                                  # (B, K)


class FeaturesGraph(Graph):
    """features (B, F) -> class scores (B, K)."""

    def forward(self, features: Tensor) -> Tensor:
        return self.model(None, None, features)                            # (B, K)


def refuse(saved: dict) -> None:
    """Nothing in a classifier's config.json stops an export before it is loaded (--lm-features: `export`)."""


def export(trained, out: Path) -> dict:
    """The scores graph of the trained classifier into `out`."""
    if getattr(trained.model, "lm_features", None) is not None:
        raise SeqlabError("a classifier with --lm-features (character LMs run over each document) is not exported "
                          "to ONNX; serve it with seqlab serve instead")
    model, c = trained.model, trained.model.config
    if c.arch == "features":
        features = torch.zeros(2, c.num_features)
        return {"classifier": export_graph(FeaturesGraph(model), (features,), out / "classifier.onnx",
                                           ["features"], ["scores"], {"features": {0: "B"}, "scores": {0: "B"}})}
    words, lengths = torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([3, 2])
    return {"classifier": export_graph(ClassifierGraph(model), (words, lengths), out / "classifier.onnx",
                                       ["words", "lengths"], ["scores"],
                                       {"words": {0: "B", 1: "T"}, "lengths": {0: "B"}, "scores": {0: "B"}})}

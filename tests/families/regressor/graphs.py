"""A regressor's ONNX graph (`seqlab export RUN --format onnx`), the batch and sequence axes dynamic:

    regressor.onnx   words (B, T), lengths (B,) -> values (B,)

`regressor.exported` runs it; `files`, `metadata` and `about` say what the export holds (its README.md)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from seqlab.export.graphs import Graph, export_graph
from seqlab.export.tokens import TOKEN_LINES, token_list, write_tokens


class RegressorGraph(Graph):
    """words (B, T), lengths (B,) -> each text's number (B,)."""

    def forward(self, words: Tensor, lengths: Tensor) -> Tensor:
        return self.model(words, lengths)                                  # (B,)


def refuse(saved: dict) -> None:
    """Every regressor exports."""


def export(trained, out: Path) -> dict:
    words, lengths = torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([3, 2])
    return {"regressor": export_graph(RegressorGraph(trained.model), (words, lengths), out / "regressor.onnx",
                                      ["words", "lengths"], ["values"],
                                      {"words": {0: "B", 1: "T"}, "lengths": {0: "B"}, "values": {0: "B"}})}


def files(trained, out: Path) -> dict[str, str]:
    write_tokens(out / "vocab.txt", trained.vocab.tokens)
    return {"vocab.txt": f"the {len(trained.vocab)} tokens the model knows, specials first, " + TOKEN_LINES}


def metadata(trained) -> dict:
    return {"values": "each text's predicted number", "vocab_size": len(trained.vocab)}


def about(trained, manifest: dict) -> dict:
    lower = "text = text.lower()\n" if trained.config.data.lowercase else ""
    example = "\n".join([
        "import numpy as np", "import onnxruntime as ort", "", f"vocab = {token_list('vocab.txt')}",
        "index = {token: i for i, token in enumerate(vocab)}", 'session = ort.InferenceSession("regressor.onnx")',
        'text = "3 7 1"', lower.rstrip("\n"), "ids = [index.get(t, 1) for t in text.split()] or [1]",
        'values = session.run(["values"], {"words": np.array([ids], np.int64), '
        '"lengths": np.array([len(ids)], np.int64)})[0]', "print(round(float(values[0]), 4))"])
    return {"summary": f"A {trained.config.model.arch}-pooled regressor over {len(trained.vocab)} tokens.",
            "graphs": {"regressor": "a batch of texts (as token ids) -> each one's number"},
            "axes": {"B": "the texts of a batch", "T": "the tokens of the longest"},
            "meanings": {"words": "each text's token ids, right-padded with <pad> (0)",
                         "lengths": "each text's number of tokens", "values": "each text's predicted number"},
            "scores": "`values` (B,) are the predicted numbers themselves.",
            "tokenize": "A text is split at whitespace (lowercased first when the run lowercased); each token is its "
                        "id in vocab.txt, or <unk> (1).",
            "example": example + "\n", "prints": "It prints the number of the text \"3 7 1\"."}

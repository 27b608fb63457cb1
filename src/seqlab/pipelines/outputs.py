"""The records the trained models' APIs return, shared by the PyTorch pipelines and the ONNX runtime
(`seqlab.export.runtime`), which never imports torch: a classifier's `Prediction`, a sequence-to-sequence
model's `Output`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Prediction:
    """The predicted class, its probability, and every class's probability."""

    label: str
    probability: float
    probabilities: dict[str, float]


@dataclass
class Output:
    """A decoded text with its tokens, its log probability (summed and length-normalised), whether it
    ended with </s>, and (when asked for) the attention weights (output tokens x source tokens)."""

    text: str
    tokens: list[str]
    score: float
    normalized: float
    finished: bool
    source_tokens: list[str]
    attention: list[list[float]] | None = None

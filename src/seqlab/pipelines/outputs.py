"""The records the trained models' APIs return, shared by the PyTorch pipelines and the ONNX runtime
(`seqlab.export.runtime`), which never imports torch: a classifier's `Prediction`, a sequence-to-sequence
model's `Output`, and the pieces of text a language model's continuation streams as (`text_pieces`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from seqlab.data.vocab import EOS


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


def text_pieces(ids: Iterable[int], body: list[int], detokenize: Callable[[list[int]], str], stop_at_eos: bool,
                whole: bool) -> Iterator[str]:
    """The continuation of a prompt (its ids `body`) as text, piece by piece as the generated `ids` come: the
    text each id adds (nothing while half a UTF-8 character waits for the rest, with byte-level BPE); the
    first `</s>` ends it with `stop_at_eos`; `whole` (beam search, whose ids come at the end) yields it once."""
    shown = len(detokenize(body)) if body else 0
    generated: list[int] = []
    for token in ids:
        if stop_at_eos and token == EOS:
            break
        generated.append(token)
        if whole:
            continue
        text = detokenize(body + generated)
        if text.endswith("\ufffd"):
            continue
        piece = text[shown:]
        shown = len(text)
        if piece:
            yield piece
    if whole and generated:
        yield detokenize(body + generated)[shown:]

"""The torch-free core of decoding: TODO"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from seqlab.data.vocab import EOS


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

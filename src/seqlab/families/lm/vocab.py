"""A language model's text <-> ids, without PyTorch: its run's tokenizer and vocabulary files, the ids of a
continuation as text, and the text read right to left (--reverse). The pipeline reads a run through these,
and so does the ONNX runtime (`seqlab.families.lm.exported`) from an export's copies of the files."""

from __future__ import annotations

from pathlib import Path

from seqlab.data.tokenizers import Tokenizer, tokenizer_from_dict
from seqlab.data.vocab import Vocab
from seqlab.errors import DAMAGED, SeqlabError
from seqlab.fileio import read_json


def read_tokenizer_and_vocab(run_dir: Path) -> tuple[Tokenizer, Vocab]:
    """A language model's tokenizer and vocabulary."""
    try:
        tokenizer = tokenizer_from_dict(read_json(run_dir / "tokenizer.json", "tokenizer file"))
        vocab = Vocab.from_dict(read_json(run_dir / "vocab.json", "vocabulary file"))
    except DAMAGED as error:
        raise SeqlabError(f"{run_dir}: tokenizer.json or vocab.json is damaged ({error}); retrain into this "
                          "directory with --overwrite") from None
    return tokenizer, vocab


def detokenize_lines(tokenizer: Tokenizer, vocab: Vocab, ids: list[int]) -> str:
    """A language model's ids -> text, `</s>` as a line break."""
    lines, current = [], []
    for token in vocab.decode(ids):
        if token == "</s>":
            lines.append(tokenizer.detokenize(current))
            current = []
        else:
            current.append(token)
    lines.append(tokenizer.detokenize(current))
    return "\n".join(lines)


def reverse_lines(lines: list[str]) -> list[str]:
    """The text read right to left: the last line first, each line's characters backwards, so that the
    stream `a b </s> c d </s>` becomes `d c </s> b a </s>` (the backward LM of Akbik et al. 2018, sec. 2.1)."""
    return [line[::-1] for line in reversed(lines)]


def unknown_tokens_note(tokens: list[str], vocab: Vocab) -> str | None:
    """What a prompt's reading warns of, or None: its token types the vocabulary lacks (read as <unk>), the
    first five named."""
    unknown = sorted({t for t in tokens if t not in vocab})
    if not unknown:
        return None
    shown = ", ".join(repr(t) for t in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
    return f"{len(unknown)} prompt token type(s) are not in the vocabulary and are read as <unk>: {shown}"

"""Warnings about the text a sequence-to-sequence model is trained on, given once its vocabularies are built
(`seqlab train seq2seq`, `seqlab prepare seq2seq`), each at most once per side:

    unknown   more than UNKNOWN_SHARE of a side's training tokens are read as <unk>: the vocabulary options
              (--min-freq, --max-vocab) dropped many types, which the model can then neither read nor write
    raw text  more than ATTACHED_SHARE of a side's words carry punctuation (`water.`, `Mann,`, `(the`) while
              the whitespace tokenizer reads them: `water.` and `water` become two words, each rarer

Both read the prepared training split (its counts, and the words read as <unk>), so they hold for a cache and
for a folder given with --data alike. Tokenised text (Moses, PTB) has its punctuation apart: under 0.1% of its
words match, against 4-13% of raw captions and e-mails (Multi30k raw English and German, AESLC).

With --raw-text refuse (the recipes made for tokenised text set it), raw text is refused instead of warned
about (`refuse_raw_text`): such a recipe on raw text trains a model that writes <unk> for every word it read
with punctuation attached.
"""

from __future__ import annotations

import re
from collections import Counter

from seqlab.data.prepared import Prepared
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq.prepared_pairs import read_tokens, unknown_words
from seqlab.families.seq2seq.vocab import PairVocabulary

UNKNOWN_SHARE = 0.02          # warn when more of a side's training tokens than this are <unk>
ATTACHED_SHARE = 0.02         # warn when more of a side's words than this have punctuation attached
SAMPLE = 2000                 # training pairs the raw-text check reads
# a word with a comma, colon, quote or bracket on it; at the end of a line also a full stop, ! or ? (inside a
# line a trailing full stop is as often an abbreviation that tokenised text keeps: `mr.`, `u.s.`)
ATTACHED = re.compile(r"\w[,;:!?\")\]]+$|^[\"(\[]+\w")
LINE_END = re.compile(r"\w[.!?][\"')\]]*$")
PLURALS = {"source": "sources", "target": "targets"}


def text_warnings(prepared: Prepared, vocabulary: PairVocabulary, data) -> list[str]:
    """The warnings the training split calls for (see the module docstring); `data`: the options that shaped it."""
    train = prepared.split("train")
    if train is None:
        return []
    messages = []
    for side in ("source", "target"):
        kind = data.side_tokenizer(side)
        raw = raw_text_warning(read_tokens(train, vocabulary, side, SAMPLE), side, data) if kind == "word" else ""
        messages += [message for message in (raw, unknown_warning(train, side, kind, data, bool(raw))) if message]
    return messages


def unknown_warning(train, side: str, kind: str, data, raw: bool = False) -> str:
    """'7.4% of the training targets' tokens are <unk> (--min-freq 2 drops 9,812 types seen once); ...', or ''.
    `raw`: the side's text looks untokenised (`raw_text_warning`), which the advice then names."""
    tokens = train.record.get("streams", {}).get(side, {}).get("ids", 0)
    unknown = train.record.get(f"unknown_{side}", 0)
    if not tokens or unknown / tokens <= UNKNOWN_SHARE:
        return ""
    counts = unknown_words(train, side)
    rare = sum(count < data.min_freq for count in counts.values())
    causes = []
    if rare:
        seen = "seen once" if data.min_freq == 2 else f"seen fewer than {data.min_freq} times"
        causes.append(f"--min-freq {data.min_freq} drops {rare:,} types {seen}")
    if len(counts) > rare:
        causes.append(f"--max-vocab {data.max_vocab} drops {len(counts) - rare:,} {'more ' if rare else ''}types"
                      if data.max_vocab else f"the vocabulary lacks {len(counts) - rare:,} types")
    flag = "--tokenizer" if not getattr(data, f"{side}_tokenizer") else f"--{side}-tokenizer"
    limits = "lower --min-freq" + (" (or raise --max-vocab)" if data.max_vocab else "")
    advice = (f"raw text? try {flag} moses or --tokenizer bpe --shared-vocab" if raw else
              f"{limits}, or try --tokenizer bpe --shared-vocab (subwords: no <unk>)")
    return (f"{unknown / tokens:.1%} of the training {PLURALS[side]}' tokens are <unk> ({'; '.join(causes)}); "
            f"{advice}")


def attached_words(lines: list[list[str]]) -> list[str]:
    """The words of `lines` (each a line's whitespace-separated words) that have punctuation attached."""
    return [word for words in lines for k, word in enumerate(words)
            if ATTACHED.search(word) or (k == len(words) - 1 and LINE_END.search(word))]


def raw_text_warning(lines: list[list[str]], side: str, data) -> str:
    """'9.2% of the training sources' words have punctuation attached (`water.` `beach.` `street.`): ...', or ''."""
    found = untokenised(lines)
    if found is None:
        return ""
    share, common = found
    bare = re.sub(r"^\W+|\W+$", "", common[0])
    flag = "--tokenizer" if not getattr(data, f"{side}_tokenizer") else f"--{side}-tokenizer"
    return (f"{share:.1%} of the training {PLURALS[side]}' words have punctuation attached "
            f"({' '.join(f'`{word}`' for word in common)}): the text looks untokenised, and --tokenizer word reads "
            f"`{common[0]}` and `{bare}` as two words; try {flag} moses (or --tokenizer bpe --shared-vocab)")


def untokenised(lines: list[list[str]]) -> tuple[float, list[str]] | None:
    """(the share of the words of `lines` with punctuation attached, the 3 most common), when over
    ATTACHED_SHARE: the text looks untokenised; else None."""
    words = sum(len(line) for line in lines)
    attached = attached_words(lines)
    if not words or len(attached) / words <= ATTACHED_SHARE:
        return None
    return len(attached) / words, [word for word, _ in Counter(attached).most_common(3)]


def refuse_raw_text(prepared: Prepared, vocabulary: PairVocabulary, data) -> None:
    """With --raw-text refuse (a recipe for tokenised text, such as configs/multi30k-gru-dot.yaml): a SeqlabError
    when a side the word tokenizer reads looks untokenised, naming what trains on raw text instead. The recipe
    would train (Multi30k raw: 19.00 BLEU, 55% of its outputs holding <unk>, against the raw recipe's 22.41)."""
    train = prepared.split("train")
    if data.raw_text != "refuse" or train is None:
        return
    for side in ("source", "target"):
        if data.side_tokenizer(side) != "word":
            continue
        found = untokenised(read_tokens(train, vocabulary, side, SAMPLE))
        if found is not None:
            share, common = found
            raise SeqlabError(
                f"the training {PLURALS[side]} look untokenised ({share:.1%} of their words have punctuation "
                f"attached: {' '.join(f'`{word}`' for word in common)}), and these options are for tokenised text "
                "(--raw-text refuse, as configs/multi30k-gru-dot.yaml sets): train raw text with its raw recipe, "
                "seqlab train seq2seq --config configs/multi30k-raw-gru-dot.yaml (--tokenizer bpe --shared-vocab), "
                "or add --tokenizer moses; --raw-text warn trains on it as it is")

"""Entity tag schemes (SLP 17.3 / 9.2.4: IOB tagging): IOB1, IOB2 (BIO) and BIOES, detected,
checked and converted through the entity spans they encode.

    token:  Barack  Obama  visited  New    York   City   .
    IOB1:   I-PER   I-PER  O        I-LOC  I-LOC  I-LOC  O     B- only between two adjacent same-type entities
    IOB2:   B-PER   I-PER  O        B-LOC  I-LOC  I-LOC  O     B- begins every entity
    BIOES:  B-PER   E-PER  O        B-LOC  I-LOC  E-LOC  O     E- ends one, S- is a one-token entity

Spans are read the way conlleval reads chunks, which accepts every scheme and scores an invalid
sequence (an I- after O in IOB2, say) without crashing: an I- that cannot continue the previous
entity starts a new one.
"""

from __future__ import annotations

SCHEMES = ("iob1", "iob2", "bioes")
PREFIXES = frozenset("BIES")

Span = tuple[str, int, int]            # (type, start, end): tokens start..end-1


def split_tag(tag: str) -> tuple[str, str]:
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', ''). A tag without a known prefix is (tag, '')."""
    if tag == "O":
        return "O", ""
    prefix, dash, kind = tag.partition("-")
    if dash and prefix in PREFIXES and kind:
        return prefix, kind
    return tag, ""


def is_entity_tag(tag: str) -> bool:
    """O, or a known prefix and a type (B-PER, I-LOC, E-ORG, S-MISC)."""
    return tag == "O" or bool(split_tag(tag)[1])


def looks_like_entity_tags(labels) -> bool:
    """Whether a file's tags are entity tags, a few stray ones aside (an `I-` without a type, `X-PER`):
    prefixed tags beside O (or only prefixed tags). A POS tag set has neither."""
    labels = set(labels)
    prefixed = sum(bool(split_tag(t)[1]) for t in labels)
    return prefixed > 0 and ("O" in labels or prefixed == len(labels))


def is_entity_tagset(labels) -> bool:
    """Whether every label is O or PREFIX-TYPE with PREFIX in B, I, E, S (else: plain tags, like POS)."""
    labels = set(labels)
    return bool(labels) and labels != {"O"} and all(split_tag(t)[1] or t == "O" for t in labels)


def _ends(prev: str, prev_type: str, tag: str, kind: str) -> bool:
    """conlleval's endOfChunk: does the chunk open before this tag end here?"""
    if prev in ("E", "S"):
        return True
    if prev in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev != "O" and prev_type != kind


def _starts(prev: str, prev_type: str, tag: str, kind: str) -> bool:
    """conlleval's startOfChunk: does a chunk begin at this tag?"""
    if tag in ("B", "S"):
        return True
    if prev in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag != "O" and prev_type != kind


def spans(tags: list[str]) -> list[Span]:
    """The entity spans of one sentence's tags, read as conlleval reads them (any scheme)."""
    result: list[Span] = []
    prev, prev_type, start = "O", "", 0
    for i, tag in enumerate([*tags, "O"]):
        prefix, kind = split_tag(tag)
        if not kind:
            prefix = "O"                     # an unprefixed non-O tag counts as outside, as in conlleval
        if prev != "O" and _ends(prev, prev_type, prefix, kind):
            result.append((prev_type, start, i))
        if prefix != "O" and _starts(prev, prev_type, prefix, kind):
            start = i
        prev, prev_type = prefix, kind
    return result


def detect_scheme(sequences, prefer: str = "iob2") -> str:
    """iob1, iob2 or bioes: the scheme under which the fewest tags are invalid (ties go to `prefer`,
    then IOB2, IOB1, BIOES). One stray error in a file (an I- opening an entity in IOB2 data) does not
    make it read as another scheme, under which every other entity would break."""
    errors = dict.fromkeys(SCHEMES, 0)
    for tags in sequences:                    # one pass: the sequences may be read from a file as they come
        for scheme in SCHEMES:
            errors[scheme] += len(invalid_positions(tags, scheme))
    order = [prefer] + [s for s in ("iob2", "iob1", "bioes") if s != prefer]
    return min(order, key=errors.__getitem__)


def invalid_positions(tags: list[str], scheme: str) -> list[int]:
    """Indices where the sequence breaks `scheme` (e.g. I-PER after O in IOB2); empty when valid."""
    target = from_spans(spans(tags), len(tags), scheme)      # what the spans these tags encode should be
    return [i for i, (tag, expected) in enumerate(zip(tags, target, strict=True)) if tag != expected]


def from_spans(entity_spans: list[Span], length: int, scheme: str) -> list[str]:
    """The tags of `length` tokens in `scheme` that encode these (non-overlapping) spans."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}; use one of {', '.join(SCHEMES)}")
    tags = ["O"] * length
    previous_end, previous_type = -1, ""
    for kind, start, end in sorted(entity_spans, key=lambda s: s[1]):
        for i in range(start, end):
            tags[i] = f"I-{kind}"
        if scheme == "iob2" or (scheme == "iob1" and start == previous_end and kind == previous_type):
            tags[start] = f"B-{kind}"
        elif scheme == "bioes":
            if end - start == 1:
                tags[start] = f"S-{kind}"
            else:
                tags[start], tags[end - 1] = f"B-{kind}", f"E-{kind}"
        previous_end, previous_type = end, kind
    return tags


def convert(tags: list[str], scheme: str) -> list[str]:
    """The same entities written in `scheme` (IOB1, IOB2 or BIOES), from tags in any scheme."""
    return from_spans(spans(tags), len(tags), scheme)


def allowed_transitions(labels: list[str], scheme: str):
    """Which tag may follow which, begin and end a sentence, for a CRF that must never produce an
    invalid sequence in `scheme`: (allowed[i, j] for label i then label j, allowed_start, allowed_end)
    as nested lists of booleans."""
    parts = [split_tag(label) for label in labels]

    def may_follow(prev: tuple[str, str] | None, tag: tuple[str, str]) -> bool:
        prefix, kind = tag
        prev_prefix, prev_kind = prev if prev is not None else ("O", "")
        if not kind:                                     # O (or a plain label): after anything but an open entity
            return scheme != "bioes" or prev_prefix not in ("B", "I")
        if scheme == "iob2":
            return prefix == "B" or (prefix == "I" and prev_prefix in ("B", "I") and prev_kind == kind)
        if scheme == "iob1":
            return prefix == "I" or (prefix == "B" and prev_prefix in ("B", "I") and prev_kind == kind)
        open_entity = prev_prefix in ("B", "I")           # bioes
        if prefix in ("B", "S"):
            return not open_entity
        return open_entity and prev_kind == kind         # I- or E- continue the same entity

    def may_end(tag: tuple[str, str]) -> bool:
        return scheme != "bioes" or tag[0] not in ("B", "I") or not tag[1]

    allowed = [[may_follow(a, b) for b in parts] for a in parts]
    return allowed, [may_follow(None, b) for b in parts], [may_end(a) for a in parts]

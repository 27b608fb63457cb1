"""Tag schemes: spans read as conlleval reads them, detection, validity, and IOB1 <-> IOB2 <-> BIOES
round trips."""

import random

import pytest

from seqlab.data.tags import (
    allowed_transitions,
    convert,
    detect_scheme,
    from_spans,
    invalid_positions,
    is_entity_tagset,
    spans,
)

# Barack Obama visited New York City . ; two adjacent PER entities ; a one-token LOC
IOB1 = ["I-PER", "I-PER", "O", "I-LOC", "I-LOC", "I-LOC", "O", "I-PER", "B-PER", "O", "I-LOC"]
IOB2 = ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "I-LOC", "O", "B-PER", "B-PER", "O", "B-LOC"]
BIOES = ["B-PER", "E-PER", "O", "B-LOC", "I-LOC", "E-LOC", "O", "S-PER", "S-PER", "O", "S-LOC"]
SPANS = [("PER", 0, 2), ("LOC", 3, 6), ("PER", 7, 8), ("PER", 8, 9), ("LOC", 10, 11)]


@pytest.mark.parametrize("tags", [IOB1, IOB2, BIOES])
def test_tags_spans_of_every_scheme(tags):
    assert spans(tags) == SPANS


@pytest.mark.parametrize("source", [IOB1, IOB2, BIOES])
@pytest.mark.parametrize("scheme, expected", [("iob1", IOB1), ("iob2", IOB2), ("bioes", BIOES)])
def test_tags_convert_between_schemes(source, scheme, expected):
    assert convert(source, scheme) == expected


def random_spans(rng, length, types=("PER", "LOC", "ORG")):
    result, i = [], 0
    while i < length:
        if rng.random() < 0.4:
            end = min(length, i + rng.randint(1, 3))
            result.append((rng.choice(types), i, end))
            i = end
        else:
            i += 1
    return result


def test_tags_round_trips_on_random_entities():
    rng = random.Random(0)
    for _ in range(300):
        length = rng.randint(0, 12)
        truth = random_spans(rng, length)
        for scheme in ("iob1", "iob2", "bioes"):
            tags = from_spans(truth, length, scheme)
            assert spans(tags) == truth
            assert invalid_positions(tags, scheme) == []
            for other in ("iob1", "iob2", "bioes"):
                assert convert(convert(tags, other), scheme) == tags


def test_tags_detect_scheme():
    assert detect_scheme([IOB1]) == "iob1"
    assert detect_scheme([IOB2]) == "iob2"
    assert detect_scheme([BIOES]) == "bioes"
    assert detect_scheme([["O", "O"]]) == "iob2"
    assert detect_scheme([BIOES, IOB2]) == "iob2"                    # a tie: IOB2 first ...
    assert detect_scheme([BIOES, IOB2], prefer="bioes") == "bioes"   # ... unless another is preferred
    stray = ["I-PER"] + IOB2[1:]                                     # IOB2 with one I- opening an entity
    assert detect_scheme([stray, IOB2]) == "iob2"                    # one error does not make it IOB1


def test_tags_invalid_sequences_are_found_and_read_like_conlleval():
    tags = ["O", "I-PER", "I-PER", "B-LOC", "I-ORG"]         # IOB2 broken at 1 (I- after O) and 4
    assert invalid_positions(tags, "iob2") == [1, 4]
    assert spans(tags) == [("PER", 1, 3), ("LOC", 3, 4), ("ORG", 4, 5)]
    assert invalid_positions(["B-PER", "I-PER", "O"], "bioes") == [1]     # BIOES must end with E-


def test_tags_entity_tagset_or_plain_tags():
    assert is_entity_tagset(["O", "B-PER", "I-PER"])
    assert not is_entity_tagset(["NOUN", "VERB", "DET"])
    assert not is_entity_tagset(["O"])
    assert not is_entity_tagset(["B-PER", "PER"])


def test_tags_allowed_transitions_of_iob2_and_bioes():
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    allowed, start, end = allowed_transitions(labels, "iob2")
    index = {label: i for i, label in enumerate(labels)}
    assert not allowed[index["O"]][index["I-PER"]] and not allowed[index["B-LOC"]][index["I-PER"]]
    assert allowed[index["B-PER"]][index["I-PER"]] and allowed[index["I-PER"]][index["B-LOC"]]
    assert start == [True, True, False, True, False] and all(end)
    labels = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]
    allowed, start, end = allowed_transitions(labels, "bioes")
    assert not allowed[1][0] and not allowed[1][4] and allowed[1][2] and allowed[1][3] and allowed[3][4]
    assert end == [True, False, False, True, True]

"""The classifier's example datasets (`seqlab examples`; the driver is `seqlab.examples`):

    sentiment      TSV reviews (text, label pos / neg, balanced) whose label the word order decides: negation ("not
                   bad"), contrast ("dull at first but wonderful in the end") and "although"

Why it is built so (the family's simplest model misses something its textbook model learns):
- sentiment: half of the reviews come in twins of the same words in another order with the opposite label
  ("good at first but dull in the end" / "dull at first but good in the end"), which no bag of words can tell
  apart: the best a bag can do is about 70% (the pooled classifier, trained well, gets there: 68.5% of the
  small test split), while a BiGRU reaches 100%.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from seqlab.data.examples import SPLITS, ExampleTask, draw

# ---------------------------------------------------------------------------------------------------- sentiment

_ASPECTS = ("the film", "this movie", "the plot", "the acting", "the script", "the soundtrack", "the ending",
            "the cast", "the dialogue", "the story", "the camera work", "the lead actor", "the pacing", "the humour")
_GOOD = "good great wonderful brilliant funny charming moving clever fresh gripping beautiful superb".split()
_BAD = "bad awful dull boring weak clumsy tedious bland messy predictable lifeless silly".split()
_INTENSIFIERS = "very really truly incredibly so quite".split()
_ASIDES = ("i saw it on a sunday .", "we went with friends .", "it runs about two hours .", "the cinema was full .",
           "my sister picked it .", "it came out last year .", "we had popcorn .", "i watched it at home .")
_TWINS = ("{a} is {x} at first but {y} in the end .", "{a} is {x} , but {b} is {y} .",
          "although {a} is {x} , {b} is {y} .", "{b} is {y} , although {a} is {x} .",
          "{a} is not {x} , it is {y} .", "{a} is not {x} but {y} .", "i expected {a} to be {x} , but it is {y} .")


def _adjective(rng: random.Random, good: bool, intensify: bool = True) -> str:
    word = rng.choice(_GOOD if good else _BAD)
    return f"{rng.choice(_INTENSIFIERS)} {word}" if intensify and rng.random() < 0.3 else word


def _review(rng: random.Random, good: bool) -> str:
    """One review, its label decided by one adjective, perhaps negated."""
    aspect = rng.choice(_ASPECTS)
    if rng.random() < 0.5:
        text = f"{aspect} is {_adjective(rng, good)} ."
    else:                                                   # not bad -> pos; not (very) good -> neg
        text = rng.choice(("{a} is not {x} .", "{a} is never {x} .", "{a} is not at all {x} .",
                           "i would not call {a} {x} .")).format(a=aspect, x=_adjective(rng, not good, not good))
    return _aside(rng)(text)


def _aside(rng: random.Random) -> Callable[[str], str]:
    """A function that adds the same sentence beside the point (or none) to a review: before it, after it."""
    chance, aside = rng.random(), rng.choice(_ASIDES)
    return lambda text: f"{aside} {text}" if chance < 0.2 else f"{text} {aside}" if chance < 0.4 else text


def _sentiment_unit(rng: random.Random, split: str) -> list[tuple[str, str]]:
    """Two reviews, one pos and one neg: either twins of the same words in two orders (the clause after "but",
    the one without "although", or after "not ... ,": "it is ..." decides), or two independent reviews."""
    if rng.random() < 0.5:
        return [(_review(rng, True), "pos"), (_review(rng, False), "neg")]
    template, (a, b) = rng.choice(_TWINS), rng.sample(_ASPECTS, 2)
    good, bad = _adjective(rng, True), _adjective(rng, False)
    aside = _aside(rng)                                     # the same for both
    return [(aside(template.format(a=a, b=b, x=bad, y=good)), "pos"),
            (aside(template.format(a=a, b=b, x=good, y=bad)), "neg")]


def _make_sentiment(rng: random.Random, counts: tuple) -> dict[str, str]:
    splits = draw(rng, _sentiment_unit, counts, key=lambda example: example[0])
    texts = {}
    for split, examples in zip(SPLITS, splits, strict=True):
        rng.shuffle(examples)
        texts[split] = "text\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in examples)
    return texts


# ---------------------------------------------------------------------------------------------------- the datasets

EXAMPLES = {
    "sentiment": ExampleTask(
        summary="pos/neg reviews (TSV) decided by word order: negation, contrast (seqlab train classifier)",
        files={option: f"{option}.tsv" for option in SPLITS},
        counts={"tiny": (400, 100, 100), "small": (4000, 400, 400)}, make=_make_sentiment,
        recipe="--format tsv --arch gru --bidirectional --embedding-size 64 --hidden-size 64 --dropout 0.2 "
               "--lr 3e-3 --epochs 5"),
}

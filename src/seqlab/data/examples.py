"""What a family's example datasets are made of (its `examples` part; `seqlab examples`, driven by
`seqlab.examples`): `ExampleTask`, one dataset's files, sizes, generator and first recipe, and `draw`, which
draws the distinct examples of each split from a seeded generator. Torch-free, like the generators.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

SIZES = ("tiny", "small")
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class ExampleTask:
    """One example dataset, as a family's `examples` part lists it in `EXAMPLES` (task name -> ExampleTask)."""

    summary: str                                    # one line for `seqlab examples --list`
    files: dict[str, str]                           # data option -> file name
    counts: dict[str, tuple]                        # size -> examples of train, dev, test (lm: (lines read,))
    make: Callable[[random.Random, tuple], dict[str, str]]     # (rng, counts) -> {data option: file text}
    recipe: str                                     # the options of a first model that learns the small data
    family: str = ""                                # the family that trains on it (set by `seqlab.examples`)


def draw(rng: random.Random, make: Callable[[random.Random, str], list], counts: tuple,
         key: Callable) -> list[list]:
    """The examples of train, dev and test (`counts` of each), drawn from `make(rng, split)` (a list of examples
    kept or dropped together: a twin pair), all distinct: no example of one split is repeated in another."""
    seen, splits = set(), []
    for split, count in zip(SPLITS, counts, strict=True):
        examples, tries = [], 0
        while len(examples) < count:
            tries += 1
            if tries > 100 * count:
                raise RuntimeError(f"the grammar makes too few distinct examples for {count} in {split}")
            unit = make(rng, split)
            keys = [key(example) for example in unit]
            if len(set(keys)) == len(keys) and not seen.intersection(keys):
                seen.update(keys)
                examples.extend(unit)
        splits.append(examples)
    return splits

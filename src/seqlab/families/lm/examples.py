"""The language model's example datasets (`seqlab examples`; the driver is `seqlab.examples`):

    lm             Tiny Shakespeare, the bundled corpus, cut 90/5/5 by lines: train.txt, valid.txt, test.txt

Why it is built so (the family's simplest model misses something its textbook model learns):
- lm: real text, cut by lines as PTB and wikitext are, small enough for a character LM on a CPU.
"""

from __future__ import annotations

import random
from importlib import resources

from seqlab.data.examples import ExampleTask

# ---------------------------------------------------------------------------------------------------- lm

def _make_lm(rng: random.Random, counts: tuple) -> dict[str, str]:
    text = resources.files("seqlab.corpora").joinpath("tinyshakespeare.txt").read_text(encoding="utf-8")
    lines = text.split("\n")[:-1][:counts[0]]                # the first N lines, or all with None
    train_end, valid_end = round(0.9 * len(lines)), round(0.95 * len(lines))
    parts = {"train": lines[:train_end], "valid": lines[train_end:valid_end], "test": lines[valid_end:]}
    return {name: "\n".join(part) + "\n" for name, part in parts.items()}


# ---------------------------------------------------------------------------------------------------- the datasets

EXAMPLES = {
    "lm": ExampleTask(
        summary="Tiny Shakespeare (bundled), cut 90/5/5 by lines: a character language model (seqlab train lm)",
        files={"train": "train.txt", "valid": "valid.txt", "test": "test.txt"},
        counts={"tiny": (600,), "small": (None,)}, make=_make_lm,
        recipe="--tokenizer char --arch lstm --embedding-size 64 --hidden-size 256 --layers 1 --seq-len 64 "
               "--batch-size 32 --lr 3e-3 --epochs 2"),
}

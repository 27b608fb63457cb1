"""Which items go into one batch: their indexes in batches of similar length (`length_batches`), for
taggers, classifiers and sequence-to-sequence pairs. Indexes only, no tensors: the ONNX runtime
(`seqlab.export.runtime`) batches as the PyTorch API does without importing torch."""

from __future__ import annotations

import random


def length_batches(lengths: list[int], batch_size: int, seed: int | None) -> list[list[int]]:
    """The items' indexes in batches of similar length (little padding).

    With a seed (training) the order is shuffled, only whole batches are kept (the few items left
    over are random ones, different every epoch), batches are formed within pools of 50 sorted by
    length, and the batches are shuffled; it all depends on the seed alone, so a resumed run sees the
    same batches. Without a seed (evaluation) every item is kept, shortest first (ties in order)."""
    order = list(range(len(lengths)))
    if seed is None:
        order.sort(key=lengths.__getitem__)
    else:
        rng = random.Random(seed)
        rng.shuffle(order)
        order = order[:len(order) - len(order) % batch_size] or order
        pool = 50 * batch_size
        order = [i for k in range(0, len(order), pool) for i in sorted(order[k:k + pool], key=lengths.__getitem__)]
    batches = [order[k:k + batch_size] for k in range(0, len(order), batch_size)]
    if seed is not None:
        rng.shuffle(batches)
    return batches

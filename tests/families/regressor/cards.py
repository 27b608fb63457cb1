"""A regressor's model card data (`seqlab.cards`): each split a file of texts and values, and each item's
squared and absolute error, which the card's bootstrap intervals resample."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from regressor.data import read_items
from seqlab.cards.bootstrap import Items
from seqlab.cards.splits import Split
from seqlab.cards.splits import no_own_sheet as training_data  # noqa: F401  (the cards contract)
from seqlab.cards.splits import one_file as evaluation_file  # noqa: F401
from seqlab.cards.splits import word_units as side_unit  # noqa: F401


def read_split(config, option: str) -> Split | None:
    path = getattr(config.data, option)
    if not path:
        return None
    return Split(option, {option: path}, ("text",),
                 lambda: (((text,), (f"{value:g}",)) for text, value in read_items(path, f"{option} file")))


def read_units(path: str | Path, fmt: str = "", columns=None, **options) -> dict:
    items = read_items(path, "file")
    return {"unit": "texts", "units": len(items), "texts": [t for t, _ in items], "labels": []}


def interval_items(trained, path, progress, read_options: dict) -> tuple[Items, dict]:
    """Per text: its squared error, its absolute error and a one; mse and mae are their sums over the ones'."""
    result = trained.evaluate_file(path)
    items = Items("texts", ["squared", "absolute", "texts"])
    errors = np.asarray(result["errors"], dtype=np.float64)
    items.add(np.stack([errors ** 2, np.abs(errors), np.ones_like(errors)], axis=1))
    items.figures["mse"] = lambda s: s[:, 0] / np.maximum(s[:, 2], 1)
    items.figures["mae"] = lambda s: s[:, 1] / np.maximum(s[:, 2], 1)
    return items, {"mse": result["mse"], "mae": result["mae"]}

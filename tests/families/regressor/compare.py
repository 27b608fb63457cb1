"""`seqlab compare regressor`: its recipes (one per pooling), the trainer's options, and no report sections of
its own."""

from __future__ import annotations

RECIPES = {"mean": {"arch": "mean"}, "max": {"arch": "max"}}
TRAIN = {"optimizer": "adam", "lr": 0.01, "batch_size": 8}
SPACE = {"lr": {"low": 1e-3, "high": 5e-2, "log": True}}
ARCH_SPACE: dict[str, dict] = {}           # no architecture-specific options to search


def resize(options: dict, size: str) -> dict:
    return dict(options)


def sections(spec: dict, rows: list[dict], models: dict, winner, figures) -> list:
    return []

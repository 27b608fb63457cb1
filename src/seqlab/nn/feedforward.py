"""A feedforward network (SLP 6.3-6.4): hidden ReLU layers, then a linear output layer; the classifier's head and
the feedforward tutorial's network."""

from __future__ import annotations

from torch import nn


def feedforward(inputs: int, hidden: int, layers: int, outputs: int, dropout: float) -> nn.Sequential:
    """`layers` hidden ReLU layers of width `hidden` (none when hidden is 0), then a linear output
    layer: h = ReLU(W x + b), z = U h (SLP eq. 6.19-6.20)."""
    parts: list[nn.Module] = []
    width = inputs
    for _ in range(layers if hidden else 0):
        parts += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
        width = hidden
    parts.append(nn.Linear(width, outputs))
    return nn.Sequential(*parts)

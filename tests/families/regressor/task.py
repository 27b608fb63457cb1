"""RegressionTask: what the trainer (`seqlab.training.task.Task`) knows of a regressor: batches of texts, the
squared error summed over them with their count, and the mean squared and absolute errors of a split."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from regressor.model import batch_tensors


@dataclass
class Rows:
    """B texts: their ids (B, T), lengths (B,) and values (B,)."""

    words: Tensor
    lengths: Tensor
    values: Tensor

    def rows(self, start: int, stop: int) -> Rows:
        return Rows(self.words[start:stop], self.lengths[start:stop], self.values[start:stop])

    def to(self, device) -> Rows:
        return Rows(self.words.to(device), self.lengths.to(device), self.values.to(device))


def make_rows(encoded: list[tuple[list[int], float]]) -> Rows:
    words, lengths = batch_tensors([row for row, _ in encoded])
    return Rows(words, lengths, torch.tensor([value for _, value in encoded], dtype=torch.float32))


class RegressionTask:
    name, unit, metric, batch_unit = "regressor", "text", "mse", "texts"
    progress = None

    def __init__(self, train, dev, test, batch_size: int, eval_batch_size: int, seed: int):
        self.train, self.batch_size, self.seed = train, batch_size, seed
        self.valid_data = self.batches(dev, eval_batch_size)
        self.test_data = self.batches(test, eval_batch_size) if test else None

    @staticmethod
    def batches(items, size: int) -> list[Rows]:
        return [make_rows(items[i:i + size]) for i in range(0, len(items), size)]

    def train_batches(self, epoch: int) -> list[Rows]:
        order = torch.randperm(len(self.train), generator=torch.Generator().manual_seed(self.seed + epoch)).tolist()
        return self.batches([self.train[i] for i in order], self.batch_size)

    def initial_state(self, model, rows: int, device):
        return None

    def count(self, batch: Rows) -> int:
        return len(batch.values)

    def loss(self, model, batch: Rows, state):
        predicted = model(batch.words, batch.lengths)                       # (B,)
        return ((predicted.float() - batch.values) ** 2).sum(), len(batch.values), None

    @torch.no_grad()
    def evaluate(self, model, data, device, rows: slice = slice(None)) -> dict[str, float]:
        stats = {"squared": 0.0, "absolute": 0.0, "items": 0.0}
        for batch in data:
            batch = batch.rows(rows.start or 0, rows.stop if rows.stop is not None else len(batch.values)).to(device)
            error = model(batch.words, batch.lengths).float() - batch.values  # (B,)
            stats["squared"] += float((error ** 2).sum())
            stats["absolute"] += float(error.abs().sum())
            stats["items"] += len(error)
        return stats

    def summarize(self, stats: dict[str, float]) -> dict:
        n = max(stats["items"], 1)
        return {"loss": stats["squared"] / n, "mse": stats["squared"] / n, "mae": stats["absolute"] / n,
                "items": int(stats["items"])}

    def describe(self, record: dict) -> str:
        return f"step {record['step']} {record['split']}: mse {record['mse']:.4f}, mae {record['mae']:.4f}"

    def progress_fields(self, loss: float) -> dict[str, str]:
        return {"mse": f"{loss:.4f}"}

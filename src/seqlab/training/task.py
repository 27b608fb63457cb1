"""The Task contract: everything the trainer (`seqlab.training.trainer.Trainer`) knows about a task
family, and all it relies on. The trainer knows nothing of language modelling, tags, classes or pairs;
each task knows nothing of model internals beyond the model's forward (`seqlab.models.base.Model`).

A task hands the trainer global batches (all processes' rows; the trainer keeps its own under DDP),
counts what a batch's loss is summed over, and computes the loss as (sum, count), after fairseq's
criterions: the trainer divides the summed loss of every micro-batch of a step by the task's count for
the whole step (`count` of each batch, added over micro-batches and processes), so padding, gradient
accumulation and data parallelism leave the gradient that of one big batch. Evaluation returns summable
statistics (every process's are added), which `summarize` turns into the figures of `metric`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from torch import Tensor


@runtime_checkable
class Batch(Protocol):
    """A batch of B rows (sentences, documents, pairs or stream segments)."""

    def rows(self, start: int, stop: int) -> Batch:
        """The rows start..stop (one process's share under DDP)."""

    def to(self, device) -> Batch:
        """The batch's tensors on `device`."""


@runtime_checkable
class Task(Protocol):
    """A task family as the trainer sees it."""

    name: str                      # its family's name (`seqlab.registry`), for messages
    unit: str                      # what `count` counts, for messages: "token", "document"
    metric: str                    # the figure that picks the best weights and drives early stopping (its
                                   # direction: its declaration in `seqlab.metrics`)
    batch_unit: str                # what a batch row is, for messages: "35 tokens", "sentences", ...
    progress: bool | None          # a bar over evaluation batches (None: when stderr is a terminal); set by the trainer
    valid_data: Any                # what `evaluate` reads for the validation split
    test_data: Any | None          # the same for the test split, or None

    def train_batches(self, epoch: int) -> Sequence[Batch]:
        """The global batches of one epoch, indexable (a resumed run starts mid-epoch) and the same for
        the same epoch every time it is asked (the order is seeded by the epoch)."""

    def initial_state(self, model, rows: int, device) -> Any:
        """The state carried into an epoch's first batch (truncated BPTT), or None."""

    def count(self, batch: Batch) -> int:
        """What the loss of `batch` is summed over (tokens scored, documents), from the batch alone: the
        trainer divides by this, and `loss` returns the same number."""

    def loss(self, model, batch: Batch, state) -> tuple[Tensor, Tensor | int, Any]:
        """(the summed loss, its count, the state to carry into the next batch)."""

    def evaluate(self, model, data, device, rows: slice = slice(None)) -> dict[str, float]:
        """Summable statistics of `data` (the rows `rows` of each batch, for DDP)."""

    def summarize(self, stats: dict[str, float]) -> dict:
        """The figures (`metric` among them) from statistics added over processes."""

    def describe(self, record: dict) -> str:
        """One line for an evaluation record (step, split and the figures)."""

    def progress_fields(self, loss: float) -> dict[str, str]:
        """What the progress bar shows for a training loss."""

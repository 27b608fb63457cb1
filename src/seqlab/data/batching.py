"""Batches: language-model streams for truncated BPTT and independent windows; and, for taggers
and classifiers, batches of sentences or documents of similar length (`length_batches`, in the
torch-free `seqlab.data.grouping`).

Streams (SLP 9.2.2, truncated backpropagation through time). The corpus is one long sequence of
ids; it is cut into B rows that are read in parallel, and each row into segments of T tokens. The
recurrent state at the end of segment k is the initial state of segment k+1 (gradients stop at the
segment boundary):

    corpus   a b c d e f g h i j k l m n o p q r s t u v w x      (B = 2 rows, T = 4)
    row 0    a b c d | e f g h | i j k l              inputs  = row[:, k*T : (k+1)*T]
    row 1    m n o p | q r s t | u v w x              targets = the same, shifted by one token

Windows (the transformer): independent chunks of T+1 tokens (T inputs, T targets), at a random
offset and in a random order that depend only on (seed, epoch), so a resumed run sees the same data.

Evaluation scores every token of a file exactly once. The first token is predicted from `</s>` (a
line start). Streams pad the last row; sliding windows score only the tokens no earlier window
scored, so each scored token sees at least `context - stride` tokens of left context.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from seqlab.data.grouping import length_batches  # noqa: F401  (re-exported)
from seqlab.data.vocab import EOS, PAD


@dataclass
class Batch:
    """inputs and targets (B, T); a target equal to `<pad>` (0) is not scored."""

    inputs: torch.Tensor
    targets: torch.Tensor

    def rows(self, start: int, stop: int) -> Batch:
        return Batch(self.inputs[start:stop], self.targets[start:stop])

    def to(self, device) -> Batch:
        return Batch(self.inputs.to(device, non_blocking=True), self.targets.to(device, non_blocking=True))

    @property
    def num_tokens(self) -> int:
        return int((self.targets != PAD).sum())


class RowBatch:
    """A global batch whose rows are read only when asked for: `rows(start, stop)` reads those rows alone, so
    under DDP each process reads its own share of every global batch from the prepared shards and none reads
    the others' (`seqlab.data.prepared`). `to`, `inputs`, `targets` and `num_tokens` read the whole batch."""

    def __init__(self, size: int, read: Callable[[int, int], Batch]):
        self.size, self._read, self._whole = size, read, None

    def rows(self, start: int, stop: int) -> Batch:
        return self._read(start, min(stop, self.size))

    def whole(self) -> Batch:
        if self._whole is None:
            self._whole = self._read(0, self.size)
        return self._whole

    def to(self, device) -> Batch:
        return self.whole().to(device)

    @property
    def inputs(self) -> torch.Tensor:
        return self.whole().inputs

    @property
    def targets(self) -> torch.Tensor:
        return self.whole().targets

    @property
    def num_tokens(self) -> int:
        return self.whole().num_tokens


def _rows_of(segments: list[np.ndarray]) -> Batch:
    """Rows of T + 1 ids each -> inputs and targets (B, T) as int64 tensors."""
    block = torch.from_numpy(np.stack(segments).astype(np.int64)) if segments else torch.empty(0, 1, dtype=torch.long)
    return Batch(block[:, :-1], block[:, 1:])


class TokenStreamBatches:
    """`StreamBatches(ids, B, T)` for training over ids read by position (`tokens.read(a, b)`, a prepared split):
    the same batches, each row's segment read when its rows are asked for (`RowBatch`)."""

    def __init__(self, tokens, batch_size: int, seq_len: int):
        self.tokens, self.batch_size, self.seq_len = tokens, batch_size, seq_len
        self.length = (len(tokens) - 1) // batch_size              # L: each row's tokens

    def __len__(self) -> int:
        return math.ceil(self.length / self.seq_len)

    def __getitem__(self, k: int) -> RowBatch:
        if not 0 <= k < len(self):
            raise IndexError(k)
        L, T = self.length, self.seq_len
        stop = min((k + 1) * T, L)

        def read(first: int, last: int) -> Batch:       # row b: inputs ids[bL + kT : bL + stop], targets +1
            return _rows_of([self.tokens.read(b * L + k * T, b * L + stop + 1) for b in range(first, last)])
        return RowBatch(self.batch_size, read)

    def __iter__(self):
        return (self[k] for k in range(len(self)))


class TokenWindowBatches:
    """`WindowBatches` over ids read by position: the same windows in the same order (seeded by (seed, epoch)),
    each read when its rows are asked for."""

    def __init__(self, tokens, batch_size: int, context: int, seed: int, epoch: int):
        n = len(tokens)
        generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        offset = int(torch.randint(context, (1,), generator=generator)) if n > 2 * (context + 1) else 0
        count = (n - offset - 1) // context
        self.starts = (offset + context * torch.randperm(count, generator=generator)).numpy()
        self.tokens, self.batch_size, self.context = tokens, batch_size, context

    def __len__(self) -> int:
        return len(self.starts) // self.batch_size

    def __getitem__(self, k: int) -> RowBatch:
        if not 0 <= k < len(self):
            raise IndexError(k)
        starts = self.starts[k * self.batch_size: (k + 1) * self.batch_size]

        def read(first: int, last: int) -> Batch:
            return _rows_of([self.tokens.read(int(s), int(s) + self.context + 1) for s in starts[first:last]])
        return RowBatch(self.batch_size, read)

    def __iter__(self):
        return (self[k] for k in range(len(self)))


class ArrayTokens:
    """Ids held in memory (a tensor or an array), read by position like a prepared split."""

    def __init__(self, ids):
        self.ids = ids.numpy() if isinstance(ids, torch.Tensor) else np.asarray(ids)

    def __len__(self) -> int:
        return len(self.ids)

    def read(self, start: int, stop: int) -> np.ndarray:
        return self.ids[max(0, start):stop]


class StreamBatches:
    """Consecutive segments of B parallel rows (see the module docstring).

    training (exact=False): inputs = ids[:-1], targets = ids[1:], the remainder that does not fill
    B equal rows is dropped (as in pytorch/examples). evaluation (exact=True): inputs = [</s>] + ids[:-1],
    targets = ids, the last row padded, so every token is scored once.
    """

    def __init__(self, ids: torch.Tensor, batch_size: int, seq_len: int, exact: bool = False):
        if exact:
            inputs = torch.cat([torch.tensor([EOS]), ids[:-1]])
            targets = ids
            length = math.ceil(len(ids) / batch_size)
            pad = batch_size * length - len(ids)
            inputs = torch.cat([inputs, torch.full((pad,), PAD)])
            targets = torch.cat([targets, torch.full((pad,), PAD)])
        else:
            length = (len(ids) - 1) // batch_size
            inputs, targets = ids[: batch_size * length], ids[1: batch_size * length + 1]
        self.inputs = inputs.view(batch_size, length)   # (B, N/B)
        self.targets = targets.view(batch_size, length)  # (B, N/B)
        self.seq_len = seq_len

    def __len__(self) -> int:
        return math.ceil(self.inputs.size(1) / self.seq_len)

    def __getitem__(self, k: int) -> Batch:
        if not 0 <= k < len(self):
            raise IndexError(k)
        cut = slice(k * self.seq_len, (k + 1) * self.seq_len)
        return Batch(self.inputs[:, cut], self.targets[:, cut])  # (B, T)

    def __iter__(self):
        return (self[k] for k in range(len(self)))


class WindowBatches:
    """Shuffled independent windows of `context` inputs and targets, B windows per batch."""

    def __init__(self, ids: torch.Tensor, batch_size: int, context: int, seed: int, epoch: int):
        generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        offset = int(torch.randint(context, (1,), generator=generator)) if len(ids) > 2 * (context + 1) else 0
        count = (len(ids) - offset - 1) // context
        starts = offset + context * torch.randperm(count, generator=generator)
        self.ids, self.starts, self.batch_size, self.context = ids, starts, batch_size, context

    def __len__(self) -> int:
        return len(self.starts) // self.batch_size   # whole batches only: every step has B windows

    def __getitem__(self, k: int) -> Batch:
        if not 0 <= k < len(self):
            raise IndexError(k)
        starts = self.starts[k * self.batch_size: (k + 1) * self.batch_size]
        index = starts[:, None] + torch.arange(self.context + 1)   # (B, T+1)
        chunk = self.ids[index]
        return Batch(chunk[:, :-1], chunk[:, 1:])  # (B, T)

    def __iter__(self):
        return (self[k] for k in range(len(self)))


def sliding_windows(ids: torch.Tensor, batch_size: int, context: int, stride: int) -> list[Batch]:
    """Evaluation windows over [</s>] + ids: each window scores the targets no earlier one scored."""
    stride = max(1, min(stride, context))
    seq = torch.cat([torch.tensor([EOS]), ids])     # seq[t] predicts seq[t+1] = ids[t]
    n = len(ids)
    windows, scored_until, start = [], 0, 0
    while True:
        stop = min(start + context, n)               # inputs seq[start:stop], targets ids[start:stop]
        inputs = torch.full((context,), PAD)
        targets = torch.full((context,), PAD)
        inputs[: stop - start] = seq[start:stop]
        fresh = scored_until - start                 # targets before this were scored already
        targets[fresh: stop - start] = ids[scored_until:stop]
        windows.append((inputs, targets))
        scored_until = stop
        if stop == n:
            break
        start += stride
    batches = []
    for k in range(0, len(windows), batch_size):
        group = windows[k: k + batch_size]
        batches.append(Batch(torch.stack([w[0] for w in group]), torch.stack([w[1] for w in group])))
    return batches

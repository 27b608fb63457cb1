"""Viterbi decoding of a linear-chain CRF, written once for PyTorch tensors (`seqlab.nn.crf.CRF.decode`, the
trained tagger) and numpy arrays (`seqlab.families.tagger.exported`, its ONNX export on onnxruntime), through a
tiny backend (`LatticeOps`: `NUMPY` here, `seqlab.nn.crf.TorchLattice`), so both give the same tags.

The HMM's Viterbi recursion (SLP 17.4: v_t(j) = max_i v_{t-1}(i) a_ij b_j(o_t)) in log space, with
the CRF's scores (SLP 17.5) in place of log a_ij and log b_j(o_t): emissions e (B, T, K), transitions A (K, K)
(A[i, j]: tag i then tag j), start and end scores (K,):

    delta_1[j] = start[j] + e_1[j]
    delta_t[j] = max_i (delta_{t-1}[i] + A[i, j]) + e_t[j]        psi_t[j] = that i (the first of equal ones)
    y_T        = argmax_j (delta_T[j] + end[j])                    the best path's score: that maximum
    y_{t-1}    = psi_t[y_t]                                        following the back pointers

Masks are (B, T) booleans, True on the real tokens of each left-aligned sentence: at padding a row keeps its
last delta, and its path holds 0. The README program of a tagger's export spells the same recursion for one
sentence (`seqlab.families.tagger.graphs.example`); tests/test_viterbi.py holds the three to the same paths
and scores on random lattices, ties, one-token sentences and padding included.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

import numpy as np

from seqlab.decoding import core


class LatticeOps(Protocol):
    """The few array operations Viterbi needs beyond indexing and arithmetic, on one backend's arrays."""

    def max(self, x, axis: int) -> tuple: ...          # (the maxima, the first index of each)
    def argmax(self, x, axis: int): ...                # the first index of each maximum
    def where(self, condition, x, y): ...              # x where condition, else y (broadcast; y may be a number)
    def pick(self, x, index): ...                      # x[i, index[i]] (B,)
    def zeros(self, shape: tuple): ...                 # int64 zeros, where the arrays live


class NumpyLattice:
    """`LatticeOps` on numpy arrays."""

    def max(self, x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
        return x.max(axis=axis), x.argmax(axis=axis)

    def argmax(self, x: np.ndarray, axis: int) -> np.ndarray:
        return x.argmax(axis=axis)

    def where(self, condition, x, y) -> np.ndarray:
        return np.where(condition, x, y)

    def pick(self, x: np.ndarray, index: np.ndarray) -> np.ndarray:
        return x[np.arange(len(index)), index]

    def zeros(self, shape: tuple) -> np.ndarray:
        return np.zeros(shape, np.int64)


NUMPY = NumpyLattice()


def viterbi(emissions: Any, mask: Any, transitions: Any, start: Any, end: Any, ops: LatticeOps,
            pace: Hashable | None = None, trace: list | None = None) -> tuple[Any, Any]:
    """The best tag path of each sentence and its score: emissions (B, T, K), mask (B, T) -> (path (B, T),
    int64, 0 at padding; score (B,)). `pace`: cut the time steps into windows (`core.slices`, a checkpoint
    between two: on a server's inference thread), the same arithmetic; None: every step at once. `trace`: a
    list that gets each step's delta_t (B, K), t = 1 .. T, the lattice `seqlab explore` draws."""
    B, T, _ = emissions.shape
    delta = start + emissions[:, 0]                                                # (B, K)
    if trace is not None:
        trace.append(delta)
    pointers = []
    windows = core.slices([B] * (T - 1), pace) if pace is not None else [range(T - 1)]
    for part in windows:
        for t in part:
            t += 1
            best, argbest = ops.max(delta[:, :, None] + transitions, axis=1)       # (B, K): best previous tag
            pointers.append(argbest)
            delta = ops.where(mask[:, t, None], best + emissions[:, t], delta)    # padding keeps delta
            if trace is not None:
                trace.append(delta)
    final = delta + end                                                            # (B, K)
    last = ops.argmax(final, axis=1)                                               # (B,)
    lengths = mask.sum(1)                                                          # (B,)
    path = ops.zeros((B, T))
    tag = last
    for t in range(T - 1, -1, -1):
        inside = t < lengths                                                       # (B,)
        path[:, t] = ops.where(inside, tag, 0)
        if t > 0:
            previous = ops.pick(pointers[t - 1], tag)                              # (B,)
            tag = ops.where(inside, previous, tag)                                 # follow pointers inside only
    return path, ops.pick(final, last)

"""A linear-chain conditional random field over per-token tag scores (Lafferty et al. 2001; the
output layer of Huang et al. 2015 and Lample et al. 2016; SLP 17.5 for the CRF, Viterbi as in 17.4).

A tag sequence y_1..y_T of a sentence with emission scores e (from the encoder) scores

    s(y) = start[y_1] + sum_t e_t[y_t] + sum_{t>1} A[y_{t-1}, y_t] + end[y_T]

and p(y | x) = exp s(y) / Z with Z = sum over all K^T sequences, computed by the forward algorithm:

    alpha_1[j] = start[j] + e_1[j]
    alpha_t[j] = logsumexp_i (alpha_{t-1}[i] + A[i, j]) + e_t[j]
    log Z      = logsumexp_j (alpha_T[j] + end[j])

Training minimises -log p(y | x) = log Z - s(y); decoding is Viterbi, the same recursion with max
(`seqlab.decoding.viterbi`, written once for these tensors and the numpy runtime); each
token's tag probabilities are its marginals, from the forward and the backward algorithm
(beta_t[i] = logsumexp_j (A[i, j] + e_{t+1}[j] + beta_{t+1}[j]), beta_T = end):
p(y_t = j | x) = exp(alpha_t[j] + beta_t[j] - log Z).
All are batched: the only loop is over time (on a server's inference thread, a window of steps at a time).
Transitions that a tag scheme forbids (I-PER after O in IOB2) get a score of -10^4, so they are never decoded
and carry no probability.
Masks are (B, T) booleans, True on the real tokens of each left-aligned sentence.
"""

from __future__ import annotations

import torch
from torch import nn

from seqlab.decoding import core
from seqlab.decoding.viterbi import viterbi

FORBIDDEN = -1e4


class CRF(nn.Module):
    def __init__(self, num_tags: int, allowed: torch.Tensor | None = None,
                 allowed_start: torch.Tensor | None = None, allowed_end: torch.Tensor | None = None):
        super().__init__()
        self.num_tags = num_tags
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))   # A[i, j]: tag i then tag j
        self.start = nn.Parameter(torch.zeros(num_tags))
        self.end = nn.Parameter(torch.zeros(num_tags))

        def penalty(mask, shape):
            mask = torch.ones(shape, dtype=torch.bool) if mask is None else mask.to(torch.bool)
            if mask.shape != shape:
                raise ValueError(f"allowed mask of shape {tuple(mask.shape)}, expected {shape}")
            return torch.where(mask, 0.0, FORBIDDEN)

        self.register_buffer("transition_penalty", penalty(allowed, (num_tags, num_tags)))
        self.register_buffer("start_penalty", penalty(allowed_start, (num_tags,)))
        self.register_buffer("end_penalty", penalty(allowed_end, (num_tags,)))

    def _scores(self):
        return (self.transitions + self.transition_penalty, self.start + self.start_penalty,
                self.end + self.end_penalty)

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log Z for each sentence: emissions (B, T, K), mask (B, T) -> (B,)."""
        end = self._scores()[2]
        return torch.logsumexp(self.forward_scores(emissions, mask)[:, -1] + end, dim=1)   # (B,)

    def forward_scores(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """alpha_t (B, T, K) of the forward algorithm; at padding each row keeps its last real alpha. On a
        server's inference thread the time steps run a window at a time (`core.slices`), the same arithmetic."""
        transitions, start, _ = self._scores()
        B, T, _ = emissions.shape
        alpha = start + emissions[:, 0]                                       # (B, K)
        alphas = [alpha]
        for part in core.slices([B] * (T - 1), (id(self), "crf")):
            for t in part:
                t += 1
                step = torch.logsumexp(alpha[:, :, None] + transitions, dim=1) + emissions[:, t]   # (B, K)
                alpha = torch.where(mask[:, t, None], step, alpha)           # padding keeps alpha
                alphas.append(alpha)
        return torch.stack(alphas, dim=1)                                     # (B, T, K)

    def backward_scores(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """beta_t (B, T, K) of the backward algorithm: beta_t[i] = logsumexp_j (A[i, j] + e_{t+1}[j] +
        beta_{t+1}[j]), beta at a row's last real token its end scores (and so at its padding)."""
        transitions, _, end = self._scores()
        B, T, K = emissions.shape
        beta = end.expand(B, K)                                               # (B, K)
        betas = [beta]
        for part in core.slices([B] * (T - 1), (id(self), "crf")):
            for t in part:
                t = T - 2 - t
                step = torch.logsumexp(transitions + (emissions[:, t + 1] + beta)[:, None, :], dim=2)   # (B, K)
                beta = torch.where(mask[:, t + 1, None], step, beta)         # past the end: the end scores
                betas.append(beta)
        return torch.stack(betas[::-1], dim=1)                                # (B, T, K)

    def score(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """s(y) of the given tags (B, T) -> (B,); tags at padded positions are ignored."""
        transitions, start, end = self._scores()
        mask_f = mask.to(emissions.dtype)
        emitted = emissions.gather(2, tags[:, :, None]).squeeze(2)           # (B, T)
        total = start[tags[:, 0]] + (emitted * mask_f).sum(1)
        moves = transitions[tags[:, :-1], tags[:, 1:]]                        # (B, T-1)
        total = total + (moves * mask_f[:, 1:]).sum(1)
        last = tags.gather(1, (mask.sum(1, keepdim=True) - 1).clamp(min=0)).squeeze(1)   # (B,)
        return total + end[last]

    def nll(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """-log p(tags | x) per sentence, (B,)."""
        return self.log_partition(emissions, mask) - self.score(emissions, tags, mask)

    def marginals(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """p(y_t = k | x) for every token, (B, T, K), 0 at padding, by the forward-backward algorithm:
        exp(alpha_t[k] + beta_t[k] - log Z) (the gradient of log Z with respect to the emissions)."""
        alpha = self.forward_scores(emissions, mask)                          # (B, T, K)
        beta = self.backward_scores(emissions, mask)                          # (B, T, K)
        log_z = torch.logsumexp(alpha[:, -1] + self._scores()[2], dim=1)      # (B,)
        return torch.exp(alpha + beta - log_z[:, None, None]) * mask[:, :, None]

    @torch.no_grad()
    def decode(self, emissions: torch.Tensor, mask: torch.Tensor, trace: list | None = None) -> torch.Tensor:
        """Viterbi: the best tag sequence of each sentence, (B, T) (padded positions hold 0), by the recursion
        the numpy runtime shares (`seqlab.decoding.viterbi`), a window of steps at a time on a server.
        `trace`: a list that gets the lattice's delta_t (B, K) of each step (`viterbi`'s)."""
        transitions, start, end = self._scores()
        path, _ = viterbi(emissions, mask, transitions, start, end, TorchLattice(emissions.device), (id(self), "crf"),
                          trace)
        return path


class TorchLattice:
    """`seqlab.decoding.viterbi.LatticeOps` on PyTorch tensors on `device`."""

    def __init__(self, device: torch.device):
        self.device = device

    def max(self, x: torch.Tensor, axis: int) -> tuple[torch.Tensor, torch.Tensor]:
        return x.max(dim=axis)

    def argmax(self, x: torch.Tensor, axis: int) -> torch.Tensor:
        return x.argmax(dim=axis)

    def where(self, condition: torch.Tensor, x, y) -> torch.Tensor:
        return torch.where(condition, x, y)

    def pick(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return x.gather(1, index[:, None]).squeeze(1)

    def zeros(self, shape: tuple) -> torch.Tensor:
        return torch.zeros(*shape, dtype=torch.long, device=self.device)

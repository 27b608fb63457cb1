"""Optimizers (SGD, Adam, AdamW) and learning-rate schedules, with JSON-serialisable state.

Schedules (all with an optional linear warm-up over the first `warmup_steps` steps):
  constant  the base rate throughout
  cosine    cosine decay from the base rate to `min_lr` over the run's steps, or over its time or token
            budget when that runs out first (the usual Adam schedule)
  step      the classic SGD schedule of Zaremba et al. 2014: from epoch `decay_start` on, the rate is
            multiplied by `lr_decay` at every epoch
  plateau   the pytorch/examples rule: multiply the rate by `lr_decay` whenever an evaluation does
            not improve on the best one
"""

from __future__ import annotations

import math

import torch

SCHEDULES = ("constant", "cosine", "step", "plateau")
OPTIMIZERS = ("sgd", "adam", "adamw")


def make_optimizer(model: torch.nn.Module, name: str, lr: float, weight_decay: float = 0.0,
                   momentum: float = 0.0, betas: tuple[float, float] = (0.9, 0.999)):
    """Weight decay applies to matrices and embeddings only, never to biases and norms (as GPT-2)."""
    decay, no_decay, seen = [], [], set()
    for p in model.parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # PyTorch's fused kernels update all parameters in one pass (on CPU, AdamW's step is ~7x faster
    # than the default loop); they exist for floating-point parameters on CPU and CUDA.
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in decay + no_decay)
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, fused=fused)
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr, betas=betas, fused=fused)
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=fused)


class Schedule:
    """lr(step, epoch) = base * warm-up * (cosine | step decay | plateau factor)."""

    def __init__(self, kind: str, base_lr: float, total_steps: int, warmup_steps: int = 0,
                 lr_decay: float = 0.25, decay_start: int = 0, min_lr: float = 0.0):
        self.kind, self.base_lr, self.total_steps = kind, base_lr, max(1, total_steps)
        self.warmup_steps, self.lr_decay, self.decay_start, self.min_lr = warmup_steps, lr_decay, decay_start, min_lr
        self.factor = 1.0           # the plateau schedule's accumulated decay

    def lr(self, step: int, epoch: int, spent: float = 0.0) -> float:
        """The rate at `step`; `spent` is the share of a time or token budget used so far: the cosine
        decays over whichever of the steps and the budget runs out first."""
        warmup = min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps else 1.0
        if self.kind == "cosine":
            steps = max(0, step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps)
            progress = min(1.0, max(spent, steps))
            rate = self.min_lr + 0.5 * (self.base_lr - self.min_lr) * (1 + math.cos(math.pi * progress))
        elif self.kind == "step":
            rate = self.base_lr * self.lr_decay ** max(0, epoch + 1 - self.decay_start)
        else:
            rate = self.base_lr * self.factor
        return rate * warmup

    def evaluated(self, improved: bool) -> None:
        if self.kind == "plateau" and not improved:
            self.factor *= self.lr_decay

    def state_dict(self) -> dict:
        return {"factor": self.factor}

    def load_state_dict(self, state: dict) -> None:
        self.factor = state["factor"]


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr

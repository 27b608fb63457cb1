"""Optimizers (SGD, Adam, AdamW, Muon) and learning-rate schedules, with JSON-serialisable state.

Muon (Jordan et al. 2024, the optimizer of the public nanoGPT speedruns) updates each hidden matrix by its
momentum, orthogonalised: the nearest semi-orthogonal matrix U V^T of the momentum U S V^T, approximated by
five Newton-Schulz iterations. Embeddings, the output layer, biases and norm gains keep AdamW (`MuonAdamW`).

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
OPTIMIZERS = ("sgd", "adam", "adamw", "muon")


def make_optimizer(model: torch.nn.Module, name: str, lr: float, weight_decay: float = 0.0,
                   momentum: float = 0.0, betas: tuple[float, float] = (0.9, 0.999)):
    """Weight decay applies to matrices and embeddings only, never to biases and norms (as GPT-2)."""
    if name == "muon":
        return MuonAdamW(muon_groups(model, weight_decay), lr=lr, betas=betas, weight_decay=weight_decay)
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


def muon_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """The parameter groups of `MuonAdamW`: Muon for the weight of every nn.Linear outside the model's output
    layer (`model.output`) that is not an embedding's (tied); a stacked W^Q W^K W^V (`qkv`, 3D x D) as three
    matrices. AdamW for the rest: embeddings, the output layer and the recurrent kernels with weight decay,
    biases and norm gains without."""
    output = getattr(model, "output", None)
    outside = {id(p) for p in output.parameters()} if isinstance(output, torch.nn.Module) else set()
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    hidden = {}                                                          # id -> blocks
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and id(module.weight) not in outside | embeddings:
            hidden[id(module.weight)] = 3 if name.endswith("qkv") else 1
    groups = {key: [] for key in ("muon1", "muon3", "decay", "no_decay")}
    seen = set()
    for p in model.parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        key = f"muon{hidden[id(p)]}" if id(p) in hidden else "decay" if p.dim() >= 2 else "no_decay"
        groups[key].append(p)
    return [{"params": groups["muon1"], "muon": True, "blocks": 1, "weight_decay": weight_decay},
            {"params": groups["muon3"], "muon": True, "blocks": 3, "weight_decay": weight_decay},
            {"params": groups["decay"], "muon": False, "weight_decay": weight_decay},
            {"params": groups["no_decay"], "muon": False, "weight_decay": 0.0}]


def orthogonalise(g: torch.Tensor, steps: int = 5, eps: float = 1e-7) -> torch.Tensor:
    """Newton-Schulz: g (m, n) -> about U V^T for g = U S V^T (singular values to within about 0.7-1.2, which
    trains as well as exactly 1; Jordan et al. 2024). The quintic X <- a X + b (X X^T) X + c (X X^T)^2 X with
    (a, b, c) = (3.4445, -4.7750, 2.0315) pushes every singular value of X = g / ||g||_F (all <= 1) towards 1.
    In fp32: without native bf16 (most CPUs) it is slower, not faster."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.float()
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT                                                        # iterate on the wide side: X X^T is smaller
    x = x / x.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.mT                                                 # X X^T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return (x.mT if tall else x).to(g.dtype)


class MuonAdamW(torch.optim.Optimizer):
    """Muon for the groups marked `muon` (`muon_groups`), AdamW for the others, in one optimizer and one
    state_dict. One learning rate serves both: Muon's update U V^T is scaled by 0.2 sqrt(max(m, n)), which gives
    it the RMS of a typical AdamW update (Liu et al. 2025, "Muon is scalable for LLM training", eq. 4; PyTorch's
    `adjust_lr_fn="match_rms_adamw"`), so the AdamW rate and weight decay carry over. Per Muon matrix W:

        B <- mu B + (1 - mu) G;   M = (1 - mu) G + mu B (Nesterov);   W <- (1 - lr wd) W - lr 0.2 sqrt(max(m, n)) NS(M)
    """

    def __init__(self, groups: list[dict], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 weight_decay: float = 0.0, momentum: float = 0.95, eps: float = 1e-8, ns_steps: int = 5):
        defaults = {"lr": lr, "betas": betas, "weight_decay": weight_decay, "momentum": momentum, "eps": eps,
                    "ns_steps": ns_steps, "muon": False, "blocks": 1}
        super().__init__([g for g in groups if g["params"]], defaults)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            (self._muon if group["muon"] else self._adamw)(group)

    def _muon(self, group: dict) -> None:
        lr, mu, blocks = group["lr"], group["momentum"], group["blocks"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p)
            buffer = state["momentum_buffer"]
            buffer.lerp_(p.grad, 1 - mu)                                # B <- mu B + (1 - mu) G
            m = p.grad.lerp(buffer, mu)                                 # Nesterov: (1 - mu) G + mu B
            m = m.view(blocks, -1, m.size(-1))                          # W^Q, W^K, W^V each on its own
            update = orthogonalise(m, group["ns_steps"]).view_as(p)
            p.mul_(1 - lr * group["weight_decay"])
            p.add_(update, alpha=-lr * 0.2 * math.sqrt(max(m.shape[-2:])))

    def _adamw(self, group: dict) -> None:
        (beta1, beta2), lr, eps = group["betas"], group["lr"], group["eps"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if "exp_avg" not in state:
                state["step"] = 0
                state["exp_avg"], state["exp_avg_sq"] = torch.zeros_like(p), torch.zeros_like(p)
            state["step"] += 1
            m, v, t = state["exp_avg"], state["exp_avg_sq"], state["step"]
            m.lerp_(p.grad, 1 - beta1)                                  # m <- b1 m + (1 - b1) g
            v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)     # v <- b2 v + (1 - b2) g^2
            p.mul_(1 - lr * group["weight_decay"])                      # decoupled weight decay
            denominator = (v / (1 - beta2 ** t)).sqrt_().add_(eps)
            p.addcdiv_(m, denominator, value=-lr / (1 - beta1 ** t))   # p <- p - lr m^ / (sqrt(v^) + eps)


class Schedule:
    """lr(step, epoch) = base * warm-up * (cosine | step decay | plateau factor)."""

    def __init__(self, kind: str, base_lr: float, total_steps: int, warmup_steps: int = 0,
                 lr_decay: float = 0.25, decay_start: int = 0, min_lr: float = 0.0):
        self.kind, self.base_lr, self.total_steps = kind, base_lr, max(1, total_steps)
        self.warmup_steps, self.lr_decay, self.decay_start, self.min_lr = warmup_steps, lr_decay, decay_start, min_lr
        self.factor = 1.0           # the plateau schedule's accumulated decay

    def lr(self, step: int, epoch: int, spent: float = 0.0) -> float:
        """The rate at `step`; `spent` is the share of a token budget used so far: the cosine decays over
        whichever of the steps and the tokens runs out first (never over the clock: see `Trainer`)."""
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

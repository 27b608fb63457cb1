"""PyTorch DDP under torchrun: set-up, rank helpers and reductions (no-ops in one process)."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def world() -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's environment; (0, 1, 0) otherwise."""
    return (int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
            int(os.environ.get("LOCAL_RANK", 0)))


def setup(device: torch.device) -> None:
    rank, size, _ = world()
    if size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=size)


def teardown() -> None:
    """Leave together: without the barrier, a process that finished first could close its connections
    while another still writes its last files, and gloo aborts that one at exit ("terminate called
    without an active exception")."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def all_reduce_sum(values: list[float], device) -> list[float]:
    if not is_distributed():
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def gather_rows(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Concatenate every rank's rows along `dim`, in rank order (equal shapes required)."""
    if not is_distributed():
        return t
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=dim)


def gather_objects(obj) -> list:
    if not is_distributed():
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj):
    """Rank 0's `obj` on every process (itself in one process)."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def broadcast_module(module: torch.nn.Module) -> None:
    """Every parameter and buffer of rank 0's `module` copied into the others' (in place), so that what rank 0
    loaded from its disk holds everywhere, whether or not the nodes share that disk."""
    if not is_distributed():
        return
    for tensor in module.state_dict().values():
        dist.broadcast(tensor, src=0)

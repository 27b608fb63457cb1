"""Checkpoints as data: safetensors for every tensor, JSON for everything else. Nothing is unpickled.

Two kinds of file, each written atomically (seqlab.fileio.atomic_write):
  model.safetensors       the weights (the best so far, in a run directory): what `seqlab.load` reads
  checkpoint.safetensors  the last training state: weights, optimizer tensors, carried recurrent
                          state, RNG states, and the trainer's position as JSON in the header, so a
                          killed run resumes exactly from one self-consistent file

Each file carries a SHA-256 of its tensors in the header; loading recomputes it, so a truncated or
damaged file is refused with a clear message instead of loading garbage. Tied parameters (one tensor
under two names) are stored once. The same tensors and metadata give the same bytes in every process
(`safetensors_bytes`), so a file's SHA-256 identifies the weights.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from seqlab.errors import SeqlabError, os_error_reason
from seqlab.fileio import atomic_write_bytes
from seqlab.version import RUN_FORMAT_VERSION as FORMAT_VERSION


def tensor_digest(tensors: dict[str, torch.Tensor]) -> str:
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(name.encode())
        digest.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def save_tensors(path: str | Path, tensors: dict[str, torch.Tensor], metadata: dict | None = None) -> None:
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    header = {"format": "seqlab", "format_version": str(FORMAT_VERSION), "sha256": tensor_digest(tensors)}
    header.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in (metadata or {}).items()})
    atomic_write_bytes(path, safetensors_bytes(tensors, header))


def safetensors_bytes(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """A safetensors file of `tensors` and `metadata` whose bytes depend on nothing else: the same in every
    process. safetensors writes its `__metadata__` from a Rust HashMap, whose order changes from one call
    to the next (its hash keys are random), so the same weights got a different header, hence a different
    SHA-256, at each run; here the header is written again with the metadata keys sorted. The tensors keep
    the order and offsets safetensors gave them (by dtype, then name: already the same in every process).

        file = 8-byte little-endian N | header: N bytes of JSON, space-padded to a multiple of 8 | tensor data
    """
    data = st_save(tensors, metadata=metadata)
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    if "__metadata__" in header:
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)                      # the tensor data starts 8-byte aligned, as safetensors' own
    return len(text).to_bytes(8, "little") + text + data[8 + size:]


def load_tensors(path: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    """Tensors and header metadata; raises SeqlabError for a missing, truncated or damaged file."""
    path = Path(path)
    if not path.exists():
        raise SeqlabError(f"checkpoint {path} does not exist")
    if not path.is_file():
        raise SeqlabError(f"checkpoint {path} is not a file (a directory?); the run directory is damaged")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SeqlabError(f"cannot read checkpoint {path}: {os_error_reason(error)}") from None
    try:
        tensors = st_load(data)
        metadata = _header(data)
    except (SafetensorError, ValueError, OSError, RuntimeError, UnicodeDecodeError, AttributeError) as error:
        foreign = _foreign_format(data)
        if foreign:
            raise SeqlabError(f"checkpoint {path} is not a safetensors file: it is {foreign}; seqlab loads only "
                              "safetensors and never unpickles a file (it could run any code)") from None
        raise SeqlabError(f"checkpoint {path} is truncated or corrupted and cannot be read ({error})") from None
    expected = metadata.get("sha256")
    if metadata.get("format") != "seqlab" or expected is None:
        raise SeqlabError(f"checkpoint {path} was not written by seqlab (no seqlab header)")
    if tensor_digest(tensors) != expected:
        raise SeqlabError(f"checkpoint {path} is corrupted: its contents do not match the checksum "
                          f"written with it")
    version = int(metadata.get("format_version", 0))
    if version > FORMAT_VERSION:
        raise SeqlabError(f"checkpoint {path} has format version {version}; this seqlab reads up to "
                          f"{FORMAT_VERSION}: upgrade seqlab")
    return tensors, metadata


def _foreign_format(data: bytes) -> str | None:
    """What a file that is not safetensors is, when it is recognisably something else. A safetensors file
    starts with its header's length (8 bytes, which may look like anything) and then the header, "{": such
    a file is a damaged safetensors file, never a foreign one."""
    if data[8:9] == b"{":
        return None
    if data[:4] == b"PK\x03\x04":
        return "a zip archive (the format of torch.save)"
    if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "a Python pickle (torch.save's legacy format, or pickle.dump)"
    return None


def _header(data: bytes) -> dict:
    size = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + size]).get("__metadata__", {}) or {}


def model_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """state_dict with each shared tensor (tied weights) kept under its first name only."""
    seen, out = set(), {}
    for name, t in model.state_dict().items():
        key = (t.data_ptr(), t.shape, t.dtype) if t.numel() else None
        if key is not None and key in seen:
            continue
        seen.add(key)
        out[name] = t
    return out


def renamed(model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Tensors saved under a parameter's earlier name, under its name today: a model class lists what it
    renamed as `renamed_parameters = {"old.prefix.": "new.prefix."}`, so a run trained before keeps loading."""
    renames = getattr(type(model), "renamed_parameters", {})
    if not renames:
        return tensors
    names = set(model.state_dict())
    out = {}
    for name, t in tensors.items():
        if name not in names:
            for old, new in renames.items():
                if name.startswith(old) and new + name[len(old):] in names:
                    name = new + name[len(old):]
                    break
        out[name] = t
    return out


def load_model_tensors(model: torch.nn.Module, tensors: dict[str, torch.Tensor], path) -> None:
    tensors = renamed(model, tensors)
    expected = model_tensors(model)
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(model.state_dict()))
    if missing or unexpected:
        raise SeqlabError(f"checkpoint {path} does not fit the model in config.json "
                          f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    for name, t in tensors.items():
        if t.shape != model.state_dict()[name].shape:
            raise SeqlabError(f"checkpoint {path}: {name} has shape {tuple(t.shape)}, the model in "
                              f"config.json expects {tuple(model.state_dict()[name].shape)}")
    model.load_state_dict(tensors, strict=False)


def save_model(path: str | Path, model: torch.nn.Module, metadata: dict | None = None) -> None:
    save_tensors(path, model_tensors(model), metadata)


def load_model(path: str | Path, model: torch.nn.Module) -> dict:
    tensors, metadata = load_tensors(path)
    load_model_tensors(model, tensors, path)
    return metadata


def optimizer_to_tensors(optimizer: torch.optim.Optimizer,
                         model: torch.nn.Module | None = None) -> tuple[dict[str, torch.Tensor], dict]:
    """Split an optimizer state_dict into tensors and JSON (no pickling); with `model`, the name of each
    parameter the state belongs to, so that a resumed model whose parameters were renamed or reordered
    gets each state back (`optimizer_from_tensors`)."""
    state = optimizer.state_dict()
    tensors, scalars = {}, {}
    for pid, param_state in state["state"].items():
        for key, value in param_state.items():
            if torch.is_tensor(value):
                tensors[f"optimizer.{pid}.{key}"] = value
            else:
                scalars[f"{pid}.{key}"] = value
    meta = {"param_groups": state["param_groups"], "scalars": scalars}
    if model is not None:
        meta["names"] = parameter_names(model, optimizer)
    return tensors, meta


def parameter_names(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """The name of each parameter the optimizer holds, in its order (the ids of its state_dict)."""
    names = {id(p): name for name, p in model.named_parameters()}
    return [names[id(p)] for group in optimizer.param_groups for p in group["params"]]


def optimizer_from_tensors(tensors: dict[str, torch.Tensor], meta: dict, model: torch.nn.Module | None = None,
                           optimizer: torch.optim.Optimizer | None = None, path="checkpoint") -> dict:
    """The optimizer state_dict of `optimizer_to_tensors`' tensors and JSON. Given the model and the
    optimizer it is for, each parameter's state goes to that parameter by name (through the model's
    `renamed_parameters`) and, for a checkpoint without names, the state's shapes are checked against
    the parameters', so that a model whose parameters were reordered is never given another's state."""
    state: dict[int, dict] = {}
    for name, value in tensors.items():
        if name.startswith("optimizer."):
            _, pid, key = name.split(".", 2)
            state.setdefault(int(pid), {})[key] = value
    for name, value in meta["scalars"].items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = value
    groups = meta["param_groups"]
    if model is None or optimizer is None:
        return {"state": state, "param_groups": groups}
    current = parameter_names(model, optimizer)
    if "names" in meta:
        today = renamed(model, {name: pid for pid, name in enumerate(meta["names"])})   # today's name -> saved id
        index = {name: pid for pid, name in enumerate(current)}
        if set(today) != set(index):
            raise SeqlabError(f"{path}: its optimizer state is for other parameters than the model in config.json "
                              "has; the run directory is damaged: retrain into it with --overwrite")
        state = {index[name]: state[pid] for name, pid in today.items() if pid in state}
        ids = iter(range(len(current)))
        groups = [{**saved, "params": [next(ids) for _ in live["params"]]}
                  for saved, live in zip(groups, optimizer.state_dict()["param_groups"], strict=True)]
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for pid, values in state.items():
        for key, value in values.items():
            if torch.is_tensor(value) and value.dim() > 0 and value.shape != params[pid].shape:
                raise SeqlabError(f"cannot resume from {path}: it was written by an earlier seqlab whose model held "
                                  f"its parameters in another order ({current[pid]} gets a {key} of shape "
                                  f"{tuple(value.shape)}); start the run again with --overwrite (its "
                                  "model.safetensors still loads for use)")
    return {"state": state, "param_groups": groups}

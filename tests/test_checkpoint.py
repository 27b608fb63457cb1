"""Checkpoints as data: atomic writes, save -> load, damaged files refused, optimizer state round trip."""

from __future__ import annotations

import copy
import errno
import json

import pytest
import torch
from safetensors.torch import save as st_save
from safetensors.torch import save_file

import seqlab.fileio
from seqlab.errors import SeqlabError
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.fileio import atomic_write, atomic_write_bytes
from seqlab.models.base import Model
from seqlab.training.checkpoint import (
    FORMAT_VERSION,
    load_model,
    load_model_tensors,
    load_tensors,
    model_tensors,
    optimizer_from_tensors,
    optimizer_to_tensors,
    save_model,
    save_tensors,
    tensor_digest,
)

VOCAB = 23


def tiny_lm(arch: str = "lstm", seed: int = 0, **overrides):
    torch.manual_seed(seed)
    options = dict(arch=arch, vocab_size=VOCAB, embedding_size=8, hidden_size=12, num_layers=2, dropout=0.0,
                   num_heads=2, context=6 if arch in ("ffn", "transformer") else 0)
    options.update(overrides)
    return build_lm(LMConfig(**options)).eval()


def tokens(rows: int = 3, length: int = 6, seed: int = 1) -> torch.Tensor:
    return torch.randint(5, VOCAB, (rows, length), generator=torch.Generator().manual_seed(seed))


# -------------------------------------------------------------------------------------- atomic writes


def test_checkpoint_atomic_write_bytes_writes_and_replaces(tmp_path):
    path = tmp_path / "sub" / "model.bin"
    atomic_write_bytes(path, b"first")
    assert path.read_bytes() == b"first"
    atomic_write_bytes(path, b"second, longer")
    assert path.read_bytes() == b"second, longer"
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.bin"]


def test_checkpoint_atomic_write_failing_writer_keeps_the_old_file(tmp_path):
    path = tmp_path / "model.safetensors"
    atomic_write_bytes(path, b"old content")

    def write_half_then_fail(tmp):
        with open(tmp, "wb") as handle:
            handle.write(b"new cont")
            handle.flush()
        assert tmp.read_bytes() == b"new cont" and tmp.parent == path.parent
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(path, write_half_then_fail)
    assert path.read_bytes() == b"old content"
    assert [p.name for p in tmp_path.iterdir()] == ["model.safetensors"]     # no temporary file left


def test_checkpoint_atomic_write_interrupted_at_fsync_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.safetensors"
    atomic_write_bytes(path, b"old content")
    calls = []

    def interrupted(fd):
        calls.append(fd)
        raise KeyboardInterrupt

    monkeypatch.setattr(seqlab.fileio.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(path, b"new content that never lands")
    monkeypatch.undo()
    assert calls                                                           # it was interrupted there
    assert path.read_bytes() == b"old content"
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.safetensors"]


def test_checkpoint_atomic_write_failing_first_write_leaves_nothing(tmp_path):
    def fail(tmp):
        tmp.write_bytes(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(SeqlabError, match=r"cannot write .*new\.bin: No space left on device; the disk is full"):
        atomic_write(tmp_path / "new.bin", fail)
    assert list(tmp_path.iterdir()) == []


def test_checkpoint_atomic_write_disk_full_keeps_the_old_file_and_says_so(tmp_path):
    path = tmp_path / "model.safetensors"
    atomic_write_bytes(path, b"old content")

    def fail(tmp):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(SeqlabError, match="the previous file is intact"):
        atomic_write(path, fail)
    assert path.read_bytes() == b"old content" and [p.name for p in tmp_path.iterdir()] == ["model.safetensors"]


# --------------------------------------------------------------------------------------- save / load


@pytest.mark.parametrize("arch, tie", [("lstm", True), ("lstm", False), ("transformer", True), ("ffn", False),
                                       ("gru", True)])
def test_checkpoint_save_load_gives_identical_logits(tmp_path, arch, tie):
    model = tiny_lm(arch, seed=0, tie_weights=tie)
    other = tiny_lm(arch, seed=1, tie_weights=tie)
    x = tokens()
    with torch.no_grad():
        expected, _ = model(x)
        before, _ = other(x)
    assert not torch.allclose(before, expected)                          # the load has work to do
    save_model(tmp_path / "model.safetensors", model, {"step": 7, "note": "best"})
    metadata = load_model(tmp_path / "model.safetensors", other)
    with torch.no_grad():
        logits, _ = other(x)
    assert torch.equal(logits, expected)
    assert metadata["note"] == "best" and json.loads(metadata["step"]) == 7
    assert metadata["format"] == "seqlab" and int(metadata["format_version"]) == FORMAT_VERSION


@pytest.mark.parametrize("arch, embedding_size", [("lstm", 12), ("lstm", 8), ("transformer", 8)])
def test_checkpoint_tied_weights_stored_once_and_still_tied(tmp_path, arch, embedding_size):
    model = tiny_lm(arch, seed=0, tie_weights=True, embedding_size=embedding_size)
    assert model.output.decoder.weight is model.embedding.weight
    save_model(tmp_path / "model.safetensors", model)
    stored, _ = load_tensors(tmp_path / "model.safetensors")
    assert "embedding.weight" in stored and "output.decoder.weight" not in stored
    assert len(stored) == len(model.state_dict()) - 1
    other = tiny_lm(arch, seed=1, tie_weights=True, embedding_size=embedding_size)
    load_model(tmp_path / "model.safetensors", other)
    assert other.output.decoder.weight is other.embedding.weight
    assert torch.equal(other.output.decoder.weight, model.embedding.weight)
    with torch.no_grad():                                                # still one tensor after loading
        other.embedding.weight[5].fill_(3.0)
    assert torch.equal(other.output.decoder.weight[5], torch.full((embedding_size,), 3.0))


def test_checkpoint_untied_weights_are_both_stored(tmp_path):
    model = tiny_lm("lstm", tie_weights=False)
    assert set(model_tensors(model)) == set(model.state_dict())


@pytest.mark.parametrize("overrides", [{"hidden_size": 16}, {"num_layers": 1}, {"vocab_size": VOCAB + 1},
                                       {"arch": "gru"}, {"tie_weights": True, "embedding_size": 12}])
def test_checkpoint_load_model_into_a_different_shape_raises(tmp_path, overrides):
    save_model(tmp_path / "model.safetensors", tiny_lm("lstm"))
    with pytest.raises(SeqlabError, match=r"model\.safetensors.*(does not fit|has shape)"):
        load_model(tmp_path / "model.safetensors", tiny_lm(**{"arch": "lstm", **overrides}))


# ------------------------------------------------------------------------------------- damaged files


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "model.safetensors"
    save_model(path, tiny_lm("lstm"), {"step": 3})
    load_tensors(path)                                                   # the intact file loads
    return path


def test_checkpoint_refuses_a_truncated_file(saved):
    data = saved.read_bytes()
    for size in (len(data) // 2, len(data) - 1, 5, 8, 100):
        saved.write_bytes(data[:size])
        with pytest.raises(SeqlabError, match=r"checkpoint .*model\.safetensors is truncated or corrupted"):
            load_tensors(saved)


def test_checkpoint_refuses_an_empty_file(saved):
    saved.write_bytes(b"")
    with pytest.raises(SeqlabError, match=r"model\.safetensors is truncated or corrupted"):
        load_tensors(saved)


@pytest.mark.parametrize("where", [-1, -3, -200])
def test_checkpoint_refuses_flipped_bytes_in_the_tensor_data(saved, where):
    data = bytearray(saved.read_bytes())
    data[where] ^= 0x5A
    saved.write_bytes(bytes(data))
    with pytest.raises(SeqlabError, match=r"model\.safetensors is corrupted: its contents do not match"):
        load_tensors(saved)


def test_checkpoint_refuses_a_damaged_header(saved):
    data = bytearray(saved.read_bytes())
    data[9] = ord("\x01")                                                # inside the JSON header
    saved.write_bytes(bytes(data))
    with pytest.raises(SeqlabError, match=r"model\.safetensors is truncated or corrupted"):
        load_tensors(saved)


def test_checkpoint_refuses_a_missing_file(tmp_path):
    with pytest.raises(SeqlabError, match=r"checkpoint .*nothing\.safetensors does not exist"):
        load_tensors(tmp_path / "nothing.safetensors")
    with pytest.raises(SeqlabError, match="does not exist"):
        load_model(tmp_path / "nothing.safetensors", tiny_lm())


def test_checkpoint_refuses_a_plain_safetensors_file(tmp_path):
    path = tmp_path / "foreign.safetensors"
    save_file(model_tensors(tiny_lm()), path)
    with pytest.raises(SeqlabError, match=r"foreign\.safetensors was not written by seqlab"):
        load_tensors(path)
    save_file({"w": torch.ones(2)}, path, metadata={"format": "pt"})
    with pytest.raises(SeqlabError, match="not written by seqlab"):
        load_tensors(path)


def test_checkpoint_refuses_a_newer_format_version(tmp_path):
    tensors = {"w": torch.arange(6.0).reshape(2, 3)}
    header = {"format": "seqlab", "format_version": str(FORMAT_VERSION + 1), "sha256": tensor_digest(tensors)}
    path = tmp_path / "future.safetensors"
    path.write_bytes(st_save(tensors, metadata=header))
    newer = FORMAT_VERSION + 1
    with pytest.raises(SeqlabError, match=rf"future\.safetensors has format version {newer}.*upgrade"):
        load_tensors(path)
    header["format_version"] = str(FORMAT_VERSION)                       # the same file, current version
    path.write_bytes(st_save(tensors, metadata=header))
    loaded, _ = load_tensors(path)
    assert torch.equal(loaded["w"], tensors["w"])


# ---------------------------------------------------------------------------------------- optimizer


def train_steps(model, optimizer, steps: int, seed: int) -> None:
    model.train()
    for step in range(steps):
        x = tokens(seed=seed + step)
        logits, _ = model(x[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


OPTIMIZERS = {
    "sgd-momentum": lambda params: torch.optim.SGD(params, lr=0.5, momentum=0.9, nesterov=True),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_checkpoint_optimizer_state_round_trip_continues_identically(tmp_path, name):
    model = tiny_lm("lstm", tie_weights=True)
    optimizer = OPTIMIZERS[name](model.parameters())
    train_steps(model, optimizer, 3, seed=10)

    tensors, meta = optimizer_to_tensors(optimizer)          # through a file and JSON, as resume does
    assert tensors and all(name.startswith("optimizer.") for name in tensors)
    save_tensors(tmp_path / "checkpoint.safetensors", tensors, {"optimizer": meta})
    loaded, header = load_tensors(tmp_path / "checkpoint.safetensors")
    resumed_model = copy.deepcopy(model)
    resumed = OPTIMIZERS[name](resumed_model.parameters())
    resumed.load_state_dict(optimizer_from_tensors(loaded, json.loads(header["optimizer"])))

    fresh_model = copy.deepcopy(model)                                   # without the state: a different path
    fresh = OPTIMIZERS[name](fresh_model.parameters())

    for m, opt in ((model, optimizer), (resumed_model, resumed), (fresh_model, fresh)):
        train_steps(m, opt, 3, seed=20)
    for (key, expected), actual in zip(model.state_dict().items(), resumed_model.state_dict().values(),
                                       strict=True):
        assert torch.equal(actual, expected), key
    pairs = zip(model.parameters(), fresh_model.parameters(), strict=True)
    assert not all(torch.equal(a, b) for a, b in pairs)
    for key, value in optimizer.state_dict()["state"][0].items():
        assert torch.equal(torch.as_tensor(resumed.state_dict()["state"][0][key]), torch.as_tensor(value))


def test_checkpoint_optimizer_non_tensor_state_round_trips(tmp_path):
    """State entries that are plain numbers travel as JSON next to the tensors."""
    model = tiny_lm("lstm")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train_steps(model, optimizer, 1, seed=1)
    first = next(iter(model.parameters()))
    optimizer.state[first]["calls"] = 3
    optimizer.state[first]["scale"] = 0.5
    tensors, meta = optimizer_to_tensors(optimizer)
    save_tensors(tmp_path / "checkpoint.safetensors", tensors, {"optimizer": meta})
    loaded, header = load_tensors(tmp_path / "checkpoint.safetensors")
    fresh = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    fresh.load_state_dict(optimizer_from_tensors(loaded, json.loads(header["optimizer"])))
    assert fresh.state[first]["calls"] == 3 and fresh.state[first]["scale"] == 0.5
    assert torch.equal(fresh.state[first]["momentum_buffer"], optimizer.state[first]["momentum_buffer"])
    assert fresh.param_groups[0]["momentum"] == 0.9


class TwoLayers(Model):
    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.second(torch.tanh(self.first(x)))


class TwoLayersRenamed(Model):
    """The same network with its first layer renamed and registered last: another parameter order."""

    renamed_parameters = {"first.": "encoder."}

    def __init__(self):
        super().__init__()
        self.second, self.encoder = torch.nn.Linear(4, 2), torch.nn.Linear(3, 4)

    def forward(self, x):
        return self.second(torch.tanh(self.encoder(x)))


def adam_steps(model, optimizer, steps: int) -> None:
    generator = torch.Generator().manual_seed(5)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(8, 3, generator=generator)).pow(2).sum().backward()
        optimizer.step()


def test_checkpoint_optimizer_state_follows_each_parameter_by_name_when_the_order_changes(tmp_path):
    """A resumed model whose parameters were renamed and reordered gets each one's Adam state back (the
    checkpoint names them); a checkpoint without names is refused when its state does not fit."""
    torch.manual_seed(0)
    old = TwoLayers()
    optimizer = torch.optim.Adam(old.parameters(), lr=0.01)
    adam_steps(old, optimizer, 2)
    tensors, meta = optimizer_to_tensors(optimizer, old)
    assert meta["names"] == ["first.weight", "first.bias", "second.weight", "second.bias"]
    new = TwoLayersRenamed()
    load_model_tensors(new, dict(old.state_dict()), "model")
    resumed = torch.optim.Adam(new.parameters(), lr=0.01)
    tensors = {name: t.clone() for name, t in tensors.items()}            # as read from the file, not shared
    resumed.load_state_dict(optimizer_from_tensors(tensors, json.loads(json.dumps(meta)), new, resumed))
    adam_steps(old, optimizer, 3)
    adam_steps(new, resumed, 3)
    assert torch.equal(new.encoder.weight, old.first.weight) and torch.equal(new.second.bias, old.second.bias)
    meta.pop("names")                                           # as an earlier seqlab wrote it
    with pytest.raises(SeqlabError, match="another order"):
        optimizer_from_tensors(tensors, meta, new, torch.optim.Adam(new.parameters(), lr=0.01))


def test_checkpoint_damaged_safetensors_is_never_called_a_pickle(tmp_path):
    """A safetensors header length whose first bytes look like a pickle's start (0x80, 0x02..0x05) is still a
    damaged safetensors file, not a foreign format."""
    path = tmp_path / "model.safetensors"
    save_tensors(path, {"w": torch.zeros(3)})
    data = bytearray(path.read_bytes())
    header = int.from_bytes(data[:8], "little")
    data[:8] = (0x0380).to_bytes(8, "little")                      # reads as b"\x80\x03..." like pickle protocol 3
    path.write_bytes(bytes(data[:8]) + bytes(data[8:8 + header]) + bytes(data[8 + header:]))
    with pytest.raises(SeqlabError) as caught:
        load_tensors(path)
    assert "pickle" not in str(caught.value) and "truncated or corrupted" in str(caught.value)
    path.write_bytes(b"\x80\x03" + b"rest of a pickle")            # a real pickle's start: named as one
    with pytest.raises(SeqlabError, match="Python pickle"):
        load_tensors(path)

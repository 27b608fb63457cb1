"""What --precision auto computes in (seqlab.training.devices.resolve_precision): fp32 on a CPU without bfloat16
kernels and for small models on any CPU, bf16 autocast where the rule applies; the choice printed, recorded in the
checkpoint and kept by --resume; the bf16 path's loss close to fp32's."""

from __future__ import annotations

import json
import math

import pytest
import torch

from conftest import Killed, kill_after_evaluation, tiny_config
from seqlab.errors import SeqlabError
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.families.lm.pipeline import train_lm
from seqlab.families.lm.task import token_loss
from seqlab.training import devices, flops
from seqlab.training.checkpoint import load_tensors

CPU = torch.device("cpu")
NEEDS_BF16 = pytest.mark.skipif(not devices.cpu_supports_bf16(),
                                reason="this CPU has no bfloat16 kernels (oneDNN needs AVX-512 or AMX; lscpu shows "
                                       "neither avx512_bf16 nor amx_bf16): the bf16 path is built, not run, here")
WIKITEXT2_LSTM = [(700, 200, 800)] * 4 + [(700, 200, 33278)]        # tied 2 x 200, batch 20 x 35: a step's products
TINY = [(32, 16, 96), (32, 24, 96), (32, 24, 963)]


def recorded_precision(run) -> tuple[str, str]:
    trainer = json.loads(load_tensors(run / "checkpoint.safetensors")[1]["trainer"])
    return trainer["precision"], trainer["precision_why"]


def losses(run) -> list[float]:
    return [json.loads(line)["loss"] for line in (run / "train_log.jsonl").read_text().splitlines()]


def bf16_for_any_size(monkeypatch):
    """The rule as if every product paid in bf16 and every step were large: auto picks bf16 for the tiny models."""
    monkeypatch.setattr(devices, "BF16_MIN_PRODUCT", 1)
    monkeypatch.setattr(devices, "BF16_MIN_SIDE", 1)
    monkeypatch.setattr(devices, "BF16_MIN_STEP", 1)


def test_devices_auto_is_fp32_on_a_cpu_without_bf16_kernels(monkeypatch):
    monkeypatch.setattr(devices, "cpu_supports_bf16", lambda: False)
    assert devices.resolve_precision(CPU, "auto", lambda: WIKITEXT2_LSTM) == \
        ("fp32", "auto: this CPU has no bfloat16 kernels")
    assert devices.resolve_precision(CPU, "fp32", pytest.fail) == ("fp32", "as asked")     # the model not looked at
    assert flops.precision_dtype(CPU, "auto") == torch.float32


def test_devices_auto_follows_the_products_where_the_cpu_has_bf16_kernels(monkeypatch):
    monkeypatch.setattr(devices, "cpu_supports_bf16", lambda: True)
    precision, why = devices.resolve_precision(CPU, "auto", lambda: WIKITEXT2_LSTM)
    assert precision == "bf16" and "100% of the model's product FLOPs" in why
    precision, why = devices.resolve_precision(CPU, "auto", lambda: TINY)
    assert precision == "fp32" and "a step of this model is small" in why
    many_small = [(4096, 32, 32)] * 200 + [(700, 200, 800)]           # large enough a step, but of small products
    precision, why = devices.resolve_precision(CPU, "auto", lambda: many_small)
    assert precision == "fp32" and "it takes 75%" in why
    assert devices.resolve_precision(CPU, "bf16", pytest.fail) == ("bf16", "as asked")
    assert devices.resolve_precision(torch.device("cuda"), "auto", pytest.fail) == ("bf16", "auto: CUDA")
    assert flops.precision_dtype(CPU, "auto") == torch.bfloat16 and flops.precision_dtype(CPU, "fp32") == torch.float32


def test_devices_product_shapes_name_every_product_of_a_forward_pass():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True)
    layer = torch.nn.Linear(16, 30)
    x = torch.randn(3, 5, 8)
    shapes = flops.product_shapes(lambda: layer(lstm(x)[0]))
    assert sorted(shapes) == sorted([(15, 8, 64), (15, 16, 64), (15, 16, 64), (15, 16, 64), (15, 16, 30)])


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
def test_devices_auto_keeps_the_tests_tiny_models_in_fp32_on_every_cpu(tmp_path, arch, monkeypatch, capsys):
    """Fixture-scale runs give the same figures with and without bf16 kernels: auto trains them in fp32."""
    monkeypatch.setattr(devices, "cpu_supports_bf16", lambda: True)
    train_lm(tiny_config(tmp_path / "auto", arch, max_steps=2, eval_every=2))
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("precision: ")]
    assert line and line[0].startswith("precision: fp32 (auto: a step of this model is small")
    assert recorded_precision(tmp_path / "auto")[0] == "fp32"
    monkeypatch.setattr(devices, "cpu_supports_bf16", lambda: False)        # the same words without bf16 kernels
    train_lm(tiny_config(tmp_path / "no-kernels", arch, max_steps=2, eval_every=2))
    assert [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("precision: ")] == line
    train_lm(tiny_config(tmp_path / "fp32", arch, max_steps=2, eval_every=2, precision="fp32"))
    assert losses(tmp_path / "auto") == losses(tmp_path / "fp32")


@NEEDS_BF16
def test_devices_auto_trains_in_bf16_where_the_rule_applies(tmp_path, monkeypatch, capsys):
    bf16_for_any_size(monkeypatch)
    train_lm(tiny_config(tmp_path / "auto", "transformer", max_steps=4, eval_every=4, log_every=2))
    out = capsys.readouterr().out
    assert "precision: bf16 autocast (auto: this CPU has " in out and "(bf16 products)" in out
    assert recorded_precision(tmp_path / "auto")[0] == "bf16"
    train_lm(tiny_config(tmp_path / "bf16", "transformer", max_steps=4, eval_every=4, log_every=2, precision="bf16"))
    train_lm(tiny_config(tmp_path / "fp32", "transformer", max_steps=4, eval_every=4, log_every=2, precision="fp32"))
    assert losses(tmp_path / "auto") == losses(tmp_path / "bf16") != losses(tmp_path / "fp32")
    peak = flops.peak(CPU, torch.bfloat16)[0]                  # MFU against the bf16 peak
    for record in (json.loads(line) for line in (tmp_path / "auto" / "train_log.jsonl").read_text().splitlines()):
        assert record["mfu"] == pytest.approx(100 * record["gflop_per_s"] * 1e9 / peak, rel=1e-3, abs=0.01)


@NEEDS_BF16
def test_devices_a_resumed_run_keeps_the_precision_it_started_with(tmp_path, monkeypatch, capsys):
    """auto chose bf16 when the run started; resumed where the rule would now say fp32, it goes on in bf16, and
    its losses are an uninterrupted run's. On a CPU without bf16 kernels it is refused with one line."""
    with monkeypatch.context() as patched:
        bf16_for_any_size(patched)
        train_lm(tiny_config(tmp_path / "whole", "lstm"))
        broken = tiny_config(tmp_path / "broken", "lstm")
        with pytest.raises(Killed):
            train_lm(broken, callback=kill_after_evaluation(4))
    capsys.readouterr()
    with monkeypatch.context() as patched:
        patched.setattr(devices, "cpu_supports_bf16", lambda: False)
        with pytest.raises(SeqlabError, match="--resume: .* trains in bf16 autocast .* this CPU has none"):
            train_lm(broken, resume=True)
    train_lm(broken, resume=True)                  # the rule as it is: the tiny model alone would get fp32
    out = capsys.readouterr().out
    assert "precision: bf16 autocast (auto: this CPU has" in out and "), kept from the start of the run" in out
    assert recorded_precision(tmp_path / "broken")[0] == "bf16"
    assert losses(tmp_path / "broken") == losses(tmp_path / "whole")


@NEEDS_BF16
def test_devices_bf16_autocast_loss_is_close_to_fp32_on_a_fixed_batch():
    torch.manual_seed(0)
    for arch in ("lstm", "transformer"):
        model = build_lm(LMConfig(arch=arch, vocab_size=300, embedding_size=128, hidden_size=128, num_layers=2,
                                  num_heads=4, context=32 if arch == "transformer" else 0, dropout=0.0))
        tokens = torch.randint(1, 300, (8, 33))

        def loss(precision, model=model, tokens=tokens):
            with devices.autocast(CPU, precision):
                logits, _ = model(tokens[:, :-1])
            total, count = token_loss(logits.float(), tokens[:, 1:])
            return float((total / count).detach())
        fp32, bf16 = loss("fp32"), loss("bf16")
        assert math.isfinite(bf16) and bf16 == pytest.approx(fp32, rel=5e-3) and bf16 != fp32, arch

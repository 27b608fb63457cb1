"""Model FLOPs and MFU (seqlab.training.flops): counts equal to the textbook's from the matrix shapes, the
fused kernels counted as their textbook cells, the probe invisible to training, MFU in every task's log,
the peak measured once and cached, and `seqlab bench peak`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import tiny_config
from seqlab.cli.main import main
from seqlab.data.vocab import PAD
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.families.lm.pipeline import train_lm
from seqlab.families.lm.task import token_loss
from seqlab.training import flops
from seqlab.training.trainer import Trainer

B, T, V, E, H = 3, 7, 50, 16, 24


def lm(arch: str, **options):
    torch.manual_seed(0)
    config = LMConfig(arch=arch, vocab_size=V, embedding_size=E, hidden_size=H, num_layers=2, dropout=0.0,
                      num_heads=2, context=T if arch in ("transformer", "ffn") else 0, **options)
    return build_lm(config)


def training_flops(model) -> int:
    tokens = torch.randint(PAD + 1, V, (B, T))

    def step():
        logits, _ = model(tokens)
        token_loss(logits, tokens)[0].backward()
    return flops.count_flops(step)


@pytest.mark.parametrize("arch, gates", [("rnn", 1), ("lstm", 4), ("gru", 3)])
def test_recurrent_lm_flops_are_6_per_weight_of_W_U_and_the_output_layer_a_token(arch, gates):
    """Per token: forward 2 FLOPs for every weight of W (x_t) and U (h_{t-1}) of each layer (SLP 8.1, 8.5)
    and of the output layer, the backward twice that: 6 N per token (Kaplan et al. 2020, eq. 2.1). Exactly so
    for oneDNN's fused LSTM (our formula); PyTorch's step-by-step RNN and GRU (and an LSTM off oneDNN) skip one
    product, the gradient of the zero initial state (h_0 U^T at t = 1), 2 G H^2 per layer and sequence."""
    weights = gates * H * E + gates * H * H          # layer 1: W (GH x E), U (GH x H)
    weights += gates * H * H + gates * H * H        # layer 2: W, U (GH x H)
    weights += H * V                                                              # the output layer (untied)
    skipped = 2 * (2 * gates * H * H) * B
    expected = (6 * weights * B * T,) if arch == "lstm" and torch.backends.mkldnn.is_available() else ()
    assert training_flops(lm(arch)) in (*expected, 6 * weights * B * T - skipped)


@pytest.mark.parametrize("arch", ["rnn", "lstm", "gru"])
def test_the_fused_recurrent_kernels_count_as_the_textbook_cells(arch):
    """oneDNN's fused LSTM layer is invisible to PyTorch's counter: our formula counts it as the textbook
    cells' matrix products are counted."""
    fused, textbook = training_flops(lm(arch, rnn_impl="fused")), training_flops(lm(arch, rnn_impl="textbook"))
    assert fused == pytest.approx(textbook, rel=0.03)    # the same to the gradient of a zero initial state


@pytest.mark.parametrize("impl", ["sdpa", "textbook"])
def test_transformer_flops_are_6N_plus_the_attention_term(impl):
    """6 N for the projections, the feedforward layers and the output layer, plus the attention scores
    Q K^T and their mix with V over the whole T x T square: forward 4 T^2 d per layer and sequence,
    backward twice that (PaLM's 12 L T d per token): fused or textbook attention alike (the fused
    kernel's recomputation of the scores in its backward is not model FLOPs)."""
    model = lm("transformer", attention_impl=impl)
    matrices = sum(p.numel() for name, p in model.named_parameters()
                   if p.dim() == 2 and "embedding" not in name and "position" not in name)
    attention = 4 * T * T * E          # forward, per layer and sequence: Q K^T and A V, 2 T^2 d FLOPs each
    expected = 6 * matrices * B * T + 3 * attention * 2 * B
    assert training_flops(model) == expected


def test_the_fused_output_layer_counts_as_the_plain_one():
    """linear_cross_entropy does the plain path's three products chunk by chunk (the weight's gradient added in
    place, addmm_): the same model FLOPs, 6 N D V."""
    from seqlab.nn.fused_output import linear_cross_entropy

    n, d, v = 700, 20, 3000
    hidden = torch.randn(n, d, requires_grad=True)
    layer = torch.nn.Linear(d, v)
    targets = torch.randint(1, v, (n,))
    fused = flops.count_flops(lambda: linear_cross_entropy(hidden, layer.weight, layer.bias, targets)[0].backward())
    plain = flops.count_flops(lambda: token_loss(layer(hidden), targets)[0].backward())
    assert fused == plain == 6 * n * d * v


def test_the_probe_leaves_training_unchanged_and_every_log_record_has_mfu(tmp_path, monkeypatch):
    train_lm(tiny_config(tmp_path / "with", "lstm"))
    monkeypatch.setattr(Trainer, "_measure_utilisation", lambda self: None)
    train_lm(tiny_config(tmp_path / "without", "lstm"))

    def records(run):
        return [json.loads(line) for line in (tmp_path / run / "train_log.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in records("with")] == [r["loss"] for r in records("without")]
    peak = flops.peak(torch.device("cpu"))[0]
    for record in records("with"):
        assert record["gflop_per_s"] > 0 and 0 < record["mfu"] < 100
        assert record["mfu"] == pytest.approx(100 * record["gflop_per_s"] * 1e9 / peak, rel=1e-3, abs=0.01)
    assert "mfu" not in records("without")[0]


@pytest.mark.slow
def test_mfu_is_logged_for_every_task(tmp_path):
    from test_classifier_cli import train as train_classifier
    from test_seq2seq_cli import train as train_seq2seq
    from test_tagger_cli import FIXTURES as TAGGING
    from test_tagger_cli import SMALL as TAGGER

    tagger = tmp_path / "tagger"
    conllu = str(TAGGING / "tagging.conllu")
    assert main(["train", "tagger", "--train", conllu, "--dev", conllu,
                 "--output", str(tagger), *TAGGER, "--max-steps", "3", "--log-every", "1"]) == 0
    runs = [tagger, train_classifier(tmp_path, "classifier", "tsv", "sentiment.tsv", "--max-steps", "3",
                                     "--log-every", "1"),
            train_seq2seq(tmp_path, "seq2seq", "--arch", "gru", "--hidden-size", "16", "--max-steps", "3",
                          "--log-every", "1")]
    for run in runs:
        record = json.loads((run / "train_log.jsonl").read_text().splitlines()[-1])
        assert record["gflop_per_s"] > 0 and 0 < record["mfu"] < 100, run.name


def test_the_peak_is_measured_once_then_read_and_a_bad_cache_is_measured_again(tmp_path, monkeypatch):
    """(The measurement itself is real in test_cli_bench_peak; here a second of it would only be waited for.)"""
    measurements = []
    monkeypatch.setattr(flops, "measure_peak", lambda device, dtype: measurements.append(dtype) or 1e11)
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    cpu = torch.device("cpu")
    assert flops.peak(cpu) == (1e11, True)
    assert flops.peak(cpu) == (1e11, False) and len(measurements) == 1
    assert flops.peak(cpu, torch.bfloat16) == (1e11, True)           # another precision: another entry
    assert flops.peak(cpu, refresh=True)[1] and len(measurements) == 3
    (tmp_path / "cache" / "peak.json").write_text("{not json")
    assert flops.peak(cpu)[1]
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("")                 # the cache cannot be written: measured, no error
    assert flops.peak(cpu)[1] and flops.peak(cpu)[1]


def test_cli_bench_peak(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path))
    assert main(["bench", "peak", "--threads", "1", "--json"]) == 0
    figure = json.loads(capsys.readouterr().out)
    assert figure["measured_now"] and figure["gflop_per_s"] > 0.1 and "1 threads" in figure["key"]
    assert main(["bench", "peak", "--threads", "1"]) == 0
    assert "cached" in capsys.readouterr().out
    assert Path(figure["cache"]).exists()
    assert main(["bench", "peak", "--device", "nonsense"]) == 2
    assert "seqlab: error:" in capsys.readouterr().err
